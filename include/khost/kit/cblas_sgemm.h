/* khost/kit/cblas_sgemm.h — the row-major SGEMM of khost/kit/blas.h (kh_sgemm_fn) over CBLAS, for a module that
 * links a CBLAS (OpenBLAS): include it where <cblas.h> is available. Header-only, because the kit links no BLAS. */
#ifndef KHOST_KIT_CBLAS_SGEMM_H
#define KHOST_KIT_CBLAS_SGEMM_H

#include <cblas.h>
#include <stdint.h>

static inline void kh_cblas_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                                  const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                                  int64_t ldc) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (blasint)m,
                (blasint)n, (blasint)k, alpha, a, (blasint)lda, b, (blasint)ldb, beta, c, (blasint)ldc);
}

#endif
