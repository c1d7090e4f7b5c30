/* tf_blas.c — MatMul's library: OpenBLAS through CBLAS, called single-threaded on whichever pool thread runs
 * the op; big products are split by rows over the pool (tf_sgemm_par) so BLAS never starts threads of its
 * own next to the executor's. Without BLAS the module loads and reports the CPU unavailable. */
#include <stdio.h>
#include <string.h>

#include "tf.h"

#ifdef TF_HAVE_BLAS
#include <cblas.h>
#include "khost/kit/blas.h"
#include "khost/kit/cblas_sgemm.h"

int tf_blas_available(void) { return 1; }

/* OpenBLAS's small-matrix path allocates on its AVX-512 kernels: those shapes' last columns take the kit's loop */
void tf_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
              const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    kh_sgemm_routed(kh_cblas_sgemm, kh_openblas_small_nn_cached(openblas_get_corename), ta, tb, m, n, k, alpha,
                    a, lda, b, ldb, beta, c, ldc);
}

void tf_blas_single_threaded(void) {
    if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

const char *tf_blas_version(char *buf, size_t n) {
    return kh_openblas_describe(openblas_get_config(), openblas_get_corename(), buf, n);
}
#else
int tf_blas_available(void) { return 0; }
void tf_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
              const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb, (void)beta,
        (void)c, (void)ldc;
}
void tf_blas_single_threaded(void) {}
const char *tf_blas_version(char *buf, size_t n) {
    snprintf(buf, n, "none");
    return buf;
}
#endif

// --- row-split GEMM over the pool -----------------------------------------------------------------------------
typedef struct gemm_job {
    int ta, tb;
    int64_t n, k;
    float alpha, beta;
    const float *a, *b;
    float *c;
    int64_t lda, ldb, ldc;
} gemm_job;

static void gemm_rows(void *ctx, int64_t r0, int64_t r1, int slot) {
    (void)slot;
    const gemm_job *j = ctx;
    const float *a = j->ta ? j->a + r0 : j->a + r0 * j->lda;
    tf_sgemm(j->ta, j->tb, r1 - r0, j->n, j->k, j->alpha, a, j->lda, j->b, j->ldb, j->beta, j->c + r0 * j->ldc, j->ldc);
}

/* Products under ~4 MFLOP per part are not worth a hand-off. */
#define TF_GEMM_PART_FLOPS (4.0e6)

void tf_sgemm_par(tf_run *r, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                  int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    double flops = 2.0 * (double)m * (double)n * (double)k;
    int parts = r->m->s->set.intra_op;
    if (flops / TF_GEMM_PART_FLOPS < parts) parts = (int)(flops / TF_GEMM_PART_FLOPS);
    if (parts <= 1 || m < 16) {
        tf_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    gemm_job j = {ta, tb, n, k, alpha, beta, a, b, c, lda, ldb, ldc};
    int64_t grain = (m + parts - 1) / parts;
    grain = (grain + 7) & ~(int64_t)7; /* whole 8-row panels per part */
    tf_parallel_for(r->m->s->pool, m, grain, parts, gemm_rows, &j);
}
