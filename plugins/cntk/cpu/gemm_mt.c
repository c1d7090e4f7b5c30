/* cpu/gemm_mt.c — large GEMMs split over cntk's own pool, each part a single-threaded BLAS call.
 *
 * Why not OpenBLAS's threads: its workers busy-wait (sched_yield) after every threaded call, and on a
 * two-core machine they steal the cores that the pool's element-wise phases and the LSTM recurrences need
 * right after (perf: ~20% of lstm_text_generation's samples in and around sched_yield,
 * bench/profile/2026-11-30-lstm_text_generation-rowblocks.txt). With one pool for everything there is never
 * more than one runnable thread per core.
 * OpenBLAS is set to one thread at session open; its idle workers sleep.
 * Split: the larger of C's dimensions, in blocks aligned to 16 (the GEMM kernels' register tile), one block
 * per thread; each part packs its own slice of the other operand, which is small for the shapes here. */
#include "cpu/cpu.h"

#define GEMM_MT_MIN_FLOPS (1 << 21) /* below ~2 MFLOP a hand-off costs more than the second core gives */
#define GEMM_MT_ALIGN 16

typedef struct gemm_job {
    int ta, tb;
    int64_t m, n, k, lda, ldb, ldc, parts;
    float alpha, beta;
    const float *a, *b;
    float *c;
    int split_n; /* split C's columns (else its rows) */
} gemm_job;

static int64_t cut(int64_t total, int64_t parts, int64_t i) {
    int64_t blocks = (total + GEMM_MT_ALIGN - 1) / GEMM_MT_ALIGN, at = blocks * i / parts * GEMM_MT_ALIGN;
    return at < total ? at : total;
}

static void gemm_part(void *ctx, int64_t b, int64_t e) {
    const gemm_job *j = ctx;
    for (int64_t p = b; p < e; p++) {
        if (j->split_n) {
            int64_t n0 = cut(j->n, j->parts, p), n1 = cut(j->n, j->parts, p + 1);
            if (n1 > n0)
                cntk_sgemm(j->ta, j->tb, j->m, n1 - n0, j->k, j->alpha, j->a, j->lda,
                           j->tb ? j->b + n0 * j->ldb : j->b + n0, j->ldb, j->beta, j->c + n0, j->ldc);
        } else {
            int64_t m0 = cut(j->m, j->parts, p), m1 = cut(j->m, j->parts, p + 1);
            if (m1 > m0)
                cntk_sgemm(j->ta, j->tb, m1 - m0, j->n, j->k, j->alpha, j->ta ? j->a + m0 : j->a + m0 * j->lda,
                           j->lda, j->b, j->ldb, j->beta, j->c + m0 * j->ldc, j->ldc);
        }
    }
}

void cntk_sgemm_mt(cntk_pool *pool, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    int threads = cntk_pool_threads(pool);
    int64_t big = m > n ? m : n;
    if (threads <= 1 || 2 * m * n * k < GEMM_MT_MIN_FLOPS || big < 2 * GEMM_MT_ALIGN) {
        cntk_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    gemm_job j = {.ta = trans_a, .tb = trans_b, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb, .ldc = ldc,
                  .alpha = alpha, .beta = beta, .a = a, .b = b, .c = c, .split_n = n >= m};
    j.parts = (big + GEMM_MT_ALIGN - 1) / GEMM_MT_ALIGN;
    if (j.parts > threads) j.parts = threads;
    cntk_parallel_for(pool, j.parts, 1, gemm_part, &j);
}
