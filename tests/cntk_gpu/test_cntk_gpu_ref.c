/* tests/cntk_gpu/test_cntk_gpu_ref.c — the cntk GPU path (cuDNN / cuBLAS / own kernels) against the reference
 * kit (khost/kit/ref.h, float64), on cuda:0.
 *   1. per kernel: a one-layer (or minimal) model per layer kind, activation and input path: the training-mode
 *      forward output, the input gradient and every parameter gradient (probes, dropout off), from two
 *      backward calls after the one forward;
 *   2. the small models of tests/cntk: probes, then whole training steps (fused loss, backward, the fused
 *      optimizer over the arena) comparing the loss, the metrics and every weight after each step, then an
 *      evaluation batch;
 *   3. dropout on the device: the kept fraction, the inverted scaling, and the backward using the same mask;
 *   4. deterministic = 1 gives bit-identical weights run to run (conv with asymmetric 'same' padding, the
 *      embedding backward), and CNTK_CUDA_CHECK_LAYERS=1 (synchronise and check after every layer) trains
 *      to the same results;
 *   5. running out of device memory is KH_ERR_NOMEM with a message, and the session still works after it.
 * Before the CUDA open (on any machine, the rehearsal included) it checks its prerequisites — the module loads,
 * the reference kit builds every model — and prints "prerequisites ok"; then it skips (exit 77) visibly where no
 * CUDA device is usable.
 * Every run draws fresh inputs (seed from the clock unless CNTK_GPU_TEST_SEED is set; printed) and poisons
 * every output buffer with NaN first, on the host and (CNTK_CUDA_POISON=1) on the device, so an element a
 * kernel forgets to write fails the comparison. Tolerances: FP32 (FMA, no TF32) against float64, normalised by
 * the reference tensor's largest magnitude; looser than the CPU path's because cuDNN may pick Winograd/FFT
 * convolutions and reduces in other orders. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parity.h"
#include "cntk_gpu_testlib.h"
#include "khost/kit/ref.h"
#include "khost/kit/status.h"
#include "khost/kit/rng.h"
#include "khost/kit/spec.h"
#include "testutil.h"

#define PROBE_TOL 1e-4 /* forward / gradient probes */
#define STEP_TOL 1e-3  /* weights after a few optimizer steps */

static kb_backend B;
static uint64_t g_seed;

static float *poisoned(int64_t n) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}

static int setup_pair(const kh_model_spec *sp, int max_batch, kh_bmodel **cm, kh_ref_model **rm) {
    *cm = kb_compile(&B, sp, max_batch, 1);
    char err[256];
    if (!*cm) return -1;
    if (kh_ref_model_create(sp, rm, err, sizeof err) != KH_OK) {
        fprintf(stderr, "ref create %s: %s\n", sp->name, err);
        return -1;
    }
    float **w = NULL;
    if (kb_init_weights(&B, *cm, sp, g_seed ^ 0x5eed, &w) != 0) return -1;
    const kh_model_shapes *sh = kh_ref_model_shapes(*rm);
    for (int l = 0; l < sh->n_layers; l++)
        for (int s = 0; s < sh->layers[l].n_params; s++) {
            kh_ref_model_set_weight_f32(*rm, l, s, w[l * KH_MAX_SLOTS + s], sh->layers[l].params[s].numel);
            /* the weights read back from the device equal what was set (the layout mappings round-trip) */
            const kh_param_shape *ps = &sh->layers[l].params[s];
            float *back = poisoned(ps->numel);
            kh_tensor tb = kb_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, back);
            CHECK(B.api->get_weight(*cm, l, s, &tb) == KH_OK, "%s get_weight %d/%d: %s", sp->name, l, s,
                  B.api->last_error(B.s));
            int diff = 0;
            for (int64_t i = 0; i < ps->numel; i++) diff += back[i] != w[l * KH_MAX_SLOTS + s][i];
            CHECK(diff == 0, "%s layer %d slot %d (%s): %d weights differ after set/get", sp->name, l, s, ps->name, diff);
            free(back);
        }
    kb_free_weights(sp, w);
    return 0;
}

