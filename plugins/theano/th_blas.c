/* th_blas.c — the BLAS the generated code calls (through th_rt_ctx.sgemm): OpenBLAS's cblas_sgemm with its
 * own threads, as Theano's CPU GEMM ran. Without BLAS the module loads and reports the CPU unavailable. */
#include <stdio.h>
#include <string.h>

#include "th.h"

#ifdef TH_HAVE_BLAS
#include <cblas.h>
#include "khost/kit/blas.h"
#include "khost/kit/cblas_sgemm.h"

int th_blas_available(void) { return 1; }

/* The generated code's calls, row-major (101) as it emits them; column-major (102) is the transposed product.
 * OpenBLAS's small-matrix path allocates on its AVX-512 kernels: those shapes' last columns take the kit's loop. */
static void sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                  int ldb, float beta, float *c, int ldc) {
    int small = kh_openblas_small_nn_cached(openblas_get_corename);
    if (order == CblasColMajor)
        kh_sgemm_routed(kh_cblas_sgemm, small, tb != CblasNoTrans, ta != CblasNoTrans, n, m, k, alpha, b, ldb, a, lda,
                        beta, c, ldc);
    else
        kh_sgemm_routed(kh_cblas_sgemm, small, ta != CblasNoTrans, tb != CblasNoTrans, m, n, k, alpha, a, lda, b, ldb,
                        beta, c, ldc);
}

th_sgemm_fn th_blas_sgemm(void) { return sgemm; }

void th_blas_threads(int threads) {
    if (openblas_get_num_threads() != threads) openblas_set_num_threads(threads);
}

const char *th_blas_version(char *buf, size_t n) {
    return kh_openblas_describe(openblas_get_config(), openblas_get_corename(), buf, n);
}
#else
int th_blas_available(void) { return 0; }
th_sgemm_fn th_blas_sgemm(void) { return NULL; }
void th_blas_threads(int threads) { (void)threads; }
const char *th_blas_version(char *buf, size_t n) {
    snprintf(buf, n, "none");
    return buf;
}
#endif
