/* plan/layout.c — the host-side NCHW <-> NHWC copies, shared by the CPU executor and the CUDA half (which
 * compiles this file too: it cannot link against cntk.so). */
#include "plan/plan.h"

/* Each of n samples is a (rows, cols) matrix; write its transpose. */
static void transpose_samples(const float *src, float *dst, int64_t n, int64_t rows, int64_t cols) {
    for (int64_t s = 0; s < n; s++) {
        const float *a = src + s * rows * cols;
        float *b = dst + s * rows * cols;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) b[c * rows + r] = a[r * cols + c];
    }
}

void cntk_nchw_to_nhwc(const float *src, float *dst, int64_t n, int64_t c, int64_t h, int64_t w) {
    transpose_samples(src, dst, n, c, h * w);
}

void cntk_nhwc_to_nchw(const float *src, float *dst, int64_t n, int64_t c, int64_t h, int64_t w) {
    transpose_samples(src, dst, n, h * w, c);
}
