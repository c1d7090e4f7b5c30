/* tests/tensorflow/test_tf_patches.c — tensorflow's Conv2D forward over patches packed from the image
 * (plugins/tensorflow/tf_ops_cpu_patches.c) against the kit's float64 convolution: the CNN models' layers, a
 * batch whose last block and last tile are partial, tiles that span two samples, 'same' padding (zeros packed
 * for the taps outside), an even window padded on one side only, strides, and blocks split into ranges as the
 * pool splits them. Compiled with the plugin's own flags (-march=native where the build uses it). */
#include <math.h>
#include <stdlib.h>

#include "khost/kit/gemm_tile.h"
#include "khost/kit/ref.h"
#include "testutil.h"
#include "tf_ops_cpu_patches.h"

static void check(const char *name, int64_t n, int64_t H, int64_t W, int64_t C, int64_t KH, int64_t F, int64_t S,
                  int same) {
    kh_conv2d_dims d;
    CHECK(kh_conv2d_geometry(&d, n, H, W, C, KH, KH, F, S, S, same) == KH_OK, "%s: geometry", name);
    int64_t K = KH * KH * C, in = n * H * W * C, out = n * d.OH * d.OW * F, blocks = tf_patches_blocks(&d, n);
    CHECK(tf_patches_fit(&d, tf_patches_floats(&d)), "%s: the contraction does not take it", name);
    float *x = malloc(sizeof(float) * (size_t)in), *w = malloc(sizeof(float) * (size_t)(K * F));
    float *y = malloc(sizeof(float) * (size_t)out), *scratch = malloc(sizeof(float) * (size_t)tf_patches_floats(&d));
    double *xd = malloc(sizeof(double) * (size_t)in), *wd = malloc(sizeof(double) * (size_t)(K * F));
    double *yd = malloc(sizeof(double) * (size_t)out);
    int ok = x && w && y && scratch && xd && wd && yd;
    CHECK(ok, "%s: out of memory", name);
    if (ok) {
        uint64_t r = 99;
        for (int64_t i = 0; i < in; i++)
            xd[i] = x[i] = (float)((double)((r = r * 6364136223846793005ull + 1442695040888963407ull) >> 40) / 8388608.0 - 1.0);
        for (int64_t i = 0; i < K * F; i++)
            wd[i] = w[i] = (float)((double)((r = r * 6364136223846793005ull + 1442695040888963407ull) >> 40) / 8388608.0 - 1.0);
        for (int64_t i = 0; i < out; i++) y[i] = NAN; /* every output must be written */
        kh_ref_conv2d_forward(yd, xd, wd, NULL, &d, 0);
        int64_t mid = blocks / 2; /* two ranges, as two threads would take them */
        tf_patches_conv(&d, x, w, y, n, 0, mid, scratch);
        tf_patches_conv(&d, x, w, y, n, mid, blocks, scratch);
        double mx = 1e-30, err = 0.0;
        int64_t at = 0;
        for (int64_t i = 0; i < out; i++) mx = fabs(yd[i]) > mx ? fabs(yd[i]) : mx;
        for (int64_t i = 0; i < out; i++)
            if (!(fabs(y[i] - yd[i]) <= err)) err = fabs(y[i] - yd[i]), at = i;
        CHECK(err / mx < 1e-5, "%s: output element %lld off by %.3g (relative)", name, (long long)at, err / mx);
    }
    free(x), free(w), free(y), free(scratch), free(xd), free(wd), free(yd);
}

int main(void) {
    check("mnist_cnn conv2", 5, 26, 26, 32, 3, 64, 1, 0);
    check("mnist_cnn conv1 (one channel)", 3, 28, 28, 1, 3, 32, 1, 0);
    check("cifar10_cnn conv1 (same, 3 channels)", 3, 32, 32, 3, 3, 32, 1, 1);
    check("cifar10_cnn conv4", 3, 14, 14, 64, 3, 64, 1, 0);
    check("tiles across samples, partial last tile (5x5 same)", 7, 5, 5, 4, 3, KH_TILE_NR, 1, 1);
    check("even window, padding after only", 2, 6, 6, 3, 2, 2 * KH_TILE_NR, 1, 1);
    check("stride 2 same", 3, 9, 9, 5, 3, KH_TILE_NR, 2, 1);
    check("one output row", 1, 3, 3, 2, 3, KH_TILE_NR, 1, 0);
    return kh_test_finish("test_tf_patches");
}
