/* tests/theano_rt/test_theano_conv.c — theano's convolution helpers (th_conv2d, th_conv2d_bwd_input,
 * th_conv2d_bwd_filter) against the kit's float64 reference: the implicit-GEMM paths (th_rt_igemm.h) on the
 * two CNN models' geometries, 'same' padding (taps in the zero run), pixel counts that leave a partial tile,
 * filter counts that leave a partial filter tile, strides, and the im2col + BLAS paths where the tile does
 * not fit. Two parts for the filter gradient, so the gather of per-thread partial sums is covered. Built twice:
 * with the project's flags and with -march=native, the flags theano's generated code is compiled with. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/ref.h"
#include "testutil.h"
#include "th_rt.h"

static void sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                  const float *b, int ldb, float beta, float *c, int ldc) {
    cblas_sgemm((CBLAS_ORDER)order, (CBLAS_TRANSPOSE)ta, (CBLAS_TRANSPOSE)tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
                ldc);
}

static float frand(uint64_t *r) {
    *r = *r * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*r >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

/* largest |got - want| relative to the largest |want| (float32 sums of a few hundred products) */
static double rel_err(const float *got, const double *want, int64_t len, int64_t *at) {
    double mx = 1e-30, err = 0.0;
    for (int64_t i = 0; i < len; i++) mx = fabs(want[i]) > mx ? fabs(want[i]) : mx;
    *at = 0;
    for (int64_t i = 0; i < len; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= err)) err = e, *at = i; /* a NaN is the worst error */
    }
    return err / mx;
}

enum { FUSED_FWD = 1, FUSED_BWD_INPUT = 2, FUSED_BWD_FILTER = 4 };

static void check(const char *name, int64_t H, int64_t W, int64_t C, int64_t KH, int64_t KW, int64_t F, int64_t S,
                  int same, int want_fused) {
    const int64_t n = 3;
    kh_conv2d_dims d;
    CHECK(kh_conv2d_geometry(&d, n, H, W, C, KH, KW, F, S, S, same) == KH_OK, "%s: geometry", name);
    th_conv g = {H, W, C, KH, KW, F, d.OH, d.OW, S, S, d.pad_top, d.pad_left};
    int64_t K = KH * KW * C, in = n * H * W * C, out = n * d.OH * d.OW * F, wn = K * F;
    th_rt_ctx c = {.threads = 2, .sgemm = sgemm, .scratch_stride = d.OH * d.OW * K + K * F};
    int fused = (th_igemm_fits_fwd(&g, c.scratch_stride) ? FUSED_FWD : 0) |
                (th_igemm_fits_bwd_input(&g, c.scratch_stride) ? FUSED_BWD_INPUT : 0) |
                (th_igemm_fits_bwd_filter(&g, c.scratch_stride) ? FUSED_BWD_FILTER : 0);
    CHECK((fused & want_fused) == want_fused, "%s: implicit-GEMM paths %d, expected at least %d", name, fused,
          want_fused);
    float *x = malloc(sizeof(float) * (size_t)in), *w = malloc(sizeof(float) * (size_t)wn);
    float *y = malloc(sizeof(float) * (size_t)out), *dy = malloc(sizeof(float) * (size_t)out);
    float *dx = malloc(sizeof(float) * (size_t)in), *dw = malloc(sizeof(float) * (size_t)wn);
    double *xd = malloc(sizeof(double) * (size_t)in), *wd = malloc(sizeof(double) * (size_t)wn);
    double *yd = malloc(sizeof(double) * (size_t)out), *dyd = malloc(sizeof(double) * (size_t)out);
    double *dxd = malloc(sizeof(double) * (size_t)in), *dwd = calloc((size_t)wn, sizeof(double));
    c.scratch = malloc(sizeof(float) * (size_t)(c.threads * c.scratch_stride));
    int ok = x && w && y && dy && dx && dw && xd && wd && yd && dyd && dxd && dwd && c.scratch;
    CHECK(ok, "%s: out of memory", name);
    if (ok) {
        uint64_t r = 777;
        for (int64_t i = 0; i < in; i++) xd[i] = x[i] = frand(&r);
        for (int64_t i = 0; i < wn; i++) wd[i] = w[i] = frand(&r);
        for (int64_t i = 0; i < out; i++) dyd[i] = dy[i] = frand(&r);
        for (int64_t i = 0; i < in; i++) dx[i] = NAN; /* every element must be written */
        for (int64_t i = 0; i < wn; i++) dw[i] = NAN;
        kh_ref_conv2d_forward(yd, xd, wd, NULL, &d, 0);
        CHECK(kh_ref_conv2d_backward(dxd, dwd, NULL, dyd, yd, xd, wd, &d, 0) == KH_OK, "%s: reference", name);
        th_conv2d(&c, &g, x, w, y, n);
        th_conv2d_bwd_input(&c, &g, w, dy, dx, n);
        th_conv2d_bwd_filter(&c, &g, x, dy, dw, n);
        int64_t at;
        double e;
        CHECK((e = rel_err(y, yd, out, &at)) < 1e-5, "%s: forward element %lld off by %.3g (relative; paths %d)",
              name, (long long)at, e, fused);
        CHECK((e = rel_err(dx, dxd, in, &at)) < 1e-5,
              "%s: input gradient element %lld off by %.3g (relative; paths %d)", name, (long long)at, e, fused);
        CHECK((e = rel_err(dw, dwd, wn, &at)) < 1e-5,
              "%s: filter gradient element %lld off by %.3g (relative; paths %d)", name, (long long)at, e, fused);
    }
    free(x), free(w), free(y), free(dy), free(dx), free(dw), free(xd), free(wd), free(yd), free(dyd), free(dxd);
    free(dwd), free(c.scratch);
}

