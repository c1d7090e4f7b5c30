/* tests/core_profile/test_backend_profile.c — a backend's profile call (ABI 1.1, the gradient split of 1.5)
 * through the ABI, on the cpu; the backend is $KHOST_TEST_PLUGIN (default theano). For each of the small
 * conformance models (every layer kind, optimizer and input path) and a three-convolution model with dropout on:
 *   - theano profiles by running its training function's profiling variant, a second compiled function with a
 *     clock read between nodes (plugins/theano/th_profile.c), so there the variant must compute the ordinary
 *     step: a model profiled for W warm-up and S timed steps ends with the same weights, bit for bit, and the same
 *     training metrics as a twin trained W + S times with train_batch on the same batch from the same weights
 *     (cntk and tensorflow time the very code train_batch runs);
 *   - the rows follow backend.h: one row per model layer first, in layer order, named by the layer's kind, then
 *     the op-kind rows (layer -1, graph backends only); every time finite and >= 0; every layer with parameters
 *     has positive forward, backward and update time (update: graph backends; cntk's optimizer step is fused
 *     over the model and is other_s); the layer rows add up to no more than total_s (tensorflow runs its nodes
 *     one at a time while profiled, so its rows too); other_s is the rest, or 0; steps = S;
 *   - the split (ABI 1.5): a layer without parameters is all input gradient; one with parameters has a weight
 *     gradient > 0 and an input gradient >= 0 adding up to no more than its backward (cntk's im2col convolution,
 *     which interleaves them, may leave it unsplit, -1); a Dense, Conv2D or LSTM after another layer with
 *     parameters has an input gradient > 0; the op kinds that form a weight's gradient (Conv2DBackpropFilter,
 *     BiasAddGrad, GatherGrad) are all weight gradient, and the ones that carry the gradient on to the input
 *     (Conv2DBackpropInput, MaxPoolGrad, ReluGrad) all input gradient;
 *   - a host older than 1.5 (a kh_profile that ends before grads) gets the same rows and nothing written past
 *     its struct;
 *   - the host's cap is kept: cap_rows 2 writes two rows (and two splits) and leaves the next untouched;
 *     cap_rows 0 none;
 *   - steps < 1 is KH_ERR_INVALID. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "testutil.h"
#include "khost/kit/rng.h"
#include "khost/kit/spec.h"
#include "khost/kit/status.h"

#define BATCH 8
#define WARMUP 2
#define STEPS 3

static kb_backend B;

/* every weight of the model, concatenated (malloc'ed) */
static float *weights(kh_bmodel *m, const kh_model_shapes *sh, int64_t *n_out) {
    int64_t total = 0;
    for (int l = 0; l < sh->n_layers; l++)
        for (int k = 0; k < sh->layers[l].n_params; k++) total += sh->layers[l].params[k].numel;
    float *all = malloc((size_t)(total + 1) * sizeof *all), *p = all;
    for (int l = 0; l < sh->n_layers; l++)
        for (int k = 0; k < sh->layers[l].n_params; k++) {
            const kh_param_shape *ps = &sh->layers[l].params[k];
            kh_tensor t = kb_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, p);
            CHECK(B.api->get_weight(m, l, k, &t) == KH_OK, "get_weight");
            p += ps->numel;
        }
    *n_out = total;
    return all;
}

static int graph_backend(void) { return strcmp(kb_plugin_name(), "cntk") != 0; }

/* row i's split as the host allocated it */
static const kh_profile_grad *grad(const kh_profile_grad *g, int32_t i) { return &g[i]; }

static int op_row(const kh_profile_row *r, const char *name) { return r->layer == -1 && !strcmp(r->what, name); }

static kh_bmodel *fresh(const kh_model_spec *sp) {
    kh_bmodel *m = kb_compile(&B, sp, BATCH, 0); /* dropout on: both twins draw the same masks */
    if (m && kb_init_weights(&B, m, sp, 11, NULL) != 0) {
        B.api->model_free(m);
        m = NULL;
    }
    return m;
}

static int finite_nonneg(double t) { return isfinite(t) && t >= 0; }

static int gemm_layer(uint32_t kind) {
    return kind == KH_LAYER_DENSE || kind == KH_LAYER_CONV2D || kind == KH_LAYER_LSTM || kind == KH_LAYER_BILSTM;
}

