/* tests/kit/test_kit.c — the helper library's basics: RNG determinism and range, shape inference for the
 * six benchmark models and its error messages, and Keras's initialisers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/rng.h"
#include "khost/kit/spec.h"
#include "khost/kit/init.h"
#include "testutil.h"

static void test_rng(void) {
    kh_rng a, b;
    kh_rng_seed(&a, 42);
    kh_rng_seed(&b, 42);
    int same = 1;
    for (int i = 0; i < 1000; i++) same &= kh_rng_u64(&a) == kh_rng_u64(&b);
    CHECK(same, "same seed, different streams");
    kh_rng_seed(&b, 43);
    CHECK(kh_rng_u64(&a) != kh_rng_u64(&b), "different seeds, same value");
    double sum = 0, sq = 0, mn = 1, mx = 0;
    for (int i = 0; i < 100000; i++) {
        double u = kh_rng_uniform(&a);
        mn = u < mn ? u : mn;
        mx = u > mx ? u : mx;
        double z = kh_rng_normal(&a);
        sum += z;
        sq += z * z;
    }
    CHECK(mn >= 0 && mx < 1, "uniform out of [0,1): %g %g", mn, mx);
    CHECK(fabs(sum / 1e5) < 0.02 && fabs(sq / 1e5 - 1) < 0.03, "normal moments %g %g", sum / 1e5, sq / 1e5);
    int64_t v[100];
    for (int i = 0; i < 100; i++) v[i] = i;
    kh_rng_shuffle_i64(&a, v, 100);
    int seen[100] = {0}, moved = 0;
    for (int i = 0; i < 100; i++) seen[v[i]]++, moved += v[i] != i;
    int perm = 1;
    for (int i = 0; i < 100; i++) perm &= seen[i] == 1;
    CHECK(perm && moved > 50, "shuffle is not a permutation or did not move (%d moved)", moved);
    CHECK(kh_seed_mix(1, 2, 3, 4) != kh_seed_mix(1, 2, 4, 3), "seed_mix ignores argument order");
}

static void test_spec_mnist_cnn(void) {
    kh_layer_spec L[] = {
        {.kind = KH_LAYER_CONV2D, .units = 32, .kernel = {3, 3}, .activation = KH_ACT_RELU},
        {.kind = KH_LAYER_CONV2D, .units = 64, .kernel = {3, 3}, .activation = KH_ACT_RELU},
        {.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}},
        {.kind = KH_LAYER_DROPOUT, .rate = 0.25f},
        {.kind = KH_LAYER_FLATTEN},
        {.kind = KH_LAYER_DENSE, .units = 128, .activation = KH_ACT_RELU},
        {.kind = KH_LAYER_DROPOUT, .rate = 0.5f},
        {.kind = KH_LAYER_DENSE, .units = 10, .activation = KH_ACT_SOFTMAX},
    };
    kh_model_spec s = {.struct_size = sizeof s, .input_dtype = KH_F32, .input_rank = 3, .input_shape = {28, 28, 1},
                       .n_layers = 8, .layers = L, .loss = KH_LOSS_CATEGORICAL_CROSSENTROPY, .n_classes = 10,
                       .optimizer = {.kind = KH_OPT_ADADELTA}};
    kh_model_shapes sh;
    char err[256];
    CHECK(kh_spec_infer(&s, &sh, err, sizeof err) == KH_OK, "mnist_cnn: %s", err);
    /* Keras's model.summary() for mnist_cnn: 1,199,882 parameters; flatten 9216 */
    CHECK(sh.total_params == 1199882, "mnist_cnn params %lld", (long long)sh.total_params);
    CHECK(sh.layers[4].out_shape[0] == 9216, "flatten %d", sh.layers[4].out_shape[0]);
    CHECK(sh.layers[0].params[0].fan_in == 9 && sh.layers[0].params[0].fan_out == 9 * 32, "conv fans");
    kh_model_shapes_free(&sh);

    L[0].padding = KH_PAD_SAME; /* same keeps 28x28 */
    CHECK(kh_spec_infer(&s, &sh, err, sizeof err) == KH_OK && sh.layers[0].out_shape[0] == 28, "same padding");
    kh_model_shapes_free(&sh);
    L[5].kind = 99;
    CHECK(kh_spec_infer(&s, &sh, err, sizeof err) == KH_ERR_INVALID && strstr(err, "layer 5"),
          "unknown kind not reported with its layer: %s", err);
    L[5].kind = KH_LAYER_DENSE;
    L[4].kind = KH_LAYER_DROPOUT; /* Dense on (h, w, c) without Flatten */
    CHECK(kh_spec_infer(&s, &sh, err, sizeof err) == KH_ERR_INVALID && strstr(err, "Flatten"), "%s", err);
    L[4].kind = KH_LAYER_FLATTEN;
    s.n_classes = 7;
    CHECK(kh_spec_infer(&s, &sh, err, sizeof err) == KH_ERR_INVALID && strstr(err, "categorical"), "%s", err);
}

