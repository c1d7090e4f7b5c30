/* th_rt.h — the support code of theano's generated C: the context a compiled function runs in and the
 * kernels the generated schedule calls for ops that are not element-wise (im2col convolution, pooling, rows,
 * copies, gathers, losses, LSTM scans). Its text is compiled into every generated source (the plugin embeds
 * it, so the cache key covers it) and into the plugin itself, which fills the context. Element-wise maths
 * comes from khost/formulas.h, the project's one definition. All sizes arrive as arguments the generated code
 * passes as constants; n, the batch rows of a call, is the only runtime size. */
#ifndef TH_RT_H
#define TH_RT_H

#include <stdint.h>
#include <string.h>

#include "khost/counter_rng.h"
#include "khost/formulas.h"

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
    float *scratch;          /* im2col blocks */
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
#define TH_TANH kh_tanhf_fast /* formulas.h's float tanh on the host */

/* C (M,N) = op(A) op(B) (+ beta C), row-major, all contiguous */
TH_RT_FN void th_gemm(const th_rt_ctx *c, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A,
                      const float *B, float *C, float beta) {
    c->sgemm(101, ta ? 112 : 111, tb ? 112 : 111, (int)M, (int)N, (int)K, 1.0f, A, ta ? (int)M : (int)K, B,
             tb ? (int)K : (int)N, beta, C, (int)N);
}

/* the same with explicit leading dimensions (strided rows of a larger value) */
TH_RT_FN void th_gemm_ld(const th_rt_ctx *c, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                         const float *B, int64_t ldb, float *C, int64_t ldc, float beta) {
    c->sgemm(101, ta ? 112 : 111, tb ? 112 : 111, (int)M, (int)N, (int)K, 1.0f, A, (int)lda, B, (int)ldb, beta, C,
             (int)ldc);
}

TH_RT_FN void th_bias_grad(const float *dy, float *db, int64_t rows, int64_t C) {
    memset(db, 0, (size_t)C * sizeof *db);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < C; j++) db[j] += dy[r * C + j];
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

/* --- convolution: im2col over blocks of samples, one GEMM per block (NHWC, HWIO) --------------------------- */
typedef struct th_conv {
    int64_t H, W, C, KH, KW, F, OH, OW, SH, SW, PT, PL, block;
} th_conv;

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

TH_RT_FN void th_conv2d(const th_rt_ctx *c, const th_conv *g, const float *x, const float *w, float *y, int64_t n) {
    int64_t K = g->KH * g->KW * g->C, in_s = g->H * g->W * g->C, out_s = g->OH * g->OW * g->F;
    for (int64_t s0 = 0; s0 < n; s0 += g->block) {
        int64_t b = n - s0 < g->block ? n - s0 : g->block;
        if (g->KH == 1 && g->KW == 1 && g->SH == 1 && g->SW == 1 && g->PT == 0 && g->PL == 0) {
            th_gemm(c, 0, 0, b * g->OH * g->OW, g->F, K, x + s0 * in_s, w, y + s0 * out_s, 0.0f);
            continue;
        }
        th_im2col(g, x + s0 * in_s, b, c->scratch);
        th_gemm(c, 0, 0, b * g->OH * g->OW, g->F, K, c->scratch, w, y + s0 * out_s, 0.0f);
    }
}

TH_RT_FN void th_conv2d_bwd_filter(const th_rt_ctx *c, const th_conv *g, const float *x, const float *dy, float *dw,
                                   int64_t n) {
    int64_t K = g->KH * g->KW * g->C, in_s = g->H * g->W * g->C, out_s = g->OH * g->OW * g->F;
    for (int64_t s0 = 0; s0 < n; s0 += g->block) {
        int64_t b = n - s0 < g->block ? n - s0 : g->block;
        th_im2col(g, x + s0 * in_s, b, c->scratch);
        th_gemm(c, 1, 0, K, g->F, b * g->OH * g->OW, c->scratch, dy + s0 * out_s, dw, s0 == 0 ? 0.0f : 1.0f);
    }
}

