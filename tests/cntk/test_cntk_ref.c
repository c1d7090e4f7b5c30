/* tests/cntk/test_cntk_ref.c — the cntk CPU backend against the reference kit (khost/ref.h), model by model:
 *   1. probes: training-mode forward (dropout off), output, input gradient and every parameter gradient
 *      from the same random output gradient;
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

#include "cntk_testlib.h"
#include "khost/ref.h"
#include "testutil.h"

#define PROBE_TOL 2e-5 /* forward / gradient probes */
#define STEP_TOL 2e-4  /* weights after a few optimizer steps */

static ct_backend B;

/* max |a - b| / max(max |b|, floor) */
static double rel_err(const float *a, const double *b, int64_t n, double floor) {
    double md = 0, mb = floor;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > md || isnan(d)) md = isnan(d) ? INFINITY : d;
        if (fabs(b[i]) > mb) mb = fabs(b[i]);
    }
    return md / mb;
}

static void compare(const char *model, const char *what, const float *a, const double *b, int64_t n, double tol) {
    double e = rel_err(a, b, n, 1e-3);
    CHECK(e <= tol, "%s %s: relative error %.3g > %.1g", model, what, e, tol);
    if (getenv("CNTK_TEST_VERBOSE")) printf("  %-22s %-28s %.3g\n", model, what, e);
}

/* A batch for the spec: images come NHWC from tasks; cntk's caps ask for NCHW, so convert like the host. */
typedef struct batch {
    int64_t n, per;
    kh_tensor x_nhwc, x_backend;
    float *xf_nhwc, *xf_nchw;
    int32_t *xi, *labels;
} batch;

static void make_batch(batch *bt, const kh_model_spec *sp, int64_t n, kh_rng *r) {
    memset(bt, 0, sizeof *bt);
    bt->n = n;
    bt->per = 1;
    int64_t dims[4] = {n, 0, 0, 0};
    for (int i = 0; i < sp->input_rank; i++) {
        bt->per *= sp->input_shape[i];
        dims[i + 1] = sp->input_shape[i];
    }
    bt->labels = malloc((size_t)n * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++) bt->labels[i] = (int32_t)kh_rng_below(r, (uint64_t)(sp->n_classes > 1 ? sp->n_classes : 2));
    if (sp->input_dtype == KH_I32) {
        int64_t vocab = sp->input_onehot > 0 ? sp->input_onehot : sp->layers[0].input_dim;
        bt->xi = malloc((size_t)(n * bt->per) * sizeof(int32_t));
        for (int64_t i = 0; i < n * bt->per; i++) bt->xi[i] = (int32_t)kh_rng_below(r, (uint64_t)vocab);
        bt->x_nhwc = ct_tensor(KH_I32, KH_LAYOUT_NT, sp->input_rank + 1, dims, bt->xi);
        bt->x_backend = bt->x_nhwc;
        return;
    }
    bt->xf_nhwc = malloc((size_t)(n * bt->per) * sizeof(float));
    ct_fill_uniform(bt->xf_nhwc, n * bt->per, -1.0f, 1.0f, r);
    bt->x_nhwc = ct_tensor(KH_F32, sp->input_rank == 3 ? KH_LAYOUT_NHWC : KH_LAYOUT_NC, sp->input_rank + 1, dims,
                           bt->xf_nhwc);
    bt->x_backend = bt->x_nhwc;
    if (sp->input_rank == 3) { /* NHWC -> NCHW as the host does for an NCHW backend */
        int64_t H = dims[1], W = dims[2], C = dims[3];
        bt->xf_nchw = malloc((size_t)(n * bt->per) * sizeof(float));
        for (int64_t s = 0; s < n; s++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t w = 0; w < W; w++)
                    for (int64_t c = 0; c < C; c++)
                        bt->xf_nchw[((s * C + c) * H + h) * W + w] = bt->xf_nhwc[((s * H + h) * W + w) * C + c];
        int64_t nd[4] = {n, C, H, W};
        bt->x_backend = ct_tensor(KH_F32, KH_LAYOUT_NCHW, 4, nd, bt->xf_nchw);
    }
}

static void free_batch(batch *bt) {
    free(bt->xf_nhwc);
    free(bt->xf_nchw);
    free(bt->xi);
    free(bt->labels);
}

