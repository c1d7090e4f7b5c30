/* tests/graph/test_graph_lower.c — the lowering and autodiff of whole models, in float64: for small models of
 * every layer kind, the probe function evaluated by the graph's reference interpreter (output, input gradient,
 * every weight gradient) and one step of the train function (loss, correct count, every updated weight) must
 * equal the reference kit's whole-model implementation (khost/kit/ref.h) to 1e-9. Both sides are float64, so any
 * difference is a lowering or gradient bug, never rounding. The recurrent cases run again lowered as scans
 * (kh_graph_lower_opts.rnn_scan), and the scan lowering of every recurrent case and of the two recurrent
 * benchmark models (their task specs, tests/backend/bench_specs.h) must equal the unrolled one to 1e-9:
 * forward values, the probe's gradients, a train step's loss and updated weights, with dropout on. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graphtest.h"
#include "bench_specs.h"
#include "khost/kit/ref.h"
#include "khost/kit/rng.h"
#include "khost/kit/optimizer.h"
#include "testutil.h"

#define TOL 1e-9
#define BATCH 3

typedef struct model_case {
    const char *name;
    uint32_t input_dtype;
    int32_t rank, shape[3], onehot;
    kh_layer_spec layers[4];
    int32_t n_layers;
    uint32_t loss;
    uint32_t opt;
    int32_t classes;
} model_case;

static kh_model_spec spec_of(const model_case *c) {
    kh_model_spec s = kh_test_spec(c->name, c->input_dtype, c->rank, c->shape[0], c->shape[1], c->shape[2], c->onehot,
                                   c->layers, c->n_layers, c->loss, c->classes);
    /* explicit Keras values, as the tasks give them (the reference kit takes a spec's values as they are) */
    s.optimizer = (kh_optimizer_spec){.kind = c->opt, .lr = c->opt == KH_OPT_ADADELTA ? 1.0f : 0.001f,
                                      .rho = c->opt == KH_OPT_ADADELTA ? 0.95f : 0.9f, .beta_1 = 0.9f,
                                      .beta_2 = 0.999f, .epsilon = 1e-7f, .decay = 0.0f};
    return s;
}

/* x: random f32 features, or indices below `vocab` */
static void make_input(const kh_model_graphs *mg, const model_case *c, kh_rng *r, double *xd, int32_t *xi, float *xf,
                       int64_t vocab) {
    int64_t n = BATCH * (c->onehot ? c->shape[0] : mg->input_numel);
    for (int64_t k = 0; k < n; k++) {
        if (c->input_dtype == KH_I32) xi[k] = (int32_t)kh_rng_below(r, (uint64_t)(c->onehot ? c->onehot : vocab));
        else xd[k] = kh_rng_uniform(r) * 2.0 - 1.0;
        if (xf) xf[k] = (float)xd[k];
    }
    if (c->onehot) { /* the graph takes the host's expansion */
        memset(xd, 0, (size_t)(BATCH * mg->input_numel) * sizeof *xd);
        for (int64_t k = 0; k < n; k++) xd[k * c->onehot + xi[k]] = 1.0;
    } else if (c->input_dtype == KH_I32) {
        for (int64_t k = 0; k < n; k++) xd[k] = xi[k];
    }
}

static kh_ref_model *ref_of(const kh_model_spec *s, const gt_store *st) {
    kh_ref_model *rm = NULL;
    char err[256];
    if (kh_ref_model_create(s, &rm, err, sizeof err) != KH_OK) {
        CHECK(0, "ref model: %s", err);
        return NULL;
    }
    for (int32_t v = 0; v < st->n; v++)
        kh_ref_model_set_weight(rm, st->mg->vars[v].layer, st->mg->vars[v].slot, st->w[v], st->mg->vars[v].numel);
    return rm;
}

