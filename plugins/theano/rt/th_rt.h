/* th_rt.h — the support code of theano's generated C: the context a compiled function runs in and the
 * kernels the generated schedule calls for ops that are not element-wise (im2col convolution, pooling, rows,
 * copies, gathers, losses, LSTM scans). Its text is compiled into every generated source (the plugin embeds
 * it, so the cache key covers it) and into the plugin itself, which fills the context. Element-wise maths
 * comes from khost/kit/formulas.h, the project's one definition. All sizes arrive as arguments the generated code
 * passes as constants; n, the batch rows of a call, is the only runtime size. */
#ifndef TH_RT_H
#define TH_RT_H

#include <stdint.h>
#include <string.h>

#include "khost/kit/counter_rng.h"
#include "khost/kit/formulas.h"

/* cblas_sgemm's signature (row-major = 101, no-trans = 111, trans = 112) */
typedef void (*th_sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                            const float *b, int ldb, float beta, float *c, int ldc);

typedef struct th_rt_ctx {
    char *arena;             /* the function's values, at the plan's offsets */
    float **w, **s1, **s2;   /* per variable: weights and optimizer slots */
    float **persistent;      /* GatherGrad accumulators */
    void *feed_x;            /* staged batch (f32, or i32 indices) */
    const int32_t *labels;
    const float *feed_dy;    /* probe: output gradient */
    float *scratch;          /* per-thread scratch: thread t owns [t * scratch_stride, (t + 1) * scratch_stride) */
    int64_t scratch_stride;
    int threads;             /* OpenMP threads of the parallel loops (BLAS itself runs single-threaded) */
    th_sgemm_fn sgemm;
    float lr;                /* this step's learning rate (kh_optimizer_step_lr) */
    uint64_t seed, counter;  /* dropout key */
    float loss_sum, correct; /* metrics written by the function */
    int32_t bad_index;       /* a Gather index outside its table (the value), else -1 */
} th_rt_ctx;

/* Generated entry point: part 0 runs the function (the probe: its forward), part 1 the probe's backward.
 * Returns 0, or 1 when a Gather index was out of range (ctx->bad_index). */
typedef int (*th_fn)(th_rt_ctx *c, int64_t n, int part);

#define TH_RT_FN static inline __attribute__((unused))
/* OpenMP loops when the source is compiled with -fopenmp, plain loops otherwise */
#ifdef _OPENMP
#define TH_PRAGMA(x) _Pragma(#x)
#else
#define TH_PRAGMA(x)
#endif
#define TH_PARALLEL_FOR(clauses) TH_PRAGMA(omp parallel for clauses)
#define TH_TANH kh_tanhf_fast /* formulas.h's float tanh on the host */

/* C (M,N) = op(A) op(B) (+ beta C), row-major, explicit leading dimensions, on the calling thread */
TH_RT_FN void th_gemm1(const th_rt_ctx *c, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A,
                       int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, float beta) {
    if (M <= 0 || N <= 0) return;
    c->sgemm(101, ta ? 112 : 111, tb ? 112 : 111, (int)M, (int)N, (int)K, 1.0f, A, (int)lda, B, (int)ldb, beta, C,
             (int)ldc);
}

/* The same split by rows of C over the threads when it is big enough to pay for them (about 4 MFLOP a part);
 * BLAS runs single-threaded inside, so one thread pool (OpenMP's) does all the parallel work. */
#define TH_GEMM_PART_FLOPS 4.0e6
TH_RT_FN void th_gemm_ld(const th_rt_ctx *c, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A,
                         int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, float beta) {
    double flops = 2.0 * (double)M * (double)N * (double)K;
    int parts = c->threads;
    if (flops / TH_GEMM_PART_FLOPS < parts) parts = (int)(flops / TH_GEMM_PART_FLOPS);
    if (parts <= 1 || M < 16) {
        th_gemm1(c, ta, tb, M, N, K, A, lda, B, ldb, C, ldc, beta);
        return;
    }
    int64_t grain = ((M + parts - 1) / parts + 7) & ~(int64_t)7;
TH_PARALLEL_FOR(num_threads(parts) schedule(static))
    for (int p = 0; p < parts; p++) {
        int64_t r0 = p * grain, r1 = r0 + grain < M ? r0 + grain : M;
        if (r0 < r1) th_gemm1(c, ta, tb, r1 - r0, N, K, ta ? A + r0 : A + r0 * lda, lda, B, ldb, C + r0 * ldc, ldc, beta);
    }
}

