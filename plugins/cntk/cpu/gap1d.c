/* cpu/gap1d.c — GlobalAveragePooling1D: y (N, C) = mean over T of x (N, T, C); no mask (Keras 2 without
 * mask_zero averages the padding too). */
#include "cpu/cpu.h"

static kh_status gap1d_forward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, int train) {
    (void)m, (void)train;
    int64_t T = L->p->sh.in_shape[0], C = L->p->sh.in_shape[1];
    float inv = 1.0f / (float)T;
    for (int64_t s = 0; s < n; s++) {
        const float *x = L->x + s * T * C;
        float *y = L->y + s * C;
        for (int64_t c = 0; c < C; c++) y[c] = 0;
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < C; c++) y[c] += x[t * C + c];
        for (int64_t c = 0; c < C; c++) y[c] *= inv;
    }
    return KH_OK;
}

/* dx[n, t, c] = dy[n, c] / T */
static kh_status gap1d_backward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, float *dy, float *dx, int fused) {
    (void)m, (void)fused;
    if (!dx) return KH_OK;
    int64_t T = L->p->sh.in_shape[0], C = L->p->sh.in_shape[1];
    float inv = 1.0f / (float)T;
    for (int64_t s = 0; s < n; s++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < C; c++) dx[(s * T + t) * C + c] = dy[s * C + c] * inv;
    return KH_OK;
}

const cntk_cpu_ops cntk_cpu_gap1d_ops = {
    .forward = gap1d_forward,
    .backward = gap1d_backward,
};