static void ref_forward(kh_ref_model *rm, const model_case *c, const double *xd, const int32_t *xi, int64_t nin) {
    if (c->input_dtype == KH_I32) {
        kh_tensor t = {.dtype = KH_I32, .layout = KH_LAYOUT_NT, .rank = 1 + c->rank, .dims = {BATCH}, .data = (void *)xi};
        for (int i = 0; i < c->rank; i++) t.dims[i + 1] = c->shape[i];
        CHECK(kh_ref_model_forward(rm, &t, 1) == KH_OK, "ref forward");
    } else {
        (void)nin;
        CHECK(kh_ref_model_forward_d(rm, xd, BATCH, 1) == KH_OK, "ref forward");
    }
}

/* Lower case c (scan: recurrent layers as a scan) into mg, its weights in s drawn from store_seed; 0 when
 * lowering failed (a failed check), and then nothing to free. */
static int lower_case(const model_case *c, int scan, uint64_t store_seed, kh_model_spec *spec, kh_model_graphs *mg,
                      gt_store *s) {
    *spec = spec_of(c);
    kh_graph_lower_opts o = {.max_batch = 5, .deterministic = 1, .rnn_scan = scan};
    char err[256];
    kh_status st = kh_graph_lower(spec, &o, mg, err, sizeof err);
    CHECK(st == KH_OK, "%s: lower: %s", c->name, err);
    if (st != KH_OK) return 0;
    CHECK(gt_store_init(s, mg, store_seed), "store");
    return 1;
}

static void check_probe(const model_case *c, int scan) {
    kh_model_spec spec;
    kh_model_graphs mg;
    gt_store s;
    if (!lower_case(c, scan, 7, &spec, &mg, &s)) return;
    kh_rng r;
    kh_rng_seed(&r, 11);
    int64_t nin = BATCH * mg.input_numel, nout = BATCH * mg.out_numel;
    double *xd = calloc((size_t)nin, sizeof *xd), *dy = calloc((size_t)nout, sizeof *dy);
    int32_t *xi = calloc((size_t)nin, sizeof *xi);
    make_input(&mg, c, &r, xd, xi, NULL, 50);
    for (int64_t k = 0; k < nout; k++) dy[k] = kh_rng_uniform(&r) * 2.0 - 1.0;
    kh_graph_ref_env env = gt_env(&s);
    env.feeds[KH_GIN_X] = xd;
    env.feeds[KH_GIN_DY] = dy;
    const kh_graph *g = &mg.fn[KH_GFN_PROBE];
    double **v = gt_eval(g, BATCH, &env);
    kh_ref_model *rm = ref_of(&spec, &s);
    if (v && rm) {
        ref_forward(rm, c, xd, xi, nin);
        int64_t no;
        const double *ry = kh_ref_model_output(rm, &no);
        double e = gt_rel_err(v[g->outputs[KH_GOUT_Y]], ry, nout);
        printf("  %-28s%s output      %.2e\n", c->name, scan ? " (scan)" : "", e);
        CHECK(e <= TOL, "%s: output %.3e", c->name, e);
        CHECK(kh_ref_model_backward(rm, dy) == KH_OK, "ref backward");
        if (g->outputs[KH_GOUT_DX] >= 0) {
            e = gt_rel_err(v[g->outputs[KH_GOUT_DX]], kh_ref_model_input_grad(rm), nin);
            printf("  %-28s d_input     %.2e\n", c->name, e);
            CHECK(e <= TOL, "%s: d_input %.3e", c->name, e);
        }
        for (int32_t k = 0; k < mg.n_vars; k++) {
            const kh_gvar *gv = &mg.vars[k];
            const double *rg = kh_ref_model_grad(rm, gv->layer, gv->slot);
            int32_t node = mg.probe_grads[k];
            double *zero = calloc((size_t)gv->numel, sizeof *zero);
            e = gt_rel_err(node >= 0 ? v[node] : zero, rg, gv->numel);
            free(zero);
            printf("  %-28s grad %-14s %.2e\n", c->name, gv->name, e);
            CHECK(e <= TOL, "%s: grad of layer %d slot %d (%s) %.3e", c->name, gv->layer, gv->slot, gv->name, e);
        }
    }
    kh_ref_model_free(rm);
    gt_values_free(g, v);
    free(xd);
    free(dy);
    free(xi);
    gt_store_free(&s);
    kh_model_graphs_free(&mg);
}