static void check_probes(const kh_model_spec *sp, int64_t n) {
    kh_bmodel *cm = NULL;
    kh_ref_model *rm = NULL;
    if (setup_pair(sp, (int)n + 2, &cm, &rm) != 0) {
        CHECK(0, "%s: setup failed: %s", sp->name, B.api->last_error(B.s));
        goto done;
    }
    kh_rng r;
    kh_rng_seed(&r, g_seed ^ 0x9e37);
    kb_batch bt;
    kb_make_batch(&bt, sp, n, &r);
    const kh_model_shapes *sh = kh_ref_model_shapes(rm);
    const kh_layer_shapes *last = &sh->layers[sh->n_layers - 1];
    int64_t on = bt.n * last->out_numel;
    float *out = poisoned(on), *dy = malloc((size_t)on * sizeof(float));
    double *dyd = malloc((size_t)on * sizeof(double));
    int64_t od[4] = {bt.n, last->out_shape[0], last->out_shape[1], last->out_shape[2]};
    /* NHWC back for image outputs: the backend converts */
    kh_tensor tout = kb_tensor(KH_F32, last->out_rank == 3 ? KH_LAYOUT_NHWC : KH_LAYOUT_ANY, last->out_rank + 1, od, out);
    kh_status st = B.api->forward(cm, &bt.x_backend, &tout);
    CHECK(st == KH_OK, "%s forward: %s", sp->name, B.api->last_error(B.s));
    CHECK(kh_ref_model_forward(rm, &bt.x_nhwc, 1) == KH_OK, "%s ref forward", sp->name);
    kb_compare(sp->name, "forward output", out, kh_ref_model_output(rm, NULL), on, PROBE_TOL, g_seed);

    kb_fill_uniform(dy, on, -1.0f, 1.0f, &r);
    for (int64_t i = 0; i < on; i++) dyd[i] = dy[i];
    kh_tensor tdy = kb_tensor(KH_F32, last->out_rank == 3 ? KH_LAYOUT_NHWC : KH_LAYOUT_ANY, last->out_rank + 1, od, dy);
    CHECK(kh_ref_model_backward(rm, dyd) == KH_OK, "%s ref backward", sp->name);
    float *dx = NULL;
    kh_tensor tdx, *pdx = NULL;
    /* backward twice after one forward (backend.h allows it): the second must not see the first's scratch
     * (a padded-input buffer reused for the padded dx, a consumed RNN reserve space) */
    for (int pass = 0; pass < 2; pass++) {
        const char *tag = pass ? " (2nd backward)" : "";
        for (int64_t i = 0; i < on; i++) dy[i] = (float)dyd[i];
        if (sp->input_dtype == KH_F32) {
            free(dx);
            dx = poisoned(bt.n * bt.per);
            tdx = bt.x_nhwc;
            tdx.data = dx;
            pdx = &tdx;
        }
        st = B.api->backward(cm, &tdy, pdx);
        CHECK(st == KH_OK, "%s backward%s: %s", sp->name, tag, B.api->last_error(B.s));
        char what[128];
        snprintf(what, sizeof what, "input gradient%s", tag);
        if (dx) kb_compare(sp->name, what, dx, kh_ref_model_input_grad(rm), bt.n * bt.per, PROBE_TOL, g_seed);
        for (int l = 0; l < sh->n_layers; l++)
            for (int s = 0; s < sh->layers[l].n_params; s++) {
                const kh_param_shape *ps = &sh->layers[l].params[s];
                float *g = poisoned(ps->numel);
                kh_tensor tg = kb_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, g);
                st = B.api->get_grad(cm, l, s, &tg);
                CHECK(st == KH_OK, "%s get_grad %d/%d: %s", sp->name, l, s, B.api->last_error(B.s));
                snprintf(what, sizeof what, "grad %s[%d].%s%s", kh_layer_kind_name(sp->layers[l].kind), l, ps->name,
                         tag);
                kb_compare(sp->name, what, g, kh_ref_model_grad(rm, l, s), ps->numel, PROBE_TOL, g_seed);
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

static void check_steps(const kh_model_spec *sp, int steps) {
    kh_bmodel *cm = NULL;
    kh_ref_model *rm = NULL;
    if (setup_pair(sp, 6, &cm, &rm) != 0) {
        CHECK(0, "%s: setup failed: %s", sp->name, B.api->last_error(B.s));
        goto done;
    }
    kh_rng r;
    kh_rng_seed(&r, g_seed ^ 0x777);
    const kh_model_shapes *sh = kh_ref_model_shapes(rm);
    for (int step = 0; step < steps; step++) {
        kb_batch bt;
        kb_make_batch(&bt, sp, step == 1 ? 3 : 6, &r); /* a short batch in the middle */
        int64_t yd[1] = {bt.n};
        kh_tensor ty = kb_tensor(KH_I32, KH_LAYOUT_NC, 1, yd, bt.labels);
        kh_status st = B.api->train_batch(cm, &bt.x_backend, &ty);
        CHECK(st == KH_OK, "%s train_batch: %s", sp->name, B.api->last_error(B.s));
        double ref_loss = 0;
        int64_t ref_correct = 0;
        CHECK(kh_ref_model_train_step(rm, &bt.x_nhwc, bt.labels, &ref_loss, &ref_correct) == KH_OK, "%s ref step: %s",
              sp->name, kh_ref_model_last_error(rm));
        kh_metrics met = {NAN, NAN, -1};
        CHECK(B.api->read_metrics(cm, KH_PHASE_TRAIN, &met, 1) == KH_OK, "%s read_metrics", sp->name);
        CHECK(met.samples == bt.n, "%s: %lld samples counted", sp->name, (long long)met.samples);
        CHECK_CLOSE(met.loss_sum / (double)bt.n, ref_loss, 1e-4, 1e-6, sp->name);
        CHECK(fabs(met.correct - (double)ref_correct) < 0.5, "%s: correct %g vs %lld", sp->name, met.correct,
              (long long)ref_correct);
        for (int l = 0; l < sh->n_layers; l++)
            for (int s = 0; s < sh->layers[l].n_params; s++) {
                const kh_param_shape *ps = &sh->layers[l].params[s];
                float *w = poisoned(ps->numel);
                kh_tensor tw = kb_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, w);
                CHECK(B.api->get_weight(cm, l, s, &tw) == KH_OK, "%s get_weight", sp->name);
                char what[96];
                snprintf(what, sizeof what, "step %d %s[%d].%s", step + 1, kh_layer_kind_name(sp->layers[l].kind), l,
                         ps->name);
                kb_compare(sp->name, what, w, kh_ref_model_weight(rm, l, s), ps->numel, STEP_TOL, g_seed);
                free(w);
            }
        kb_free_batch(&bt);
    }
    kb_batch bt;
    kb_make_batch(&bt, sp, 4, &r);
    int64_t yd[1] = {bt.n};
    kh_tensor ty = kb_tensor(KH_I32, KH_LAYOUT_NC, 1, yd, bt.labels);
    CHECK(B.api->eval_batch(cm, &bt.x_backend, &ty) == KH_OK, "%s eval: %s", sp->name, B.api->last_error(B.s));
    double ref_loss = 0;
    int64_t ref_correct = 0;
    kh_ref_model_forward(rm, &bt.x_nhwc, 0);
    kh_ref_model_loss(rm, bt.labels, &ref_loss, &ref_correct);
    kh_metrics met = {NAN, NAN, -1};
    CHECK(B.api->sync(cm) == KH_OK, "%s sync", sp->name);
    B.api->read_metrics(cm, KH_PHASE_EVAL, &met, 1);
    CHECK(met.samples == 4, "%s eval samples %lld", sp->name, (long long)met.samples);
    CHECK_CLOSE(met.loss_sum / 4.0, ref_loss, 1e-4, 1e-6, "eval loss");
    CHECK(fabs(met.correct - (double)ref_correct) < 0.5, "%s eval correct %g vs %lld", sp->name, met.correct,
          (long long)ref_correct);
    kb_free_batch(&bt);
done:
    if (cm) B.api->model_free(cm);
    kh_ref_model_free(rm);
}

// --- deterministic = 1: bit-identical runs --------------------------------------------------------------
/* Train a fresh model from the same weights on the same batches (a short one in the middle); every weight
 * after the steps, as raw bits, into *out (malloc'ed; *n floats). */
static int train_fixed(const kh_model_spec *sp, uint64_t seed, float **out, int64_t *n) {
    *out = NULL;
    *n = 0;
    kh_bmodel *cm = kb_compile(&B, sp, 6, 1);
    if (!cm) return -1;
    if (kb_init_weights(&B, cm, sp, 99, NULL) != 0) {
        B.api->model_free(cm);
        return -1;
    }
    kh_rng r;
    kh_rng_seed(&r, seed);
    int rc = 0;
    for (int step = 0; step < 3 && rc == 0; step++) {
        kb_batch bt;
        kb_make_batch(&bt, sp, step == 1 ? 3 : 6, &r);
        int64_t yd[1] = {bt.n};
        kh_tensor ty = kb_tensor(KH_I32, KH_LAYOUT_NC, 1, yd, bt.labels);
        if (B.api->train_batch(cm, &bt.x_backend, &ty) != KH_OK) rc = -1;
        kb_free_batch(&bt);
    }
    kh_model_shapes shp;
    char err[256];
    if (rc == 0 && kh_spec_infer(sp, &shp, err, sizeof err) == KH_OK) {
        int64_t total = 0;
        for (int l = 0; l < shp.n_layers; l++)
            for (int s = 0; s < shp.layers[l].n_params; s++) total += shp.layers[l].params[s].numel;
        float *all = malloc((size_t)(total > 0 ? total : 1) * sizeof(float));
        int64_t at = 0;
        for (int l = 0; all && l < shp.n_layers && rc == 0; l++)
            for (int s = 0; s < shp.layers[l].n_params && rc == 0; s++) {
                const kh_param_shape *ps = &shp.layers[l].params[s];
                kh_tensor tw = kb_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, all + at);
                if (B.api->get_weight(cm, l, s, &tw) != KH_OK) rc = -1;
                at += ps->numel;
            }
        *out = all;
        *n = total;
        kh_model_shapes_free(&shp);
    } else {
        rc = -1;
    }
    B.api->model_free(cm);
    return rc;
}