TH_RT_FN void th_gemm(const th_rt_ctx *c, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A,
                      const float *B, float *C, float beta) {
    th_gemm_ld(c, ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, C, N, beta);
}

#ifdef _OPENMP
#include <omp.h>
TH_RT_FN int th_thread_id(void) { return omp_get_thread_num(); }
#else
TH_RT_FN int th_thread_id(void) { return 0; }
#endif

/* column sums: each thread sums its rows into its scratch, then the partial sums are added in thread order */
TH_RT_FN void th_bias_grad(const th_rt_ctx *c, const float *dy, float *db, int64_t rows, int64_t C) {
    int parts = rows * C >= 65536 && c->scratch_stride >= C ? c->threads : 1;
    if (parts <= 1) {
        memset(db, 0, (size_t)C * sizeof *db);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < C; j++) db[j] += dy[r * C + j];
        return;
    }
    int64_t grain = (rows + parts - 1) / parts;
TH_PARALLEL_FOR(num_threads(parts) schedule(static))
    for (int p = 0; p < parts; p++) {
        float *acc = c->scratch + p * c->scratch_stride;
        memset(acc, 0, (size_t)C * sizeof *acc);
        int64_t r1 = (p + 1) * grain < rows ? (p + 1) * grain : rows;
        for (int64_t r = p * grain; r < r1; r++)
            for (int64_t j = 0; j < C; j++) acc[j] += dy[r * C + j];
    }
    memcpy(db, c->scratch, (size_t)C * sizeof *db);
    for (int p = 1; p < parts; p++)
        for (int64_t j = 0; j < C; j++) db[j] += c->scratch[p * c->scratch_stride + j];
}

TH_RT_FN void th_softmax(const float *x, float *y, int64_t rows, int64_t C) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C, mx = xr[0], s = 0.0f;
        for (int64_t j = 1; j < C; j++) mx = xr[j] > mx ? xr[j] : mx;
        for (int64_t j = 0; j < C; j++) s += (yr[j] = kh_expf_fast(xr[j] - mx));
        float inv = 1.0f / s;
        for (int64_t j = 0; j < C; j++) yr[j] *= inv;
    }
}

TH_RT_FN void th_softmax_grad(const float *y, const float *dy, float *dx, int64_t rows, int64_t C) {
    for (int64_t r = 0; r < rows; r++) {
        const float *yr = y + r * C, *dr = dy + r * C;
        float s = 0.0f;
        for (int64_t j = 0; j < C; j++) s += yr[j] * dr[j];
        for (int64_t j = 0; j < C; j++) dx[r * C + j] = yr[j] * (dr[j] - s);
    }
}

/* --- convolution: implicit GEMM where the tile fits, else im2col + GEMM per sample (NHWC, HWIO) ------------- */
typedef struct th_conv {
    int64_t H, W, C, KH, KW, F, OH, OW, SH, SW, PT, PL;
} th_conv;

#include "th_rt_igemm.h"

/* patches (b*OH*OW, KH*KW*C) of samples [0, b) of x */
TH_RT_FN void th_im2col(const th_conv *g, const float *x, int64_t b, float *col) {
    int64_t K = g->KH * g->KW * g->C;
    for (int64_t s = 0; s < b; s++)
        for (int64_t oh = 0; oh < g->OH; oh++)
            for (int64_t ow = 0; ow < g->OW; ow++) {
                float *row = col + ((s * g->OH + oh) * g->OW + ow) * K;
                for (int64_t kh = 0; kh < g->KH; kh++) {
                    int64_t ih = oh * g->SH + kh - g->PT;
                    for (int64_t kw = 0; kw < g->KW; kw++) {
                        int64_t iw = ow * g->SW + kw - g->PL;
                        float *dst = row + (kh * g->KW + kw) * g->C;
                        if (ih < 0 || ih >= g->H || iw < 0 || iw >= g->W) memset(dst, 0, (size_t)g->C * sizeof *dst);
                        else memcpy(dst, x + ((s * g->H + ih) * g->W + iw) * g->C, (size_t)g->C * sizeof *dst);
                    }
                }
            }
}