static void test_spec_lstm(void) {
    /* imdb_bidirectional_lstm: 2,658,945 parameters in Keras */
    kh_layer_spec L[] = {{.kind = KH_LAYER_EMBEDDING, .input_dim = 20000, .units = 128},
                         {.kind = KH_LAYER_BILSTM, .units = 64},
                         {.kind = KH_LAYER_DROPOUT, .rate = 0.5f},
                         {.kind = KH_LAYER_DENSE, .units = 1, .activation = KH_ACT_SIGMOID}};
    kh_model_spec s = {.struct_size = sizeof s, .input_dtype = KH_I32, .input_rank = 1, .input_shape = {100},
                       .n_layers = 4, .layers = L, .loss = KH_LOSS_BINARY_CROSSENTROPY, .n_classes = 1,
                       .optimizer = {.kind = KH_OPT_ADAM}};
    kh_model_shapes sh;
    char err[256];
    CHECK(kh_spec_infer(&s, &sh, err, sizeof err) == KH_OK, "bilstm: %s", err);
    CHECK(sh.total_params == 2658945, "bilstm params %lld", (long long)sh.total_params);
    CHECK(sh.layers[1].n_params == 6 && sh.layers[1].params[4].init == KH_INIT_ORTHOGONAL &&
              sh.layers[1].params[5].init == KH_INIT_LSTM_BIAS && sh.layers[1].out_shape[0] == 128,
          "bilstm slots");
    kh_model_shapes_free(&sh);
    /* lstm_text_generation with one-hot input: LSTM(128) on (40, 57) then Dense(57): 102,585 parameters */
    kh_layer_spec T[] = {{.kind = KH_LAYER_LSTM, .units = 128},
                         {.kind = KH_LAYER_DENSE, .units = 57, .activation = KH_ACT_SOFTMAX}};
    kh_model_spec t = {.struct_size = sizeof t, .input_dtype = KH_I32, .input_rank = 1, .input_shape = {40},
                       .input_onehot = 57, .n_layers = 2, .layers = T,
                       .loss = KH_LOSS_CATEGORICAL_CROSSENTROPY, .n_classes = 57, .optimizer = {.kind = KH_OPT_RMSPROP}};
    CHECK(kh_spec_infer(&t, &sh, err, sizeof err) == KH_OK, "textgen: %s", err);
    CHECK(sh.total_params == 102585 && sh.in_rank == 2 && sh.in_shape[1] == 57, "textgen params %lld",
          (long long)sh.total_params);
    kh_model_shapes_free(&sh);
    t.input_onehot = 0; /* integer input straight into an LSTM is an error */
    CHECK(kh_spec_infer(&t, &sh, err, sizeof err) == KH_ERR_INVALID && strstr(err, "integer"), "%s", err);
}

static void test_init(void) {
    kh_rng r;
    kh_rng_seed(&r, 5);
    kh_param_shape g = {.rank = 2, .dims = {300, 100}, .numel = 30000, .init = KH_INIT_GLOROT_UNIFORM,
                        .fan_in = 300, .fan_out = 100};
    float *w = malloc(30000 * sizeof *w);
    CHECK(kh_init_param(&r, &g, w) == KH_OK, "glorot");
    double lim = sqrt(6.0 / 400), mx = 0, var = 0;
    for (int i = 0; i < 30000; i++) {
        mx = fabs(w[i]) > mx ? fabs(w[i]) : mx;
        var += (double)w[i] * w[i];
    }
    CHECK(mx <= lim && mx > 0.99 * lim, "glorot max %g, limit %g", mx, lim);
    CHECK(fabs(var / 30000 - lim * lim / 3) < 0.05 * lim * lim / 3, "glorot variance");
    /* orthogonal [u, 4u]: rows orthonormal */
    kh_param_shape o = {.rank = 2, .dims = {16, 64}, .numel = 1024, .init = KH_INIT_ORTHOGONAL};
    CHECK(kh_init_param(&r, &o, w) == KH_OK, "orthogonal");
    double worst = 0;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            double d = 0;
            for (int k = 0; k < 64; k++) d += (double)w[i * 64 + k] * w[j * 64 + k];
            worst = fmax(worst, fabs(d - (i == j)));
        }
    CHECK(worst < 1e-5, "orthogonal rows: worst |QQ^T - I| %g", worst);
    kh_param_shape b = {.rank = 1, .dims = {20}, .numel = 20, .init = KH_INIT_LSTM_BIAS};
    CHECK(kh_init_param(&r, &b, w) == KH_OK, "lstm bias");
    int ok = 1;
    for (int i = 0; i < 20; i++) ok &= w[i] == ((i >= 5 && i < 10) ? 1.0f : 0.0f);
    CHECK(ok, "forget-gate quarter of the LSTM bias is not 1");
    kh_param_shape e = {.rank = 2, .dims = {100, 10}, .numel = 1000, .init = KH_INIT_UNIFORM_005};
    kh_init_param(&r, &e, w);
    mx = 0;
    for (int i = 0; i < 1000; i++) mx = fabs(w[i]) > mx ? fabs(w[i]) : mx;
    CHECK(mx <= 0.05 && mx > 0.045, "embedding uniform max %g", mx);
    free(w);
}

int main(void) {
    test_rng();
    test_spec_mnist_cnn();
    test_spec_lstm();
    test_init();
    return kh_test_finish("test_kit");
}