/* deterministic = 1 promises the same bits run to run: conv algorithms reported deterministic by cuDNN and
 * the ordered embedding backward (the atomic one sums in arrival order). */
static void check_deterministic(void) {
    static const kh_layer_spec conv[] = {
        KB_L(.kind = KH_LAYER_CONV2D, .units = 8, .kernel = {3, 3}, .padding = KH_PAD_SAME, .activation = KH_ACT_RELU),
        KB_L(.kind = KH_LAYER_CONV2D, .units = 8, .kernel = {4, 4}, .strides = {2, 2}, .padding = KH_PAD_SAME,
             .activation = KH_ACT_RELU),
        KB_L(.kind = KH_LAYER_FLATTEN),
        KB_L(.kind = KH_LAYER_DENSE, .units = 5, .activation = KH_ACT_SOFTMAX),
    };
    static const kh_layer_spec emb[] = {
        KB_L(.kind = KH_LAYER_EMBEDDING, .input_dim = 7, .units = 16), /* 7 rows, 24 steps: many repeats */
        KB_L(.kind = KH_LAYER_GAP1D),
        KB_L(.kind = KH_LAYER_DENSE, .units = 1, .activation = KH_ACT_SIGMOID),
    };
    kh_model_spec specs[2] = {
        kb_spec("det_conv", KH_F32, 3, 12, 12, 3, 0, conv, KB_N(conv), KH_LOSS_CATEGORICAL_CROSSENTROPY,
                kb_opt(KH_OPT_ADAM, 1e-2f, 0), 5),
        kb_spec("det_embedding", KH_I32, 1, 24, 0, 0, 0, emb, KB_N(emb), KH_LOSS_BINARY_CROSSENTROPY,
                kb_opt(KH_OPT_ADAM, 1e-2f, 0), 2),
    };
    for (int i = 0; i < 2; i++) {
        float *a = NULL, *b = NULL;
        int64_t na = 0, nb = 0;
        int ra = train_fixed(&specs[i], g_seed ^ 0xde7, &a, &na), rb = train_fixed(&specs[i], g_seed ^ 0xde7, &b, &nb);
        CHECK(ra == 0 && rb == 0, "%s: training failed: %s", specs[i].name, B.api->last_error(B.s));
        if (ra == 0 && rb == 0) {
            int64_t diff = 0;
            for (int64_t k = 0; k < na && k < nb; k++) diff += memcmp(&a[k], &b[k], sizeof(float)) != 0;
            CHECK(na == nb && diff == 0, "%s: two deterministic runs differ in %lld of %lld weights", specs[i].name,
                  (long long)diff, (long long)na);
        }
        free(a);
        free(b);
    }
}