/* dx of samples [0, b) += patches' gradients */
TH_RT_FN void th_col2im(const th_conv *g, const float *col, int64_t b, float *dx) {
    int64_t K = g->KH * g->KW * g->C;
    for (int64_t s = 0; s < b; s++)
        for (int64_t oh = 0; oh < g->OH; oh++)
            for (int64_t ow = 0; ow < g->OW; ow++) {
                const float *row = col + ((s * g->OH + oh) * g->OW + ow) * K;
                for (int64_t kh = 0; kh < g->KH; kh++) {
                    int64_t ih = oh * g->SH + kh - g->PT;
                    if (ih < 0 || ih >= g->H) continue;
                    for (int64_t kw = 0; kw < g->KW; kw++) {
                        int64_t iw = ow * g->SW + kw - g->PL;
                        if (iw < 0 || iw >= g->W) continue;
                        float *d = dx + ((s * g->H + ih) * g->W + iw) * g->C;
                        const float *src = row + (kh * g->KW + kw) * g->C;
                        for (int64_t ch = 0; ch < g->C; ch++) d[ch] += src[ch];
                    }
                }
            }
}

/* Samples in parallel (Theano's CorrMM: OpenMP over the batch). Where the tile fits, the patches are read from
 * the image inside the GEMM (th_rt_igemm.h) against the filter packed once in thread 0's scratch; otherwise
 * each sample's patches go to its thread's scratch for a single-threaded BLAS GEMM. */
TH_RT_FN void th_conv2d(const th_rt_ctx *c, const th_conv *g, const float *x, const float *w, float *y, int64_t n) {
    int64_t K = g->KH * g->KW * g->C, in_s = g->H * g->W * g->C, out_s = g->OH * g->OW * g->F;
    if (g->KH == 1 && g->KW == 1 && g->SH == 1 && g->SW == 1 && g->PT == 0 && g->PL == 0) {
        th_gemm(c, 0, 0, n * g->OH * g->OW, g->F, K, x, w, y, 0.0f);
        return;
    }
    if (th_igemm_fits_fwd(g, c->scratch_stride)) {
        float *wp = c->scratch, *zeros = wp + K * g->F;
        th_igemm_pack_fwd(g, w, wp);
        memset(zeros, 0, (size_t)g->C * sizeof *zeros);
TH_PARALLEL_FOR(num_threads(c->threads) schedule(static))
        for (int64_t s = 0; s < n; s++) th_igemm_fwd_sample(g, x + s * in_s, wp, zeros, y + s * out_s);
        return;
    }
TH_PARALLEL_FOR(num_threads(c->threads) schedule(static))
    for (int64_t s = 0; s < n; s++) {
        float *col = c->scratch + th_thread_id() * c->scratch_stride;
        th_im2col(g, x + s * in_s, 1, col);
        th_gemm1(c, 0, 0, g->OH * g->OW, g->F, K, col, K, w, g->F, y + s * out_s, g->F, 0.0f);
    }
}

/* per-thread partial filter gradients in each thread's scratch (implicit-GEMM tiles, or BLAS after the patches),
 * summed in thread order */
