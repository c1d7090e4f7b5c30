/* tests/tensorflow/test_tf_determinism.c — the parallel executor gives the same bits every time.
 * With several threads, independent nodes run at once in an order that changes from run to run; every
 * kernel's result must still not depend on it (no shared scratch between nodes, no summation order that
 * follows the schedule). Each model is trained for a few steps from the same weights and batches several
 * times, at 2 threads with every op dispatched to the pool, each time freshly compiled; every weight after the last step must be bitwise equal
 * to the first run's. Models: two convolutions (two filter gradients that may run together), the small
 * recurrent ones, and an embedding. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "testutil.h"
#include "khost/kit/rng.h"
#include "khost/kit/spec.h"

#define RUNS 11
#define STEPS 3

static kb_backend B;

/* Every op goes to the pool (inline_cost 0), so the small test models run with as much concurrency as the
 * executor allows, not inline on one thread. */
static const char *config(const char *section, const char *key) {
    return section && !strcmp(section, "plugin tensorflow") && !strcmp(key, "inline_cost") ? "0" : NULL;
}

/* Train STEPS steps from seed-fixed weights and batches; returns all weights concatenated (malloc'ed). */
static float *train(const kh_model_spec *sp, int64_t *n_out) {
    kh_bmodel *m = kb_compile(&B, sp, 8, 0);
    if (!m) return NULL;
    if (kb_init_weights(&B, m, sp, 11, NULL) != 0) return NULL;
    kh_rng r;
    kh_rng_seed(&r, 21);
    for (int s = 0; s < STEPS; s++) {
        kb_batch bt;
        kb_make_batch(&bt, sp, 8, &r);
        int64_t yd[1] = {bt.n};
        kh_tensor ty = kb_tensor(KH_I32, KH_LAYOUT_NC, 1, yd, bt.labels);
        CHECK(B.api->train_batch(m, &bt.x_backend, &ty) == KH_OK, "%s train: %s", sp->name, B.api->last_error(B.s));
        kb_free_batch(&bt);
    }
    kh_model_shapes sh;
    char err[256];
    kh_spec_infer(sp, &sh, err, sizeof err);
    int64_t total = 0;
    for (int l = 0; l < sh.n_layers; l++)
        for (int k = 0; k < sh.layers[l].n_params; k++) total += sh.layers[l].params[k].numel;
    float *all = malloc((size_t)total * sizeof *all), *p = all;
    for (int l = 0; l < sh.n_layers; l++)
        for (int k = 0; k < sh.layers[l].n_params; k++) {
            const kh_param_shape *ps = &sh.layers[l].params[k];
            kh_tensor t = kb_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, p);
            CHECK(B.api->get_weight(m, l, k, &t) == KH_OK, "get_weight");
            p += ps->numel;
        }
    kh_model_shapes_free(&sh);
    B.api->model_free(m);
    *n_out = total;
    return all;
}

int main(void) {
    setenv("KHOST_TEST_PLUGIN", "tensorflow", 1);
    static kh_host_api host;
    host = *kb_host();
    host.config_get = config;
    kb_set_host(&host);
    kb_load(&B, 2);
    static const kh_layer_spec cnn2[] = {
        KB_L(.kind = KH_LAYER_CONV2D, .units = 6, .kernel = {3, 3}, .activation = KH_ACT_RELU),
        KB_L(.kind = KH_LAYER_CONV2D, .units = 8, .kernel = {3, 3}, .padding = KH_PAD_SAME, .activation = KH_ACT_RELU),
        KB_L(.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}),
        KB_L(.kind = KH_LAYER_CONV2D, .units = 8, .kernel = {2, 2}, .activation = KH_ACT_RELU),
        KB_L(.kind = KH_LAYER_FLATTEN),
        KB_L(.kind = KH_LAYER_DENSE, .units = 3, .activation = KH_ACT_SOFTMAX)};
    kh_model_spec extra = kb_spec("three_convs", KH_F32, 3, 12, 12, 2, 0, cnn2, KB_N(cnn2),
                                  KH_LOSS_CATEGORICAL_CROSSENTROPY, kb_opt(KH_OPT_ADADELTA, 1.0f, 0), 3);
    const kh_model_spec *specs;
    int n = kb_small_models(&specs);
    for (int i = -1; i < n; i++) {
        const kh_model_spec *sp = i < 0 ? &extra : &specs[i];
        int64_t n0 = 0, nk = 0;
        float *first = train(sp, &n0);
        CHECK(first != NULL, "%s: first run", sp->name);
        if (!first) continue;
        int differ = 0;
        for (int run = 1; run < RUNS; run++) {
            float *w = train(sp, &nk);
            if (!w || nk != n0 || memcmp(w, first, (size_t)n0 * sizeof *w) != 0) differ++;
            free(w);
        }
        printf("  %-26s %d of %d repeated runs differ from the first\n", sp->name, differ, RUNS - 1);
        CHECK(differ == 0, "%s: %d of %d runs at 2 threads gave other weights", sp->name, differ, RUNS - 1);
        free(first);
    }
    kb_unload(&B);
    return kh_test_finish("test_tf_determinism");
}
