/* core/cell/layout.c — NHWC/NCHW transposition and one-hot expansion of batches (see layout.h). */
#include "cell/layout.h"

#include <string.h>

/* Both layout changes are one transposition per item: NHWC is an (h*w) x c matrix per item, NCHW a c x (h*w)
 * one. Each of n items, rows x cols, becomes cols x rows; the source is read in order. */
static void transpose_items(float *dst, const float *src, int64_t n, int64_t rows, int64_t cols) {
    for (int64_t b = 0; b < n; b++) {
        const float *s = src + b * rows * cols;
        float *d = dst + b * rows * cols;
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++) d[j * rows + i] = s[i * cols + j];
    }
}

void kh_layout_nhwc_to_nchw(float *dst, const float *src, int64_t n, int64_t h, int64_t w, int64_t c) {
    transpose_items(dst, src, n, h * w, c);
}

void kh_layout_nchw_to_nhwc(float *dst, const float *src, int64_t n, int64_t c, int64_t h, int64_t w) {
    transpose_items(dst, src, n, c, h * w);
}

int kh_layout_onehot(float *dst, const int32_t *src, int64_t count, int32_t depth) {
    memset(dst, 0, (size_t)(count * depth) * sizeof *dst);
    for (int64_t i = 0; i < count; i++) {
        if (src[i] < 0 || src[i] >= depth) return -1;
        dst[i * depth + src[i]] = 1.0f;
    }
    return 0;
}

int kh_layout_convert(kh_tensor *dst, const kh_tensor *src, int to_nchw, int32_t onehot_depth, void *buf) {
    *dst = *src;
    if (onehot_depth > 0 && src->dtype == KH_I32) {
        if (kh_layout_onehot(buf, src->data, kh_tensor_numel(src), onehot_depth) != 0) return -1;
        dst->dtype = KH_F32;
        dst->layout = KH_LAYOUT_NTC;
        dst->dims[dst->rank++] = onehot_depth;
        dst->data = buf;
        return 0;
    }
    if (to_nchw && src->rank == 4 && src->dtype == KH_F32) {
        kh_layout_nhwc_to_nchw(buf, src->data, src->dims[0], src->dims[1], src->dims[2], src->dims[3]);
        dst->layout = KH_LAYOUT_NCHW;
        dst->dims[1] = src->dims[3];
        dst->dims[2] = src->dims[1];
        dst->dims[3] = src->dims[2];
        dst->data = buf;
    }
    return 0;
}
