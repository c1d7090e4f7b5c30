/* tests/cntk/test_cntk_basic.c — the cntk module's contract and hand-computable cases:
 * descriptor and caps (NCHW, probes, one-hot; CUDA reported unavailable), argument errors with their
 * message form, a Dense layer and an SGD step checked against numbers worked out by hand, Flatten's
 * NCHW -> Keras order permutation, the dense Adam update of an Embedding (untouched rows still move), and
 * dropout's masks: the reference kit's stream element for element, drawn in parts by the pool's threads. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_testlib.h"
#include "khost/kit/ref.h"
#include "parity.h"
#include "testutil.h"

static kb_backend B;

static void test_caps(void) {
    CHECK(B.desc->kind == KH_MODULE_BACKEND && strcmp(B.desc->name, "cntk") == 0, "descriptor");
    CHECK(B.desc->abi_major == KH_ABI_MAJOR, "abi major");
    kh_caps c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    CHECK(B.api->get_caps(KH_DEVICE_CPU, &c) == KH_OK, "caps cpu");
    CHECK(c.available == 1, "cpu available: %s", c.note);
    CHECK(c.image_layout == KH_LAYOUT_NCHW, "NCHW");
    CHECK((c.flags & (KH_CAP_PROBES | KH_CAP_ONEHOT_INPUT | KH_CAP_PREDICT)) ==
              (KH_CAP_PROBES | KH_CAP_ONEHOT_INPUT | KH_CAP_PREDICT), "flags %x", c.flags);
    for (uint32_t k = KH_LAYER_DENSE; k < KH_LAYER_KIND_END; k++) CHECK(c.layer_kinds & (1u << k), "kind %u", k);
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    CHECK(B.api->get_caps(KH_DEVICE_CUDA, &c) == KH_OK, "cuda caps");
    /* unavailable (no toolkit at build time, or no driver/device here) must say why; available must say what */
    CHECK(c.available ? c.layer_kinds != 0 : c.note[0] != 0, "cuda caps: available %d, note '%s'", c.available, c.note);
    char env[256];
    CHECK(B.api->environment(B.s, env, sizeof env) == KH_OK, "environment");
    CHECK(strncmp(env, "blas=openblas-", 14) == 0 && strstr(env, "threads=2"), "environment: %s", env);
    /* the oneDNN path names the instruction set oneDNN chose on this CPU (one model name, several ISAs) */
    if (strstr(env, "cpu_path=onednn-"))
        CHECK(strstr(env, " onednn_isa=") && !strstr(env, " onednn_isa= "), "oneDNN's ISA: %s", env);
    else
        CHECK(!strstr(env, "onednn_isa="), "no oneDNN, no ISA: %s", env);
}

/* Dense(2, linear) on 3 inputs, W = [[1,2],[3,4],[5,6]], b = [0.5, -1]; x = [1, 0, -1] -> y = [-3.5, -5].
 * dy = [1, 2]: dW = x^T dy = [[1,2],[0,0],[-1,-2]], db = [1, 2], dx = dy W^T = [5, 11, 17]. */