/* Layer row i's split (see the header); *learns: a layer before it has parameters (updated here). */
static void check_split(const kh_model_spec *sp, const kh_model_shapes *sh, const kh_profile_row *w,
                        const kh_profile_grad *g, int32_t i, int *learns) {
    uint32_t kind = sp->layers[i].kind;
    int params = sh->layers[i].n_params > 0;
    if (g->input_s == -1 && g->weight_s == -1) {
        CHECK(params && !graph_backend() && kind == KH_LAYER_CONV2D, "%s: layer %d (%s): not split", sp->name, i,
              w->what);
    } else if (!params) {
        CHECK(g->weight_s == 0 && g->input_s == w->backward_s,
              "%s: layer %d (%s, no parameters): input %.9g + weight %.9g s, backward %.9g s", sp->name, i, w->what,
              g->input_s, g->weight_s, w->backward_s);
    } else {
        CHECK(finite_nonneg(g->input_s) && g->weight_s > 0 && isfinite(g->weight_s) &&
                  g->input_s + g->weight_s <= w->backward_s * (1 + 1e-12),
              "%s: layer %d (%s): input %.9g + weight %.9g s, backward %.9g s", sp->name, i, w->what, g->input_s,
              g->weight_s, w->backward_s);
        if (*learns && gemm_layer(kind))
            CHECK(g->input_s > 0, "%s: layer %d (%s) passes a gradient on, yet no input gradient time", sp->name, i,
                  w->what);
    }
    if (params) *learns = 1;
}

/* An op-kind row's split: the op kinds wholly on one side. */
static void check_op_split(const kh_model_spec *sp, const kh_profile_row *r, const kh_profile_grad *g) {
    static const char *weight_ops[] = {"conv2d_backprop_filter", "bias_add_grad", "gather_grad"};
    static const char *input_ops[] = {"conv2d_backprop_input", "maxpool_grad", "relu_grad"};
    for (int k = 0; k < 3; k++) {
        if (op_row(r, weight_ops[k]))
            CHECK(g->input_s == 0 && g->weight_s == r->backward_s, "%s: %s: input %.9g, weight %.9g, backward %.9g s",
                  sp->name, r->what, g->input_s, g->weight_s, r->backward_s);
        if (op_row(r, input_ops[k]))
            CHECK(g->weight_s == 0 && g->input_s == r->backward_s, "%s: %s: input %.9g, weight %.9g, backward %.9g s",
                  sp->name, r->what, g->input_s, g->weight_s, r->backward_s);
    }
}