static void check_train(const model_case *c, int scan) {
    kh_model_spec spec;
    kh_model_graphs mg;
    gt_store s;
    if (!lower_case(c, scan, 3, &spec, &mg, &s)) return;
    kh_rng r;
    kh_rng_seed(&r, 5);
    int64_t nin = BATCH * mg.input_numel;
    double *xd = calloc((size_t)nin, sizeof *xd), *lab = calloc(BATCH, sizeof *lab);
    int32_t *xi = calloc((size_t)nin, sizeof *xi), labi[BATCH];
    make_input(&mg, c, &r, xd, xi, NULL, 50);
    for (int k = 0; k < BATCH; k++) {
        labi[k] = (int32_t)kh_rng_below(&r, (uint64_t)(c->classes > 1 ? c->classes : 2));
        lab[k] = labi[k];
    }
    kh_ref_model *rm = ref_of(&spec, &s);
    kh_graph_ref_env env = gt_env(&s);
    env.feeds[KH_GIN_X] = xd;
    env.feeds[KH_GIN_LABELS] = lab;
    env.lr = kh_optimizer_step_lr(&mg.opt, 0);
    const kh_graph *g = &mg.fn[KH_GFN_TRAIN];
    double **v = gt_eval(g, BATCH, &env);
    if (v && rm) {
        double loss = 0.0;
        int64_t correct = 0;
        if (c->input_dtype == KH_I32) {
            kh_tensor t = {.dtype = KH_I32, .rank = 1 + c->rank, .dims = {BATCH}, .data = xi};
            for (int i = 0; i < c->rank; i++) t.dims[i + 1] = c->shape[i];
            CHECK(kh_ref_model_train_step(rm, &t, labi, &loss, &correct) == KH_OK, "ref step");
        } else {
            CHECK(kh_ref_model_forward_d(rm, xd, BATCH, 1) == KH_OK, "ref fwd");
            CHECK(kh_ref_model_loss(rm, labi, &loss, &correct) == KH_OK, "ref loss");
            CHECK(kh_ref_model_loss_backward(rm, labi) == KH_OK, "ref loss backward");
            CHECK(kh_ref_model_apply_gradients(rm) == KH_OK, "ref apply");
        }
        double gl = v[g->outputs[KH_GOUT_LOSS_SUM]][0] / BATCH;
        printf("  %-28s%s train loss  %.9f vs %.9f, correct %g vs %lld\n", c->name, scan ? " (scan)" : "", gl, loss,
               v[g->outputs[KH_GOUT_CORRECT]][0], (long long)correct);
        CHECK(fabs(gl - loss) <= TOL * (1 + fabs(loss)), "%s: loss %.12f vs %.12f", c->name, gl, loss);
        CHECK(v[g->outputs[KH_GOUT_CORRECT]][0] == (double)correct, "%s: correct", c->name);
        for (int32_t k = 0; k < mg.n_vars; k++) {
            const kh_gvar *gv = &mg.vars[k];
            const double *rw = kh_ref_model_weight(rm, gv->layer, gv->slot);
            double e = gt_rel_err(s.w[k], rw, gv->numel);
            CHECK(e <= TOL, "%s: updated layer %d slot %d (%s) %.3e", c->name, gv->layer, gv->slot, gv->name, e);
        }
    }
    kh_ref_model_free(rm);
    gt_values_free(g, v);
    free(xd);
    free(xi);
    free(lab);
    gt_store_free(&s);
    kh_model_graphs_free(&mg);
}

