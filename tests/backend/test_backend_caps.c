/* tests/backend/test_backend_caps.c — a backend's CUDA device kind as seen on ANY machine, for every bundled
 * plugin ($KHOST_TEST_PLUGIN; runs in CI, no GPU needed):
 *   1. a cpu session (where the build has a cpu path) trains a small conv model and maps none of cuBLAS, cuDNN
 *      or the plugin's GPU half (<plugin>-cuda/<plugin>_cuda.so, loaded only when the CUDA kind is first asked
 *      for); with $KHOST_TEST_GPU_HALF=1 (the build made the half) get_caps(cuda) then loads it;
 *   2. the module loads (no link-time libcuda.so.1: the CUDA runtime is static, or the stub of a build without
 *      CUDA) and answers get_caps(cuda) with a note, the device layout of its cpu and BiLSTM listed;
 *   3. where the kind is unavailable, open(cuda:0) fails cleanly (KH_ERR_UNSUPPORTED, no session, the error
 *      naming "<plugin> open on cuda:0"); where it is available it opens and its environment string names the
 *      libraries (kb_traits);
 *   4. the cpu keeps training beside it.
 * The CUDA part never depends on the cpu: a build without BLAS (the GPU machine) still tests it.
 * tests/backend_e2e/half_missing.sh runs it against a build folder holding the module alone. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "testutil.h"

static kh_bsession *open_kind(kb_backend *b, uint32_t kind, char *err, size_t n, kh_status *st) {
    kh_device dev;
    memset(&dev, 0, sizeof dev);
    dev.struct_size = sizeof dev;
    dev.kind = kind;
    dev.ordinal = kind == KH_DEVICE_CUDA ? 0 : -1;
    dev.threads = 1;
    snprintf(dev.id, sizeof dev.id, "%s", kind == KH_DEVICE_CUDA ? "cuda:0" : "cpu");
    kh_bsession *s = NULL;
    *st = b->api->open(kb_host(), &dev, &s, err, n);
    return s;
}

/* One training step of spec on the cpu session, with a random batch in the cpu's layouts. */
static void cpu_trains(kb_backend *b, const kh_model_spec *sp) {
    kh_bmodel *m = kb_compile(b, sp, 4, 1);
    CHECK(m != NULL, "cpu compile %s", sp->name);
    if (!m) return;
    CHECK(kb_init_weights(b, m, sp, 1, NULL) == 0, "cpu weights");
    kh_rng r;
    kh_rng_seed(&r, 3);
    kb_batch bt;
    kb_make_batch(&bt, sp, 2, &r);
    int64_t yd[1] = {2};
    kh_tensor ty = kb_tensor(KH_I32, KH_LAYOUT_NC, 1, yd, bt.labels);
    CHECK(b->api->train_batch(m, &bt.x_backend, &ty) == KH_OK, "cpu train %s: %s", sp->name, b->api->last_error(b->s));
    kh_metrics met;
    CHECK(b->api->read_metrics(m, KH_PHASE_TRAIN, &met, 1) == KH_OK && met.samples == 2, "cpu metrics");
    kb_free_batch(&bt);
    b->api->model_free(m);
}