// --- CNTK_CUDA_CHECK_LAYERS=1: the same results, checked after every layer ---------------------------------
static void check_layer_checks(const kh_model_spec *sp) {
    setenv("CNTK_CUDA_CHECK_LAYERS", "1", 1);
    check_steps(sp, 2);
    unsetenv("CNTK_CUDA_CHECK_LAYERS");
}

// --- out of device memory ---------------------------------------------------------------------------------
static void check_oom(void) {
    const kh_layer_spec l = {.kind = KH_LAYER_DENSE, .units = 1 << 20};
    kh_model_spec sp = {.struct_size = sizeof sp, .name = "huge", .input_dtype = KH_F32, .input_rank = 1,
                        .input_shape = {1}, .n_layers = 1, .layers = &l, .loss = KH_LOSS_NONE,
                        .optimizer = {.kind = KH_OPT_SGD, .lr = 0.1f}};
    kh_compile_opts o = {.struct_size = sizeof o, .max_batch = 1 << 19, .seed = 1, .deterministic = 1}; /* 2 TiB */
    kh_bmodel *m = NULL;
    kh_status st = B.api->compile(B.s, &sp, &o, &m);
    const char *e = B.api->last_error(B.s);
    CHECK(st == KH_ERR_NOMEM && m == NULL, "2 TiB output: status %d (%s)", (int)st, e);
    CHECK(strstr(e, "out of device memory") != NULL, "oom message: %s", e);
    printf("out-of-memory message: %s\n", e);
}