TH_RT_FN void th_conv2d_bwd_filter(const th_rt_ctx *c, const th_conv *g, const float *x, const float *dy, float *dw,
                                   int64_t n) {
    int64_t K = g->KH * g->KW * g->C, in_s = g->H * g->W * g->C, out_s = g->OH * g->OW * g->F;
    int64_t cols = g->OH * g->OW * K;
    int parts = n < c->threads ? (int)n : c->threads;
    int64_t grain = (n + parts - 1) / parts;
    if (th_igemm_fits_bwd_filter(g, c->scratch_stride)) {
TH_PARALLEL_FOR(num_threads(parts) schedule(static))
        for (int p = 0; p < parts; p++) {
            float *part = c->scratch + p * c->scratch_stride;
            memset(part, 0, (size_t)th_igemm_filter_part_floats(g) * sizeof *part);
            int64_t s1 = (p + 1) * grain < n ? (p + 1) * grain : n;
            for (int64_t s = p * grain; s < s1; s++) th_igemm_bwd_filter_sample(g, x + s * in_s, dy + s * out_s, part);
        }
        th_igemm_filter_gather(g, c->scratch, c->scratch_stride, parts, dw);
        return;
    }
TH_PARALLEL_FOR(num_threads(parts) schedule(static))
    for (int p = 0; p < parts; p++) {
        float *col = c->scratch + p * c->scratch_stride, *part = col + cols;
        int64_t s1 = (p + 1) * grain < n ? (p + 1) * grain : n;
        if (p * grain >= s1) memset(part, 0, (size_t)(K * g->F) * sizeof *part);
        for (int64_t s = p * grain; s < s1; s++) {
            th_im2col(g, x + s * in_s, 1, col);
            th_gemm1(c, 1, 0, K, g->F, g->OH * g->OW, col, K, dy + s * out_s, g->F, part, g->F,
                     s == p * grain ? 0.0f : 1.0f);
        }
    }
    memcpy(dw, c->scratch + cols, (size_t)(K * g->F) * sizeof *dw);
    for (int p = 1; p < parts; p++) {
        const float *part = c->scratch + p * c->scratch_stride + cols;
        for (int64_t k = 0; k < K * g->F; k++) dw[k] += part[k];
    }
}

TH_RT_FN void th_conv2d_bwd_input(const th_rt_ctx *c, const th_conv *g, const float *w, const float *dy, float *dx,
                                  int64_t n) {
    int64_t K = g->KH * g->KW * g->C, in_s = g->H * g->W * g->C, out_s = g->OH * g->OW * g->F;
    if (th_igemm_fits_bwd_input(g, c->scratch_stride)) {
        float *wp = c->scratch, *zeros = wp + K * g->F;
        th_igemm_pack_bwd_input(g, w, wp);
        memset(zeros, 0, (size_t)g->F * sizeof *zeros);
TH_PARALLEL_FOR(num_threads(c->threads) schedule(static))
        for (int64_t s = 0; s < n; s++) th_igemm_bwd_input_sample(g, dy + s * out_s, wp, zeros, dx + s * in_s);
        return;
    }
TH_PARALLEL_FOR(num_threads(c->threads) schedule(static))
    for (int64_t s = 0; s < n; s++) {
        float *col = c->scratch + th_thread_id() * c->scratch_stride;
        th_gemm1(c, 0, 1, g->OH * g->OW, K, g->F, dy + s * out_s, g->F, w, g->F, col, K, 0.0f);
        memset(dx + s * in_s, 0, (size_t)in_s * sizeof *dx);
        th_col2im(g, col, 1, dx + s * in_s);
    }
}

/* --- max pooling (each gradient to the first maximum of its window, row-major) ----------------------------- */
#define TH_POOL_CH 64 /* channels a pass keeps its running maxima for, in registers or L1 */

/* One output pixel, channels [c0, c0 + nc): the window's maxima in best[] and, per channel, the offset in the
 * sample of the first tap that holds it (strictly greater replaces, so ties keep the first in row-major
 * order). NHWC: a tap's channels are contiguous, so the compare and the selects run across channels.
 * Returns 0 for a window wholly in the padding (its maximum is 0 and it passes no gradient). */
TH_RT_FN int th_pool_window(const th_conv *g, const float *xs, int64_t oh, int64_t ow, int64_t c0, int64_t nc,
                             float *restrict best, int64_t *restrict at) {
    int first = 1;
    for (int64_t kh = 0; kh < g->KH; kh++) {
        int64_t ih = oh * g->SH + kh - g->PT;
        if (ih < 0 || ih >= g->H) continue;
        for (int64_t kw = 0; kw < g->KW; kw++) {
            int64_t iw = ow * g->SW + kw - g->PL;
            if (iw < 0 || iw >= g->W) continue;
            int64_t k = (ih * g->W + iw) * g->C + c0;
            const float *restrict xt = xs + k;
            if (first) {
                for (int64_t ch = 0; ch < nc; ch++) best[ch] = xt[ch], at[ch] = k + ch;
                first = 0;
                continue;
            }
            for (int64_t ch = 0; ch < nc; ch++) {
                int gt = xt[ch] > best[ch];
                best[ch] = gt ? xt[ch] : best[ch];
                at[ch] = gt ? k + ch : at[ch];
            }
        }
    }
    if (first)
        for (int64_t ch = 0; ch < nc; ch++) best[ch] = 0.0f;
    return !first;
}