static void test_dense_by_hand(void) {
    kh_layer_spec l = {.kind = KH_LAYER_DENSE, .units = 2};
    kh_model_spec sp = {.struct_size = sizeof sp, .name = "dense", .input_dtype = KH_F32, .input_rank = 1,
                        .input_shape = {3}, .n_layers = 1, .layers = &l, .loss = KH_LOSS_NONE,
                        .optimizer = {.kind = KH_OPT_SGD, .lr = 0.1f}};
    kh_bmodel *m = kb_compile(&B, &sp, 4, 1);
    CHECK(m != NULL, "compile dense");
    if (!m) return;
    float W[6] = {1, 2, 3, 4, 5, 6}, b[2] = {0.5f, -1}, x[3] = {1, 0, -1}, y[2], dy[2] = {1, 2}, dx[3], g[6];
    int64_t wd[2] = {3, 2}, bd[1] = {2}, xd[2] = {1, 3}, yd[2] = {1, 2};
    kh_tensor tw = kb_tensor(KH_F32, 0, 2, wd, W), tb = kb_tensor(KH_F32, 0, 1, bd, b);
    CHECK(B.api->set_weight(m, 0, 0, &tw) == KH_OK && B.api->set_weight(m, 0, 1, &tb) == KH_OK, "set");
    kh_tensor tx = kb_tensor(KH_F32, KH_LAYOUT_NC, 2, xd, x), ty = kb_tensor(KH_F32, KH_LAYOUT_NC, 2, yd, y);
    CHECK(B.api->forward(m, &tx, &ty) == KH_OK, "forward: %s", B.api->last_error(B.s));
    CHECK_CLOSE(y[0], -3.5, 0, 1e-6, "y0");
    CHECK_CLOSE(y[1], -5.0, 0, 1e-6, "y1");
    kh_tensor tdy = kb_tensor(KH_F32, KH_LAYOUT_NC, 2, yd, dy), tdx = kb_tensor(KH_F32, KH_LAYOUT_NC, 2, xd, dx);
    CHECK(B.api->backward(m, &tdy, &tdx) == KH_OK, "backward");
    CHECK_CLOSE(dx[0], 5, 0, 1e-6, "dx0");
    CHECK_CLOSE(dx[1], 11, 0, 1e-6, "dx1");
    CHECK_CLOSE(dx[2], 17, 0, 1e-6, "dx2");
    kh_tensor tg = kb_tensor(KH_F32, 0, 2, wd, g);
    CHECK(B.api->get_grad(m, 0, 0, &tg) == KH_OK, "get_grad");
    const float want[6] = {1, 2, 0, 0, -1, -2};
    for (int i = 0; i < 6; i++) CHECK_CLOSE(g[i], want[i], 0, 1e-6, "dW");
    /* errors: wrong weight shape, out-of-range slot, message form */
    int64_t bad[2] = {2, 3};
    kh_tensor tbad = kb_tensor(KH_F32, 0, 2, bad, W);
    CHECK(B.api->set_weight(m, 0, 0, &tbad) == KH_ERR_INVALID, "bad shape refused");
    CHECK(strncmp(B.api->last_error(B.s), "cntk dense[0] set_weight on cpu: ", 33) == 0, "message: %s",
          B.api->last_error(B.s));
    CHECK(B.api->get_weight(m, 0, 2, &tw) == KH_ERR_INVALID, "slot 2 refused");
    int64_t big[2] = {9, 3};
    kh_tensor tbig = kb_tensor(KH_F32, KH_LAYOUT_NC, 2, big, x);
    CHECK(B.api->predict(m, &tbig, &ty) == KH_ERR_INVALID, "batch larger than max_batch refused");
    B.api->model_free(m);
}

/* Softmax + CCE + SGD by hand: Dense(2, softmax) with zero weights on x = [1, 2], label 1:
 * p = [0.5, 0.5], loss = ln 2, dz = p - onehot = [0.5, -0.5]; dW = x^T dz, W -= 0.1 dW. */
static void test_sgd_step_by_hand(void) {
    kh_layer_spec l = {.kind = KH_LAYER_DENSE, .units = 2, .activation = KH_ACT_SOFTMAX};
    kh_model_spec sp = {.struct_size = sizeof sp, .name = "softmax", .input_dtype = KH_F32, .input_rank = 1,
                        .input_shape = {2}, .n_layers = 1, .layers = &l,
                        .loss = KH_LOSS_CATEGORICAL_CROSSENTROPY, .optimizer = {.kind = KH_OPT_SGD, .lr = 0.1f},
                        .n_classes = 2};
    kh_bmodel *m = kb_compile(&B, &sp, 2, 1);
    CHECK(m != NULL, "compile softmax");
    if (!m) return;
    float W[4] = {0}, b[2] = {0}, x[2] = {1, 2};
    int32_t lab[1] = {1};
    int64_t wd[2] = {2, 2}, bd[1] = {2}, xd[2] = {1, 2}, ld[1] = {1};
    kh_tensor tw = kb_tensor(KH_F32, 0, 2, wd, W), tb = kb_tensor(KH_F32, 0, 1, bd, b);
    B.api->set_weight(m, 0, 0, &tw);
    B.api->set_weight(m, 0, 1, &tb);
    kh_tensor tx = kb_tensor(KH_F32, KH_LAYOUT_NC, 2, xd, x), ty = kb_tensor(KH_I32, KH_LAYOUT_NC, 1, ld, lab);
    CHECK(B.api->train_batch(m, &tx, &ty) == KH_OK, "train: %s", B.api->last_error(B.s));
    kh_metrics met;
    B.api->read_metrics(m, KH_PHASE_TRAIN, &met, 1);
    CHECK_CLOSE(met.loss_sum, log(2.0), 1e-6, 0, "loss");
    CHECK(met.samples == 1, "samples");
    B.api->get_weight(m, 0, 0, &tw);
    const float want[4] = {-0.05f, 0.05f, -0.1f, 0.1f};
    for (int i = 0; i < 4; i++) CHECK_CLOSE(W[i], want[i], 1e-6, 1e-7, "W after step");
    B.api->get_weight(m, 0, 1, &tb);
    CHECK_CLOSE(b[0], -0.05, 1e-6, 1e-7, "b0");
    lab[0] = 5;
    CHECK(B.api->train_batch(m, &tx, &ty) == KH_ERR_INVALID, "label out of range refused");
    B.api->model_free(m);
}

