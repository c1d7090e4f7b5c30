/* tests/graph/test_graph_plan.c — the memory plan (kit/graph/plan.c) of every function of the six
 * benchmark models and of small recurrent models:
 *   - safety under any schedule a dataflow executor may pick: random topological orders of the data and
 *     control edges are simulated over the arena (which value occupies each 64-byte block); every node must
 *     find each of its inputs still intact when it runs. The probe function runs its forward part once and
 *     its backward part twice, as khost verify may;
 *   - economy: the arena is smaller than one buffer per value, and some nodes run in place;
 *   - storage: every arena value lies inside the arena, aligned; variables, feeds and accumulators are not in
 *     the arena.
 * The recurrent models are planned both unrolled and lowered as scans (kh_graph_lower_opts.rnn_scan).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/graph.h"
#include "khost/kit/rng.h"
#include "bench_specs.h"
#include "testutil.h"

#define BLOCK 64
#define ORDERS 4

typedef struct sim {
    const kh_graph *g;
    const kh_gplan *p;
    int32_t *vroot;   /* producer of the data a node's value shows (through views) */
    int32_t *occ;     /* per arena block: the producer whose data is there (-1 none) */
    int64_t blocks;
    int bad;
    char what[256];
} sim;

static int is_arena(const sim *s, int32_t i) { return s->p->e[i].store == KH_GSTORE_ARENA; }

static void run_node(sim *s, int32_t i) {
    const kh_graph *g = s->g;
    const int32_t *in = kh_graph_inputs(g, i);
    for (int k = 0; k < g->nodes[i].n_in && !s->bad; k++) {
        int32_t u = in[k];
        if (!is_arena(s, u)) continue;
        int64_t b0 = s->p->e[u].offset / BLOCK, b1 = (s->p->e[u].offset + s->p->e[u].bytes + BLOCK - 1) / BLOCK;
        for (int64_t b = b0; b < b1; b++)
            if (s->occ[b] != s->vroot[u]) {
                s->bad = 1;
                int32_t o = s->occ[b];
                snprintf(s->what, sizeof s->what,
                         "node %d (%s) reads input %d (%s, [%lld, +%lld)) but block %lld holds node %d's data (%s, [%lld, +%lld))",
                         i, kh_gop_name(g->nodes[i].op), u, kh_gop_name(g->nodes[u].op), (long long)s->p->e[u].offset,
                         (long long)s->p->e[u].bytes, (long long)b, o, o >= 0 ? kh_gop_name(g->nodes[o].op) : "-",
                         o >= 0 ? (long long)s->p->e[o].offset : -1LL, o >= 0 ? (long long)s->p->e[o].bytes : -1LL);
                return;
            }
    }
    if (is_arena(s, i) && g->nodes[i].op != KH_GOP_RESHAPE) {
        int64_t b0 = s->p->e[i].offset / BLOCK, b1 = (s->p->e[i].offset + s->p->e[i].bytes + BLOCK - 1) / BLOCK;
        for (int64_t b = b0; b < b1; b++) s->occ[b] = i;
    }
}

/* Successors (data + control), CSR. */
static void successors(const kh_graph *g, const kh_gplan *p, int32_t **off, int32_t **succ) {
    int32_t n = g->n_nodes;
    *off = calloc((size_t)n + 1, sizeof **off);
    *succ = malloc(((size_t)g->n_ins + (size_t)p->n_ctrl + 1) * sizeof **succ);
    int32_t *fill = calloc((size_t)n + 1, sizeof *fill);
    for (int32_t i = 0; i < n; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) (*off)[kh_graph_inputs(g, i)[k] + 1]++;
    for (int32_t e = 0; e < p->n_ctrl; e++) (*off)[p->ctrl_from[e] + 1]++;
    for (int32_t i = 0; i < n; i++) (*off)[i + 1] += (*off)[i];
    for (int32_t i = 0; i < n; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int32_t a = kh_graph_inputs(g, i)[k];
            (*succ)[(*off)[a] + fill[a]++] = i;
        }
    for (int32_t e = 0; e < p->n_ctrl; e++) {
        int32_t a = p->ctrl_from[e];
        (*succ)[(*off)[a] + fill[a]++] = p->ctrl_to[e];
    }
    free(fill);
}