TH_RT_FN void th_maxpool(const th_rt_ctx *c, const th_conv *g, const float *x, float *y, int64_t n, int grad,
                         const float *dy, float *dx) {
    int64_t in_s = g->H * g->W * g->C, out_s = g->OH * g->OW * g->C;
TH_PARALLEL_FOR(num_threads(c->threads) schedule(static))
    for (int64_t s = 0; s < n; s++) {
        float best[TH_POOL_CH];
        int64_t at[TH_POOL_CH];
        const float *xs = x + s * in_s;
        float *dxs = grad ? dx + s * in_s : NULL;
        if (grad) memset(dxs, 0, (size_t)in_s * sizeof *dxs);
        for (int64_t oh = 0; oh < g->OH; oh++)
            for (int64_t ow = 0; ow < g->OW; ow++)
                for (int64_t c0 = 0; c0 < g->C; c0 += TH_POOL_CH) {
                    int64_t nc = g->C - c0 < TH_POOL_CH ? g->C - c0 : TH_POOL_CH;
                    int64_t o = s * out_s + (oh * g->OW + ow) * g->C + c0;
                    int any = th_pool_window(g, xs, oh, ow, c0, nc, best, at);
                    if (grad) {
                        if (!any) continue;
                        for (int64_t ch = 0; ch < nc; ch++) dxs[at[ch]] += dy[o + ch];
                    } else {
                        memcpy(y + o, best, (size_t)nc * sizeof *y);
                    }
                }
    }
}

/* --- copies around an axis: (outer, len, inner) views ------------------------------------------------------- */
TH_RT_FN void th_slice(const float *x, float *y, int64_t outer, int64_t len, int64_t begin, int64_t size, int64_t inner) {
    for (int64_t o = 0; o < outer; o++)
        memcpy(y + o * size * inner, x + (o * len + begin) * inner, (size_t)(size * inner) * sizeof *y);
}

/* part (outer, lj, inner) of a concat output (outer, len, inner) at position pos */
TH_RT_FN void th_concat_part(const float *x, float *y, int64_t outer, int64_t len, int64_t pos, int64_t lj,
                             int64_t inner) {
    for (int64_t o = 0; o < outer; o++)
        memcpy(y + (o * len + pos) * inner, x + o * lj * inner, (size_t)(lj * inner) * sizeof *y);
}

TH_RT_FN void th_reverse(const float *x, float *y, int64_t outer, int64_t len, int64_t inner) {
    for (int64_t o = 0; o < outer; o++)
        for (int64_t l = 0; l < len; l++)
            memcpy(y + (o * len + l) * inner, x + (o * len + len - 1 - l) * inner, (size_t)inner * sizeof *y);
}

TH_RT_FN void th_mean(const float *x, float *y, int64_t outer, int64_t len, int64_t inner) {
    float inv = 1.0f / (float)len;
    for (int64_t o = 0; o < outer; o++) {
        float *yo = y + o * inner;
        memset(yo, 0, (size_t)inner * sizeof *yo);
        for (int64_t l = 0; l < len; l++) {
            const float *xl = x + (o * len + l) * inner;
            for (int64_t k = 0; k < inner; k++) yo[k] += xl[k];
        }
        for (int64_t k = 0; k < inner; k++) yo[k] *= inv;
    }
}

TH_RT_FN void th_mean_grad(const float *dy, float *dx, int64_t outer, int64_t len, int64_t inner) {
    float inv = 1.0f / (float)len;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t l = 0; l < len; l++)
            for (int64_t k = 0; k < inner; k++) dx[(o * len + l) * inner + k] = dy[o * inner + k] * inv;
}