/* Same weights into both (kit initialisers, seeded). */
static int setup_pair(const kh_model_spec *sp, int deterministic, kh_bmodel **cm, kh_ref_model **rm) {
    *cm = ct_compile(&B, sp, 6, deterministic);
    char err[256];
    if (!*cm) return -1;
    if (kh_ref_model_create(sp, rm, err, sizeof err) != KH_OK) {
        fprintf(stderr, "ref create %s: %s\n", sp->name, err);
        return -1;
    }
    float **w = NULL;
    if (ct_init_weights(&B, *cm, sp, 99, &w) != 0) return -1;
    const kh_model_shapes *sh = kh_ref_model_shapes(*rm);
    for (int l = 0; l < sh->n_layers; l++)
        for (int s = 0; s < sh->layers[l].n_params; s++)
            kh_ref_model_set_weight_f32(*rm, l, s, w[l * KH_MAX_SLOTS + s], sh->layers[l].params[s].numel);
    ct_free_weights(sp, w);
    if (!deterministic) kh_ref_model_set_dropout(*rm, 1, 7); /* ct_compile seeds cntk with 7 */
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
    batch bt;
    make_batch(&bt, sp, 5, &r);
    const kh_model_shapes *sh = kh_ref_model_shapes(rm);
    const kh_layer_shapes *last = &sh->layers[sh->n_layers - 1];
    int64_t on = bt.n * last->out_numel;
    float *out = malloc((size_t)on * sizeof(float)), *dy = malloc((size_t)on * sizeof(float));
    double *dyd = malloc((size_t)on * sizeof(double));
    int64_t od[4] = {bt.n, last->out_shape[0], last->out_shape[1], last->out_shape[2]};
    kh_tensor tout = ct_tensor(KH_F32, KH_LAYOUT_ANY, last->out_rank + 1, od, out);
    kh_status st = B.api->forward(cm, &bt.x_backend, &tout);
    CHECK(st == KH_OK, "%s forward: %s", sp->name, B.api->last_error(B.s));
    CHECK(kh_ref_model_forward(rm, &bt.x_nhwc, 1) == KH_OK, "%s ref forward", sp->name);
    compare(sp->name, "forward output", out, kh_ref_model_output(rm, NULL), on, PROBE_TOL);

    ct_fill_uniform(dy, on, -1.0f, 1.0f, &r);
    for (int64_t i = 0; i < on; i++) dyd[i] = dy[i];
    kh_tensor tdy = ct_tensor(KH_F32, KH_LAYOUT_ANY, last->out_rank + 1, od, dy);
    float *dx = NULL;
    kh_tensor tdx, *pdx = NULL;
    if (sp->input_dtype == KH_F32) {
        dx = malloc((size_t)(bt.n * bt.per) * sizeof(float));
        tdx = bt.x_nhwc; /* ask for NHWC back: the backend converts */
        tdx.data = dx;
        pdx = &tdx;
    }
    st = B.api->backward(cm, &tdy, pdx);
    CHECK(st == KH_OK, "%s backward: %s", sp->name, B.api->last_error(B.s));
    CHECK(kh_ref_model_backward(rm, dyd) == KH_OK, "%s ref backward", sp->name);
    if (dx) compare(sp->name, "input gradient", dx, kh_ref_model_input_grad(rm), bt.n * bt.per, PROBE_TOL);
    for (int l = 0; l < sh->n_layers; l++)
        for (int s = 0; s < sh->layers[l].n_params; s++) {
            const kh_param_shape *ps = &sh->layers[l].params[s];
            float *g = malloc((size_t)ps->numel * sizeof(float));
            kh_tensor tg = ct_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, g);
            st = B.api->get_grad(cm, l, s, &tg);
            CHECK(st == KH_OK, "%s get_grad %d/%d: %s", sp->name, l, s, B.api->last_error(B.s));
            char what[96];
            snprintf(what, sizeof what, "grad %s[%d].%s", kh_layer_kind_name(sp->layers[l].kind), l, ps->name);
            compare(sp->name, what, g, kh_ref_model_grad(rm, l, s), ps->numel, PROBE_TOL);
            free(g);
        }
    free(out);
    free(dy);
    free(dyd);
    free(dx);
    free_batch(&bt);
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
        batch bt;
        make_batch(&bt, sp, step == 1 ? 3 : 6, &r); /* a short batch in the middle */
        int64_t yd[1] = {bt.n};
        kh_tensor ty = ct_tensor(KH_I32, KH_LAYOUT_NC, 1, yd, bt.labels);
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
                kh_tensor tw = ct_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, w);
                CHECK(B.api->get_weight(cm, l, s, &tw) == KH_OK, "%s get_weight", name);
                char what[96];
                snprintf(what, sizeof what, "step %d %s[%d].%s", step + 1, kh_layer_kind_name(sp->layers[l].kind), l,
                         ps->name);
                compare(name, what, w, kh_ref_model_weight(rm, l, s), ps->numel, STEP_TOL);
                free(w);
            }
        free_batch(&bt);
    }
    /* evaluation metrics on one more batch */
    batch bt;
    make_batch(&bt, sp, 4, &r);
    int64_t yd[1] = {bt.n};
    kh_tensor ty = ct_tensor(KH_I32, KH_LAYOUT_NC, 1, yd, bt.labels);
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
    free_batch(&bt);
