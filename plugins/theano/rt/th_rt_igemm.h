/* th_rt_igemm.h — theano's convolutions as implicit GEMMs: CorrMM's im2col fused into the GEMM's operand fetch.
 * The kit's register tile (khost/kit/gemm_tile.h) accumulates TH_MR output rows x TH_NR columns: each row's a is
 * read straight from the image (a pixel's KH*KW runs of C contiguous floats, NHWC, or a zero run for a tap in the
 * padding), b from the filter packed once per call into TH_NR-column panels. No patch buffer is written or
 * packed again, and the filter is not repacked for every sample as a BLAS call per sample does. th_rt.h takes
 * these where the geometry fits the tile (th_igemm_fits_*) and im2col + BLAS for the rest. */
#ifndef TH_RT_IGEMM_H
#define TH_RT_IGEMM_H

#include <stdint.h>
#include <string.h>

#include "khost/kit/gemm_tile.h"

#define TH_MR KH_TILE_MR
#define TH_NR KH_TILE_NR
#define TH_IG_RUNS 32 /* pointer runs of one tile call: a kernel's taps, or a chunk of image rows */

/* the floats the forward and input-gradient kernels keep in thread 0's scratch: the packed filter and a zero
 * run as long as the longest run they read */
static inline __attribute__((unused)) int64_t th_igemm_shared_floats(const th_conv *g) {
    return g->KH * g->KW * g->C * g->F + (g->C > g->F ? g->C : g->F);
}

static inline __attribute__((unused)) int th_igemm_fits_fwd(const th_conv *g, int64_t scratch_stride) {
    return g->F % TH_NR == 0 && g->KH * g->KW <= TH_IG_RUNS && th_igemm_shared_floats(g) <= scratch_stride;
}

/* the input gradient as a stride-1 correlation of dy with the flipped, transposed filter */
static inline __attribute__((unused)) int th_igemm_fits_bwd_input(const th_conv *g, int64_t scratch_stride) {
    return g->SH == 1 && g->SW == 1 && g->C % TH_NR == 0 && g->KH * g->KW <= TH_IG_RUNS &&
           th_igemm_shared_floats(g) <= scratch_stride;
}

/* per-thread partial filter gradients, tile by tile: (KH*KW) x (C / TH_NR) x ceil(F / TH_MR) tiles */
static inline __attribute__((unused)) int64_t th_igemm_filter_part_floats(const th_conv *g) {
    return g->KH * g->KW * (g->C / TH_NR) * ((g->F + TH_MR - 1) / TH_MR) * TH_MR * TH_NR;
}

static inline __attribute__((unused)) int th_igemm_fits_bwd_filter(const th_conv *g, int64_t scratch_stride) {
    return g->C % TH_NR == 0 && th_igemm_filter_part_floats(g) <= scratch_stride;
}

/* filter (K, F) as F / TH_NR panels of (K, TH_NR): panel f0 starts at wp + f0 * K */
static inline __attribute__((unused)) void th_igemm_pack_fwd(const th_conv *g, const float *w, float *wp) {
    kh_gemm_tile_pack_b(w, g->KH * g->KW * g->C, g->F, wp);
}

/* filter (KH*KW, C, F) as C / TH_NR panels of (KH*KW*F, TH_NR): panel c0 element [(r, f), j] = w[r, c0 + j, f] */
static inline __attribute__((unused)) void th_igemm_pack_bwd_input(const th_conv *g, const float *w, float *wp) {
    int64_t runs = g->KH * g->KW;
    for (int64_t c0 = 0; c0 < g->C; c0 += TH_NR)
        for (int64_t r = 0; r < runs; r++)
            for (int64_t f = 0; f < g->F; f++) {
                float *dst = wp + c0 * runs * g->F + (r * g->F + f) * TH_NR;
                for (int64_t j = 0; j < TH_NR; j++) dst[j] = w[(r * g->C + c0 + j) * g->F + f];
            }
}

