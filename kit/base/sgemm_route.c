/* kit/base/sgemm_route.c — an SGEMM that never reaches OpenBLAS's allocating small-matrix path.
 *
 * OpenBLAS (0.3.21 and every later release checked) runs a product with m*n*k <= 10^6 through its AVX-512
 * "small matrix" kernels on the SkylakeX, Cooperlake and SapphireRapids core types. Their no-transpose kernel
 * (column-major) covers M in blocks of 16 rows and, when 1 to 8 rows remain and K >= 32, copies those rows into
 * a buffer it mallocs and frees on that call. Row-major C = A B is that kernel with M = n, so the columns
 * [0, n - n % 16) go to OpenBLAS (its 16-row blocks, no remainder) and the last n % 16 columns to the loop
 * below: the step stays allocation-free with OpenBLAS's kernels on everything else. */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <strings.h>

#include "khost/kit/blas.h"

int kh_openblas_small_nn_allocates(const char *corename) {
    if (!corename) return 0;
    return !strcasecmp(corename, "skylakex") || !strcasecmp(corename, "cooperlake") ||
           !strcasecmp(corename, "sapphirerapids");
}

int kh_openblas_small_nn_cached(char *(*corename)(void)) {
    static atomic_int cached = -1; /* one per module: each links its own copy of the kit */
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) { /* threads racing here compute the same answer */
        v = kh_openblas_small_nn_allocates(corename());
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
}

int64_t kh_sgemm_blas_columns(int small_nn_allocates, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k) {
    if (!small_nn_allocates || trans_a || trans_b || k < 32) return n;
    if ((double)m * (double)n * (double)k > 1e6) return n;
    int64_t r = n % 16;
    return r >= 1 && r <= 8 ? n - r : n;
}

/* Columns of B packed per pass: 8 floats (one AVX register) of TAIL_K rows, 8 KiB on the stack. */
#define TAIL_W 8
#define TAIL_K 256

/* C[:, j0:j1) = alpha A B[:, j0:j1) + beta C[:, j0:j1), no transposes, k > 0, TAIL_W columns a pass. */
static void sgemm_nn_columns(int64_t m, int64_t j0, int64_t j1, int64_t k, float alpha, const float *a, int64_t lda,
                             const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    float panel[TAIL_K * TAIL_W];
    for (int64_t j = j0; j < j1; j += TAIL_W) {
        int64_t w = j1 - j < TAIL_W ? j1 - j : TAIL_W;
        for (int64_t p0 = 0; p0 < k; p0 += TAIL_K) {
            int64_t kc = k - p0 < TAIL_K ? k - p0 : TAIL_K;
            for (int64_t p = 0; p < kc; p++)
                for (int64_t q = 0; q < TAIL_W; q++) panel[p * TAIL_W + q] = q < w ? b[(p0 + p) * ldb + j + q] : 0.0f;
            for (int64_t i = 0; i < m; i++) {
                float acc[TAIL_W] = {0};
                const float *ai = a + i * lda + p0;
                for (int64_t p = 0; p < kc; p++)
                    for (int q = 0; q < TAIL_W; q++) acc[q] += ai[p] * panel[p * TAIL_W + q];
                float *ci = c + i * ldc + j;
                for (int64_t q = 0; q < w; q++)
                    ci[q] = p0 > 0 ? ci[q] + alpha * acc[q] : alpha * acc[q] + (beta == 0.0f ? 0.0f : beta * ci[q]);
            }
        }
    }
}

void kh_sgemm_routed(kh_sgemm_fn blas, int small_nn_allocates, int trans_a, int trans_b, int64_t m, int64_t n,
                     int64_t k, float alpha, const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                     float *c, int64_t ldc) {
    if (m <= 0 || n <= 0) return;
    int64_t nb = kh_sgemm_blas_columns(small_nn_allocates, trans_a, trans_b, m, n, k);
    if (nb > 0) blas(trans_a, trans_b, m, nb, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (nb < n) sgemm_nn_columns(m, nb, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
