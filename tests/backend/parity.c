/* tests/backend/parity.c — see parity.h. */
#include "parity.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/ref.h"
#include "testutil.h"

double kb_rel_err(const float *a, const double *b, int64_t n, double floor) {
    double md = 0, mb = floor;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > md || isnan(d)) md = isnan(d) ? INFINITY : d;
        if (fabs(b[i]) > mb) mb = fabs(b[i]);
    }
    return md / mb;
}

void kb_compare(const char *model, const char *what, const float *a, const double *b, int64_t n, double tol,
                uint64_t seed) {
    double e = kb_rel_err(a, b, n, 1e-3);
    char s[48] = "";
    if (seed) snprintf(s, sizeof s, " (seed %llu)", (unsigned long long)seed);
    CHECK(e <= tol, "%s %s: relative error %.3g > %.1g%s", model, what, e, tol, s);
    if (getenv("KHOST_TEST_VERBOSE")) printf("  %-24s %-30s %.3g\n", model, what, e);
}

void kb_make_batch(kb_batch *bt, const kh_model_spec *sp, int64_t n, kh_rng *r) {
    memset(bt, 0, sizeof *bt);
    bt->n = n;
    bt->per = 1;
    int64_t dims[4] = {n, 0, 0, 0};
    for (int i = 0; i < sp->input_rank; i++) {
        bt->per *= sp->input_shape[i];
        dims[i + 1] = sp->input_shape[i];
    }
    bt->labels = malloc((size_t)n * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++)
        bt->labels[i] = (int32_t)kh_rng_below(r, (uint64_t)(sp->n_classes > 1 ? sp->n_classes : 2));
    if (sp->input_dtype == KH_I32) {
        int64_t vocab = sp->input_onehot > 0 ? sp->input_onehot : sp->layers[0].input_dim;
        bt->xi = malloc((size_t)(n * bt->per) * sizeof(int32_t));
        for (int64_t i = 0; i < n * bt->per; i++) bt->xi[i] = (int32_t)kh_rng_below(r, (uint64_t)vocab);
        bt->x_nhwc = kb_tensor(KH_I32, KH_LAYOUT_NT, sp->input_rank + 1, dims, bt->xi);
        bt->x_backend = bt->x_nhwc;
        if (sp->input_onehot > 0 && !(kb_caps()->flags & KH_CAP_ONEHOT_INPUT)) {
            /* expanded by the host, as the training loop does for such a backend */
            int64_t depth = sp->input_onehot;
            bt->xf_nhwc = calloc((size_t)(n * bt->per * depth), sizeof(float));
            for (int64_t i = 0; i < n * bt->per; i++) bt->xf_nhwc[i * depth + bt->xi[i]] = 1.0f;
            dims[sp->input_rank + 1] = depth;
            bt->x_backend = kb_tensor(KH_F32, KH_LAYOUT_NTC, sp->input_rank + 2, dims, bt->xf_nhwc);
        }
        return;
    }
    bt->xf_nhwc = malloc((size_t)(n * bt->per) * sizeof(float));
    kb_fill_uniform(bt->xf_nhwc, n * bt->per, -1.0f, 1.0f, r);
    bt->x_nhwc = kb_tensor(KH_F32, sp->input_rank == 3 ? KH_LAYOUT_NHWC : KH_LAYOUT_NC, sp->input_rank + 1, dims,
                           bt->xf_nhwc);
    bt->x_backend = bt->x_nhwc;
    if (sp->input_rank == 3 && kb_caps()->image_layout == KH_LAYOUT_NCHW) { /* as the host converts */
        int64_t H = dims[1], W = dims[2], C = dims[3];
        bt->xf_nchw = malloc((size_t)(n * bt->per) * sizeof(float));
        for (int64_t s = 0; s < n; s++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t w = 0; w < W; w++)
                    for (int64_t c = 0; c < C; c++)
                        bt->xf_nchw[((s * C + c) * H + h) * W + w] = bt->xf_nhwc[((s * H + h) * W + w) * C + c];
        int64_t nd[4] = {n, C, H, W};
        bt->x_backend = kb_tensor(KH_F32, KH_LAYOUT_NCHW, 4, nd, bt->xf_nchw);
    }
}

void kb_free_batch(kb_batch *bt) {
    free(bt->xf_nhwc);
    free(bt->xf_nchw);
    free(bt->xi);
    free(bt->labels);
}

kh_optimizer_spec kb_opt(uint32_t kind, float lr, float decay) {
    kh_optimizer_spec o = {.kind = kind, .lr = lr, .rho = kind == KH_OPT_ADADELTA ? 0.95f : 0.9f, .beta_1 = 0.9f,
                           .beta_2 = 0.999f, .epsilon = 1e-7f, .decay = decay};
    return o;
}