// --- rnn_scan against unrolled -----------------------------------------------------------------------------------
static int recurrent(const kh_model_spec *s) {
    for (int32_t l = 0; l < s->n_layers; l++)
        if (s->layers[l].kind == KH_LAYER_LSTM || s->layers[l].kind == KH_LAYER_BILSTM) return 1;
    return 0;
}

/* One function of both lowerings on the same weights, batch and output gradient; returns its values and leaves
 * the updated weights in st[k]. */
static double **eval_fn(const kh_model_graphs *mg, gt_store *st, kh_gfn fn, const double *x, const double *lab,
                        const double *dy) {
    kh_graph_ref_env env = gt_env(st);
    env.feeds[KH_GIN_X] = x;
    env.feeds[KH_GIN_LABELS] = lab;
    env.feeds[KH_GIN_DY] = dy;
    env.seed = 1234; /* dropout is on: both lowerings draw the same masks (seed, counter, layer, element) */
    env.counter = 2;
    env.lr = kh_optimizer_step_lr(&mg->opt, 0);
    return gt_eval(&mg->fn[fn], BATCH, &env);
}

static void check_err(const char *name, const char *what, const double *a, const double *b, int64_t n) {
    double e = gt_rel_err(a, b, n);
    printf("  %-28s scan vs unrolled %-18s %.2e\n", name, what, e);
    CHECK(e <= TOL, "%s: scan vs unrolled: %s %.3e", name, what, e);
}

/* The same model lowered with rnn_scan = 1 and 0 computes the same function: forward values, the probe's input
 * and weight gradients, the train step's loss, correct count and updated weights (dropout on), to 1e-9. */