int main(void) {
    const int all = FUSED_FWD | FUSED_BWD_INPUT | FUSED_BWD_FILTER;
    /* the models' layers: mnist_cnn conv2, cifar10_cnn conv2..conv4 ('same' and valid), the first layers */
    check("mnist_cnn conv2 (26x26x32, 64 filters)", 26, 26, 32, 3, 3, 64, 1, 0, all);
    check("cifar10_cnn conv3 (same, 16x16x32, 64 filters)", 16, 16, 32, 3, 3, 64, 1, 1, all);
    check("cifar10_cnn conv4 (14x14x64, 64 filters)", 14, 14, 64, 3, 3, 64, 1, 0, all);
    check("cifar10_cnn conv1 (same, 3 channels)", 32, 32, 3, 3, 3, 32, 1, 1, FUSED_FWD);
    check("mnist_cnn conv1 (1 channel)", 28, 28, 1, 3, 3, 32, 1, 0, FUSED_FWD);
    /* edges: a partial pixel tile, a partial filter tile, an even window's one-sided padding, a stride */
    check("7x5 same, partial pixel tile", 7, 5, TH_NR, 3, 3, TH_NR, 1, 1, all);
    check("2x2 same (padding only after)", 5, 5, TH_NR, 2, 2, 2 * TH_NR, 1, 1, all);
    check("10 filters (partial filter tile; forward on BLAS)", 6, 6, TH_NR, 3, 3, 10, 1, 1,
          FUSED_BWD_INPUT | FUSED_BWD_FILTER);
    check("stride 2 same (input gradient on BLAS)", 9, 8, TH_NR, 3, 3, TH_NR, 2, 1, FUSED_FWD | FUSED_BWD_FILTER);
    check("5x5 stride 3 valid", 13, 11, TH_NR, 5, 5, TH_NR, 3, 0, FUSED_FWD | FUSED_BWD_FILTER);
    check("38 output rows (the filter gradient's rows in chunks)", 40, 9, TH_NR, 3, 3, TH_NR, 1, 0, all);
    check("channels off the tile (BLAS everywhere)", 6, 6, 5, 3, 3, 7, 1, 1, 0);
    return kh_test_finish(TEST_NAME);
}
