/* khost/kit/blas.h — what the backends share about the OpenBLAS they call: the description every record carries
 * (kit/base/blas_name.c), and the route of an SGEMM around OpenBLAS's allocating small-matrix kernel
 * (kit/base/sgemm_route.c). The kit does not link BLAS: the backend passes OpenBLAS's strings and its own
 * SGEMM. */
#ifndef KHOST_KIT_BLAS_H
#define KHOST_KIT_BLAS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "openblas-0.3.21 (SkylakeX kernels)" from openblas_get_config() and openblas_get_corename() (the kernels in
 * use: see core/devices/blas_tune.c), into buf; returns buf. */
const char *kh_openblas_describe(const char *config, const char *corename, char *buf, size_t n);

/* A row-major SGEMM, C (m x n) = alpha op(A) op(B) + beta C, op a transpose where trans_* is nonzero. */
typedef void (*kh_sgemm_fn)(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                            int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

/* Nonzero when the kernels OpenBLAS names `corename` (openblas_get_corename()) carry its AVX-512 small-matrix
 * SGEMM (SkylakeX, Cooperlake, SapphireRapids): their no-transpose kernel calls malloc and free on every call
 * whose last up to 8 rows of a 16-row block need its dot-product path. */
int kh_openblas_small_nn_allocates(const char *corename);
/* The same for the OpenBLAS this module calls, asked of corename (openblas_get_corename) the first time only:
 * OpenBLAS fixes its kernels when it loads, so the answer never changes, and an SGEMM call pays a load. */
int kh_openblas_small_nn_cached(char *(*corename)(void));

/* The columns [0, return) of a row-major SGEMM that may go to OpenBLAS without an allocation; the rest are
 * computed by kh_sgemm_routed's own loop. n unless small_nn_allocates and the shape takes that path: no
 * transpose, m*n*k <= 10^6, k >= 32 and n % 16 in [1, 8] (row-major n is the kernel's column-major M). */
int64_t kh_sgemm_blas_columns(int small_nn_allocates, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k);

/* blas for the columns kh_sgemm_blas_columns gives it, the kit's loop (no allocation) for the rest. */
void kh_sgemm_routed(kh_sgemm_fn blas, int small_nn_allocates, int trans_a, int trans_b, int64_t m, int64_t n,
                     int64_t k, float alpha, const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                     float *c, int64_t ldc);

#ifdef __cplusplus
}
#endif
#endif