static void one_model(const kh_model_spec *sp) {
    kh_model_shapes sh;
    char err[256];
    if (kh_spec_infer(sp, &sh, err, sizeof err) != KH_OK) {
        CHECK(0, "%s: %s", sp->name, err);
        return;
    }
    kh_rng r;
    kh_rng_seed(&r, 21);
    kb_batch bt;
    kb_make_batch(&bt, sp, BATCH, &r);
    int64_t yd[1] = {bt.n};
    kh_tensor ty = kb_tensor(KH_I32, KH_LAYOUT_NC, 1, yd, bt.labels);
    kh_bmodel *ma = fresh(sp), *mb = fresh(sp);
    CHECK(ma && mb, "%s: compile", sp->name);
    if (!ma || !mb) goto out;

    /* the twin: W + S ordinary steps */
    for (int s = 0; s < WARMUP + STEPS; s++)
        CHECK(B.api->train_batch(ma, &bt.x_backend, &ty) == KH_OK, "%s train: %s", sp->name, B.api->last_error(B.s));
    /* the profiled model */
    int cap = sh.n_layers + 64;
    kh_profile_row *rows = calloc((size_t)cap + 1, sizeof *rows);
    kh_profile_grad *grads = malloc(((size_t)cap + 1) * sizeof *grads);
    for (int i = 0; grads && i <= cap; i++) grads[i].input_s = grads[i].weight_s = -1;
    kh_profile pr = {.struct_size = sizeof pr, .cap_rows = cap, .rows = rows, .grads = grads,
                     .grad_size = sizeof *grads};
    kh_status st = rows && grads ? B.api->profile(mb, &bt.x_backend, &ty, WARMUP, STEPS, &pr) : KH_ERR_NOMEM;
    CHECK(st == KH_OK, "%s profile: %s", sp->name, B.api->last_error(B.s));
    if (st != KH_OK) {
        free(rows);
        free(grads);
        goto out;
    }

    if (!strcmp(kb_plugin_name(), "theano")) {
        int64_t na = 0, nb = 0;
        float *wa = weights(ma, &sh, &na), *wb = weights(mb, &sh, &nb);
        CHECK(na == nb && memcmp(wa, wb, (size_t)na * sizeof *wa) == 0,
              "%s: the profiled steps left other weights than train_batch", sp->name);
        free(wa);
        free(wb);
        kh_metrics ka, kb;
        memset(&ka, 0, sizeof ka);
        memset(&kb, 0, sizeof kb);
        CHECK(B.api->read_metrics(ma, KH_PHASE_TRAIN, &ka, 0) == KH_OK &&
                  B.api->read_metrics(mb, KH_PHASE_TRAIN, &kb, 0) == KH_OK,
              "%s: read_metrics", sp->name);
        CHECK(ka.loss_sum == kb.loss_sum && ka.correct == kb.correct && ka.samples == kb.samples,
              "%s: train metrics differ: loss %.9g / %.9g, correct %g / %g, samples %lld / %lld", sp->name,
              ka.loss_sum, kb.loss_sum, ka.correct, kb.correct, (long long)ka.samples, (long long)kb.samples);
    }

    /* the rows */
    CHECK(pr.steps == STEPS, "%s: steps %d", sp->name, pr.steps);
    CHECK(pr.n_rows >= sh.n_layers && pr.n_rows <= cap, "%s: %d rows for %d layers", sp->name, pr.n_rows, sh.n_layers);
    CHECK(pr.total_s > 0 && isfinite(pr.total_s), "%s: total_s %g", sp->name, pr.total_s);
    double sum = 0;
    int learns = 0; /* a layer before this one has parameters */
    for (int32_t i = 0; i < pr.n_rows && i < sh.n_layers; i++) {
        const kh_profile_row *w = &rows[i];
        CHECK(w->layer == i, "%s: row %d is layer %d", sp->name, i, w->layer);
        CHECK(!strcmp(w->what, kh_layer_kind_name(sp->layers[i].kind)), "%s: row %d is '%s'", sp->name, i, w->what);
        CHECK(finite_nonneg(w->forward_s) && finite_nonneg(w->backward_s) && finite_nonneg(w->optimizer_s),
              "%s: layer %d times %g %g %g", sp->name, i, w->forward_s, w->backward_s, w->optimizer_s);
        if (sh.layers[i].n_params > 0)
            CHECK(w->forward_s > 0 && w->backward_s > 0 && (w->optimizer_s > 0 || !graph_backend()) && w->calls > 0,
                  "%s: layer %d (%s, with parameters): forward %g, backward %g, update %g s, %lld calls", sp->name, i,
                  w->what, w->forward_s, w->backward_s, w->optimizer_s, (long long)w->calls);
        sum += w->forward_s + w->backward_s + w->optimizer_s;
        check_split(sp, &sh, w, grad(grads, i), i, &learns);
    }
    /* cntk's layers, theano's nodes and tensorflow's nodes (one at a time while profiled, tf_profile.c) run one
     * after another: the rows partition the steps' wall time */
    CHECK(sum <= pr.total_s, "%s: the layer rows add up to %.9f s, more than total_s %.9f s", sp->name, sum,
          pr.total_s);
    double rest = pr.total_s > sum ? pr.total_s - sum : 0;
    CHECK(finite_nonneg(pr.other_s) && fabs(pr.other_s - rest) <= 1e-9 + 1e-9 * pr.total_s,
          "%s: other_s %.9f, total_s - rows %.9f", sp->name, pr.other_s, pr.total_s - sum);
    int kinds = 0;
    for (int32_t i = sh.n_layers; i < pr.n_rows; i++) {
        kinds++;
        CHECK(rows[i].layer == -1 && rows[i].what[0], "%s: row %d after the layers: layer %d '%s'", sp->name, i,
              rows[i].layer, rows[i].what);
        check_op_split(sp, &rows[i], grad(grads, i));
    }
    CHECK(graph_backend() ? kinds > 0 : kinds == 0, "%s: %d op-kind rows", sp->name, kinds);
    printf("  %-26s %d layer rows, %d op kinds, %.3f ms a step, %.1f %% in layers\n", sp->name, sh.n_layers, kinds,
           pr.total_s * 1e3 / STEPS, pr.total_s > 0 ? 100 * sum / pr.total_s : 0);

    /* a 1.4 host: its kh_profile ends before grads; whatever lies after it stays as it was */
    struct {
        kh_profile p;
        unsigned char tail[32];
    } old;
    memset(&old, 0x5a, sizeof old);
    old.p = (kh_profile){.struct_size = offsetof(kh_profile, grads), .cap_rows = cap, .rows = rows};
    memset(&old.p.grads, 0x5a, sizeof old.p - offsetof(kh_profile, grads));
    unsigned char want[sizeof old.p - offsetof(kh_profile, grads) + sizeof old.tail];
    memset(want, 0x5a, sizeof want);
    CHECK(B.api->profile(mb, &bt.x_backend, &ty, 0, 1, &old.p) == KH_OK && old.p.n_rows == pr.n_rows &&
              memcmp((unsigned char *)&old + offsetof(kh_profile, grads), want, sizeof want) == 0,
          "%s: a 1.4 host's profile: %d rows (%d before), the bytes past its struct %s", sp->name, old.p.n_rows,
          pr.n_rows, memcmp((unsigned char *)&old + offsetof(kh_profile, grads), want, sizeof want) ? "written" : "kept");

    /* the host's cap, and a bad call */
    memset(rows, 0x5a, (size_t)3 * sizeof *rows);
    memset(grads, 0x5a, (size_t)3 * sizeof *grads);
    kh_profile_row canary = rows[2];
    kh_profile_grad gcanary = grads[2];
    kh_profile p2 = {.struct_size = sizeof p2, .cap_rows = 2, .rows = rows, .grads = grads, .grad_size = sizeof *grads};
    CHECK(B.api->profile(mb, &bt.x_backend, &ty, 0, 1, &p2) == KH_OK && p2.n_rows == 2 &&
              memcmp(&rows[2], &canary, sizeof canary) == 0 && rows[0].layer == 0 &&
              memcmp(&grads[2], &gcanary, sizeof gcanary) == 0,
          "%s: cap_rows 2: %d rows written, the third %s, its split %s", sp->name, p2.n_rows,
          memcmp(&rows[2], &canary, sizeof canary) ? "overwritten" : "untouched",
          memcmp(&grads[2], &gcanary, sizeof gcanary) ? "overwritten" : "untouched");
    kh_profile p0 = {.struct_size = sizeof p0, .cap_rows = 0, .rows = NULL};
    CHECK(B.api->profile(mb, &bt.x_backend, &ty, 0, 1, &p0) == KH_OK && p0.n_rows == 0, "%s: cap_rows 0: %d rows",
          sp->name, p0.n_rows);
    kh_profile pz = {.struct_size = sizeof pz, .cap_rows = cap, .rows = rows};
    CHECK(B.api->profile(mb, &bt.x_backend, &ty, 0, 0, &pz) == KH_ERR_INVALID, "%s: steps 0 accepted", sp->name);
    free(rows);
    free(grads);
out:
    if (ma) B.api->model_free(ma);
    if (mb) B.api->model_free(mb);
    kb_free_batch(&bt);
    kh_model_shapes_free(&sh);
}

