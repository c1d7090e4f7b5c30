/* kit/ref/maxpool2d.c — reference MaxPooling2D over NHWC (geometry from kh_conv2d_geometry with
 * OC == C). The gradient goes to the FIRST maximum of a window in row-major window order, so ties are
 * resolved the same way on every run (backends are compared on tie-free random data). */
#include "khost/kit/ref.h"

// The flat input index of the first maximum of window (n, oh, ow) for channel c; 'same' padding is skipped
// (TensorFlow pads max pooling with -inf, so padding never wins).
static int64_t window_argmax(const double *inp, const kh_conv2d_dims *d, int64_t n, int64_t oh, int64_t ow,
                             int64_t c) {
    int64_t best = -1;
    double bestv = 0.0;
    for (int64_t kh = 0; kh < d->KH; kh++) {
        int64_t ih = oh * d->SH - d->pad_top + kh;
        if (ih < 0 || ih >= d->H) continue;
        for (int64_t kw = 0; kw < d->KW; kw++) {
            int64_t iw = ow * d->SW - d->pad_left + kw;
            if (iw < 0 || iw >= d->W) continue;
            int64_t at = ((n * d->H + ih) * d->W + iw) * d->C + c;
            if (best < 0 || inp[at] > bestv) {
                best = at;
                bestv = inp[at];
            }
        }
    }
    return best; // >= 0: the geometry guarantees every window overlaps the input
}

void kh_ref_maxpool2d_forward(double *out, const double *inp, const kh_conv2d_dims *d) {
    // out (B, OH, OW, C), inp (B, H, W, C)
    for (int64_t n = 0; n < d->B; n++)
        for (int64_t oh = 0; oh < d->OH; oh++)
            for (int64_t ow = 0; ow < d->OW; ow++)
                for (int64_t c = 0; c < d->C; c++)
                    out[((n * d->OH + oh) * d->OW + ow) * d->C + c] = inp[window_argmax(inp, d, n, oh, ow, c)];
}

void kh_ref_maxpool2d_backward(double *dinp, const double *dout, const double *inp, const kh_conv2d_dims *d) {
    // dinp (B, H, W, C) overwritten, dout (B, OH, OW, C), inp (B, H, W, C)
    for (int64_t i = 0; i < d->B * d->H * d->W * d->C; i++) dinp[i] = 0.0;
    for (int64_t n = 0; n < d->B; n++)
        for (int64_t oh = 0; oh < d->OH; oh++)
            for (int64_t ow = 0; ow < d->OW; ow++)
                for (int64_t c = 0; c < d->C; c++)
                    // += : overlapping windows (stride < pool) may pick the same input
                    dinp[window_argmax(inp, d, n, oh, ow, c)] += dout[((n * d->OH + oh) * d->OW + ow) * d->C + c];
}
