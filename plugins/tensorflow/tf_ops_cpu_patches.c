/* tf_ops_cpu_patches.c — Conv2D and its two backprops as TensorFlow's Eigen path computes them (Eigen's
 * SpatialConvolution, SpatialConvolutionBackwardInput and SpatialConvolutionBackwardKernel: TensorFlow 1.x's
 * "eigen_tensor" kernels, the default CPU path of later releases): contractions whose input mapper packs the patch
 * operand block by block straight from the image into the GEMM's panel layout, so the im2col matrix never exists,
 * not even a block of it in row-major form.
 *   Forward: a block is TF_PATCH_TILES tiles of KH_TILE_MR output pixels (in the batch's row order, across
 *   samples); each tile's patches are packed k-major (pixel fastest, zeros for taps in the padding) in the
 *   thread's scratch, then multiplied by the kernel, packed once per call in KH_TILE_NR-column panels, with the
 *   kit's register tile (khost/kit/gemm_tile.h).
 *   Input gradient: the forward contraction of the output gradient's patches (padded by the kernel's extent less
 *   the forward's padding) with the kernel turned by 180 degrees and its channels swapped, packed so.
 *   Kernel gradient: the contraction of the output gradient with the patches over a block of TF_FILTER_ROWS
 *   output pixels, both packed into the tile's panels (the patches straight from the image, zeros for the
 *   padding), into the kernel gradient's transpose (OC, K): KH_TILE_MR filters against KH_TILE_NR channels of
 *   one tap per tile.
 * Stride 1 for the two gradients (every task's convolutions); other strides keep the im2col path. */
#include <string.h>

#include "khost/kit/gemm_tile.h"
#include "tf_ops_cpu_patches.h"

#define TF_PATCH_TILES 16 /* a block's packed patches: 96 x K floats, L2-resident beside the kernel's panels */

int64_t tf_patches_floats(const kh_conv2d_dims *d) {
    int64_t K = d->KH * d->KW * d->C;
    return K * d->OC + TF_PATCH_TILES * KH_TILE_MR * K;
}

int tf_patches_fit(const kh_conv2d_dims *d, int64_t scratch_floats) {
    return d->OC % KH_TILE_NR == 0 && tf_patches_floats(d) <= scratch_floats;
}

int64_t tf_patches_blocks(const kh_conv2d_dims *d, int64_t n) {
    int64_t rows = n * d->OH * d->OW, per = TF_PATCH_TILES * KH_TILE_MR;
    return (rows + per - 1) / per;
}

/* panel[k * MR + i] = patch element k of output row g0 + i (rows past the last repeat it; they are not stored) */
static void pack_patches(const kh_conv2d_dims *d, const float *x, int64_t g0, int64_t rows, float *panel) {
    int64_t P = d->OH * d->OW, C = d->C;
    for (int64_t i = 0; i < KH_TILE_MR; i++) {
        int64_t g = g0 + (i < rows ? i : rows - 1), s = g / P, p = g % P, oh = p / d->OW, ow = p % d->OW;
        const float *xs = x + s * d->H * d->W * C;
        float *dst = panel + i;
        for (int64_t kh = 0; kh < d->KH; kh++) {
            int64_t ih = oh * d->SH + kh - d->pad_top;
            for (int64_t kw = 0; kw < d->KW; kw++, dst += C * KH_TILE_MR) {
                int64_t iw = ow * d->SW + kw - d->pad_left;
                if (ih < 0 || ih >= d->H || iw < 0 || iw >= d->W) {
                    for (int64_t c = 0; c < C; c++) dst[c * KH_TILE_MR] = 0.0f;
                } else {
                    const float *src = xs + (ih * d->W + iw) * C;
                    for (int64_t c = 0; c < C; c++) dst[c * KH_TILE_MR] = src[c];
                }
            }
        }
    }
}

