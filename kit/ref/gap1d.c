/* kit/ref/gap1d.c — reference GlobalAveragePooling1D: the mean over time (no masking, as Keras 2
 * without mask_zero). */
#include "khost/kit/ref.h"

void kh_ref_gap1d_forward(double *out, const double *inp, int64_t B, int64_t T, int64_t C) {
    // out (B, C), inp (B, T, C)
    for (int64_t n = 0; n < B; n++) {
        double *y = out + n * C;
        for (int64_t j = 0; j < C; j++) y[j] = 0.0;
        for (int64_t t = 0; t < T; t++) {
            const double *x = inp + (n * T + t) * C;
            for (int64_t j = 0; j < C; j++) y[j] += x[j];
        }
        for (int64_t j = 0; j < C; j++) y[j] /= (double)T;
    }
}

void kh_ref_gap1d_backward(double *dinp, const double *dout, int64_t B, int64_t T, int64_t C) {
    // dinp (B, T, C) overwritten, dout (B, C)
    for (int64_t n = 0; n < B; n++) {
        for (int64_t t = 0; t < T; t++) {
            for (int64_t j = 0; j < C; j++) dinp[(n * T + t) * C + j] = dout[n * C + j] / (double)T;
        }
    }
}
