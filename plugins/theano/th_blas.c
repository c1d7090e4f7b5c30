/* th_blas.c — the BLAS the generated code calls (through th_rt_ctx.sgemm): OpenBLAS's cblas_sgemm with its
 * own threads, as Theano's CPU GEMM ran. Without BLAS the module loads and reports the CPU unavailable. */
#include <stdio.h>
#include <string.h>

#include "th.h"

#ifdef TH_HAVE_BLAS
#include <cblas.h>
#include "khost/kit/blas.h"

int th_blas_available(void) { return 1; }

static void sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                  int ldb, float beta, float *c, int ldc) {
    if (m <= 0 || n <= 0) return;
    cblas_sgemm((enum CBLAS_ORDER)order, (enum CBLAS_TRANSPOSE)ta, (enum CBLAS_TRANSPOSE)tb, m, n, k, alpha, a, lda,
                b, ldb, beta, c, ldc);
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
