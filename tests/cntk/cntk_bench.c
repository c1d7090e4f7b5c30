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
#include "bench_models.h"

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
    /* the tasks' own models (tasks/common_models), with the original data sets' steps and evaluation sizes */
    static const struct { int64_t train_steps, eval_samples; } per_epoch[KH_BENCH_N_MODELS] = {
        {469, 10000}, {469, 10000}, {1562, 10000}, {782, 25000}, {782, 25000}, {1565, 0}};
    static kh_bench_model def[KH_BENCH_N_MODELS];
    bench_model models[KH_BENCH_N_MODELS];
    for (int i = 0; i < KH_BENCH_N_MODELS; i++) {
        const char *nm = kh_bench_model_names[i];
        if (kh_bench_model_get(nm, !strcmp(nm, "imdb_fasttext") ? vocab_ft : 0, &def[i]) != KH_OK) {
            fprintf(stderr, "cntk_bench: %s: bad model size\n", nm);
            return 2;
        }
        models[i] = (bench_model){nm, def[i].spec, def[i].batch_size, per_epoch[i].train_steps,
                                  per_epoch[i].eval_samples};
    }
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
