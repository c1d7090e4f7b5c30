/* tests/backend/test_backend_ref.c — the conformance suite: a backend on the cpu against the float64 reference
 * kit (khost/kit/ref.h), model by model ($KHOST_TEST_PLUGIN, default cntk; tests/backend/CMakeLists.txt runs
 * it for every bundled plugin):
 *   1. probes: training-mode forward (dropout off), output, input gradient and every parameter gradient
 *      from the same random output gradient, then backward once more after the same forward (same result);
 *   2. whole training steps (forward, fused loss, backward, optimizer) from the same weights, comparing the
 *      loss and every weight after each step; once with dropout on, from the same seed, where the masks must
 *      agree element for element (cntk draws them in NHWC order although it stores NCHW).
 * Small models cover every layer kind, activation, loss, optimizer and input path (f32, NCHW images,
 * embedding indices, one-hot as a row lookup, one-hot expanded). Tolerances: float32 against float64,
 * normalised by the reference tensor's largest magnitude. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "khost/kit/ref.h"
#include "khost/kit/status.h"
#include "khost/kit/rng.h"
#include "khost/kit/spec.h"
#include "testutil.h"

#define PROBE_TOL 2e-5 /* forward / gradient probes */
#define STEP_TOL 2e-4  /* weights after a few optimizer steps */

static kb_backend B;

/* Same weights into both (kit initialisers, seeded). */
static int setup_pair(const kh_model_spec *sp, int deterministic, kh_bmodel **cm, kh_ref_model **rm) {
    *cm = kb_compile(&B, sp, 6, deterministic);
    char err[256];
    if (!*cm) return -1;
    if (kh_ref_model_create(sp, rm, err, sizeof err) != KH_OK) {
        fprintf(stderr, "ref create %s: %s\n", sp->name, err);
        return -1;
    }
    float **w = NULL;
    if (kb_init_weights(&B, *cm, sp, 99, &w) != 0) return -1;
    const kh_model_shapes *sh = kh_ref_model_shapes(*rm);
    for (int l = 0; l < sh->n_layers; l++)
        for (int s = 0; s < sh->layers[l].n_params; s++)
            kh_ref_model_set_weight_f32(*rm, l, s, w[l * KH_MAX_SLOTS + s], sh->layers[l].params[s].numel);
    kb_free_weights(sp, w);
    if (!deterministic) kh_ref_model_set_dropout(*rm, 1, 7); /* kb_compile seeds cntk with 7 */
    return 0;
}

static void check_probes(const kh_model_spec *sp) {
    kh_bmodel *cm = NULL;
    kh_ref_model *rm = NULL;
    if (setup_pair(sp, 1, &cm, &rm) != 0) {
        CHECK(0, "%s: setup failed", sp->name);
        goto done;
    }
    kh_rng r;
    kh_rng_seed(&r, 1234);
    kb_batch bt;
    kb_make_batch(&bt, sp, 5, &r);
    const kh_model_shapes *sh = kh_ref_model_shapes(rm);
    const kh_layer_shapes *last = &sh->layers[sh->n_layers - 1];
    int64_t on = bt.n * last->out_numel;
    float *out = malloc((size_t)on * sizeof(float)), *dy = malloc((size_t)on * sizeof(float));
    double *dyd = malloc((size_t)on * sizeof(double));
    int64_t od[4] = {bt.n, last->out_shape[0], last->out_shape[1], last->out_shape[2]};
    kh_tensor tout = kb_tensor(KH_F32, KH_LAYOUT_ANY, last->out_rank + 1, od, out);
    kh_status st = B.api->forward(cm, &bt.x_backend, &tout);
    CHECK(st == KH_OK, "%s forward: %s", sp->name, B.api->last_error(B.s));
    CHECK(kh_ref_model_forward(rm, &bt.x_nhwc, 1) == KH_OK, "%s ref forward", sp->name);
    kb_compare(sp->name, "forward output", out, kh_ref_model_output(rm, NULL), on, PROBE_TOL, 0);

    kb_fill_uniform(dy, on, -1.0f, 1.0f, &r);
    for (int64_t i = 0; i < on; i++) dyd[i] = dy[i];
    kh_tensor tdy = kb_tensor(KH_F32, KH_LAYOUT_ANY, last->out_rank + 1, od, dy);
    float *dx = NULL;
    kh_tensor tdx, *pdx = NULL;
    if (sp->input_dtype == KH_F32) {
        dx = malloc((size_t)(bt.n * bt.per) * sizeof(float));
        tdx = bt.x_nhwc; /* ask for NHWC back: the backend converts */
        tdx.data = dx;
        pdx = &tdx;
    }
    CHECK(kh_ref_model_backward(rm, dyd) == KH_OK, "%s ref backward", sp->name);
    /* backend.h allows backward() again after one forward(): the second must give the same gradients (a
     * backend that reuses a forward buffer as backward scratch fails here) */
    for (int pass = 0; pass < 2; pass++) {
        const char *tag = pass ? " (2nd backward)" : "";
        for (int64_t i = 0; i < on; i++) dy[i] = (float)dyd[i]; /* the same dy, whatever the first pass did */
        st = B.api->backward(cm, &tdy, pdx);
        CHECK(st == KH_OK, "%s backward%s: %s", sp->name, tag, B.api->last_error(B.s));
        char what[128];
        snprintf(what, sizeof what, "input gradient%s", tag);
        if (dx) kb_compare(sp->name, what, dx, kh_ref_model_input_grad(rm), bt.n * bt.per, PROBE_TOL, 0);
        for (int l = 0; l < sh->n_layers; l++)
            for (int s = 0; s < sh->layers[l].n_params; s++) {
                const kh_param_shape *ps = &sh->layers[l].params[s];
                float *g = malloc((size_t)ps->numel * sizeof(float));
                kh_tensor tg = kb_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, g);
                st = B.api->get_grad(cm, l, s, &tg);
                CHECK(st == KH_OK, "%s get_grad %d/%d: %s", sp->name, l, s, B.api->last_error(B.s));
                snprintf(what, sizeof what, "grad %s[%d].%s%s", kh_layer_kind_name(sp->layers[l].kind), l, ps->name,
                         tag);
                kb_compare(sp->name, what, g, kh_ref_model_grad(rm, l, s), ps->numel, PROBE_TOL, 0);
                free(g);
            }
    }
    free(out);
    free(dy);
    free(dyd);
    free(dx);
    kb_free_batch(&bt);