/* y rows of blocks [b0, b1) = the patches of x contracted with the kernel packed in wp (K x OC, in panels) */
static void contract(const kh_conv2d_dims *d, const float *x, const float *wp, float *y, int64_t n, int64_t b0,
                     int64_t b1, float *panels) {
    int64_t K = d->KH * d->KW * d->C, F = d->OC, rows = n * d->OH * d->OW, per = TF_PATCH_TILES * KH_TILE_MR;
    float tile[KH_TILE_MR * KH_TILE_NR];
    for (int64_t b = b0; b < b1; b++) {
        int64_t g0 = b * per, tiles = (rows - g0 + KH_TILE_MR - 1) / KH_TILE_MR;
        if (tiles > TF_PATCH_TILES) tiles = TF_PATCH_TILES;
        for (int64_t t = 0; t < tiles; t++) {
            int64_t gt = g0 + t * KH_TILE_MR;
            pack_patches(d, x, gt, rows - gt < KH_TILE_MR ? rows - gt : KH_TILE_MR, panels + t * KH_TILE_MR * K);
        }
        for (int64_t f0 = 0; f0 < F; f0 += KH_TILE_NR) {
            const float *b_run[1] = {wp + f0 * K};
            for (int64_t t = 0; t < tiles; t++) {
                int64_t gt = g0 + t * KH_TILE_MR, mr = rows - gt < KH_TILE_MR ? rows - gt : KH_TILE_MR;
                const float *panel = panels + t * KH_TILE_MR * K, *a_run[1][KH_TILE_MR];
                for (int i = 0; i < KH_TILE_MR; i++) a_run[0][i] = panel + i;
                kh_gemm_tile(1, a_run, KH_TILE_MR, b_run, KH_TILE_NR, K, tile, 0);
                for (int64_t i = 0; i < mr; i++) memcpy(y + (gt + i) * F + f0, tile + i * KH_TILE_NR, KH_TILE_NR * sizeof *y);
            }
        }
    }
}

void tf_patches_conv(const kh_conv2d_dims *d, const float *x, const float *w, float *y, int64_t n, int64_t b0,
                     int64_t b1, float *scratch) {
    int64_t K = d->KH * d->KW * d->C;
    kh_gemm_tile_pack_b(w, K, d->OC, scratch); /* panel f0 at scratch + f0 * K */
    contract(d, x, scratch, y, n, b0, b1, scratch + K * d->OC);
}

// --- input gradient ---------------------------------------------------------------------------------------------

int tf_patches_input_grad_dims(const kh_conv2d_dims *d, kh_conv2d_dims *t) {
    if (d->SH != 1 || d->SW != 1 || d->pad_top >= d->KH || d->pad_left >= d->KW) return 0;
    *t = *d;
    t->H = d->OH, t->W = d->OW, t->C = d->OC;
    t->OH = d->H, t->OW = d->W, t->OC = d->C;
    t->pad_top = d->KH - 1 - d->pad_top, t->pad_left = d->KW - 1 - d->pad_left;
    t->pad_bottom = d->KH - 1 - d->pad_bottom, t->pad_right = d->KW - 1 - d->pad_right;
    return 1;
}

int tf_patches_input_grad_fit(const kh_conv2d_dims *d, int64_t scratch_floats) {
    kh_conv2d_dims t;
    return tf_patches_input_grad_dims(d, &t) && tf_patches_fit(&t, scratch_floats);
}

/* wp = panels of the kernel w (KH, KW, C, OC) turned by 180 degrees with its channels swapped, as the (KH*KW*OC,
 * C) matrix of the input gradient's contraction: row (kh', kw', oc), column c holds w[KH-1-kh', KW-1-kw', c, oc] */
static void pack_kernel_turned(const kh_conv2d_dims *d, const float *w, float *wp) {
    int64_t C = d->C, OC = d->OC, K2 = d->KH * d->KW * OC;
    for (int64_t c0 = 0; c0 < C; c0 += KH_TILE_NR)
        for (int64_t kh = 0; kh < d->KH; kh++)
            for (int64_t kw = 0; kw < d->KW; kw++) {
                const float *src = w + ((d->KH - 1 - kh) * d->KW + (d->KW - 1 - kw)) * C * OC + c0 * OC;
                float *dst = wp + c0 * K2 + (kh * d->KW + kw) * OC * KH_TILE_NR;
                for (int64_t oc = 0; oc < OC; oc++)
                    for (int64_t j = 0; j < KH_TILE_NR; j++) dst[oc * KH_TILE_NR + j] = src[j * OC + oc];
            }
}

void tf_patches_input_grad(const kh_conv2d_dims *d, const float *dy, const float *w, float *dx, int64_t n,
                           int64_t b0, int64_t b1, float *scratch) {
    kh_conv2d_dims t;
    if (!tf_patches_input_grad_dims(d, &t)) return; /* the caller asked tf_patches_input_grad_fit first */
    pack_kernel_turned(d, w, scratch);
    contract(&t, dy, scratch, dx, n, b0, b1, scratch + t.KH * t.KW * t.C * t.OC);
}

// --- kernel gradient --------------------------------------------------------------------------------------------

#define TF_FILTER_ROWS 128 /* output pixels per block: their packed gradients and patches stay in L2 */