TH_RT_FN void th_conv2d_bwd_input(const th_rt_ctx *c, const th_conv *g, const float *w, const float *dy, float *dx,
                                  int64_t n) {
    int64_t K = g->KH * g->KW * g->C, in_s = g->H * g->W * g->C, out_s = g->OH * g->OW * g->F;
    memset(dx, 0, (size_t)(n * in_s) * sizeof *dx);
    for (int64_t s0 = 0; s0 < n; s0 += g->block) {
        int64_t b = n - s0 < g->block ? n - s0 : g->block;
        th_gemm(c, 0, 1, b * g->OH * g->OW, K, g->F, dy + s0 * out_s, w, c->scratch, 0.0f);
        th_col2im(g, c->scratch, b, dx + s0 * in_s);
    }
}

/* --- max pooling (each gradient to the first maximum of its window, row-major) ----------------------------- */
TH_RT_FN void th_maxpool(const th_conv *g, const float *x, float *y, int64_t n, int grad, const float *dy, float *dx) {
    if (grad) memset(dx, 0, (size_t)(n * g->H * g->W * g->C) * sizeof *dx);
    for (int64_t s = 0; s < n; s++)
        for (int64_t oh = 0; oh < g->OH; oh++)
            for (int64_t ow = 0; ow < g->OW; ow++)
                for (int64_t ch = 0; ch < g->C; ch++) {
                    float best = 0.0f;
                    int64_t at = -1;
                    for (int64_t kh = 0; kh < g->KH; kh++) {
                        int64_t ih = oh * g->SH + kh - g->PT;
                        if (ih < 0 || ih >= g->H) continue;
                        for (int64_t kw = 0; kw < g->KW; kw++) {
                            int64_t iw = ow * g->SW + kw - g->PL;
                            if (iw < 0 || iw >= g->W) continue;
                            int64_t k = ((s * g->H + ih) * g->W + iw) * g->C + ch;
                            if (at < 0 || x[k] > best) {
                                best = x[k];
                                at = k;
                            }
                        }
                    }
                    int64_t o = ((s * g->OH + oh) * g->OW + ow) * g->C + ch;
                    if (grad) dx[at] += dy[o];
                    else y[o] = best;
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
TH_RT_FN void th_lstm_scan(const th_rt_ctx *c, const float *xw, const float *Uw, float *S, float *z, int64_t n,
                           int64_t T, int64_t U) {
    const int64_t G = 4 * U, ST = T * 6 * U;
    for (int64_t t = 0; t < T; t++) {
        for (int64_t r = 0; r < n; r++) memcpy(z + r * G, xw + (r * T + t) * G, (size_t)G * sizeof *z);
        if (t > 0) th_gemm_ld(c, 0, 0, n, G, U, S + (t - 1) * 6 * U, ST, Uw, G, z, G, 1.0f);
        for (int64_t r = 0; r < n; r++) {
            const float *zr = z + r * G;
            float *s = S + r * ST + t * 6 * U;
            const float *cp = t > 0 ? s - 6 * U + U : NULL;
            for (int64_t u = 0; u < U; u++)
                kh_lstm_cell(zr[u], zr[U + u], zr[2 * U + u], zr[3 * U + u], cp ? cp[u] : 0.0f, &s[2 * U + u],
                             &s[3 * U + u], &s[4 * U + u], &s[5 * U + u], &s[U + u], &s[u]);
        }
    }
}

/* dXW (n, T, 4U) from dS's h and c components */
TH_RT_FN void th_lstm_scan_grad(const th_rt_ctx *c, const float *S, const float *Uw, const float *dS, float *dxw,
                                float *tmp, int64_t n, int64_t T, int64_t U) {
    const int64_t G = 4 * U, ST = T * 6 * U;
    float *dh_next = tmp, *dc_next = tmp + n * U;
    memset(tmp, 0, (size_t)(2 * n * U) * sizeof *tmp);
    for (int64_t t = T - 1; t >= 0; t--) {
        for (int64_t r = 0; r < n; r++) {
            const float *s = S + r * ST + t * 6 * U, *ds = dS + r * ST + t * 6 * U;
            const float *cp = t > 0 ? s - 6 * U + U : NULL;
            float *dz = dxw + (r * T + t) * G, *dhn = dh_next + r * U, *dcn = dc_next + r * U;
            for (int64_t u = 0; u < U; u++)
                kh_lstm_cell_backward(s[2 * U + u], s[3 * U + u], s[4 * U + u], s[5 * U + u], s[U + u],
                                      cp ? cp[u] : 0.0f, ds[u] + dhn[u], ds[U + u] + dcn[u], &dz[u], &dz[U + u],
                                      &dz[2 * U + u], &dz[3 * U + u], &dcn[u]);
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
