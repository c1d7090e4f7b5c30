/* tests/kit/test_sgemm_route.c — kh_sgemm_routed (kit/base/sgemm_route.c): which columns of a row-major SGEMM
 * reach the backend's BLAS when OpenBLAS's AVX-512 small-matrix kernel would allocate, and that the kit's loop
 * computes the rest right (against float64 sums; beta 0 never reads C, which holds NaN). The BLAS here is a
 * plain loop that records the columns it was given; the allocation itself is tests/tensorflow's test_tf_alloc
 * under the SkylakeX and Cooperlake core types. */
#include <math.h>
#include <stdlib.h>

#include "khost/kit/blas.h"
#include "khost/kit/rng.h"
#include "testutil.h"

static int64_t blas_columns_seen;
static void loop_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                       const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    blas_columns_seen = n;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t p = 0; p < k; p++) s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
            c[i * ldc + j] = (float)(alpha * s + (beta == 0.0f ? 0.0 : (double)beta * c[i * ldc + j]));
        }
}

static int corename_calls;
static char *fake_corename(void) {
    static char name[] = "SkylakeX";
    corename_calls++;
    return name;
}

static void check_shape(int64_t m, int64_t n, int64_t k, float alpha, float beta, int small) {
    int64_t lda = k + 3, ldb = n + 5, ldc = n + 2;
    float *a = malloc(sizeof(float) * (size_t)(m * lda)), *b = malloc(sizeof(float) * (size_t)(k * ldb));
    float *c = malloc(sizeof(float) * (size_t)(m * ldc)), *c0 = malloc(sizeof(float) * (size_t)(m * ldc));
    kh_rng r;
    kh_rng_seed(&r, (uint64_t)(m * 131 + n * 7 + k));
    for (int64_t i = 0; i < m * lda; i++) a[i] = (float)(kh_rng_uniform(&r) - 0.5);
    for (int64_t i = 0; i < k * ldb; i++) b[i] = (float)(kh_rng_uniform(&r) - 0.5);
    for (int64_t i = 0; i < m * ldc; i++) c0[i] = c[i] = beta == 0.0f ? NAN : (float)(kh_rng_uniform(&r) - 0.5);
    blas_columns_seen = -1;
    kh_sgemm_routed(loop_sgemm, small, 0, 0, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    int64_t want = kh_sgemm_blas_columns(small, 0, 0, m, n, k);
    CHECK(want == n ? blas_columns_seen == n : blas_columns_seen == (want > 0 ? want : -1),
          "m=%lld n=%lld k=%lld: BLAS given %lld columns, want %lld", (long long)m, (long long)n, (long long)k,
          (long long)blas_columns_seen, (long long)want);
    double worst = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < ldc; j++) {
            if (j >= n) { /* beyond n: untouched */
                CHECK(isnan(c0[i * ldc + j]) ? isnan(c[i * ldc + j]) : c[i * ldc + j] == c0[i * ldc + j], "pad");
                continue;
            }
            double s = 0;
            for (int64_t p = 0; p < k; p++) s += (double)a[i * lda + p] * b[p * ldb + j];
            double ref = alpha * s + (beta == 0.0f ? 0.0 : (double)beta * c0[i * ldc + j]);
            double e = fabs(c[i * ldc + j] - ref) / (1e-6 + fabs(ref) + 1e-3 * sqrt((double)k));
            if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
        }
    CHECK(worst < 1e-4, "m=%lld n=%lld k=%lld alpha=%g beta=%g: worst relative error %g", (long long)m, (long long)n,
          (long long)k, alpha, beta, worst);
    free(a), free(b), free(c), free(c0);
}

int main(void) {
    /* the predicate: no transposes, m*n*k <= 10^6, k >= 32, n % 16 in [1, 8]; only where the kernels allocate */
    CHECK(kh_sgemm_blas_columns(1, 0, 0, 128, 8, 144) == 0, "n = 8 (the conv test's shape): all routed");
    CHECK(kh_sgemm_blas_columns(1, 0, 0, 16, 36, 144) == 32, "n = 36: 32 to BLAS, 4 routed");
    CHECK(kh_sgemm_blas_columns(1, 0, 0, 32, 1, 128) == 0, "Dense(1)");
    CHECK(kh_sgemm_blas_columns(1, 0, 0, 32, 25, 64) == 25, "n %% 16 = 9: the masked path, no allocation");
    CHECK(kh_sgemm_blas_columns(1, 0, 0, 32, 32, 64) == 32, "n %% 16 = 0");
    CHECK(kh_sgemm_blas_columns(1, 0, 0, 32, 8, 31) == 8, "k < 32");
    CHECK(kh_sgemm_blas_columns(1, 1, 0, 32, 8, 64) == 8 && kh_sgemm_blas_columns(1, 0, 1, 32, 8, 64) == 8, "trans");
    CHECK(kh_sgemm_blas_columns(1, 0, 0, 1000, 8, 125) == 0, "m*n*k = 10^6 is small");
    CHECK(kh_sgemm_blas_columns(1, 0, 0, 1000, 8, 126) == 8, "m*n*k > 10^6 is not");
    CHECK(kh_sgemm_blas_columns(0, 0, 0, 128, 8, 144) == 8, "kernels without the small path: all to BLAS");
    CHECK(kh_openblas_small_nn_allocates("SkylakeX") && kh_openblas_small_nn_allocates("cooperlake") &&
          kh_openblas_small_nn_allocates("sapphirerapids"), "AVX-512 core names");
    CHECK(!kh_openblas_small_nn_allocates("Haswell") && !kh_openblas_small_nn_allocates("Zen") &&
          !kh_openblas_small_nn_allocates(NULL), "others");

    /* the cached answer asks OpenBLAS's core name once */
    CHECK(kh_openblas_small_nn_cached(fake_corename) == 1 && kh_openblas_small_nn_cached(fake_corename) == 1 &&
          corename_calls == 1, "cached: %d calls", corename_calls);

    /* the arithmetic of every route: all columns routed, a tail routed, none routed; K over several panels */
    const int64_t shapes[][3] = {{128, 8, 144}, {8, 3, 128}, {5, 5, 144}, {16, 36, 144}, {32, 1, 128},
                                 {7, 24, 600}, {3, 17, 1000}, {33, 40, 32}, {32, 25, 64}, {1, 1, 32}};
    const float ab[][2] = {{1, 0}, {1, 1}, {0.5f, -2}, {-1.5f, 0}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (size_t v = 0; v < sizeof ab / sizeof *ab; v++)
            for (int small = 0; small <= 1; small++)
                check_shape(shapes[s][0], shapes[s][1], shapes[s][2], ab[v][0], ab[v][1], small);
    return kh_test_finish("test_sgemm_route");
}
