/* tests/cntk_gpu/test_cntk_cpu_maps.c — a cpu cell of the cntk module maps none of cuBLAS/cuDNN: the CUDA
 * executor is a second object (cntk-cuda/cntk_cuda.so beside cntk.so) loaded only when the CUDA device kind is
 * first asked for. Opens a cpu session, compiles and trains a small conv model, then reads /proc/self/maps.
 * In a CUDA build it then asks get_caps(cuda) and checks that the GPU half is mapped from then on (the lazy
 * load finds its file) and answers with a note. Skips (exit 77) where the module has no cpu path. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_testlib.h"
#include "testutil.h"

/* How many lines of /proc/self/maps contain needle. */
static int mapped(const char *needle) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, needle)) n++;
    fclose(f);
    return n;
}

int main(void) {
    kb_backend b;
    kb_load(&b, 1); /* skips (77) where the module or its cpu path is missing: nothing to measure then */
    static const kh_layer_spec layers[] = {
        {.kind = KH_LAYER_CONV2D, .units = 4, .kernel = {3, 3}, .activation = KH_ACT_RELU},
        {.kind = KH_LAYER_FLATTEN},
        {.kind = KH_LAYER_DENSE, .units = 3, .activation = KH_ACT_SOFTMAX},
    };
    kh_model_spec sp = {.struct_size = sizeof sp, .name = "maps", .input_dtype = KH_F32, .input_rank = 3,
                        .input_shape = {6, 6, 2}, .n_layers = 3, .layers = layers,
                        .loss = KH_LOSS_CATEGORICAL_CROSSENTROPY, .optimizer = {.kind = KH_OPT_ADAM, .lr = 1e-3f},
                        .n_classes = 3};
    kh_bmodel *m = kb_compile(&b, &sp, 2, 1);
    CHECK(m != NULL, "cpu compile");
    if (m) {
        CHECK(kb_init_weights(&b, m, &sp, 1, NULL) == 0, "cpu weights");
        float x[2 * 6 * 6 * 2];
        kh_rng r;
        kh_rng_seed(&r, 3);
        kb_fill_uniform(x, 2 * 6 * 6 * 2, -1.0f, 1.0f, &r);
        int32_t y[2] = {0, 2};
        int64_t xd[4] = {2, 2, 6, 6}, yd[1] = {2};
        kh_tensor tx = kb_tensor(KH_F32, KH_LAYOUT_NCHW, 4, xd, x), ty = kb_tensor(KH_I32, KH_LAYOUT_NC, 1, yd, y);
        CHECK(b.api->train_batch(m, &tx, &ty) == KH_OK, "cpu train: %s", b.api->last_error(b.s));
    }
    int blas = mapped("libcublas"), dnn = mapped("libcudnn"), half = mapped("cntk_cuda.so");
    printf("after a cpu training step: %d libcublas, %d libcudnn, %d cntk_cuda.so mappings\n", blas, dnn, half);
    CHECK(blas == 0 && dnn == 0 && half == 0, "a cpu session mapped the GPU half or its libraries");
    if (m) b.api->model_free(m);

#ifdef CNTK_TEST_GPU_HALF
    kh_caps c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    CHECK(b.api->get_caps(KH_DEVICE_CUDA, &c) == KH_OK && c.note[0], "get_caps(cuda)");
    printf("get_caps(cuda): available=%d note=\"%s\"\n", c.available, c.note);
    CHECK(strstr(c.note, "cntk_cuda.so") == NULL, "the GPU half did not load: %s", c.note);
    CHECK(mapped("cntk_cuda.so") > 0, "get_caps(cuda) did not load the GPU half");
#endif
    kb_unload(&b);
    return kh_test_finish("test_cntk_cpu_maps");
}