kh_model_spec kb_spec(const char *name, uint32_t dtype, int rank, int a, int b, int c, int onehot,
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

static const kh_layer_spec mlp[] = {KB_L(.kind = KH_LAYER_DENSE, .units = 7, .activation = KH_ACT_RELU),
                                    KB_L(.kind = KH_LAYER_DROPOUT, .rate = 0.3f),
                                    KB_L(.kind = KH_LAYER_DENSE, .units = 5, .activation = KH_ACT_TANH),
                                    KB_L(.kind = KH_LAYER_DENSE, .units = 4, .activation = KH_ACT_SOFTMAX)};
static const kh_layer_spec cnn[] = {
    KB_L(.kind = KH_LAYER_CONV2D, .units = 3, .kernel = {3, 3}, .activation = KH_ACT_RELU),
    KB_L(.kind = KH_LAYER_CONV2D, .units = 4, .kernel = {3, 2}, .padding = KH_PAD_SAME, .activation = KH_ACT_TANH),
    KB_L(.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}),
    KB_L(.kind = KH_LAYER_DROPOUT, .rate = 0.25f),
    KB_L(.kind = KH_LAYER_FLATTEN),
    KB_L(.kind = KH_LAYER_DENSE, .units = 6, .activation = KH_ACT_SIGMOID),
    KB_L(.kind = KH_LAYER_DENSE, .units = 3),
    KB_L(.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_SOFTMAX)};
static const kh_layer_spec cnn_strided[] = {
    KB_L(.kind = KH_LAYER_CONV2D, .units = 2, .kernel = {3, 3}, .strides = {2, 2}, .padding = KH_PAD_SAME,
         .activation = KH_ACT_RELU),
    KB_L(.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}, .strides = {1, 1}, .padding = KH_PAD_SAME),
    KB_L(.kind = KH_LAYER_FLATTEN),
    KB_L(.kind = KH_LAYER_DENSE, .units = 2, .activation = KH_ACT_SOFTMAX)};
/* Convolutions wide enough for a blocked layout (16 channels) passing their tensor straight on (conv -> conv),
 * through an element-wise Activation (conv -> relu -> conv) and to a max pooling (ties after the relu): the
 * shapes where cntk's oneDNN path keeps the tensor blocked between the layers (plugins/cntk/cpu/conv_onednn.c,
 * maxpool_onednn.c); then Dropout and Flatten, which that path passes the pooled tensor through in NHWC
 * (cntk's masks still drawn in Keras order: the dropout-on steps check them against the kit), and a Dense with
 * a relu, which it runs as an inner product with the relu fused and its gradient on oneDNN's eltwise
 * (cpu/dense_onednn.c). */
static const kh_layer_spec cnn_chain[] = {
    KB_L(.kind = KH_LAYER_CONV2D, .units = 16, .kernel = {3, 3}, .padding = KH_PAD_SAME, .activation = KH_ACT_RELU),
    KB_L(.kind = KH_LAYER_CONV2D, .units = 16, .kernel = {3, 3}, .padding = KH_PAD_SAME),
    KB_L(.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_RELU),
    KB_L(.kind = KH_LAYER_CONV2D, .units = 16, .kernel = {3, 3}, .padding = KH_PAD_SAME, .activation = KH_ACT_RELU),
    KB_L(.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}),
    KB_L(.kind = KH_LAYER_DROPOUT, .rate = 0.25f),
    KB_L(.kind = KH_LAYER_FLATTEN),
    KB_L(.kind = KH_LAYER_DENSE, .units = 5, .activation = KH_ACT_RELU),
    KB_L(.kind = KH_LAYER_DENSE, .units = 3, .activation = KH_ACT_SOFTMAX)};
/* A max pooling's output through Dropout into another convolution (cifar10_cnn's pool -> dropout -> conv),
 * 16 channels: cntk's oneDNN path passes the pooled tensor on in the pooling's layout, the masks stored in it. */
static const kh_layer_spec cnn_pool_conv[] = {
    KB_L(.kind = KH_LAYER_CONV2D, .units = 16, .kernel = {3, 3}, .padding = KH_PAD_SAME, .activation = KH_ACT_RELU),
    KB_L(.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}),
    KB_L(.kind = KH_LAYER_DROPOUT, .rate = 0.25f),
    KB_L(.kind = KH_LAYER_CONV2D, .units = 8, .kernel = {3, 3}, .padding = KH_PAD_SAME, .activation = KH_ACT_RELU),
    KB_L(.kind = KH_LAYER_FLATTEN),
    KB_L(.kind = KH_LAYER_DENSE, .units = 3, .activation = KH_ACT_SOFTMAX)};