/* A random topological order of the nodes with phase in [lo, hi] (Kahn's algorithm, random pick). */
static void run_part(sim *s, const int32_t *off, const int32_t *succ, int lo, int hi, kh_rng *r) {
    const kh_graph *g = s->g;
    int32_t n = g->n_nodes, *pend = calloc((size_t)n + 1, sizeof *pend), *ready = malloc(((size_t)n + 1) * sizeof *ready);
    int32_t nr = 0;
    for (int32_t i = 0; i < n; i++) {
        int ph = g->nodes[i].phase;
        if (ph < lo || ph > hi) continue;
        for (int32_t k = off[i]; k < off[i + 1]; k++) {
            int ps = g->nodes[succ[k]].phase;
            if (ps >= lo && ps <= hi) pend[succ[k]]++;
        }
    }
    for (int32_t i = 0; i < n; i++) {
        int ph = g->nodes[i].phase;
        if (ph >= lo && ph <= hi && pend[i] == 0) ready[nr++] = i;
    }
    while (nr > 0 && !s->bad) {
        int32_t pick = r ? (int32_t)kh_rng_below(r, (uint64_t)nr) : 0;
        int32_t i = ready[pick];
        ready[pick] = ready[--nr];
        run_node(s, i);
        for (int32_t k = off[i]; k < off[i + 1]; k++) {
            int32_t t = succ[k];
            int ps = g->nodes[t].phase;
            if (ps >= lo && ps <= hi && --pend[t] == 0) ready[nr++] = t;
        }
    }
    free(pend);
    free(ready);
}

static void check_fn(const char *model, const char *fn, const kh_graph *g, int probe) {
    kh_gplan p;
    kh_status st = kh_graph_plan(g, 64, &p);
    CHECK(st == KH_OK, "%s %s: plan failed", model, fn);
    if (st != KH_OK) return;
    int inplace = 0, misplaced = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const kh_gplan_entry *e = &p.e[i];
        inplace += e->inplace_of >= 0;
        if (e->store == KH_GSTORE_ARENA && (e->offset % 64 != 0 || e->offset + e->bytes > p.arena_bytes)) misplaced++;
        uint32_t op = g->nodes[i].op;
        if ((op == KH_GOP_VARIABLE || op == KH_GOP_INPUT || op == KH_GOP_GATHER_GRAD) && e->store == KH_GSTORE_ARENA)
            misplaced++;
    }
    CHECK(misplaced == 0, "%s %s: %d values outside the arena, unaligned, or wrongly stored", model, fn, misplaced);
    CHECK(p.arena_bytes < p.naive_bytes, "%s %s: arena %lld not below %lld", model, fn, (long long)p.arena_bytes,
          (long long)p.naive_bytes);
    sim s = {.g = g, .p = &p, .blocks = p.arena_bytes / BLOCK + 1};
    s.vroot = malloc(((size_t)g->n_nodes + 1) * sizeof *s.vroot);
    s.occ = malloc((size_t)s.blocks * sizeof *s.occ);
    for (int32_t i = 0; i < g->n_nodes; i++)
        s.vroot[i] = g->nodes[i].op == KH_GOP_RESHAPE ? s.vroot[kh_graph_inputs(g, i)[0]] : i;
    int32_t *off, *succ;
    successors(g, &p, &off, &succ);
    kh_rng r;
    kh_rng_seed(&r, 99);
    for (int o = 0; o <= ORDERS && !s.bad; o++) {
        for (int64_t b = 0; b < s.blocks; b++) s.occ[b] = -1;
        kh_rng *rr = o == 0 ? NULL : &r; /* order 0: lowest ready first (close to graph order) */
        if (probe) {
            run_part(&s, off, succ, 0, 0, rr);
            run_part(&s, off, succ, 1, 99, rr);
            run_part(&s, off, succ, 1, 99, rr);
        } else {
            run_part(&s, off, succ, 0, 99, rr);
        }
    }
    printf("  %-30s %-8s %6d nodes, arena %9lld of %10lld bytes, %4d in place, %5d control edges  %s\n", model, fn,
           g->n_nodes, (long long)p.arena_bytes, (long long)p.naive_bytes, inplace, p.n_ctrl, s.bad ? "UNSAFE" : "ok");
    CHECK(!s.bad, "%s %s: %s", model, fn, s.what);
    free(off);
    free(succ);
    free(s.vroot);
    free(s.occ);
    kh_gplan_free(&p);
}