done:
    if (cm) B.api->model_free(cm);
    kh_ref_model_free(rm);
}

static void check_steps(const kh_model_spec *sp, int deterministic, int steps) {
    kh_bmodel *cm = NULL;
    kh_ref_model *rm = NULL;
    if (setup_pair(sp, deterministic, &cm, &rm) != 0) {
        CHECK(0, "%s: setup failed", sp->name);
        goto done;
    }
    kh_rng r;
    kh_rng_seed(&r, 777);
    const kh_model_shapes *sh = kh_ref_model_shapes(rm);
    char name[96];
    snprintf(name, sizeof name, "%s%s", sp->name, deterministic ? "" : "+dropout");
    for (int step = 0; step < steps; step++) {
        kb_batch bt;
        kb_make_batch(&bt, sp, step == 1 ? 3 : 6, &r); /* a short batch in the middle */
        int64_t yd[1] = {bt.n};
        kh_tensor ty = kb_tensor(KH_I32, KH_LAYOUT_NC, 1, yd, bt.labels);
        kh_status st = B.api->train_batch(cm, &bt.x_backend, &ty);
        CHECK(st == KH_OK, "%s train_batch: %s", name, B.api->last_error(B.s));
        double ref_loss = 0;
        int64_t ref_correct = 0;
        CHECK(kh_ref_model_train_step(rm, &bt.x_nhwc, bt.labels, &ref_loss, &ref_correct) == KH_OK, "%s ref step: %s",
              name, kh_ref_model_last_error(rm));
        kh_metrics met;
        B.api->read_metrics(cm, KH_PHASE_TRAIN, &met, 1);
        CHECK(met.samples == bt.n, "%s: %lld samples counted", name, (long long)met.samples);
        CHECK_CLOSE(met.loss_sum / (double)bt.n, ref_loss, 1e-5, 1e-6, name);
        CHECK(fabs(met.correct - (double)ref_correct) < 0.5, "%s: correct %g vs %lld", name, met.correct,
              (long long)ref_correct);
        for (int l = 0; l < sh->n_layers; l++)
            for (int s = 0; s < sh->layers[l].n_params; s++) {
                const kh_param_shape *ps = &sh->layers[l].params[s];
                float *w = malloc((size_t)ps->numel * sizeof(float));
                kh_tensor tw = kb_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, w);
                CHECK(B.api->get_weight(cm, l, s, &tw) == KH_OK, "%s get_weight", name);
                char what[96];
                snprintf(what, sizeof what, "step %d %s[%d].%s", step + 1, kh_layer_kind_name(sp->layers[l].kind), l,
                         ps->name);
                kb_compare(name, what, w, kh_ref_model_weight(rm, l, s), ps->numel, STEP_TOL, 0);
                free(w);
            }
        kb_free_batch(&bt);
    }
    /* evaluation metrics on one more batch */
    kb_batch bt;
    kb_make_batch(&bt, sp, 4, &r);
    int64_t yd[1] = {bt.n};
    kh_tensor ty = kb_tensor(KH_I32, KH_LAYOUT_NC, 1, yd, bt.labels);
    CHECK(B.api->eval_batch(cm, &bt.x_backend, &ty) == KH_OK, "%s eval: %s", name, B.api->last_error(B.s));
    double ref_loss = 0;
    int64_t ref_correct = 0;
    kh_ref_model_forward(rm, &bt.x_nhwc, 0);
    kh_ref_model_loss(rm, bt.labels, &ref_loss, &ref_correct);
    kh_metrics met;
    B.api->read_metrics(cm, KH_PHASE_EVAL, &met, 1);
    CHECK_CLOSE(met.loss_sum / 4.0, ref_loss, 1e-5, 1e-6, "eval loss");
    CHECK(fabs(met.correct - (double)ref_correct) < 0.5, "%s eval correct %g vs %lld", name, met.correct,
          (long long)ref_correct);
    kb_free_batch(&bt);
done:
    if (cm) B.api->model_free(cm);
    kh_ref_model_free(rm);
}

int main(void) {
    /* 2 threads by default (BiLSTM directions in parallel, cell rows split); KHOST_TEST_THREADS=1 for the
     * sequential paths */
    const char *th = getenv("KHOST_TEST_THREADS");
    kb_load(&B, th && atoi(th) > 0 ? atoi(th) : 2);

    const kh_model_spec *specs;
    int n_specs = kb_small_models(&specs);
    for (int i = 0; i < n_specs; i++) {
        check_probes(&specs[i]);
        check_steps(&specs[i], 1, 3);
        /* dropout on, same seed: identical masks — where the backend draws the reference kit's stream (cntk
         * does; tensorflow's counter-based masks are tested in tests/tensorflow) */
        if (!strcmp(B.desc->name, "cntk")) check_steps(&specs[i], 0, 2);
    }
    kb_unload(&B);
    return kh_test_finish("test_backend_ref");
}