int tf_patches_filter_grad_fit(const kh_conv2d_dims *d) {
    return d->SH == 1 && d->SW == 1 && d->C % KH_TILE_NR == 0;
}

int64_t tf_patches_filter_grad_floats(const kh_conv2d_dims *d) {
    int64_t K = d->KH * d->KW * d->C, oct = (d->OC + KH_TILE_MR - 1) / KH_TILE_MR;
    return (oct * KH_TILE_MR + K) * TF_FILTER_ROWS;
}

/* The block's two operands in the tile's panel layouts, rows g0 .. g0 + rows of the batch's output pixels:
 * ap (one panel per KH_TILE_MR filters) [g * MR + i] = dy[g][oc0 + i] (filters past OC repeat the last);
 * bp (one panel per KH_TILE_NR of the K patch elements, a tap's channels) [g * NR + j] = the patch element. */
static void pack_filter_block(const kh_conv2d_dims *d, const float *x, const float *dy, int64_t g0, int64_t rows,
                              float *ap, float *bp) {
    int64_t P = d->OH * d->OW, C = d->C, OC = d->OC, G = TF_FILTER_ROWS;
    for (int64_t oc0 = 0; oc0 < OC; oc0 += KH_TILE_MR) {
        int64_t mr = OC - oc0 < KH_TILE_MR ? OC - oc0 : KH_TILE_MR;
        float *dst = ap + oc0 * G;
        for (int64_t g = 0; g < rows; g++) {
            const float *src = dy + (g0 + g) * OC + oc0;
            for (int64_t i = 0; i < KH_TILE_MR; i++) dst[g * KH_TILE_MR + i] = src[i < mr ? i : mr - 1];
        }
    }
    for (int64_t g = 0; g < rows; g++) {
        int64_t s = (g0 + g) / P, p = (g0 + g) % P, oh = p / d->OW, ow = p % d->OW;
        const float *xs = x + s * d->H * d->W * C;
        for (int64_t kh = 0; kh < d->KH; kh++)
            for (int64_t kw = 0; kw < d->KW; kw++) {
                int64_t ih = oh + kh - d->pad_top, iw = ow + kw - d->pad_left;
                int in = ih >= 0 && ih < d->H && iw >= 0 && iw < d->W;
                const float *src = xs + (ih * d->W + iw) * C;
                for (int64_t c0 = 0; c0 < C; c0 += KH_TILE_NR) {
                    float *dst = bp + ((kh * d->KW + kw) * C + c0) * G + g * KH_TILE_NR;
                    if (in) memcpy(dst, src + c0, KH_TILE_NR * sizeof *dst);
                    else memset(dst, 0, KH_TILE_NR * sizeof *dst);
                }
            }
    }
}

void tf_patches_filter_grad(const kh_conv2d_dims *d, const float *x, const float *dy, float *dwt, int64_t s0,
                            int64_t s1, float *scratch) {
    int64_t P = d->OH * d->OW, K = d->KH * d->KW * d->C, OC = d->OC, G = TF_FILTER_ROWS;
    int64_t oct = (OC + KH_TILE_MR - 1) / KH_TILE_MR;
    float *ap = scratch, *bp = scratch + oct * KH_TILE_MR * G, tile[KH_TILE_MR * KH_TILE_NR];
    for (int64_t g0 = s0 * P; g0 < s1 * P; g0 += G) {
        int64_t rows = s1 * P - g0 < G ? s1 * P - g0 : G;
        pack_filter_block(d, x, dy, g0, rows, ap, bp);
        for (int64_t oc0 = 0; oc0 < OC; oc0 += KH_TILE_MR) {
            int64_t mr = OC - oc0 < KH_TILE_MR ? OC - oc0 : KH_TILE_MR;
            const float *a_run[1][KH_TILE_MR];
            for (int i = 0; i < KH_TILE_MR; i++) a_run[0][i] = ap + oc0 * G + i;
            for (int64_t k0 = 0; k0 < K; k0 += KH_TILE_NR) {
                const float *b_run[1] = {bp + k0 * G};
                float *out = dwt + oc0 * K + k0;
                for (int64_t i = 0; i < KH_TILE_MR; i++)
                    memcpy(tile + i * KH_TILE_NR, out + (i < mr ? i : mr - 1) * K, KH_TILE_NR * sizeof *tile);
                kh_gemm_tile(1, a_run, KH_TILE_MR, b_run, KH_TILE_NR, rows, tile, 1);
                for (int64_t i = 0; i < mr; i++) memcpy(out + i * K, tile + i * KH_TILE_NR, KH_TILE_NR * sizeof *out);
            }
        }
    }
}
