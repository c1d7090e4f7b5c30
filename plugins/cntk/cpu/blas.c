/* cpu/blas.c — the one place that talks to the vendor BLAS (OpenBLAS through CBLAS).
 *
 * Without BLAS (KHOST_HAVE_BLAS undefined) the module still builds and loads: get_caps reports the CPU
 * device unavailable and open() refuses it, so the naive loop below only keeps the code linkable.
 */
#include <stdio.h>
#include <string.h>

#include "cpu/cpu.h"

#ifdef CNTK_HAVE_BLAS
#include <cblas.h>
#include "khost/kit/blas.h"
#include "khost/kit/cblas_sgemm.h"

int cntk_blas_available(void) { return 1; }

/* OpenBLAS's small-matrix path allocates on its AVX-512 kernels: those shapes' last columns take the kit's loop */
void cntk_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    kh_sgemm_routed(kh_cblas_sgemm, kh_openblas_small_nn_cached(openblas_get_corename), trans_a, trans_b, m, n,
                    k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void cntk_blas_set_threads(int n) {
    if (n >= 1 && openblas_get_num_threads() != n) openblas_set_num_threads(n);
}

const char *cntk_blas_version(char *buf, size_t n) {
    return kh_openblas_describe(openblas_get_config(), openblas_get_corename(), buf, n);
}

#else

int cntk_blas_available(void) { return 0; }

void cntk_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float acc = 0;
            for (int64_t p = 0; p < k; p++) {
                float av = trans_a ? a[p * lda + i] : a[i * lda + p];
                float bv = trans_b ? b[j * ldb + p] : b[p * ldb + j];
                acc += av * bv;
            }
            c[i * ldc + j] = alpha * acc + (beta == 0.0f ? 0.0f : beta * c[i * ldc + j]);
        }
}

void cntk_blas_set_threads(int n) { (void)n; }
const char *cntk_blas_version(char *buf, size_t n) {
    snprintf(buf, n, "none");
    return buf;
}

#endif