/* y (OH*OW, F) of one sample: rows are output pixels, each tap's run read from the image (or the zero run) */
static inline __attribute__((unused)) void th_igemm_fwd_sample(const th_conv *g, const float *xs, const float *wp,
                                                               const float *zeros, float *ys) {
    int64_t P = g->OH * g->OW, K = g->KH * g->KW * g->C, runs = g->KH * g->KW;
    const float *a[TH_IG_RUNS][TH_MR], *b[TH_IG_RUNS];
    float tile[TH_MR * TH_NR];
    for (int64_t p0 = 0; p0 < P; p0 += TH_MR) {
        int64_t mr = P - p0 < TH_MR ? P - p0 : TH_MR;
        for (int64_t i = 0; i < TH_MR; i++) { /* rows past the end repeat the last pixel; they are not stored */
            int64_t p = p0 + (i < mr ? i : mr - 1), oh = p / g->OW, ow = p % g->OW;
            for (int64_t kh = 0; kh < g->KH; kh++)
                for (int64_t kw = 0; kw < g->KW; kw++) {
                    int64_t ih = oh * g->SH + kh - g->PT, iw = ow * g->SW + kw - g->PL;
                    int in = ih >= 0 && ih < g->H && iw >= 0 && iw < g->W;
                    a[kh * g->KW + kw][i] = in ? xs + (ih * g->W + iw) * g->C : zeros;
                }
        }
        for (int64_t f0 = 0; f0 < g->F; f0 += TH_NR) {
            for (int64_t r = 0; r < runs; r++) b[r] = wp + f0 * K + r * g->C * TH_NR;
            kh_gemm_tile(runs, a, 1, b, TH_NR, g->C, tile, 0);
            for (int64_t i = 0; i < mr; i++) memcpy(ys + (p0 + i) * g->F + f0, tile + i * TH_NR, TH_NR * sizeof *ys);
        }
    }
}

/* dx (H*W, C) of one sample (stride 1): dx[ih, iw, c] = sum over taps and f of dy[ih + PT - kh, iw + PL - kw, f]
 * w[kh, kw, c, f], rows the input pixels, each tap's run a row of dy (or the zero run outside it) */
static inline __attribute__((unused)) void th_igemm_bwd_input_sample(const th_conv *g, const float *dys,
                                                                     const float *wp, const float *zeros,
                                                                     float *dxs) {
    int64_t Q = g->H * g->W, runs = g->KH * g->KW;
    const float *a[TH_IG_RUNS][TH_MR], *b[TH_IG_RUNS];
    float tile[TH_MR * TH_NR];
    for (int64_t q0 = 0; q0 < Q; q0 += TH_MR) {
        int64_t mr = Q - q0 < TH_MR ? Q - q0 : TH_MR;
        for (int64_t i = 0; i < TH_MR; i++) {
            int64_t q = q0 + (i < mr ? i : mr - 1), ih = q / g->W, iw = q % g->W;
            for (int64_t kh = 0; kh < g->KH; kh++)
                for (int64_t kw = 0; kw < g->KW; kw++) {
                    int64_t oh = ih + g->PT - kh, ow = iw + g->PL - kw;
                    int in = oh >= 0 && oh < g->OH && ow >= 0 && ow < g->OW;
                    a[kh * g->KW + kw][i] = in ? dys + (oh * g->OW + ow) * g->F : zeros;
                }
        }
        for (int64_t c0 = 0; c0 < g->C; c0 += TH_NR) {
            for (int64_t r = 0; r < runs; r++) b[r] = wp + c0 * runs * g->F + r * g->F * TH_NR;
            kh_gemm_tile(runs, a, 1, b, TH_NR, g->F, tile, 0);
            for (int64_t i = 0; i < mr; i++) memcpy(dxs + (q0 + i) * g->C + c0, tile + i * TH_NR, TH_NR * sizeof *dxs);
        }
    }
}

