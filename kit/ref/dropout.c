/* kit/ref/dropout.c — reference inverted Dropout. The mask is an input so runs are deterministic and a
 * backend can be compared element by element; rate 0 or no mask is the identity (inference). */
#include "khost/kit/ref.h"

void kh_ref_dropout_mask(uint8_t *mask, int64_t N, double rate, kh_rng *r) {
    // mask (N): keep with probability 1 - rate
    for (int64_t i = 0; i < N; i++) mask[i] = kh_rng_uniform(r) >= rate ? 1 : 0;
}

void kh_ref_dropout_forward(double *out, const uint8_t *mask, const double *inp, int64_t N, double rate) {
    // out (N), mask (N), inp (N)
    if (!mask || rate <= 0.0) {
        for (int64_t i = 0; i < N; i++) out[i] = inp[i];
        return;
    }
    double scale = 1.0 / (1.0 - rate); // inverted dropout: inference needs no rescaling
    for (int64_t i = 0; i < N; i++) out[i] = mask[i] ? inp[i] * scale : 0.0;
}

void kh_ref_dropout_backward(double *dinp, const double *dout, const uint8_t *mask, int64_t N, double rate) {
    // dinp (N) overwritten, dout (N), mask (N)
    if (!mask || rate <= 0.0) {
        for (int64_t i = 0; i < N; i++) dinp[i] = dout[i];
        return;
    }
    double scale = 1.0 / (1.0 - rate);
    for (int64_t i = 0; i < N; i++) dinp[i] = mask[i] ? dout[i] * scale : 0.0;
}
