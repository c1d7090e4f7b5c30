/* tests/cntk/cntk_bench.c — per-batch times of the cntk CPU backend on the six benchmark models (Keras 2
 * example architectures, batch sizes and optimizers; random data and kit-initialised weights), and the
 * resulting estimate of seconds per epoch at the original data set sizes.
 *   cntk_bench [--threads N] [--batches N] [--vocab-fasttext N] [model ...]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_testlib.h"

#define L_(...) ((kh_layer_spec){__VA_ARGS__})

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct bench_model {
    const char *name;
    kh_model_spec spec;
    int batch;
    int64_t train_steps, eval_samples; /* per epoch in the original benchmark */
} bench_model;

static kh_optimizer_spec opt(uint32_t kind, float lr, float rho, float decay) {
    kh_optimizer_spec o = {.kind = kind, .lr = lr, .rho = rho, .beta_1 = 0.9f, .beta_2 = 0.999f, .epsilon = 1e-7f,
                           .decay = decay};
    return o;
}

static void run(kb_backend *B, bench_model *bm, int batches) {
    kh_model_spec *sp = &bm->spec;
    kh_bmodel *m = kb_compile(B, sp, bm->batch, 0);
    if (!m) return;
    if (kb_init_weights(B, m, sp, 1, NULL) != 0) {
        B->api->model_free(m);
        return;
    }
    kh_rng r;
    kh_rng_seed(&r, 3);
    int64_t per = 1, dims[4] = {bm->batch, 0, 0, 0};
    for (int i = 0; i < sp->input_rank; i++) per *= sp->input_shape[i];
    void *x = malloc((size_t)(bm->batch * per) * 4);
    int32_t *y = malloc((size_t)bm->batch * 4);
    kh_tensor tx;
    if (sp->input_dtype == KH_I32) {
        int64_t vocab = sp->input_onehot > 0 ? sp->input_onehot : sp->layers[0].input_dim;
        for (int64_t i = 0; i < bm->batch * per; i++) ((int32_t *)x)[i] = (int32_t)kh_rng_below(&r, (uint64_t)vocab);
        dims[1] = sp->input_shape[0];
        tx = kb_tensor(KH_I32, KH_LAYOUT_NT, 2, dims, x);
    } else if (sp->input_rank == 3) { /* NCHW as the host hands it to cntk */
        kb_fill_uniform(x, bm->batch * per, 0, 1, &r);
        int64_t d[4] = {bm->batch, sp->input_shape[2], sp->input_shape[0], sp->input_shape[1]};
        tx = kb_tensor(KH_F32, KH_LAYOUT_NCHW, 4, d, x);
    } else {
        kb_fill_uniform(x, bm->batch * per, 0, 1, &r);
        dims[1] = per;
        tx = kb_tensor(KH_F32, KH_LAYOUT_NC, 2, dims, x);
    }
    for (int i = 0; i < bm->batch; i++) y[i] = (int32_t)kh_rng_below(&r, (uint64_t)(sp->n_classes > 1 ? sp->n_classes : 2));
    int64_t yd[1] = {bm->batch};
    kh_tensor ty = kb_tensor(KH_I32, KH_LAYOUT_NC, 1, yd, y);
    for (int i = 0; i < 2; i++) B->api->train_batch(m, &tx, &ty); /* warm-up: page faults, BLAS buffers */
    double t0 = now();
    for (int i = 0; i < batches; i++)
        if (B->api->train_batch(m, &tx, &ty) != KH_OK) {
            fprintf(stderr, "%s: %s\n", bm->name, B->api->last_error(B->s));
            break;
        }
    double tt = (now() - t0) / batches;
    t0 = now();
    for (int i = 0; i < batches; i++) B->api->eval_batch(m, &tx, &ty);
    double te = (now() - t0) / batches;
    double epoch = tt * (double)bm->train_steps + te * (double)((bm->eval_samples + bm->batch - 1) / bm->batch);
    printf("%-26s batch %4d  train %9.2f ms/batch  eval %8.2f ms/batch  ~%7.1f s/epoch (%lld steps)\n", bm->name,
           bm->batch, 1e3 * tt, 1e3 * te, epoch, (long long)bm->train_steps);
    fflush(stdout);
    free(x);
    free(y);
    B->api->model_free(m);
}