done:
    if (cm) B.api->model_free(cm);
    kh_ref_model_free(rm);
}

// --- the models --------------------------------------------------------------------------------------------
static kh_optimizer_spec opt(uint32_t kind, float lr, float decay) {
    kh_optimizer_spec o = {.kind = kind, .lr = lr, .rho = kind == KH_OPT_ADADELTA ? 0.95f : 0.9f, .beta_1 = 0.9f,
                           .beta_2 = 0.999f, .epsilon = 1e-7f, .decay = decay};
    return o;
}

static kh_model_spec spec(const char *name, uint32_t dtype, int rank, int a, int b, int c, int onehot,
                          const kh_layer_spec *layers, int n, uint32_t loss, kh_optimizer_spec o, int classes) {
    kh_model_spec s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.name = name;
    s.input_dtype = dtype;
    s.input_rank = rank;
    s.input_shape[0] = a, s.input_shape[1] = b, s.input_shape[2] = c;
    s.input_onehot = onehot;
    s.n_layers = n;
    s.layers = layers;
    s.loss = loss;
    s.optimizer = o;
    s.n_classes = classes;
    return s;
}

#define L_(...) ((kh_layer_spec){__VA_ARGS__})
#define N_(arr) (int)(sizeof arr / sizeof arr[0])