int main(void) {
    kb_backend b;
    kb_load_module(&b); /* skips only when the module itself is missing */
    const char *plugin = b.desc->name;
    const kb_traits *tr = kb_traits_of(plugin);
    char err[512] = "";
    kh_status st;
    static const kh_layer_spec conv[] = {
        KB_L(.kind = KH_LAYER_CONV2D, .units = 4, .kernel = {3, 3}, .activation = KH_ACT_RELU),
        KB_L(.kind = KH_LAYER_FLATTEN), KB_L(.kind = KH_LAYER_DENSE, .units = 3, .activation = KH_ACT_SOFTMAX)};
    static const kh_layer_spec dense[] = {KB_L(.kind = KH_LAYER_DENSE, .units = 3, .activation = KH_ACT_SOFTMAX)};
    kh_model_spec conv_sp = kb_spec("maps", KH_F32, 3, 6, 6, 2, 0, conv, KB_N(conv), KH_LOSS_CATEGORICAL_CROSSENTROPY,
                                    kb_opt(KH_OPT_ADAM, 1e-3f, 0), 3);
    kh_model_spec dense_sp = kb_spec("tiny", KH_F32, 1, 4, 0, 0, 0, dense, KB_N(dense),
                                     KH_LOSS_CATEGORICAL_CROSSENTROPY, kb_opt(KH_OPT_ADAM, 1e-3f, 0), 3);

    /* 1. a cpu session maps no CUDA library and not the GPU half */
    int cpu = kb_caps()->available;
    if (cpu) {
        b.s = open_kind(&b, KH_DEVICE_CPU, err, sizeof err, &st);
        CHECK(st == KH_OK && b.s, "open cpu: %s", err);
        if (b.s) cpu_trains(&b, &conv_sp);
    } else {
        printf("cpu part not run: %s\n", kb_caps()->note);
    }
    int blas = kh_test_mapped("libcublas"), dnn = kh_test_mapped("libcudnn"), half = kh_test_mapped(tr->gpu_half);
    printf("after a cpu session: %d libcublas, %d libcudnn, %d %s mappings\n", blas, dnn, half, tr->gpu_half);
    CHECK(blas == 0 && dnn == 0 && half == 0, "a cpu session mapped the GPU half or its libraries");

    /* 2. get_caps(cuda) */
    kh_caps c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    CHECK(b.api->get_caps(KH_DEVICE_CUDA, &c) == KH_OK, "get_caps(cuda)");
    CHECK(c.note[0] != 0, "a note explains the CUDA kind");
    printf("get_caps(cuda): available=%d note=\"%s\"\n", c.available, c.note);
    uint32_t layout = strcmp(plugin, "cntk") ? KH_LAYOUT_NHWC : KH_LAYOUT_NCHW; /* cntk is NCHW on every device */
    CHECK(c.image_layout == layout, "%s on the GPU too", layout == KH_LAYOUT_NCHW ? "NCHW" : "NHWC");
    CHECK(c.layer_kinds & (1u << KH_LAYER_BILSTM), "BiLSTM listed");
    const char *gh = getenv("KHOST_TEST_GPU_HALF");
    if (gh && !strcmp(gh, "1")) {
        CHECK(strstr(c.note, tr->gpu_half) == NULL, "the GPU half did not load: %s", c.note);
        CHECK(kh_test_mapped(tr->gpu_half) > 0, "get_caps(cuda) did not load the GPU half");
    }

    /* 3. open(cuda:0) */
    kh_bsession *s = open_kind(&b, KH_DEVICE_CUDA, err, sizeof err, &st);
    if (!c.available) {
        char want[64];
        snprintf(want, sizeof want, "%s open on cuda:0", plugin);
        CHECK(st == KH_ERR_UNSUPPORTED && s == NULL, "open cuda:0 where unavailable: status %d", (int)st);
        CHECK(strstr(err, want) != NULL, "open error names the device: %s", err);
        printf("open cuda:0: %s\n", err);
    } else {
        CHECK(st == KH_OK && s != NULL, "open cuda:0: %s", err);
        if (s) {
            char env[512] = "";
            CHECK(b.api->environment(s, env, sizeof env) == KH_OK, "cuda:0 environment");
            for (int k = 0; k < 3 && tr->cuda_env_keys[k]; k++)
                CHECK(strstr(env, tr->cuda_env_keys[k]) != NULL, "environment names %s: %s", tr->cuda_env_keys[k], env);
            printf("cuda:0 environment: %s\n", env);
            b.api->close(s);
        }
    }

    /* 4. the cpu still trains beside it, in a session opened after the refusal too */
    if (b.s) {
        cpu_trains(&b, &dense_sp);
        b.api->close(b.s);
        b.s = open_kind(&b, KH_DEVICE_CPU, err, sizeof err, &st);
        CHECK(st == KH_OK && b.s, "open cpu beside cuda: %s", err);
        if (b.s) cpu_trains(&b, &dense_sp);
    }
    kb_unload(&b);
    return kh_test_finish("test_backend_caps");
}