/* --- embeddings ------------------------------------------------------------------------------------------------ */
TH_RT_FN int th_gather(th_rt_ctx *c, const float *table, const int32_t *idx, float *y, int64_t ni, int64_t V, int64_t D) {
    for (int64_t k = 0; k < ni; k++) {
        int32_t r = idx[k];
        if (r < 0 || r >= V) {
            c->bad_index = r;
            return 1;
        }
        memcpy(y + k * D, table + (int64_t)r * D, (size_t)D * sizeof *y);
    }
    return 0;
}

TH_RT_FN void th_gather_grad(const int32_t *idx, const float *dy, float *acc, int64_t ni, int64_t D) {
    for (int64_t k = 0; k < ni; k++) {
        float *a = acc + (int64_t)idx[k] * D;
        const float *d = dy + k * D;
        for (int64_t j = 0; j < D; j++) a[j] += d[j];
    }
}

/* --- losses and metrics (Keras 2: probabilities clipped; gradient zero where the clip binds) --------------------- */
TH_RT_FN void th_softmax_xent(const float *p, const int32_t *lab, float *loss, int64_t rows, int64_t C) {
    for (int64_t r = 0; r < rows; r++) loss[r] = kh_cce_loss(p[r * C + lab[r]]);
}

TH_RT_FN void th_sigmoid_xent(const float *p, const int32_t *lab, float *loss, int64_t rows) {
    for (int64_t r = 0; r < rows; r++) loss[r] = kh_bce_loss(p[r], (float)lab[r]);
}

TH_RT_FN void th_softmax_xent_grad(const float *p, const int32_t *lab, const float *dl, float *dx, int64_t rows,
                                   int64_t C) {
    for (int64_t r = 0; r < rows; r++) {
        float pt = p[r * C + lab[r]];
        for (int64_t j = 0; j < C; j++) dx[r * C + j] = dl[r] * kh_softmax_cce_grad(p[r * C + j], j == lab[r], pt, 1.0f);
    }
}

TH_RT_FN void th_sigmoid_xent_grad(const float *p, const int32_t *lab, const float *dl, float *dx, int64_t rows) {
    for (int64_t r = 0; r < rows; r++) dx[r] = dl[r] * kh_sigmoid_bce_grad(p[r], (float)lab[r], 1.0f);
}

TH_RT_FN float th_sum(const float *x, int64_t n) {
    double s = 0.0;
    for (int64_t k = 0; k < n; k++) s += x[k];
    return (float)s;
}

TH_RT_FN float th_correct(const float *p, const int32_t *lab, int64_t rows, int64_t C) {
    int64_t ok = 0;
    for (int64_t r = 0; r < rows; r++) {
        if (C == 1) {
            ok += (p[r] > 0.5f ? 1 : 0) == lab[r];
            continue;
        }
        int64_t best = 0;
        for (int64_t j = 1; j < C; j++)
            if (p[r * C + j] > p[r * C + best]) best = j;
        ok += best == lab[r];
    }
    return (float)ok;
}

/* --- LSTM scans: S (n, T, 6, U) holds h, c, i, f, g, o of every step. The input projection of all steps (xw)
 * was one GEMM before the scan; inside it each step is one GEMM with the recurrent kernel and one fused gate
 * loop. Scratch: n * 4U floats forward, 2 n U backward. ---------------------------------------------------- */
/* One row's cells, out of line with restrict parameters: inside an OpenMP region GCC does not vectorise the
 * loop when it is inlined into the outlined body, and on its own it does. */
static __attribute__((noinline, unused)) void th_lstm_cells(int64_t U, const float *restrict zi, const float *restrict zf,
                                                           const float *restrict zc, const float *restrict zo,
                                                           const float *restrict cp, float *restrict gi,
                                                           float *restrict gf, float *restrict gg, float *restrict go,
                                                           float *restrict cc, float *restrict h) {
    if (cp)
        for (int64_t u = 0; u < U; u++)
            kh_lstm_cell(zi[u], zf[u], zc[u], zo[u], cp[u], &gi[u], &gf[u], &gg[u], &go[u], &cc[u], &h[u]);
    else
        for (int64_t u = 0; u < U; u++)
            kh_lstm_cell(zi[u], zf[u], zc[u], zo[u], 0.0f, &gi[u], &gf[u], &gg[u], &go[u], &cc[u], &h[u]);
}

