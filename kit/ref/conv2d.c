/* kit/ref/conv2d.c — reference Conv2D (NHWC input, kernel [kh, kw, cin, cout] as Keras, any stride,
 * 'valid' or TensorFlow's 'same' padding) with its fused activation (the
 * window geometry is khost/kit/geometry.h's). Direct loops, no im2col: the oracle should be obviously right, not fast. */
#include <stdlib.h>

#include "khost/kit/ref.h"

void kh_ref_conv2d_forward(double *out, const double *inp, const double *w, const double *b,
                           const kh_conv2d_dims *d, int act) {
    // out (B, OH, OW, OC), inp (B, H, W, C), w (KH, KW, C, OC), b (OC)
    const int64_t H = d->H, W = d->W, C = d->C, OC = d->OC;
    for (int64_t n = 0; n < d->B; n++) {
        for (int64_t oh = 0; oh < d->OH; oh++) {
            for (int64_t ow = 0; ow < d->OW; ow++) {
                double *y = out + ((n * d->OH + oh) * d->OW + ow) * OC;
                for (int64_t o = 0; o < OC; o++) y[o] = b ? b[o] : 0.0;
                for (int64_t kh = 0; kh < d->KH; kh++) {
                    int64_t ih = oh * d->SH - d->pad_top + kh;
                    if (ih < 0 || ih >= H) continue; // zero padding
                    for (int64_t kw = 0; kw < d->KW; kw++) {
                        int64_t iw = ow * d->SW - d->pad_left + kw;
                        if (iw < 0 || iw >= W) continue;
                        const double *x = inp + ((n * H + ih) * W + iw) * C;
                        const double *wk = w + (kh * d->KW + kw) * C * OC;
                        for (int64_t c = 0; c < C; c++) {
                            for (int64_t o = 0; o < OC; o++) y[o] += x[c] * wk[c * OC + o];
                        }
                    }
                }
            }
        }
    }
    // an activation over the channel axis (softmax too) is the Activation layer on (B*OH*OW, OC) rows
    kh_ref_activation_forward(out, out, d->B * d->OH * d->OW, OC, act);
}

kh_status kh_ref_conv2d_backward(double *dinp, double *dw, double *db, const double *dout, const double *out,
                                 const double *inp, const double *w, const kh_conv2d_dims *d, int act) {
    // dinp (B, H, W, C) overwritten; dw (KH, KW, C, OC) +=; db (OC) +=; dout, out (B, OH, OW, OC)
    const int64_t H = d->H, W = d->W, C = d->C, OC = d->OC;
    double *dz = malloc((size_t)OC * sizeof *dz + 1); // (OC) pre-activation gradients of one output pixel
    if (!dz) return KH_ERR_NOMEM;
    if (dinp) {
        for (int64_t i = 0; i < d->B * H * W * C; i++) dinp[i] = 0.0;
    }
    for (int64_t n = 0; n < d->B; n++) {
        for (int64_t oh = 0; oh < d->OH; oh++) {
            for (int64_t ow = 0; ow < d->OW; ow++) {
                int64_t pix = (n * d->OH + oh) * d->OW + ow;
                const double *y = out + pix * OC;
                const double *dy = dout + pix * OC;
                kh_ref_act_dpre_row(act, y, dy, OC, dz, db);
                for (int64_t kh = 0; kh < d->KH; kh++) {
                    int64_t ih = oh * d->SH - d->pad_top + kh;
                    if (ih < 0 || ih >= H) continue; // padding: no input, no gradient
                    for (int64_t kw = 0; kw < d->KW; kw++) {
                        int64_t iw = ow * d->SW - d->pad_left + kw;
                        if (iw < 0 || iw >= W) continue;
                        int64_t xoff = ((n * H + ih) * W + iw) * C;
                        int64_t woff = (kh * d->KW + kw) * C * OC;
                        for (int64_t c = 0; c < C; c++) {
                            const double *wrow = w + woff + c * OC;
                            double *dwrow = dw + woff + c * OC;
                            double xc = inp[xoff + c], acc = 0.0;
                            for (int64_t o = 0; o < OC; o++) {
                                dwrow[o] += xc * dz[o];
                                acc += wrow[o] * dz[o];
                            }
                            if (dinp) dinp[xoff + c] += acc;
                        }
                    }
                }
            }
        }
    }
    free(dz);
    return KH_OK;
}
