/* tests/theano_rt/test_theano_pool.c — th_maxpool against a scalar reference: values, and every gradient to
 * the first maximum of its window in row-major order (windows full of ties: the inputs are small integers),
 * with overlapping windows (3x3 stride 2), padded windows ('same', a window partly in the padding), and more
 * channels than one pass keeps (TH_POOL_CH + 6). The reference is the kit's (kh_ref_maxpool2d_*). */
#include <stdlib.h>
#include <string.h>

#include "khost/kit/ref.h"
#include "testutil.h"
#include "th_rt.h"

/* the kit's float64 reference pooling (first maximum of each window, row-major) over the same geometry; every
 * value here is a small integer or half-integer sum, so float and double agree exactly */
static kh_conv2d_dims ref_dims(const th_conv *g, int64_t n) {
    return (kh_conv2d_dims){.B = n, .H = g->H, .W = g->W, .C = g->C, .KH = g->KH, .KW = g->KW, .OC = g->C,
                            .SH = g->SH, .SW = g->SW, .OH = g->OH, .OW = g->OW, .pad_top = g->PT, .pad_left = g->PL};
}

static void ref_pool(const th_conv *g, const float *x, float *y, int64_t n, int grad, const float *dy, float *dx) {
    kh_conv2d_dims d = ref_dims(g, n);
    int64_t in = n * g->H * g->W * g->C, out = n * g->OH * g->OW * g->C;
    double *xd = malloc(sizeof(double) * (size_t)in), *io = malloc(sizeof(double) * (size_t)(in > out ? in : out));
    double *dyd = malloc(sizeof(double) * (size_t)out);
    CHECK(xd && io && dyd, "reference: out of memory");
    if (xd && io && dyd) {
        for (int64_t i = 0; i < in; i++) xd[i] = x[i];
        if (!grad) {
            kh_ref_maxpool2d_forward(io, xd, &d);
            for (int64_t i = 0; i < out; i++) y[i] = (float)io[i];
        } else {
            for (int64_t i = 0; i < out; i++) dyd[i] = dy[i];
            kh_ref_maxpool2d_backward(io, dyd, xd, &d);
            for (int64_t i = 0; i < in; i++) dx[i] = (float)io[i];
        }
    }
    free(xd), free(io), free(dyd);
}

static void check(const char *name, th_conv g) {
    const int64_t n = 3, in = n * g.H * g.W * g.C, out = n * g.OH * g.OW * g.C;
    float *x = malloc(sizeof(float) * (size_t)in), *dx = malloc(sizeof(float) * (size_t)in);
    float *dx_ref = malloc(sizeof(float) * (size_t)in), *y = malloc(sizeof(float) * (size_t)out);
    float *y_ref = malloc(sizeof(float) * (size_t)out), *dy = malloc(sizeof(float) * (size_t)out);
    CHECK(x && dx && dx_ref && y && y_ref && dy, "%s: out of memory", name);
    if (!(x && dx && dx_ref && y && y_ref && dy)) return;
    uint64_t r = 12345;
    for (int64_t i = 0; i < in; i++) x[i] = (float)((r = r * 6364136223846793005ull + 1442695040888963407ull) >> 61);
    for (int64_t i = 0; i < out; i++) dy[i] = (float)(i % 13) + 0.5f; /* distinct enough to see where each went */
    th_rt_ctx c = {.threads = 1};
    th_maxpool(&c, &g, x, y, n, 0, NULL, NULL);
    ref_pool(&g, x, y_ref, n, 0, NULL, NULL);
    CHECK(memcmp(y, y_ref, sizeof(float) * (size_t)out) == 0, "%s: pooled values differ from the reference", name);
    th_maxpool(&c, &g, x, NULL, n, 1, dy, dx);
    ref_pool(&g, x, NULL, n, 1, dy, dx_ref);
    int64_t bad = -1;
    for (int64_t i = 0; i < in && bad < 0; i++)
        if (dx[i] != dx_ref[i]) bad = i;
    CHECK(bad < 0, "%s: gradient at element %lld is %g, want %g (first maximum of its window)", name, (long long)bad,
          bad < 0 ? 0.0 : (double)dx[bad], bad < 0 ? 0.0 : (double)dx_ref[bad]);
    free(x), free(dx), free(dx_ref), free(y), free(y_ref), free(dy);
}

int main(void) {
    /* {H, W, C, KH, KW, F, OH, OW, SH, SW, PT, PL} */
    check("2x2 stride 2", (th_conv){8, 8, 5, 2, 2, 5, 4, 4, 2, 2, 0, 0});
    check("3x3 stride 2 (overlapping)", (th_conv){9, 9, 3, 3, 3, 3, 4, 4, 2, 2, 0, 0});
    check("3x3 stride 1 same (padded)", (th_conv){5, 6, 4, 3, 3, 4, 5, 6, 1, 1, 1, 1});
    check("2x2 stride 2, channels over one pass",
          (th_conv){4, 4, TH_POOL_CH + 6, 2, 2, TH_POOL_CH + 6, 2, 2, 2, 2, 0, 0});
    return kh_test_finish("test_theano_pool");
}