static void check_scan(const kh_model_spec *spec) {
    kh_model_graphs mg[2];
    char err[256];
    for (int sc = 0; sc < 2; sc++) {
        kh_graph_lower_opts o = {.max_batch = 5, .rnn_scan = sc};
        kh_status st = kh_graph_lower(spec, &o, &mg[sc], err, sizeof err);
        CHECK(st == KH_OK, "%s: lower (rnn_scan %d): %s", spec->name, sc, err);
        if (st != KH_OK) {
            if (sc == 1) kh_model_graphs_free(&mg[0]);
            return;
        }
    }
    const char *name = spec->name;
    printf("  %-28s nodes unrolled / scan: train %d / %d, probe %d / %d, predict %d / %d\n", name,
           mg[0].fn[KH_GFN_TRAIN].n_nodes, mg[1].fn[KH_GFN_TRAIN].n_nodes, mg[0].fn[KH_GFN_PROBE].n_nodes,
           mg[1].fn[KH_GFN_PROBE].n_nodes, mg[0].fn[KH_GFN_PREDICT].n_nodes, mg[1].fn[KH_GFN_PREDICT].n_nodes);
    kh_gfn back = spec->loss != KH_LOSS_NONE ? KH_GFN_TRAIN : KH_GFN_PROBE; /* a function with the backward */
    CHECK(mg[1].fn[back].n_nodes < mg[0].fn[back].n_nodes, "%s: the scan graph is the smaller", name);
    int32_t counts[KH_GOP_END];
    kh_graph_op_counts(&mg[1].fn[back], counts);
    CHECK(counts[KH_GOP_LSTM_SCAN] > 0 && counts[KH_GOP_LSTM_SCAN_GRAD] == counts[KH_GOP_LSTM_SCAN] &&
              counts[KH_GOP_LSTM_SCAN_GRAD_U] == counts[KH_GOP_LSTM_SCAN], "%s: one scan, grad and grad_u per direction",
          name);
    kh_graph_op_counts(&mg[0].fn[back], counts);
    CHECK(counts[KH_GOP_LSTM_SCAN] == 0, "%s: rnn_scan 0 stays unrolled", name);
    kh_rng r;
    kh_rng_seed(&r, 17);
    const kh_model_graphs *m = &mg[0];
    int64_t nin = BATCH * m->input_numel, nout = BATCH * m->out_numel;
    double *x = calloc((size_t)nin, sizeof *x), *dy = calloc((size_t)nout, sizeof *dy), lab[BATCH];
    int64_t vocab = spec->layers[0].kind == KH_LAYER_EMBEDDING ? spec->layers[0].input_dim : 0;
    if (spec->input_onehot > 0) { /* the host's expansion of indices */
        int64_t steps = nin / spec->input_onehot;
        for (int64_t k = 0; k < steps; k++) x[k * spec->input_onehot + kh_rng_below(&r, (uint64_t)spec->input_onehot)] = 1.0;
    } else {
        for (int64_t k = 0; k < nin; k++)
            x[k] = vocab ? (double)kh_rng_below(&r, (uint64_t)vocab) : kh_rng_uniform(&r) * 2.0 - 1.0;
    }
    for (int64_t k = 0; k < nout; k++) dy[k] = kh_rng_uniform(&r) * 2.0 - 1.0;
    for (int k = 0; k < BATCH; k++) lab[k] = (double)kh_rng_below(&r, (uint64_t)(spec->n_classes > 1 ? spec->n_classes : 2));
    /* probe: output, input gradient, weight gradients */
    gt_store st[2];
    double **v[2];
    for (int sc = 0; sc < 2; sc++) {
        CHECK(gt_store_init(&st[sc], &mg[sc], 29), "store");
        v[sc] = eval_fn(&mg[sc], &st[sc], KH_GFN_PROBE, x, NULL, dy);
    }
    if (v[0] && v[1]) {
        const kh_graph *g0 = &mg[0].fn[KH_GFN_PROBE], *g1 = &mg[1].fn[KH_GFN_PROBE];
        check_err(name, "probe output", v[1][g1->outputs[KH_GOUT_Y]], v[0][g0->outputs[KH_GOUT_Y]], nout);
        CHECK((g0->outputs[KH_GOUT_DX] >= 0) == (g1->outputs[KH_GOUT_DX] >= 0), "%s: input gradient in both", name);
        if (g0->outputs[KH_GOUT_DX] >= 0 && g1->outputs[KH_GOUT_DX] >= 0)
            check_err(name, "probe d_input", v[1][g1->outputs[KH_GOUT_DX]], v[0][g0->outputs[KH_GOUT_DX]], nin);
        for (int32_t k = 0; k < m->n_vars; k++) {
            int32_t n0 = mg[0].probe_grads[k], n1 = mg[1].probe_grads[k];
            CHECK((n0 >= 0) == (n1 >= 0), "%s: gradient of %s in both", name, m->vars[k].name);
            if (n0 < 0 || n1 < 0) continue;
            char what[64];
            snprintf(what, sizeof what, "grad L%d %s", m->vars[k].layer, m->vars[k].name);
            check_err(name, what, v[1][n1], v[0][n0], m->vars[k].numel);
        }
    }
    for (int sc = 0; sc < 2; sc++) {
        gt_values_free(&mg[sc].fn[KH_GFN_PROBE], v[sc]);
        gt_store_free(&st[sc]);
    }
    /* train: loss, correct count, every updated weight */
    if (spec->loss != KH_LOSS_NONE) {
        for (int sc = 0; sc < 2; sc++) {
            CHECK(gt_store_init(&st[sc], &mg[sc], 31), "store");
            v[sc] = eval_fn(&mg[sc], &st[sc], KH_GFN_TRAIN, x, lab, NULL);
        }
        if (v[0] && v[1]) {
            const kh_graph *g0 = &mg[0].fn[KH_GFN_TRAIN], *g1 = &mg[1].fn[KH_GFN_TRAIN];
            double l0 = v[0][g0->outputs[KH_GOUT_LOSS_SUM]][0], l1 = v[1][g1->outputs[KH_GOUT_LOSS_SUM]][0];
            printf("  %-28s scan vs unrolled train loss %.12f vs %.12f\n", name, l1 / BATCH, l0 / BATCH);
            CHECK(fabs(l1 - l0) <= TOL * (1 + fabs(l0)), "%s: train loss %.12f vs %.12f", name, l1, l0);
            CHECK(v[0][g0->outputs[KH_GOUT_CORRECT]][0] == v[1][g1->outputs[KH_GOUT_CORRECT]][0], "%s: correct", name);
            for (int32_t k = 0; k < m->n_vars; k++) {
                char what[64];
                snprintf(what, sizeof what, "updated L%d %s", m->vars[k].layer, m->vars[k].name);
                check_err(name, what, st[1].w[k], st[0].w[k], m->vars[k].numel);
            }
        }
        for (int sc = 0; sc < 2; sc++) {
            gt_values_free(&mg[sc].fn[KH_GFN_TRAIN], v[sc]);
            gt_store_free(&st[sc]);
        }
    }
    free(x);
    free(dy);
    kh_model_graphs_free(&mg[0]);
    kh_model_graphs_free(&mg[1]);
}

