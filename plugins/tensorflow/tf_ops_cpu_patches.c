/* tf_ops_cpu_patches.c — Conv2D's forward as TensorFlow 1.x's Eigen path computed it: a contraction of the
 * image's patches with the kernel (Eigen's SpatialConvolution), whose input mapper packs the patch operand block
 * by block straight from the image into the GEMM's panel layout, so the im2col matrix never exists, not even a
 * block of it in row-major form. A block is TF_PATCH_TILES tiles of KH_TILE_MR output pixels (in the batch's row
 * order, across samples); each tile's patches are packed k-major (pixel fastest, zeros for taps in the padding)
 * in the thread's scratch, then multiplied by the kernel, packed once per call in KH_TILE_NR-column panels, with
 * the kit's register tile (khost/kit/gemm_tile.h). */
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

void tf_patches_conv(const kh_conv2d_dims *d, const float *x, const float *w, float *y, int64_t n, int64_t b0,
                     int64_t b1, float *scratch) {
    int64_t K = d->KH * d->KW * d->C, F = d->OC, rows = n * d->OH * d->OW, per = TF_PATCH_TILES * KH_TILE_MR;
    float *wp = scratch, *panels = scratch + K * F, tile[KH_TILE_MR * KH_TILE_NR];
    kh_gemm_tile_pack_b(w, K, F, wp); /* panel f0 at wp + f0 * K */
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
