/* tests/cntk_gpu/test_cntk_gpu_caps.c — the cntk module's CUDA device kind as seen on ANY machine (ctest
 * label "cntk", runs in CI): the module loads (no link-time libcuda.so.1: the CUDA runtime is static), answers
 * get_caps(cuda) with a reason when it cannot run there, refuses to open cuda:0 cleanly in that case, and the
 * cpu keeps working beside it. Where a GPU is usable the same test opens it and checks the environment string.
 * The CUDA part never depends on the cpu: a build without BLAS (the GPU machine) still tests it. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_testlib.h"
#include "testutil.h"

int main(void) {
    kb_backend b;
    kb_load_module(&b); /* skips only when the module itself is missing */
    kh_caps c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    CHECK(b.api->get_caps(KH_DEVICE_CUDA, &c) == KH_OK, "get_caps(cuda)");
    CHECK(c.note[0] != 0, "a note explains the CUDA kind");
    printf("get_caps(cuda): available=%d note=\"%s\"\n", c.available, c.note);
    CHECK(c.image_layout == KH_LAYOUT_NCHW, "NCHW on the GPU too");
    CHECK(c.layer_kinds & (1u << KH_LAYER_BILSTM), "BiLSTM listed");

    kh_device dev;
    memset(&dev, 0, sizeof dev);
    dev.struct_size = sizeof dev;
    dev.kind = KH_DEVICE_CUDA;
    dev.ordinal = 0;
    snprintf(dev.id, sizeof dev.id, "cuda:0");
    char err[512] = "";
    kh_bsession *s = NULL;
    kh_status st = b.api->open(kb_host(), &dev, &s, err, sizeof err);
    if (!c.available) {
        CHECK(st == KH_ERR_UNSUPPORTED && s == NULL, "open cuda:0 where unavailable: status %d", (int)st);
        CHECK(strstr(err, "cntk open on cuda:0") != NULL, "open error names the device: %s", err);
        printf("open cuda:0: %s\n", err);
    } else {
        CHECK(st == KH_OK && s != NULL, "open cuda:0: %s", err);
        if (s) {
            char env[512];
            CHECK(b.api->environment(s, env, sizeof env) == KH_OK && strstr(env, "cudnn="), "environment: %s", env);
            printf("cuda:0 environment: %s\n", env);
            b.api->close(s);
        }
    }

    /* the cpu still trains beside it, where this build has a cpu path */
    if (!kb_cpu_caps()->available) {
        printf("cpu part not run: %s\n", kb_cpu_caps()->note);
        kb_unload(&b);
        return kh_test_finish("test_cntk_gpu_caps");
    }
    kh_device cpu;
    memset(&cpu, 0, sizeof cpu);
    cpu.struct_size = sizeof cpu;
    cpu.kind = KH_DEVICE_CPU;
    cpu.ordinal = -1;
    cpu.threads = 1;
    snprintf(cpu.id, sizeof cpu.id, "cpu");
    st = b.api->open(kb_host(), &cpu, &b.s, err, sizeof err);
    CHECK(st == KH_OK, "open cpu beside cuda: %s", err);
    if (st != KH_OK) {
        b.s = NULL;
        kb_unload(&b);
        return kh_test_finish("test_cntk_gpu_caps");
    }
    const kh_layer_spec l = {.kind = KH_LAYER_DENSE, .units = 3, .activation = KH_ACT_SOFTMAX};
    kh_model_spec sp = {.struct_size = sizeof sp, .name = "tiny", .input_dtype = KH_F32, .input_rank = 1,
                        .input_shape = {4}, .n_layers = 1, .layers = &l, .loss = KH_LOSS_CATEGORICAL_CROSSENTROPY,
                        .optimizer = {.kind = KH_OPT_ADAM, .lr = 1e-3f}, .n_classes = 3};
    kh_bmodel *m = kb_compile(&b, &sp, 4, 1);
    CHECK(m != NULL, "cpu compile");
    if (m) {
        CHECK(kb_init_weights(&b, m, &sp, 1, NULL) == 0, "cpu weights");
        float x[8] = {1, 2, 3, 4, -1, 0, 1, 0};
        int32_t y[2] = {0, 2};
        int64_t xd[2] = {2, 4}, yd[1] = {2};
        kh_tensor tx = kb_tensor(KH_F32, KH_LAYOUT_NC, 2, xd, x), ty = kb_tensor(KH_I32, KH_LAYOUT_NC, 1, yd, y);
        CHECK(b.api->train_batch(m, &tx, &ty) == KH_OK, "cpu train: %s", b.api->last_error(b.s));
        kh_metrics met;
        CHECK(b.api->read_metrics(m, KH_PHASE_TRAIN, &met, 1) == KH_OK && met.samples == 2, "cpu metrics");
        b.api->model_free(m);
    }
    kb_unload(&b);
    return kh_test_finish("test_cntk_gpu_caps");
}