// --- the models --------------------------------------------------------------------------------------------
#define NOLOSS KH_LOSS_NONE, kb_opt(KH_OPT_SGD, 0.1f, 0), 0

int main(void) {
    const char *se = getenv("CNTK_GPU_TEST_SEED");
    g_seed = se && *se ? strtoull(se, NULL, 10) : (uint64_t)time(NULL);
    setenv("CNTK_CUDA_POISON", "1", 0); /* NaN-fill device activations before every pass */
    kb_load_module(&B);
    printf("seed %llu (CNTK_GPU_TEST_SEED to repeat)\n", (unsigned long long)g_seed);

    /* 1. per kernel: one layer kind (activation, padding, input path) at a time */
    const kh_layer_spec k_dense[] = {KB_L(.kind = KH_LAYER_DENSE, .units = 37, .activation = KH_ACT_RELU)};
    const kh_layer_spec k_dense_sm[] = {KB_L(.kind = KH_LAYER_DENSE, .units = 45, .activation = KH_ACT_SOFTMAX)};
    const kh_layer_spec k_dense_sig[] = {KB_L(.kind = KH_LAYER_DENSE, .units = 9, .activation = KH_ACT_SIGMOID)};
    const kh_layer_spec k_dense_tanh[] = {KB_L(.kind = KH_LAYER_DENSE, .units = 130, .activation = KH_ACT_TANH)};
    const kh_layer_spec k_conv_valid[] = {KB_L(.kind = KH_LAYER_CONV2D, .units = 32, .kernel = {3, 3},
                                             .activation = KH_ACT_RELU)};
    const kh_layer_spec k_conv_same[] = {KB_L(.kind = KH_LAYER_CONV2D, .units = 16, .kernel = {3, 3},
                                            .padding = KH_PAD_SAME, .activation = KH_ACT_TANH)};
    const kh_layer_spec k_conv_asym[] = {KB_L(.kind = KH_LAYER_CONV2D, .units = 5, .kernel = {2, 3}, .strides = {2, 2},
                                            .padding = KH_PAD_SAME)};
    const kh_layer_spec k_pool[] = {KB_L(.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2})};
    const kh_layer_spec k_pool_same[] = {KB_L(.kind = KH_LAYER_MAXPOOL2D, .kernel = {3, 3}, .strides = {2, 2},
                                            .padding = KH_PAD_SAME)};
    const kh_layer_spec k_act_relu[] = {KB_L(.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_RELU)};
    const kh_layer_spec k_act_sig[] = {KB_L(.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_SIGMOID)};
    const kh_layer_spec k_act_tanh[] = {KB_L(.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_TANH)};
    const kh_layer_spec k_act_sm[] = {KB_L(.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_SOFTMAX)};
    const kh_layer_spec k_flatten[] = {KB_L(.kind = KH_LAYER_FLATTEN)};
    const kh_layer_spec k_embed[] = {KB_L(.kind = KH_LAYER_EMBEDDING, .input_dim = 50, .units = 24)};
    const kh_layer_spec k_gap[] = {KB_L(.kind = KH_LAYER_GAP1D)};
    const kh_layer_spec k_lstm[] = {KB_L(.kind = KH_LAYER_LSTM, .units = 16)};
    const kh_layer_spec k_lstm_seq[] = {KB_L(.kind = KH_LAYER_LSTM, .units = 12, .return_sequences = 1)};
    const kh_layer_spec k_bilstm[] = {KB_L(.kind = KH_LAYER_BILSTM, .units = 10)};
    const kh_layer_spec k_bilstm_seq[] = {KB_L(.kind = KH_LAYER_BILSTM, .units = 7, .return_sequences = 1)};
    const kh_layer_spec k_onehot_lstm[] = {KB_L(.kind = KH_LAYER_LSTM, .units = 8)};
    kh_model_spec kernels[] = {
        kb_spec("k_dense_relu", KH_F32, 1, 70, 0, 0, 0, k_dense, 1, NOLOSS),
        kb_spec("k_dense_softmax", KH_F32, 1, 33, 0, 0, 0, k_dense_sm, 1, NOLOSS),
        kb_spec("k_dense_sigmoid", KH_F32, 1, 5, 0, 0, 0, k_dense_sig, 1, NOLOSS),
        kb_spec("k_dense_tanh", KH_F32, 1, 300, 0, 0, 0, k_dense_tanh, 1, NOLOSS),
        kb_spec("k_conv_valid", KH_F32, 3, 12, 11, 3, 0, k_conv_valid, 1, NOLOSS),
        kb_spec("k_conv_same", KH_F32, 3, 9, 10, 8, 0, k_conv_same, 1, NOLOSS),
        kb_spec("k_conv_asym_same", KH_F32, 3, 7, 8, 2, 0, k_conv_asym, 1, NOLOSS),
        kb_spec("k_maxpool", KH_F32, 3, 8, 6, 4, 0, k_pool, 1, NOLOSS),
        kb_spec("k_maxpool_same", KH_F32, 3, 7, 9, 3, 0, k_pool_same, 1, NOLOSS),
        kb_spec("k_act_relu", KH_F32, 3, 4, 5, 6, 0, k_act_relu, 1, NOLOSS),
        kb_spec("k_act_sigmoid", KH_F32, 1, 77, 0, 0, 0, k_act_sig, 1, NOLOSS),
        kb_spec("k_act_tanh", KH_F32, 2, 6, 7, 0, 0, k_act_tanh, 1, NOLOSS),
        kb_spec("k_act_softmax", KH_F32, 2, 5, 11, 0, 0, k_act_sm, 1, NOLOSS),
        kb_spec("k_flatten", KH_F32, 3, 3, 4, 5, 0, k_flatten, 1, NOLOSS),
        kb_spec("k_embedding", KH_I32, 1, 13, 0, 0, 0, k_embed, 1, NOLOSS),
        kb_spec("k_gap1d", KH_F32, 2, 17, 9, 0, 0, k_gap, 1, NOLOSS),
        kb_spec("k_lstm", KH_F32, 2, 11, 6, 0, 0, k_lstm, 1, NOLOSS),
        kb_spec("k_lstm_sequences", KH_F32, 2, 9, 5, 0, 0, k_lstm_seq, 1, NOLOSS),
        kb_spec("k_bilstm", KH_F32, 2, 8, 4, 0, 0, k_bilstm, 1, NOLOSS),
        kb_spec("k_bilstm_sequences", KH_F32, 2, 6, 3, 0, 0, k_bilstm_seq, 1, NOLOSS),
        kb_spec("k_onehot_lstm", KH_I32, 1, 10, 0, 0, 13, k_onehot_lstm, 1, NOLOSS),
    };
    const kh_model_spec *models;
    int n_models = kb_small_models(&models);
    int n_kernels = (int)(sizeof kernels / sizeof kernels[0]);
    if (!kb_ref_prerequisites(kernels, n_kernels) || !kb_ref_prerequisites(models, n_models))
        return kh_test_finish("test_cntk_gpu_ref");
    printf("prerequisites ok: cntk loaded, the reference kit builds all %d models\n", n_kernels + n_models);
    fflush(stdout);
    ctg_open_cuda(&B); /* skips without a usable device */
    for (int i = 0; i < n_kernels; i++) check_probes(&kernels[i], 7);

    /* 2. the small models of the CPU parity test */
    for (int i = 0; i < n_models; i++) {
        check_probes(&models[i], 5);
        check_steps(&models[i], 3);
    }
    kb_check_dropout(&B, KH_LAYOUT_NCHW, g_seed); /* cntk takes images as NCHW */
    check_deterministic();
    check_layer_checks(&models[0]);
    check_oom();
    /* the session survives all of that: one more small model trains */
    check_steps(&models[0], 1);
    kb_unload(&B);
    return kh_test_finish("test_cntk_gpu_ref");
}