int main(void) {
    /* 2 threads by default (BiLSTM directions in parallel, cell rows split); CNTK_TEST_THREADS=1 for the
     * sequential paths */
    const char *th = getenv("CNTK_TEST_THREADS");
    ct_load(&B, th && atoi(th) > 0 ? atoi(th) : 2);

    const kh_layer_spec mlp[] = {L_(.kind = KH_LAYER_DENSE, .units = 7, .activation = KH_ACT_RELU),
                                 L_(.kind = KH_LAYER_DROPOUT, .rate = 0.3f),
                                 L_(.kind = KH_LAYER_DENSE, .units = 5, .activation = KH_ACT_TANH),
                                 L_(.kind = KH_LAYER_DENSE, .units = 4, .activation = KH_ACT_SOFTMAX)};
    const kh_layer_spec cnn[] = {
        L_(.kind = KH_LAYER_CONV2D, .units = 3, .kernel = {3, 3}, .activation = KH_ACT_RELU),
        L_(.kind = KH_LAYER_CONV2D, .units = 4, .kernel = {3, 2}, .padding = KH_PAD_SAME, .activation = KH_ACT_TANH),
        L_(.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}),
        L_(.kind = KH_LAYER_DROPOUT, .rate = 0.25f),
        L_(.kind = KH_LAYER_FLATTEN),
        L_(.kind = KH_LAYER_DENSE, .units = 6, .activation = KH_ACT_SIGMOID),
        L_(.kind = KH_LAYER_DENSE, .units = 3),
        L_(.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_SOFTMAX)};
    const kh_layer_spec cnn_strided[] = {
        L_(.kind = KH_LAYER_CONV2D, .units = 2, .kernel = {3, 3}, .strides = {2, 2}, .padding = KH_PAD_SAME,
           .activation = KH_ACT_RELU),
        L_(.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}, .strides = {1, 1}, .padding = KH_PAD_SAME),
        L_(.kind = KH_LAYER_FLATTEN),
        L_(.kind = KH_LAYER_DENSE, .units = 2, .activation = KH_ACT_SOFTMAX)};
    const kh_layer_spec fasttext[] = {L_(.kind = KH_LAYER_EMBEDDING, .input_dim = 40, .units = 4),
                                      L_(.kind = KH_LAYER_GAP1D),
                                      L_(.kind = KH_LAYER_DENSE, .units = 1, .activation = KH_ACT_SIGMOID)};
    const kh_layer_spec bilstm[] = {L_(.kind = KH_LAYER_EMBEDDING, .input_dim = 30, .units = 6),
                                    L_(.kind = KH_LAYER_BILSTM, .units = 5),
                                    L_(.kind = KH_LAYER_DROPOUT, .rate = 0.5f),
                                    L_(.kind = KH_LAYER_DENSE, .units = 1, .activation = KH_ACT_SIGMOID)};
    const kh_layer_spec textgen[] = {L_(.kind = KH_LAYER_LSTM, .units = 6),
                                     L_(.kind = KH_LAYER_DENSE, .units = 9, .activation = KH_ACT_SOFTMAX)};
    const kh_layer_spec seq[] = {L_(.kind = KH_LAYER_LSTM, .units = 4, .return_sequences = 1),
                                 L_(.kind = KH_LAYER_BILSTM, .units = 3, .return_sequences = 1),
                                 L_(.kind = KH_LAYER_GAP1D),
                                 L_(.kind = KH_LAYER_DENSE, .units = 3, .activation = KH_ACT_SOFTMAX)};
    const kh_layer_spec onehot_flat[] = {L_(.kind = KH_LAYER_FLATTEN),
                                         L_(.kind = KH_LAYER_DENSE, .units = 3, .activation = KH_ACT_SOFTMAX)};

    kh_model_spec specs[] = {
        spec("mlp_rmsprop", KH_F32, 1, 8, 0, 0, 0, mlp, N_(mlp), KH_LOSS_CATEGORICAL_CROSSENTROPY,
             opt(KH_OPT_RMSPROP, 1e-3f, 0), 4),
        spec("cnn_adadelta", KH_F32, 3, 7, 6, 2, 0, cnn, N_(cnn), KH_LOSS_CATEGORICAL_CROSSENTROPY,
             opt(KH_OPT_ADADELTA, 1.0f, 0), 3),
        spec("cnn_strided_sgd", KH_F32, 3, 5, 6, 3, 0, cnn_strided, N_(cnn_strided), KH_LOSS_CATEGORICAL_CROSSENTROPY,
             opt(KH_OPT_SGD, 0.1f, 0), 2),
        spec("fasttext_adam", KH_I32, 1, 9, 0, 0, 0, fasttext, N_(fasttext), KH_LOSS_BINARY_CROSSENTROPY,
             opt(KH_OPT_ADAM, 1e-3f, 0), 1),
        spec("bilstm_adam", KH_I32, 1, 7, 0, 0, 0, bilstm, N_(bilstm), KH_LOSS_BINARY_CROSSENTROPY,
             opt(KH_OPT_ADAM, 1e-3f, 1e-3f), 1),
        spec("textgen_onehot_rmsprop", KH_I32, 1, 5, 0, 0, 9, textgen, N_(textgen), KH_LOSS_CATEGORICAL_CROSSENTROPY,
             opt(KH_OPT_RMSPROP, 1e-2f, 0), 9),
        spec("lstm_sequences_adam", KH_F32, 2, 6, 3, 0, 0, seq, N_(seq), KH_LOSS_CATEGORICAL_CROSSENTROPY,
             opt(KH_OPT_ADAM, 1e-3f, 0), 3),
        spec("onehot_expanded_rmsprop", KH_I32, 2, 2, 3, 0, 4, onehot_flat, N_(onehot_flat),
             KH_LOSS_CATEGORICAL_CROSSENTROPY, opt(KH_OPT_RMSPROP, 1e-3f, 1e-2f), 3),
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        check_probes(&specs[i]);
        check_steps(&specs[i], 1, 3);
        check_steps(&specs[i], 0, 2); /* dropout on, same seed: identical masks */
    }
    ct_unload(&B);
    return kh_test_finish("test_cntk_ref");
}