/* dc_next (in: the next step's, out: this step's) is read and written at the same index only */
static __attribute__((noinline, unused)) void th_lstm_cells_backward(
    int64_t U, const float *restrict gi, const float *restrict gf, const float *restrict gg, const float *restrict go,
    const float *restrict cc, const float *restrict cp, const float *restrict dh, const float *restrict dc,
    const float *restrict dhn, float *restrict dzi, float *restrict dzf, float *restrict dzc, float *restrict dzo,
    float *restrict dcn) {
    for (int64_t u = 0; u < U; u++)
        kh_lstm_cell_backward(gi[u], gf[u], gg[u], go[u], cc[u], cp[u], dh[u] + dhn[u], dc[u] + dcn[u], &dzi[u],
                              &dzf[u], &dzc[u], &dzo[u], &dcn[u]);
}

TH_RT_FN void th_lstm_scan(const th_rt_ctx *c, const float *xw, const float *Uw, float *S, float *z, int64_t n,
                           int64_t T, int64_t U) {
    const int64_t G = 4 * U, ST = T * 6 * U;
    for (int64_t t = 0; t < T; t++) {
        for (int64_t r = 0; r < n; r++) memcpy(z + r * G, xw + (r * T + t) * G, (size_t)G * sizeof *z);
        if (t > 0) th_gemm_ld(c, 0, 0, n, G, U, S + (t - 1) * 6 * U, ST, Uw, G, z, G, 1.0f);
TH_PARALLEL_FOR(num_threads(c->threads) schedule(static) if (n * U >= 4096))
        for (int64_t r = 0; r < n; r++) {
            const float *zr = z + r * G;
            float *s = S + r * ST + t * 6 * U;
            th_lstm_cells(U, zr, zr + U, zr + 2 * U, zr + 3 * U, t > 0 ? s - 6 * U + U : NULL, s + 2 * U, s + 3 * U,
                          s + 4 * U, s + 5 * U, s + U, s);
        }
    }
}

/* dXW (n, T, 4U) from dS's h and c components; tmp holds dh, dc of the next step and U zeros */
TH_RT_FN void th_lstm_scan_grad(const th_rt_ctx *c, const float *S, const float *Uw, const float *dS, float *dxw,
                                float *tmp, int64_t n, int64_t T, int64_t U) {
    const int64_t G = 4 * U, ST = T * 6 * U;
    float *dh_next = tmp, *dc_next = tmp + n * U;
    memset(tmp, 0, (size_t)(2 * n * U + U) * sizeof *tmp);
    for (int64_t t = T - 1; t >= 0; t--) {
TH_PARALLEL_FOR(num_threads(c->threads) schedule(static) if (n * U >= 4096))
        for (int64_t r = 0; r < n; r++) {
            const float *s = S + r * ST + t * 6 * U, *ds = dS + r * ST + t * 6 * U;
            float *dz = dxw + (r * T + t) * G;
            th_lstm_cells_backward(U, s + 2 * U, s + 3 * U, s + 4 * U, s + 5 * U, s + U,
                                   t > 0 ? s - 6 * U + U : tmp + 2 * n * U, ds, ds + U, dh_next + r * U, dz, dz + U,
                                   dz + 2 * U, dz + 3 * U, dc_next + r * U);
        }
        if (t > 0) th_gemm_ld(c, 0, 1, n, U, G, dxw + t * G, T * G, Uw, G, dh_next, U, 0.0f);
    }
}

/* dU (U, 4U) = sum over t >= 1 of h_{t-1}^T dXW[:, t] */
TH_RT_FN void th_lstm_scan_grad_u(const th_rt_ctx *c, const float *S, const float *dxw, float *du, int64_t n,
                                  int64_t T, int64_t U) {
    const int64_t G = 4 * U;
    if (T < 2) memset(du, 0, (size_t)(U * G) * sizeof *du);
    for (int64_t t = 1; t < T; t++)
        th_gemm_ld(c, 1, 0, U, G, n, S + (t - 1) * 6 * U, T * 6 * U, dxw + t * G, T * G, du, G, t == 1 ? 0.0f : 1.0f);
}

#endif