static const kh_layer_spec fasttext[] = {KB_L(.kind = KH_LAYER_EMBEDDING, .input_dim = 40, .units = 4),
                                         KB_L(.kind = KH_LAYER_GAP1D),
                                         KB_L(.kind = KH_LAYER_DENSE, .units = 1, .activation = KH_ACT_SIGMOID)};
static const kh_layer_spec bilstm[] = {KB_L(.kind = KH_LAYER_EMBEDDING, .input_dim = 30, .units = 6),
                                       KB_L(.kind = KH_LAYER_BILSTM, .units = 5),
                                       KB_L(.kind = KH_LAYER_DROPOUT, .rate = 0.5f),
                                       KB_L(.kind = KH_LAYER_DENSE, .units = 1, .activation = KH_ACT_SIGMOID)};
static const kh_layer_spec textgen[] = {KB_L(.kind = KH_LAYER_LSTM, .units = 6),
                                        KB_L(.kind = KH_LAYER_DENSE, .units = 9, .activation = KH_ACT_SOFTMAX)};
static const kh_layer_spec seq[] = {KB_L(.kind = KH_LAYER_LSTM, .units = 4, .return_sequences = 1),
                                    KB_L(.kind = KH_LAYER_BILSTM, .units = 3, .return_sequences = 1),
                                    KB_L(.kind = KH_LAYER_GAP1D),
                                    KB_L(.kind = KH_LAYER_DENSE, .units = 3, .activation = KH_ACT_SOFTMAX)};
static const kh_layer_spec onehot_flat[] = {KB_L(.kind = KH_LAYER_FLATTEN),
                                            KB_L(.kind = KH_LAYER_DENSE, .units = 3, .activation = KH_ACT_SOFTMAX)};

int kb_small_models(const kh_model_spec **models) {
    static kh_model_spec m[10];
    static int n;
    if (!n) {
        m[n++] = kb_spec("mlp_rmsprop", KH_F32, 1, 8, 0, 0, 0, mlp, KB_N(mlp), KH_LOSS_CATEGORICAL_CROSSENTROPY,
                         kb_opt(KH_OPT_RMSPROP, 1e-3f, 0), 4);
        m[n++] = kb_spec("cnn_adadelta", KH_F32, 3, 7, 6, 2, 0, cnn, KB_N(cnn), KH_LOSS_CATEGORICAL_CROSSENTROPY,
                         kb_opt(KH_OPT_ADADELTA, 1.0f, 0), 3);
        m[n++] = kb_spec("cnn_strided_sgd", KH_F32, 3, 5, 6, 3, 0, cnn_strided, KB_N(cnn_strided),
                         KH_LOSS_CATEGORICAL_CROSSENTROPY, kb_opt(KH_OPT_SGD, 0.1f, 0), 2);
        m[n++] = kb_spec("cnn_pool_conv_rmsprop", KH_F32, 3, 8, 8, 3, 0, cnn_pool_conv, KB_N(cnn_pool_conv),
                         KH_LOSS_CATEGORICAL_CROSSENTROPY, kb_opt(KH_OPT_RMSPROP, 1e-3f, 0), 3);
        m[n++] = kb_spec("cnn_chain_rmsprop", KH_F32, 3, 6, 6, 2, 0, cnn_chain, KB_N(cnn_chain),
                         KH_LOSS_CATEGORICAL_CROSSENTROPY, kb_opt(KH_OPT_RMSPROP, 1e-3f, 0), 3);
        m[n++] = kb_spec("fasttext_adam", KH_I32, 1, 9, 0, 0, 0, fasttext, KB_N(fasttext), KH_LOSS_BINARY_CROSSENTROPY,
                         kb_opt(KH_OPT_ADAM, 1e-3f, 0), 1);
        m[n++] = kb_spec("bilstm_adam", KH_I32, 1, 7, 0, 0, 0, bilstm, KB_N(bilstm), KH_LOSS_BINARY_CROSSENTROPY,
                         kb_opt(KH_OPT_ADAM, 1e-3f, 1e-3f), 1);
        m[n++] = kb_spec("textgen_onehot_rmsprop", KH_I32, 1, 5, 0, 0, 9, textgen, KB_N(textgen),
                         KH_LOSS_CATEGORICAL_CROSSENTROPY, kb_opt(KH_OPT_RMSPROP, 1e-2f, 0), 9);
        m[n++] = kb_spec("lstm_sequences_adam", KH_F32, 2, 6, 3, 0, 0, seq, KB_N(seq), KH_LOSS_CATEGORICAL_CROSSENTROPY,
                         kb_opt(KH_OPT_ADAM, 1e-3f, 0), 3);
        m[n++] = kb_spec("onehot_expanded_rmsprop", KH_I32, 2, 2, 3, 0, 4, onehot_flat, KB_N(onehot_flat),
                         KH_LOSS_CATEGORICAL_CROSSENTROPY, kb_opt(KH_OPT_RMSPROP, 1e-3f, 1e-2f), 3);
    }
    *models = m;
    return n;
}