/* The bounds a device path checks a batch against: the smallest Gather table and class count of the train
 * function (a sigmoid's one column counts as two classes). */
static void check_bounds(const model_case *c, int32_t want_idx, int32_t want_label) {
    kh_model_spec spec = spec_of(c);
    kh_graph_lower_opts o = {.max_batch = 5, .deterministic = 1};
    kh_model_graphs mg;
    char err[256];
    if (kh_graph_lower(&spec, &o, &mg, err, sizeof err) != KH_OK) {
        CHECK(0, "%s: lower: %s", c->name, err);
        return;
    }
    int32_t idx = 0, label = 0;
    kh_graph_feed_bounds(&mg.fn[KH_GFN_TRAIN], &idx, &label);
    CHECK(idx == want_idx && label == want_label, "%s: bounds %d / %d, want %d / %d", c->name, idx, label, want_idx,
          want_label);
    idx = 7, label = 1; /* a bound already lower stays */
    kh_graph_feed_bounds(&mg.fn[KH_GFN_TRAIN], &idx, &label);
    CHECK(idx == (want_idx && want_idx < 7 ? want_idx : 7) && label == 1, "%s: only ever lowered (%d / %d)", c->name,
          idx, label);
    kh_model_graphs_free(&mg);
}

int main(void) {
    const model_case cases[] = {
        {"dense relu+softmax", KH_F32, 1, {6}, 0,
         {{.kind = KH_LAYER_DENSE, .units = 5, .activation = KH_ACT_RELU},
          {.kind = KH_LAYER_DENSE, .units = 4, .activation = KH_ACT_SOFTMAX}}, 2, KH_LOSS_CATEGORICAL_CROSSENTROPY,
         KH_OPT_RMSPROP, 4},
        {"conv same/valid+pool", KH_F32, 3, {6, 5, 2}, 0,
         {{.kind = KH_LAYER_CONV2D, .units = 3, .kernel = {3, 3}, .padding = KH_PAD_SAME, .activation = KH_ACT_RELU},
          {.kind = KH_LAYER_CONV2D, .units = 2, .kernel = {2, 2}, .padding = KH_PAD_VALID, .activation = KH_ACT_TANH},
          {.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}},
          {.kind = KH_LAYER_FLATTEN}}, 4, KH_LOSS_NONE, KH_OPT_ADADELTA, 0},
        {"conv even same+pool same", KH_F32, 3, {5, 5, 2}, 0,
         {{.kind = KH_LAYER_CONV2D, .units = 2, .kernel = {2, 2}, .padding = KH_PAD_SAME},
          {.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}, .padding = KH_PAD_SAME},
          {.kind = KH_LAYER_FLATTEN},
          {.kind = KH_LAYER_DENSE, .units = 3, .activation = KH_ACT_SOFTMAX}}, 4, KH_LOSS_CATEGORICAL_CROSSENTROPY,
         KH_OPT_ADADELTA, 3},
        {"embedding+gap+sigmoid", KH_I32, 1, {7}, 0,
         {{.kind = KH_LAYER_EMBEDDING, .input_dim = 50, .units = 4},
          {.kind = KH_LAYER_GAP1D},
          {.kind = KH_LAYER_DENSE, .units = 1, .activation = KH_ACT_SIGMOID}}, 3, KH_LOSS_BINARY_CROSSENTROPY,
         KH_OPT_ADAM, 1},
        {"lstm last", KH_F32, 2, {4, 3}, 0, {{.kind = KH_LAYER_LSTM, .units = 2}}, 1, KH_LOSS_NONE, KH_OPT_RMSPROP, 0},
        {"lstm sequences", KH_F32, 2, {4, 3}, 0, {{.kind = KH_LAYER_LSTM, .units = 2, .return_sequences = 1}}, 1,
         KH_LOSS_NONE, KH_OPT_RMSPROP, 0},
        {"bilstm last", KH_F32, 2, {4, 3}, 0, {{.kind = KH_LAYER_BILSTM, .units = 2}}, 1, KH_LOSS_NONE, KH_OPT_RMSPROP, 0},
        {"bilstm sequences", KH_F32, 2, {4, 3}, 0, {{.kind = KH_LAYER_BILSTM, .units = 2, .return_sequences = 1}}, 1,
         KH_LOSS_NONE, KH_OPT_RMSPROP, 0},
        {"emb+bilstm+dropout+dense", KH_I32, 1, {5}, 0,
         {{.kind = KH_LAYER_EMBEDDING, .input_dim = 50, .units = 3},
          {.kind = KH_LAYER_BILSTM, .units = 2},
          {.kind = KH_LAYER_DROPOUT, .rate = 0.5f},
          {.kind = KH_LAYER_DENSE, .units = 1, .activation = KH_ACT_SIGMOID}}, 4, KH_LOSS_BINARY_CROSSENTROPY,
         KH_OPT_ADAM, 1},
        {"onehot lstm+softmax", KH_I32, 1, {4}, 6,
         {{.kind = KH_LAYER_LSTM, .units = 3},
          {.kind = KH_LAYER_DENSE, .units = 6, .activation = KH_ACT_SOFTMAX}}, 2, KH_LOSS_CATEGORICAL_CROSSENTROPY,
         KH_OPT_RMSPROP, 6},
    };
    check_bounds(&cases[0], 0, 4);  /* no Gather; softmax over 4 */
    check_bounds(&cases[3], 50, 2); /* a 50-row table; a sigmoid */
    for (int scan = 0; scan <= 1; scan++) { /* the scan lowering of the recurrent cases against the reference too */
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            kh_model_spec s = spec_of(&cases[k]);
            if (cases[k].onehot || (scan && !recurrent(&s))) continue; /* onehot: the reference takes indices */
            check_probe(&cases[k], scan);
        }
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            kh_model_spec s = spec_of(&cases[k]);
            if (cases[k].loss != KH_LOSS_NONE && (!scan || recurrent(&s))) check_train(&cases[k], scan);
        }
    }
    /* rnn_scan against unrolled: the small recurrent cases, and the recurrent benchmark models as their tasks
     * build them */
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        kh_model_spec s = spec_of(&cases[k]);
        if (recurrent(&s)) check_scan(&s);
    }
    const kb_model *models;
    int nm = kb_bench_models(&models), seen = 0;
    for (int k = 0; k < nm; k++)
        if (recurrent(&models[k].spec)) {
            check_scan(&models[k].spec);
            seen++;
        }
    CHECK(seen == 2, "imdb_bidirectional_lstm and lstm_text_generation compared (%d models)", seen);
    return kh_test_finish("test_graph_lower");
}
