/* tests/tensorflow_gpu/test_tf_gpu_caps.c — the tensorflow module's CUDA device kind as seen on ANY machine
 * (ctest label "tensorflow"): the module loads (no link-time libcuda.so.1: the CUDA runtime is static, or the
 * stub of a build without CUDA), get_caps(cuda) answers with a reason when it cannot run there, open(cuda:0)
 * then fails cleanly with a message naming the device, and the cpu keeps training beside it (where the build
 * has a cpu path). Where a GPU is usable the same test opens it and checks the environment string instead. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "tf_gpu_testlib.h"

int main(void) {
    kb_backend b;
    tfg_load_module(&b);
    kh_caps c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    CHECK(b.api->get_caps(KH_DEVICE_CUDA, &c) == KH_OK, "get_caps(cuda)");
    CHECK(c.note[0] != 0, "a note explains the CUDA kind");
    printf("get_caps(cuda): available=%d note=\"%s\"\n", c.available, c.note);
    CHECK(c.image_layout == KH_LAYOUT_NHWC, "NHWC on the GPU too");
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
        CHECK(strstr(err, TFG_PLUGIN " open on cuda:0") != NULL, "open error names the device: %s", err);
        printf("open cuda:0: %s\n", err);
    } else {
        CHECK(st == KH_OK && s != NULL, "open cuda:0: %s", err);
        if (s) {
            char env[512];
            CHECK(b.api->environment(s, env, sizeof env) == KH_OK && strstr(env, "cudnn=") && strstr(env, "cublas=") &&
                      strstr(env, "device="),
                  "environment: %s", env);
            printf("cuda:0 environment: %s\n", env);
            b.api->close(s);
        }
    }

    /* the cpu still trains beside it, where this build has a cpu path (the GPU machine has no BLAS: the CUDA
     * part above must be tested there all the same) */
    kh_caps cc;
    memset(&cc, 0, sizeof cc);
    cc.struct_size = sizeof cc;
    CHECK(b.api->get_caps(KH_DEVICE_CPU, &cc) == KH_OK, "get_caps(cpu)");
    b.s = cc.available ? tfg_open_cpu(&b, 1) : NULL;
    if (!cc.available) printf("cpu part not run: %s\n", cc.note);
    CHECK(!cc.available || b.s != NULL, "open cpu");
    if (b.s) {
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
        b.api->close(b.s);
    }
    tfg_unload(&b);
    return kh_test_finish("test_tf_gpu_caps (" TFG_PLUGIN ")");
}