int kb_ref_prerequisites(const kh_model_spec *specs, int n) {
    int ok = 1;
    for (int k = 0; k < n; k++) {
        kh_ref_model *rm = NULL;
        char err[256] = "";
        kh_status st = kh_ref_model_create(&specs[k], &rm, err, sizeof err);
        CHECK(st == KH_OK, "%s: the reference kit cannot build it: %s", specs[k].name, err);
        ok &= st == KH_OK;
        kh_ref_model_free(rm);
    }
    return ok;
}

void kb_check_dropout(kb_backend *b, uint32_t image_layout, uint64_t seed) {
    const kh_layer_spec l = {.kind = KH_LAYER_DROPOUT, .rate = 0.3f};
    kh_model_spec sp = {.struct_size = sizeof sp, .name = "dropout", .input_dtype = KH_F32, .input_rank = 3,
                        .input_shape = {8, 8, 16}, .n_layers = 1, .layers = &l, .loss = KH_LOSS_NONE,
                        .optimizer = {.kind = KH_OPT_SGD, .lr = 0.1f}};
    kh_bmodel *m = kb_compile(b, &sp, 64, 0); /* deterministic = 0: masks on */
    CHECK(m != NULL, "dropout compile: %s", b->api->last_error(b->s));
    if (!m) return;
    int64_t n = 64, N = n * 8 * 8 * 16;
    int64_t nchw[4] = {n, 16, 8, 8}, nhwc[4] = {n, 8, 8, 16};
    const int64_t *d4 = image_layout == KH_LAYOUT_NCHW ? nchw : nhwc;
    kh_rng r;
    kh_rng_seed(&r, seed ^ 0xd0);
    float *x = kb_nan_floats(N), *y = kb_nan_floats(N), *y2 = kb_nan_floats(N), *dy = kb_nan_floats(N),
          *dx = kb_nan_floats(N);
    CHECK(x && y && y2 && dy && dx, "dropout buffers");
    if (x && y && y2 && dy && dx) {
        kb_fill_uniform(x, N, 0.5f, 1.5f, &r); /* never zero: a zero output means dropped */
        kb_fill_uniform(dy, N, 0.5f, 1.5f, &r);
        kh_tensor tx = kb_tensor(KH_F32, image_layout, 4, d4, x), ty = kb_tensor(KH_F32, image_layout, 4, d4, y);
        kh_tensor tdy = kb_tensor(KH_F32, image_layout, 4, d4, dy), tdx = kb_tensor(KH_F32, image_layout, 4, d4, dx);
        CHECK(b->api->forward(m, &tx, &ty) == KH_OK, "dropout forward: %s", b->api->last_error(b->s));
        CHECK(b->api->backward(m, &tdy, &tdx) == KH_OK, "dropout backward: %s", b->api->last_error(b->s));
        int64_t kept = 0, bad_scale = 0, bad_mask = 0, same = 0;
        for (int64_t i = 0; i < N; i++) {
            int keep = y[i] != 0.0f;
            kept += keep;
            if (keep && fabsf(y[i] - x[i] / 0.7f) > 1e-5f * fabsf(y[i])) bad_scale++;
            if (keep != (dx[i] != 0.0f) || (keep && fabsf(dx[i] - dy[i] / 0.7f) > 1e-5f * fabsf(dx[i]))) bad_mask++;
        }
        double frac = (double)kept / (double)N; /* 65536 draws: sd of the fraction ~0.0018 */
        CHECK(fabs(frac - 0.7) < 0.01, "dropout kept fraction %.4f, expected 0.7", frac);
        CHECK(bad_scale == 0, "dropout: %lld kept elements not scaled by 1/(1-rate)", (long long)bad_scale);
        CHECK(bad_mask == 0, "dropout: the backward's mask differs from the forward's at %lld elements",
              (long long)bad_mask);
        ty.data = y2; /* a second forward draws a different mask */
        CHECK(b->api->forward(m, &tx, &ty) == KH_OK, "dropout forward 2: %s", b->api->last_error(b->s));
        for (int64_t i = 0; i < N; i++) same += (y[i] != 0.0f) == (y2[i] != 0.0f);
        CHECK(same < N, "dropout: two forwards drew the same mask");
    }
    free(x), free(y), free(y2), free(dy), free(dx);
    b->api->model_free(m);
}