/* Flatten of a (H=1, W=2, C=2) image: the NCHW input [c0: a b | c1: c d] must come out in Keras's (h, w, c)
 * order [a c b d]. */
static void test_flatten_order(void) {
    kh_layer_spec l = {.kind = KH_LAYER_FLATTEN};
    kh_model_spec sp = {.struct_size = sizeof sp, .name = "flatten", .input_dtype = KH_F32, .input_rank = 3,
                        .input_shape = {1, 2, 2}, .n_layers = 1, .layers = &l, .loss = KH_LOSS_NONE};
    kh_bmodel *m = kb_compile(&B, &sp, 1, 1);
    CHECK(m != NULL, "compile flatten");
    if (!m) return;
    float x[4] = {1, 2, 3, 4}, y[4];
    int64_t xd[4] = {1, 2, 1, 2}, yd[2] = {1, 4};
    kh_tensor tx = kb_tensor(KH_F32, KH_LAYOUT_NCHW, 4, xd, x), ty = kb_tensor(KH_F32, KH_LAYOUT_NC, 2, yd, y);
    CHECK(B.api->predict(m, &tx, &ty) == KH_OK, "predict");
    CHECK(y[0] == 1 && y[1] == 3 && y[2] == 2 && y[3] == 4, "order %g %g %g %g", y[0], y[1], y[2], y[3]);
    B.api->model_free(m);
}

/* Embedding(5, 2) -> GAP1D -> Dense(1, sigmoid), Adam. Step 1 touches row 0, step 2 row 1. Rows never
 * touched keep zero moments and stay put; row 0, untouched in step 2, must still move in step 2 by its
 * decayed momentum — exactly what Keras's dense Adam update computes with g = 0. */
static void test_embedding_dense_adam(void) {
    kh_layer_spec ls[3] = {{.kind = KH_LAYER_EMBEDDING, .input_dim = 5, .units = 2},
                           {.kind = KH_LAYER_GAP1D},
                           {.kind = KH_LAYER_DENSE, .units = 1, .activation = KH_ACT_SIGMOID}};
    kh_model_spec sp = {.struct_size = sizeof sp, .name = "embed", .input_dtype = KH_I32, .input_rank = 1,
                        .input_shape = {2}, .n_layers = 3, .layers = ls, .loss = KH_LOSS_BINARY_CROSSENTROPY,
                        .optimizer = {.kind = KH_OPT_ADAM, .lr = 0.01f, .beta_1 = 0.9f, .beta_2 = 0.999f,
                                      .epsilon = 1e-7f},
                        .n_classes = 1};
    kh_bmodel *m = kb_compile(&B, &sp, 1, 1);
    CHECK(m != NULL, "compile embed");
    if (!m) return;
    float E[10], K[2] = {1.0f, -1.0f}, bias[1] = {0};
    for (int i = 0; i < 10; i++) E[i] = 0.01f * (float)i;
    int64_t ed[2] = {5, 2}, kd[2] = {2, 1}, bd[1] = {1}, xd[2] = {1, 2}, ld[1] = {1};
    kh_tensor te = kb_tensor(KH_F32, 0, 2, ed, E), tk = kb_tensor(KH_F32, 0, 2, kd, K), tb = kb_tensor(KH_F32, 0, 1, bd, bias);
    B.api->set_weight(m, 0, 0, &te);
    B.api->set_weight(m, 2, 0, &tk);
    B.api->set_weight(m, 2, 1, &tb);
    int32_t x1[2] = {0, 0}, x2[2] = {1, 1}, lab[1] = {1};
    kh_tensor tx = kb_tensor(KH_I32, KH_LAYOUT_NT, 2, xd, x1), ty = kb_tensor(KH_I32, KH_LAYOUT_NC, 1, ld, lab);
    CHECK(B.api->train_batch(m, &tx, &ty) == KH_OK, "step 1");
    float E1[10];
    kh_tensor te1 = kb_tensor(KH_F32, 0, 2, ed, E1);
    B.api->get_weight(m, 0, 0, &te1);
    CHECK(E1[0] != E[0] && E1[1] != E[1], "row 0 moved in step 1");
    CHECK(E1[2] == E[2] && E1[9] == E[9], "untouched rows unchanged while their moments are zero");
    /* step 1 Adam on row 0: g = dL/dE[0] (nonzero), m = 0.1 g, v = 0.001 g^2, lr_t = 0.01 sqrt(0.001)/0.1:
     * w -= lr_t * m / (sqrt(v) + eps) = 0.01 * sign(g) (up to eps) */
    CHECK_CLOSE(fabs(E1[0] - E[0]), 0.01, 1e-4, 0, "first Adam step is lr in size");
    tx.data = x2;
    CHECK(B.api->train_batch(m, &tx, &ty) == KH_OK, "step 2");
    float E2[10];
    kh_tensor te2 = kb_tensor(KH_F32, 0, 2, ed, E2);
    B.api->get_weight(m, 0, 0, &te2);
    /* row 0 had g = 0 in step 2: m = 0.9 m1, v = 0.999 v1; lr_t2 = 0.01 sqrt(1-0.999^2)/(1-0.81) */
    double g1 = (E[0] - E1[0]) > 0 ? 1 : -1; /* sign of the step-1 gradient */
    double m1 = 0.1, v1 = 0.001;             /* in units of |g1|, |g1|^2 */
    double lr2 = 0.01 * sqrt(1 - 0.999 * 0.999) / (1 - 0.9 * 0.9);
    double step2 = lr2 * (0.9 * m1) / sqrt(0.999 * v1); /* eps negligible vs |g| sqrt(v) */
    CHECK_CLOSE(E1[0] - E2[0], g1 * step2, 2e-3, 1e-7, "momentum moves an untouched row");
    CHECK(E2[2] != E1[2], "row 1 moved in step 2");
    B.api->model_free(m);
}

