/* tests/tensorflow/tf_overhead.c — the executor's cost per op, measured on graphs of trivial ops (not a test:
 * build/tests/tensorflow/tf_overhead [--ops N] [--width W] [--rounds R]).
 *
 * The model is a chain of N Activation(relu) layers on a W-element input: its predict function is N relu
 * nodes (plus the input) whose kernels touch W floats each, so at small W the time per predict call divided by
 * N is the executor's overhead per op (scheduling, pending counts, the call into the kernel), and the same
 * chain in cntk (one layer object per relu) is the per-layer cost of a layer-by-layer executor, side by side.
 * Rows: cntk; tensorflow with inter_op_parallelism 1 (nodes in graph order on the calling thread, TensorFlow's
 * single-threaded executor); tensorflow with the default (the dataflow executor: pending counts, ready stack,
 * pool), all with 2 threads. Median of R rounds of 200 calls each.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parity.h"

static const char *g_inter = NULL;
static const char *config(const char *section, const char *key) {
    if (section && !strcmp(section, "plugin tensorflow") && !strcmp(key, "inter_op_parallelism")) return g_inter;
    return NULL;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double measure(const char *plugin, const char *inter, int threads, int ops, int width, int rounds) {
    setenv("KHOST_TEST_PLUGIN", plugin, 1);
    g_inter = inter;
    static kh_host_api host;
    host = *kb_host();
    host.config_get = config;
    kb_set_host(&host);
    kb_backend B;
    kb_load(&B, threads);
    kh_layer_spec *layers = calloc((size_t)ops, sizeof *layers);
    for (int i = 0; i < ops; i++) layers[i] = (kh_layer_spec){.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_RELU};
    kh_model_spec sp = kb_spec("relu_chain", KH_F32, 1, width, 0, 0, 0, layers, ops, KH_LOSS_NONE, kb_opt(KH_OPT_SGD, 0.1f, 0), 0);
    kh_bmodel *m = kb_compile(&B, &sp, 1, 1);
    if (!m) exit(1);
    float *x = calloc((size_t)width, sizeof *x), *y = calloc((size_t)width, sizeof *y);
    for (int k = 0; k < width; k++) x[k] = (float)(k % 7) - 3.0f;
    int64_t d[2] = {1, width};
    kh_tensor tx = kb_tensor(KH_F32, KH_LAYOUT_NC, 2, d, x), ty = kb_tensor(KH_F32, KH_LAYOUT_NC, 2, d, y);
    double *per = calloc((size_t)rounds, sizeof *per);
    const int calls = 200;
    for (int w = 0; w < 20; w++) B.api->predict(m, &tx, &ty);
    for (int r = 0; r < rounds; r++) {
        double t0 = now();
        for (int c = 0; c < calls; c++)
            if (B.api->predict(m, &tx, &ty) != KH_OK) {
                fprintf(stderr, "predict: %s\n", B.api->last_error(B.s));
                exit(1);
            }
        per[r] = (now() - t0) / calls / ops * 1e6;
    }
    qsort(per, (size_t)rounds, sizeof *per, cmp);
    double med = per[rounds / 2];
    printf("%-12s %-26s threads %d  ops %5d  width %5d  %8.3f us/op  (min %.3f, max %.3f over %d rounds)\n", plugin,
           inter ? (atoi(inter) == 1 ? "inter_op 1 (graph order)" : "dataflow executor") : "layer by layer", threads,
           ops, width, med, per[0], per[rounds - 1], rounds);
    free(per);
    free(x);
    free(y);
    free(layers);
    B.api->model_free(m);
    kb_unload(&B);
    return med;
}

int main(int argc, char **argv) {
    int ops = 1000, width = 1, rounds = 7;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--ops")) ops = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--width")) width = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
    }
    if (ops < 1 || width < 1 || rounds < 1) {
        fprintf(stderr, "usage: tf_overhead [--ops N] [--width W] [--rounds R]\n");
        return 2;
    }
    measure("cntk", NULL, 2, ops, width, rounds);
    measure("tensorflow", "1", 2, ops, width, rounds);
    measure("tensorflow", "2", 2, ops, width, rounds);
    return 0;
}
