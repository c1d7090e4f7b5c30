/* tests/theano_passes/test_theano_pipeline.c — theano's pass pipeline (th_optimize, level 1) on the four
 * functions of the six benchmark models, lowered as theano lowers them (kh_graph_lower_opts.rnn_scan = 1, dropout
 * on; the specs are the tasks', tests/backend/bench_specs.h, nothing shrunk). For every function:
 *   - the passes run one by one in the pipeline's order reproduce th_optimize's graph node for node;
 *   - the table of node counts after each pass and of the op counts each pass changed is printed (the
 *     describe-style summary);
 *   - outputs, the probe's weight gradients and the Apply ops survive, every element-wise node ends in an
 *     Elemwise within the bounds;
 *   - the lowered and the optimised graph, evaluated in float64 by kh_graph_eval_ref on the same random batch
 *     (n = 2 of max_batch 3), weights, optimizer slots and dropout keys, agree on every node the optimisation
 *     maps (outputs, gradients, updated weights and slots included) to 1e-12 relative; on a difference each
 *     pass's graph is compared too, to name the pass. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __GLIBC__
#include <limits.h>
#include <malloc.h>
#endif

#include "testutil.h"
#include "bench_specs.h"
#include "tptest.h"
#include "khost/kit/optimizer.h"

#define MAX_BATCH 3
#define ROWS 2
#define N_PASSES 5

static const char *const g_fn_names[KH_GFN_COUNT] = {"train", "eval", "predict", "probe"};

typedef struct pass_ref {
    const char *name;
    const char *abbrev;
    th_pass_fn fn;
} pass_ref;

/* the pipeline's order (pipeline.c); checked against th_optimize's report */
static const pass_ref g_passes[N_PASSES] = {
    {"canonicalize", "canon", th_pass_canon}, {"constant-fold", "fold", th_pass_constfold},
    {"merge", "merge", th_pass_merge},        {"dead-code", "dce", th_pass_dce},
    {"fuse-elemwise", "fuse", th_pass_fuse},
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "add -3, relu -2, elemwise +5": the op counts that changed from a to b */
static void op_delta(const kh_graph *a, const kh_graph *b, char *out, size_t len) {
    int32_t ca[KH_GOP_END], cb[KH_GOP_END];
    kh_graph_op_counts(a, ca);
    kh_graph_op_counts(b, cb);
    size_t k = 0;
    out[0] = 0;
    for (uint32_t op = 1; op < KH_GOP_END && k + 40 < len; op++)
        if (ca[op] != cb[op])
            k += (size_t)snprintf(out + k, len - k, "%s%s %d->%d", k ? ", " : "", kh_gop_name(op), ca[op], cb[op]);
    if (!k) snprintf(out, len, "-");
}

typedef struct totals {
    int64_t before, after;
    double max_err;
    int32_t compared;
} totals;

/* The lowered and the optimised graph in float64 on the same batch; on a difference, each pass's graph against
 * the lowered one names the pass. */
static void compare_values(const kb_model *md, const kh_model_graphs *mg, const kh_graph *g, const kh_graph *out,
                           const int32_t *map, const kh_graph *stage, int32_t *const *smap, int built, const char *what,
                           totals *tot) {
    tp_opts o = tp_default_opts();
    o.n = ROWS;
    o.seed = 1234;
    o.opt = mg->opt;
    o.lr = kh_optimizer_step_lr(&mg->opt, 0);
    o.label_below = md->spec.n_classes > 1 ? md->spec.n_classes : 2;
    o.index_below = md->spec.layers[0].kind == KH_LAYER_EMBEDDING ? md->spec.layers[0].input_dim : 2;
    char label[160];
    snprintf(label, sizeof label, "%s: lowered vs optimised", what);
    tp_equiv_result r = tp_equiv(g, out, map, &o, label);
    if (!r.ok && built == N_PASSES + 1) { /* name the pass: each stage against the lowered graph */
        int32_t *m = malloc((size_t)g->n_nodes * sizeof *m);
        for (int32_t i = 0; i < g->n_nodes; i++) m[i] = i;
        for (int p = 0; p < N_PASSES; p++) {
            for (int32_t i = 0; i < g->n_nodes; i++) m[i] = m[i] >= 0 ? smap[p + 1][m[i]] : -1;
            snprintf(label, sizeof label, "%s: lowered vs after %s", what, g_passes[p].name);
            if (!tp_equiv(g, &stage[p + 1], m, &o, label).ok) break;
        }
        free(m);
    }
    if (r.max_err > tot->max_err) tot->max_err = r.max_err;
    tot->compared += r.nodes;
}

static void check_function(const kb_model *md, const kh_model_graphs *mg, int f, int values, totals *tot) {
    const kh_graph *g = &mg->fn[f];
    char what[128];
    snprintf(what, sizeof what, "%s %s", md->name, g_fn_names[f]);
    /* the pipeline */
    int32_t *map = malloc((size_t)g->n_nodes * sizeof *map);
    kh_graph out;
    th_opt_report rep;
    char err[256] = "";
    double t0 = now();
    kh_status st = th_optimize(g, 1, &out, map, &rep, err, sizeof err);
    double t_opt = now() - t0;
    CHECK(st == KH_OK, "%s: th_optimize: %s", what, err);
    if (st != KH_OK) {
        free(map);
        return;
    }
    /* the same passes one by one: stage[p] is the graph after pass p (stage 0 the lowered one) */
    kh_graph stage[N_PASSES + 1];
    int32_t *smap[N_PASSES + 1], changed[N_PASSES];
    int built = 1;
    stage[0] = *g;
    smap[0] = NULL;
    for (int p = 0; p < N_PASSES; p++) {
        CHECK(rep.n == N_PASSES && strcmp(rep.run[p].name, g_passes[p].name) == 0, "%s: pass %d of the pipeline is %s",
              what, p, g_passes[p].name);
        smap[p + 1] = malloc((size_t)stage[p].n_nodes * sizeof(int32_t) + 1);
        if (tp_pass(g_passes[p].fn, &stage[p], &stage[p + 1], smap[p + 1], &changed[p]) != KH_OK) break;
        built++;
        CHECK(rep.n == N_PASSES && rep.run[p].changed == changed[p] && rep.run[p].nodes_after == stage[p + 1].n_nodes,
              "%s: %s alone does what it did in the pipeline", what, g_passes[p].name);
    }
    if (built == N_PASSES + 1) {
        const kh_graph *last = &stage[N_PASSES];
        int same = last->n_nodes == out.n_nodes;
        for (int32_t i = 0; same && i < out.n_nodes; i++)
            same = last->nodes[i].op == out.nodes[i].op && last->nodes[i].n_in == out.nodes[i].n_in &&
                   memcmp(kh_graph_inputs(last, i), kh_graph_inputs(&out, i), (size_t)out.nodes[i].n_in * sizeof(int32_t)) == 0;
        CHECK(same, "%s: the passes one by one build th_optimize's graph", what);
        /* the table */
        printf("  %-24s %-7s nodes %5d", md->name, g_fn_names[f], g->n_nodes);
        for (int p = 0; p < N_PASSES; p++) printf(" -> %s %d", g_passes[p].abbrev, stage[p + 1].n_nodes);
        printf("  (%.1f ms)\n", t_opt * 1e3);
        for (int p = 0; p < N_PASSES; p++) {
            char delta[1024];
            op_delta(&stage[p], &stage[p + 1], delta, sizeof delta);
            if (changed[p]) printf("  %33s %-6s %4d rewrites: %s\n", "", g_passes[p].abbrev, changed[p], delta);
        }
    }
    /* what must survive */
    for (int k = 0; k < 8; k++)
        if (g->outputs[k] >= 0)
            CHECK(out.outputs[k] == map[g->outputs[k]] && out.outputs[k] >= 0 && (out.nodes[out.outputs[k]].flags & KH_GVAL_OUTPUT),
                  "%s: output %d kept, flagged", what, k);
    if (f == KH_GFN_PROBE)
        for (int32_t v = 0; v < mg->n_vars; v++)
            if (mg->probe_grads[v] >= 0)
                CHECK(map[mg->probe_grads[v]] >= 0 && (out.nodes[map[mg->probe_grads[v]]].flags & KH_GVAL_OUTPUT),
                      "%s: the gradient of %s kept", what, mg->vars[v].name);
    int32_t before[KH_GOP_END], after[KH_GOP_END];
    kh_graph_op_counts(g, before);
    kh_graph_op_counts(&out, after);
    for (uint32_t op = KH_GOP_APPLY_GRADIENT_DESCENT; op <= KH_GOP_APPLY_ADADELTA; op++)
        CHECK(before[op] == after[op], "%s: %s ops kept (%d -> %d)", what, kh_gop_name(op), before[op], after[op]);
    CHECK(before[KH_GOP_GATHER_GRAD] == after[KH_GOP_GATHER_GRAD], "%s: GatherGrad accumulators kept", what);
    CHECK(tp_fused_form(&out), "%s: every element-wise node in an Elemwise within the bounds", what);
    /* the probe runs its forward part (phase 0) alone (th_dialect_c.c): no forward node may read a later phase */
    int split = 1;
    for (int32_t i = 0; i < out.n_nodes; i++)
        for (int j = 0; j < out.nodes[i].n_in && out.nodes[i].phase == 0; j++)
            split &= out.nodes[tp_in(&out, i, j)].phase == 0;
    CHECK(split, "%s: forward nodes read forward values only", what);
    CHECK(out.n_nodes <= g->n_nodes, "%s: no larger", what);
    if (values) compare_values(md, mg, g, &out, map, stage, smap, built, what, tot);
    tot->before += g->n_nodes;
    tot->after += out.n_nodes;
    for (int p = 1; p < built; p++) {
        kh_graph_release(&stage[p]);
        free(smap[p]);
    }
    if (built < N_PASSES + 1) free(smap[built]);
    kh_graph_release(&out);
    free(map);
}

/* Arguments: --only NAME (that model alone), --no-values NAME (that model's passes and structure, no float64
 * evaluation: CMakeLists.txt runs imdb_fasttext's 480 MB-per-value evaluation as its own, slow-labelled test). */
int main(int argc, char **argv) {
    const char *only = NULL, *no_values = NULL;
    for (int a = 1; a + 1 < argc; a += 2) {
        if (strcmp(argv[a], "--only") == 0) only = argv[a + 1];
        else if (strcmp(argv[a], "--no-values") == 0) no_values = argv[a + 1];
        else {
            fprintf(stderr, "usage: %s [--only MODEL] [--no-values MODEL]\n", argv[0]);
            return 2;
        }
    }
#ifdef __GLIBC__
    /* imdb_fasttext's 1.2 million x 50 embedding is 480 MB per float64 value, and every evaluation allocates a
     * few (the variable, its GatherGrad, the Apply's result, the stores): served from fresh mmaps, the time goes
     * to the kernel zeroing pages. Keep freed memory in the heap instead (glibc; sanitizers bring their own). */
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
    const kb_model *models;
    int nm = kb_bench_models(&models);
    CHECK(nm == 6, "six benchmark models (%d)", nm);
    int seen = 0;
    totals tot = {0, 0, 0.0, 0};
    printf("  node counts after each pass (lowered -> canonicalize -> constant-fold -> merge -> dead-code -> "
           "fuse-elemwise), and the op counts each pass changed:\n");
    for (int k = 0; k < nm; k++) {
        const kb_model *md = &models[k];
        if (only && strcmp(only, md->name) != 0) continue;
        int values = !no_values || strcmp(no_values, md->name) != 0;
        if (!values) printf("  %s: passes and structure only here; its values are compared by a test of its own\n", md->name);
        seen++;
        kh_graph_lower_opts lo = {.max_batch = MAX_BATCH, .rnn_scan = 1}; /* as theano lowers (th_model.c) */
        kh_model_graphs mg;
        char err[256];
        double t0 = now();
        kh_status st = kh_graph_lower(&md->spec, &lo, &mg, err, sizeof err);
        CHECK(st == KH_OK, "%s: lower: %s", md->name, err);
        if (st != KH_OK) continue;
        for (int f = 0; f < KH_GFN_COUNT; f++)
            if (mg.fn[f].n_nodes > 0) check_function(md, &mg, f, values, &tot);
        printf("  %-24s %.1f s\n", md->name, now() - t0);
        kh_model_graphs_free(&mg);
    }
    CHECK(seen == (only ? 1 : nm), "every model asked for checked (%d)", seen);
    printf("  all functions: %lld -> %lld nodes; %d values compared, max rel err %.1e\n", (long long)tot.before,
           (long long)tot.after, tot.compared, tot.max_err);
    return kh_test_finish("test_theano_pipeline");
}