/* Dropout(0.3) on (8, 8, 16) images, stored NCHW: the kept elements of each training forward are those
 * the reference kit keeps drawing kh_seed_mix(seed, forward, layer 0, 0)'s stream in (N, H, W, C) order,
 * for a full batch of 64 and a partial one of 37 (two threads split both unevenly, so the second part starts
 * from an advanced stream); kb_check_dropout adds the scaling and the backward's mask. */
static void test_dropout_kit_stream(void) {
    enum { H = 8, W = 8, C = 16, PER = H * W * C, NMAX = 64 };
    const kh_layer_spec l = {.kind = KH_LAYER_DROPOUT, .rate = 0.3f};
    kh_model_spec sp = {.struct_size = sizeof sp, .name = "dropout", .input_dtype = KH_F32, .input_rank = 3,
                        .input_shape = {H, W, C}, .n_layers = 1, .layers = &l, .loss = KH_LOSS_NONE,
                        .optimizer = {.kind = KH_OPT_SGD, .lr = 0.1f}};
    kh_bmodel *m = kb_compile(&B, &sp, NMAX, 0); /* seed 7, masks on */
    CHECK(m != NULL, "dropout compile: %s", B.api->last_error(B.s));
    if (!m) return;
    static float x[NMAX * PER], y[NMAX * PER];
    static uint8_t want[NMAX * PER];
    for (int64_t i = 0; i < NMAX * PER; i++) x[i] = 1.0f;
    const int batches[2] = {NMAX, 37};
    for (int f = 0; f < 2; f++) {
        int64_t n = batches[f], d4[4] = {n, C, H, W};
        kh_tensor tx = kb_tensor(KH_F32, KH_LAYOUT_NCHW, 4, d4, x), ty = kb_tensor(KH_F32, KH_LAYOUT_NCHW, 4, d4, y);
        CHECK(B.api->forward(m, &tx, &ty) == KH_OK, "dropout forward %d: %s", f, B.api->last_error(B.s));
        kh_rng r;
        kh_rng_seed(&r, kh_seed_mix(7, (uint64_t)f, 0, 0));
        kh_ref_dropout_mask(want, n * PER, 0.3, &r);
        int64_t differ = 0, first = -1;
        for (int64_t s = 0; s < n; s++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t w = 0; w < W; w++)
                    for (int64_t c = 0; c < C; c++) {
                        int64_t keras = ((s * H + h) * W + w) * C + c, stored = ((s * C + c) * H + h) * W + w;
                        if ((y[stored] != 0.0f) != want[keras] && differ++ == 0) first = keras;
                    }
        CHECK(differ == 0, "forward %d (batch %lld): %lld of %lld elements differ from the kit's mask, first at "
              "Keras index %lld", f, (long long)n, (long long)differ, (long long)(n * PER), (long long)first);
    }
    B.api->model_free(m);
    kb_check_dropout(&B, KH_LAYOUT_NCHW, 7);
}

int main(void) {
    kb_load(&B, 2);
    test_caps();
    test_dense_by_hand();
    test_sgd_step_by_hand();
    test_flatten_order();
    test_embedding_dense_adam();
    test_dropout_kit_stream();
    kb_unload(&B);
    return kh_test_finish("test_cntk_basic");
}