int main(int argc, char **argv) {
    int threads = 2, batches = 10;
    int vocab_ft = 1200000;
    const char *only[8];
    int n_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batches") && i + 1 < argc) batches = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--vocab-fasttext") && i + 1 < argc) vocab_ft = atoi(argv[++i]);
        else if (n_only < 8) only[n_only++] = argv[i];
    }
    static const kh_layer_spec mlp[] = {L_(.kind = KH_LAYER_DENSE, .units = 512, .activation = KH_ACT_RELU),
                                        L_(.kind = KH_LAYER_DROPOUT, .rate = 0.2f),
                                        L_(.kind = KH_LAYER_DENSE, .units = 512, .activation = KH_ACT_RELU),
                                        L_(.kind = KH_LAYER_DROPOUT, .rate = 0.2f),
                                        L_(.kind = KH_LAYER_DENSE, .units = 10, .activation = KH_ACT_SOFTMAX)};
    static const kh_layer_spec cnn[] = {L_(.kind = KH_LAYER_CONV2D, .units = 32, .kernel = {3, 3}, .activation = KH_ACT_RELU),
                                        L_(.kind = KH_LAYER_CONV2D, .units = 64, .kernel = {3, 3}, .activation = KH_ACT_RELU),
                                        L_(.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}),
                                        L_(.kind = KH_LAYER_DROPOUT, .rate = 0.25f),
                                        L_(.kind = KH_LAYER_FLATTEN),
                                        L_(.kind = KH_LAYER_DENSE, .units = 128, .activation = KH_ACT_RELU),
                                        L_(.kind = KH_LAYER_DROPOUT, .rate = 0.5f),
                                        L_(.kind = KH_LAYER_DENSE, .units = 10, .activation = KH_ACT_SOFTMAX)};
    static const kh_layer_spec cifar[] = {
        L_(.kind = KH_LAYER_CONV2D, .units = 32, .kernel = {3, 3}, .padding = KH_PAD_SAME, .activation = KH_ACT_RELU),
        L_(.kind = KH_LAYER_CONV2D, .units = 32, .kernel = {3, 3}, .activation = KH_ACT_RELU),
        L_(.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}),
        L_(.kind = KH_LAYER_DROPOUT, .rate = 0.25f),
        L_(.kind = KH_LAYER_CONV2D, .units = 64, .kernel = {3, 3}, .padding = KH_PAD_SAME, .activation = KH_ACT_RELU),
        L_(.kind = KH_LAYER_CONV2D, .units = 64, .kernel = {3, 3}, .activation = KH_ACT_RELU),
        L_(.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}),
        L_(.kind = KH_LAYER_DROPOUT, .rate = 0.25f),
        L_(.kind = KH_LAYER_FLATTEN),
        L_(.kind = KH_LAYER_DENSE, .units = 512, .activation = KH_ACT_RELU),
        L_(.kind = KH_LAYER_DROPOUT, .rate = 0.5f),
        L_(.kind = KH_LAYER_DENSE, .units = 10, .activation = KH_ACT_SOFTMAX)};
    static const kh_layer_spec bilstm[] = {L_(.kind = KH_LAYER_EMBEDDING, .input_dim = 20000, .units = 128),
                                           L_(.kind = KH_LAYER_BILSTM, .units = 64),
                                           L_(.kind = KH_LAYER_DROPOUT, .rate = 0.5f),
                                           L_(.kind = KH_LAYER_DENSE, .units = 1, .activation = KH_ACT_SIGMOID)};
    kh_layer_spec fasttext[] = {L_(.kind = KH_LAYER_EMBEDDING, .input_dim = vocab_ft, .units = 50),
                                L_(.kind = KH_LAYER_GAP1D),
                                L_(.kind = KH_LAYER_DENSE, .units = 1, .activation = KH_ACT_SIGMOID)};
    static const kh_layer_spec textgen[] = {L_(.kind = KH_LAYER_LSTM, .units = 128),
                                            L_(.kind = KH_LAYER_DENSE, .units = 57, .activation = KH_ACT_SOFTMAX)};
#define SPEC(nm, dt, rk, a, b, c, oh, ly, ls, o, cls)                                                            \
    {.struct_size = sizeof(kh_model_spec), .name = nm, .input_dtype = dt, .input_rank = rk, .input_shape = {a, b, c}, \
     .input_onehot = oh, .n_layers = (int)(sizeof ly / sizeof ly[0]), .layers = ly, .loss = ls, .optimizer = o,    \
     .n_classes = cls}
    bench_model models[] = {
        {"mnist_mlp", SPEC("mnist_mlp", KH_F32, 1, 784, 0, 0, 0, mlp, KH_LOSS_CATEGORICAL_CROSSENTROPY,
                           opt(KH_OPT_RMSPROP, 1e-3f, 0.9f, 0), 10), 128, 469, 10000},
        {"mnist_cnn", SPEC("mnist_cnn", KH_F32, 3, 28, 28, 1, 0, cnn, KH_LOSS_CATEGORICAL_CROSSENTROPY,
                           opt(KH_OPT_ADADELTA, 1.0f, 0.95f, 0), 10), 128, 469, 10000},
        {"cifar10_cnn", SPEC("cifar10_cnn", KH_F32, 3, 32, 32, 3, 0, cifar, KH_LOSS_CATEGORICAL_CROSSENTROPY,
                             opt(KH_OPT_RMSPROP, 1e-4f, 0.9f, 1e-6f), 10), 32, 1562, 10000},
        {"imdb_bidirectional_lstm", SPEC("imdb_bidirectional_lstm", KH_I32, 1, 100, 0, 0, 0, bilstm,
                                         KH_LOSS_BINARY_CROSSENTROPY, opt(KH_OPT_ADAM, 1e-3f, 0, 0), 1), 32, 782, 25000},
        {"imdb_fasttext", SPEC("imdb_fasttext", KH_I32, 1, 400, 0, 0, 0, fasttext, KH_LOSS_BINARY_CROSSENTROPY,
                               opt(KH_OPT_ADAM, 1e-3f, 0, 0), 1), 32, 782, 25000},
        {"lstm_text_generation", SPEC("lstm_text_generation", KH_I32, 1, 40, 0, 0, 57, textgen,
                                      KH_LOSS_CATEGORICAL_CROSSENTROPY, opt(KH_OPT_RMSPROP, 1e-2f, 0.9f, 0), 57), 128,
         1565, 0},
    };
    kb_backend B;
    kb_load(&B, threads);
    char env[256];
    B.api->environment(B.s, env, sizeof env);
    printf("cntk %s, %s\n", B.desc->version, env);
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        int want = n_only == 0;
        for (int k = 0; k < n_only; k++) want |= strcmp(only[k], models[i].name) == 0;
        if (want) run(&B, &models[i], batches);
    }
    kb_unload(&B);
    return 0;
}