/* part (the tiles of th_igemm_filter_part_floats) += one sample's filter gradient. Tile (tap r, channels c0,
 * filters f0) row i, column j is dW[r, c0 + j, f0 + i]: rows read dy (a broadcast per filter, stride F along a
 * row of output pixels), columns read the image (TH_NR channels of the tap's pixel), over the output pixels
 * whose tap lies inside the image. */
static inline __attribute__((unused)) void th_igemm_bwd_filter_sample(const th_conv *g, const float *xs,
                                                                      const float *dys, float *part) {
    const float *a[TH_IG_RUNS][TH_MR], *b[TH_IG_RUNS];
    int64_t ftiles = (g->F + TH_MR - 1) / TH_MR;
    float *tile = part;
    for (int64_t kh = 0; kh < g->KH; kh++)
        for (int64_t kw = 0; kw < g->KW; kw++) {
            /* output columns whose tap is inside: ow * SW + kw - PL in [0, W) */
            int64_t ow0 = g->PL - kw > 0 ? (g->PL - kw + g->SW - 1) / g->SW : 0;
            int64_t ow1 = (g->W - 1 - kw + g->PL) / g->SW + 1;
            if (g->W - 1 - kw + g->PL < 0) ow1 = 0;
            if (ow1 > g->OW) ow1 = g->OW;
            for (int64_t c0 = 0; c0 < g->C; c0 += TH_NR)
                for (int64_t ft = 0; ft < ftiles; ft++, tile += TH_MR * TH_NR) {
                    int64_t f0 = ft * TH_MR, mr = g->F - f0 < TH_MR ? g->F - f0 : TH_MR;
                    if (ow1 <= ow0) continue;
                    int64_t runs = 0;
                    for (int64_t oh = 0; oh < g->OH; oh++) {
                        int64_t ih = oh * g->SH + kh - g->PT;
                        if (ih < 0 || ih >= g->H) continue;
                        for (int64_t i = 0; i < TH_MR; i++) /* rows past F repeat the last filter */
                            a[runs][i] = dys + (oh * g->OW + ow0) * g->F + f0 + (i < mr ? i : mr - 1);
                        b[runs] = xs + (ih * g->W + ow0 * g->SW + kw - g->PL) * g->C + c0;
                        if (++runs == TH_IG_RUNS) {
                            kh_gemm_tile(runs, a, g->F, b, g->SW * g->C, ow1 - ow0, tile, 1);
                            runs = 0;
                        }
                    }
                    if (runs) kh_gemm_tile(runs, a, g->F, b, g->SW * g->C, ow1 - ow0, tile, 1);
                }
        }
}

/* dw (KH*KW*C, F) = the sum of the parts' tiles, in part order */
static inline __attribute__((unused)) void th_igemm_filter_gather(const th_conv *g, const float *parts,
                                                                  int64_t stride, int nparts, float *dw) {
    int64_t ftiles = (g->F + TH_MR - 1) / TH_MR, runs = g->KH * g->KW;
    for (int64_t r = 0; r < runs; r++)
        for (int64_t c0 = 0; c0 < g->C; c0 += TH_NR)
            for (int64_t ft = 0; ft < ftiles; ft++) {
                int64_t t = (r * (g->C / TH_NR) + c0 / TH_NR) * ftiles + ft, f0 = ft * TH_MR;
                int64_t mr = g->F - f0 < TH_MR ? g->F - f0 : TH_MR;
                for (int64_t i = 0; i < mr; i++)
                    for (int64_t j = 0; j < TH_NR; j++) {
                        float s = 0.0f;
                        for (int p = 0; p < nparts; p++) s += parts[p * stride + t * TH_MR * TH_NR + i * TH_NR + j];
                        dw[(r * g->C + c0 + j) * g->F + f0 + i] = s;
                    }
            }
}

#endif
