/* tests/tensorflow/test_tf_patches.c — tensorflow's Conv2D forward and its two gradients over patches packed from
 * the image (plugins/tensorflow/tf_ops_cpu_patches.c) against the kit's float64 convolution: the CNN models'
 * layers, a batch whose last block and last tile are partial, tiles that span two samples, 'same' padding (zeros
 * packed for the taps outside; runs clipped at the edges for the kernel gradient), an even window padded on one
 * side only, strides, filter counts that leave a partial tile, and blocks or samples split into ranges as the
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

static void fill(float *f, double *d, int64_t n, uint64_t *r) {
    for (int64_t i = 0; i < n; i++)
        d[i] = f[i] = (float)((double)((*r = *r * 6364136223846793005ull + 1442695040888963407ull) >> 40) / 8388608.0 - 1.0);
}

/* the largest relative difference of got from want (relative to want's largest magnitude); *at its index */
static double rel_err(const float *got, const double *want, int64_t n, int64_t *at) {
    double mx = 1e-30, err = 0.0;
    for (int64_t i = 0; i < n; i++) mx = fabs(want[i]) > mx ? fabs(want[i]) : mx;
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= err)) err = fabs(got[i] - want[i]), *at = i;
    return err / mx;
}

/* Both gradients of one layer: the input gradient over blocks in two ranges, the kernel gradient's transpose
 * accumulated over two ranges of samples (as two parts would) onto a non-zero start. */
static void check_grads(const char *name, int64_t n, int64_t H, int64_t W, int64_t C, int64_t KH, int64_t F,
                        int same) {
    kh_conv2d_dims d, t;
    CHECK(kh_conv2d_geometry(&d, n, H, W, C, KH, KH, F, 1, 1, same) == KH_OK, "%s: geometry", name);
    CHECK(tf_patches_input_grad_dims(&d, &t), "%s: no input-gradient geometry", name);
    int64_t K = KH * KH * C, in = n * H * W * C, out = n * d.OH * d.OW * F, scratch_n = tf_patches_floats(&t);
    CHECK(tf_patches_input_grad_fit(&d, scratch_n) && tf_patches_filter_grad_fit(&d),
          "%s: the contractions do not take it", name);
    float *x = malloc(sizeof(float) * (size_t)in), *w = malloc(sizeof(float) * (size_t)(K * F));
    float *dy = malloc(sizeof(float) * (size_t)out), *dx = malloc(sizeof(float) * (size_t)in);
    if (tf_patches_filter_grad_floats(&d) > scratch_n) scratch_n = tf_patches_filter_grad_floats(&d);
    float *dwt = malloc(sizeof(float) * (size_t)(K * F)), *scratch = malloc(sizeof(float) * (size_t)scratch_n);
    double *xd = malloc(sizeof(double) * (size_t)in), *wd = malloc(sizeof(double) * (size_t)(K * F));
    double *dyd = malloc(sizeof(double) * (size_t)out), *dxd = malloc(sizeof(double) * (size_t)in);
    double *dwd = calloc((size_t)(K * F), sizeof(double));
    int ok = x && w && dy && dx && dwt && scratch && xd && wd && dyd && dxd && dwd;
    CHECK(ok, "%s: out of memory", name);
    if (ok) {
        uint64_t r = 7;
        fill(x, xd, in, &r), fill(w, wd, K * F, &r), fill(dy, dyd, out, &r);
        for (int64_t i = 0; i < in; i++) dx[i] = NAN; /* every input gradient must be written */
        CHECK(kh_ref_conv2d_backward(dxd, dwd, NULL, dyd, dyd, xd, wd, &d, KH_ACT_LINEAR) == KH_OK, "%s: ref", name);
        int64_t blocks = tf_patches_blocks(&t, n), mid = blocks / 2, at = 0;
        tf_patches_input_grad(&d, dy, w, dx, n, 0, mid, scratch);
        tf_patches_input_grad(&d, dy, w, dx, n, mid, blocks, scratch);
        double e = rel_err(dx, dxd, in, &at);
        CHECK(e < 1e-5, "%s: input gradient element %lld off by %.3g (relative)", name, (long long)at, e);
        /* dwt starts at 1 and takes the samples in two ranges: 1 + the gradient, transposed */
        for (int64_t i = 0; i < K * F; i++) dwt[i] = 1.0f;
        tf_patches_filter_grad(&d, x, dy, dwt, 0, n / 2, scratch);
        tf_patches_filter_grad(&d, x, dy, dwt, n / 2, n, scratch);
        double mx = 1e-30, err = 0.0;
        for (int64_t i = 0; i < K * F; i++) mx = fabs(dwd[i]) > mx ? fabs(dwd[i]) : mx;
        for (int64_t k = 0; k < K; k++)
            for (int64_t f = 0; f < F; f++) {
                double diff = fabs(dwt[f * K + k] - 1.0 - dwd[k * F + f]);
                if (!(diff <= err)) err = diff, at = k * F + f;
            }
        CHECK(err / mx < 1e-5, "%s: kernel gradient element %lld off by %.3g (relative)", name, (long long)at, err / mx);
    }
    free(x), free(w), free(dy), free(dx), free(dwt), free(scratch), free(xd), free(wd), free(dyd), free(dxd), free(dwd);
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
    check_grads("mnist_cnn conv2 gradients", 5, 26, 26, 32, 3, 64, 0);
    check_grads("cifar10_cnn conv2 gradients (same)", 3, 32, 32, 32, 3, 32, 1);
    check_grads("cifar10_cnn conv4 gradients", 3, 14, 14, 64, 3, 64, 0);
    check_grads("gradients, even window padded after only, 10 filters (a partial tile)", 2, 6, 6, KH_TILE_NR, 2, 10, 1);
    check_grads("gradients, 5x5 same on a 3x3 image (taps wholly outside)", 2, 3, 3, KH_TILE_NR, 5, 7, 1);
    check_grads("gradients, one sample, one output row", 1, 3, 5, 2 * KH_TILE_NR, 3, 6, 0);
    kh_conv2d_dims s2, t2;
    CHECK(kh_conv2d_geometry(&s2, 2, 9, 9, KH_TILE_NR, 3, 3, 8, 2, 2, 1) == KH_OK, "stride 2 geometry");
    CHECK(!tf_patches_input_grad_dims(&s2, &t2) && !tf_patches_filter_grad_fit(&s2),
          "stride 2: the gradient contractions must leave it to im2col");
    kh_conv2d_dims c3;
    CHECK(kh_conv2d_geometry(&c3, 2, 8, 8, 3, 3, 3, 32, 1, 1, 1) == KH_OK && !tf_patches_filter_grad_fit(&c3) &&
              !tf_patches_input_grad_fit(&c3, 1 << 30),
          "3 channels: the gradient contractions must leave it to im2col");
    return kh_test_finish("test_tf_patches");
}
