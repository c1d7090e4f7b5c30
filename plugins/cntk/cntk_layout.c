/* cntk_layout.c — the host-side NCHW <-> NHWC copies, shared by the CPU executor and the CUDA half (which
 * compiles this file too: it cannot link against cntk.so). */
#include "cpu/cpu.h"

void cntk_nchw_to_nhwc(const float *src, float *dst, int64_t n, int64_t c, int64_t h, int64_t w) {
    int64_t hw = h * w;
    for (int64_t s = 0; s < n; s++) {
        const float *a = src + s * c * hw;
        float *b = dst + s * c * hw;
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t p = 0; p < hw; p++) b[p * c + ch] = a[ch * hw + p];
    }
}

void cntk_nhwc_to_nchw(const float *src, float *dst, int64_t n, int64_t c, int64_t h, int64_t w) {
    int64_t hw = h * w;
    for (int64_t s = 0; s < n; s++) {
        const float *a = src + s * c * hw;
        float *b = dst + s * c * hw;
        for (int64_t p = 0; p < hw; p++)
            for (int64_t ch = 0; ch < c; ch++) b[ch * hw + p] = a[p * c + ch];
    }
}