#define L(...) ((kh_layer_spec){__VA_ARGS__})

static void check_model(const char *name, uint32_t dtype, int rank, int a, int b, int c, int onehot,
                        const kh_layer_spec *layers, int n, uint32_t loss, uint32_t opt, int classes, int *inplace_seen) {
    kh_model_spec s = kh_test_spec(name, dtype, rank, a, b, c, onehot, layers, n, loss, classes);
    s.optimizer.kind = opt;
    int recurrent = 0;
    for (int l = 0; l < n; l++) recurrent |= layers[l].kind == KH_LAYER_LSTM || layers[l].kind == KH_LAYER_BILSTM;
    for (int k = 0; k < (recurrent ? 4 : 2); k++) { /* deterministic or not; recurrent models also as scans */
        int det = k & 1, scan = k >> 1;
        kh_graph_lower_opts o = {.max_batch = 4, .deterministic = det, .rnn_scan = scan};
        kh_model_graphs mg;
        char err[256], label[64];
        snprintf(label, sizeof label, "%s%s", name, scan ? " (scan)" : "");
        kh_status st = kh_graph_lower(&s, &o, &mg, err, sizeof err);
        CHECK(st == KH_OK, "%s: %s", label, err);
        if (st != KH_OK) return;
        static const char *names[KH_GFN_COUNT] = {"train", "eval", "predict", "probe"};
        for (int f = 0; f < KH_GFN_COUNT; f++) {
            if (mg.fn[f].n_nodes == 0) continue;
            check_fn(label, names[f], &mg.fn[f], f == KH_GFN_PROBE);
            for (int32_t i = 0; i < mg.fn[f].n_nodes && f == KH_GFN_TRAIN; i++) {
                uint32_t op = mg.fn[f].nodes[i].op;
                (void)op;
            }
        }
        if (det == 1) {
            kh_gplan p;
            if (kh_graph_plan(&mg.fn[KH_GFN_PREDICT], 64, &p) == KH_OK) {
                for (int32_t i = 0; i < p.n_nodes; i++) *inplace_seen += p.e[i].inplace_of >= 0;
                kh_gplan_free(&p);
            }
        }
        kh_model_graphs_free(&mg);
    }
}

int main(void) {
    int inplace = 0;
    /* the six benchmark models as their tasks define them (tests/backend/bench_specs.h), with the IMDb
     * embeddings cut to 2000 / 5000 rows: the plan's decisions do not depend on a table's height, and the
     * simulated schedules then touch megabytes, not the full tables' gigabytes */
    const kb_model *bm;
    int nm = kb_bench_models(&bm);
    CHECK(nm == 6, "six benchmark models (%d)", nm);
    for (int i = 0; i < nm; i++) {
        kh_layer_spec ly[32];
        int n = bm[i].spec.n_layers;
        memcpy(ly, bm[i].spec.layers, (size_t)n * sizeof *ly);
        if (ly[0].kind == KH_LAYER_EMBEDDING) ly[0].input_dim = ly[1].kind == KH_LAYER_BILSTM ? 2000 : 5000;
        const kh_model_spec *sp = &bm[i].spec;
        check_model(sp->name, sp->input_dtype, sp->input_rank, sp->input_shape[0], sp->input_shape[1],
                    sp->input_shape[2], sp->input_onehot, ly, n, sp->loss, sp->optimizer.kind, sp->n_classes, &inplace);
    }
    const kh_layer_spec seq[] = {L(.kind = KH_LAYER_LSTM, .units = 4, .return_sequences = 1),
                                 L(.kind = KH_LAYER_BILSTM, .units = 3, .return_sequences = 1), L(.kind = KH_LAYER_GAP1D),
                                 L(.kind = KH_LAYER_DENSE, .units = 3, .activation = KH_ACT_SOFTMAX)};
    check_model("lstm+bilstm sequences", KH_F32, 2, 6, 3, 0, 0, seq, 4, KH_LOSS_CATEGORICAL_CROSSENTROPY, KH_OPT_ADAM,
                3, &inplace);
    CHECK(inplace > 0, "no node ran in place in any predict function");
    return kh_test_finish("test_graph_plan");
}