int main(void) {
    setenv("KHOST_TEST_PLUGIN", getenv("KHOST_TEST_PLUGIN") ? getenv("KHOST_TEST_PLUGIN") : "theano", 1);
    kb_load(&B, 2);
    CHECK(B.api->profile != NULL, "%s has no profile call", kb_plugin_name());
    if (!B.api->profile) return kh_test_finish("test_backend_profile");
    static const kh_layer_spec cnn3[] = {
        KB_L(.kind = KH_LAYER_CONV2D, .units = 6, .kernel = {3, 3}, .activation = KH_ACT_RELU),
        KB_L(.kind = KH_LAYER_CONV2D, .units = 8, .kernel = {3, 3}, .padding = KH_PAD_SAME, .activation = KH_ACT_RELU),
        KB_L(.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}),
        KB_L(.kind = KH_LAYER_DROPOUT, .rate = 0.25f),
        KB_L(.kind = KH_LAYER_CONV2D, .units = 8, .kernel = {2, 2}, .activation = KH_ACT_RELU),
        KB_L(.kind = KH_LAYER_FLATTEN),
        KB_L(.kind = KH_LAYER_DENSE, .units = 3, .activation = KH_ACT_SOFTMAX)};
    kh_model_spec extra = kb_spec("three_convs_dropout", KH_F32, 3, 12, 12, 2, 0, cnn3, KB_N(cnn3),
                                  KH_LOSS_CATEGORICAL_CROSSENTROPY, kb_opt(KH_OPT_ADADELTA, 1.0f, 0), 3);
    one_model(&extra);
    const kh_model_spec *specs;
    int n = kb_small_models(&specs);
    for (int i = 0; i < n; i++) one_model(&specs[i]);
    kb_unload(&B);
    return kh_test_finish("test_backend_profile");
}
