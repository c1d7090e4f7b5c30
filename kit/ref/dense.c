/* kit/ref/dense.c — reference Dense layer: out = act(inp @ w + b), kernel [in, units] as Keras. */
#include <stdlib.h>

#include "khost/kit/ref.h"

void kh_ref_dense_forward(double *out, const double *inp, const double *w, const double *b, int64_t B, int64_t C,
                          int64_t OC, int act) {
    // out (B, OC), inp (B, C), w (C, OC), b (OC)
    for (int64_t n = 0; n < B; n++) {
        const double *x = inp + n * C;
        double *y = out + n * OC;
        for (int64_t o = 0; o < OC; o++) y[o] = b ? b[o] : 0.0;
        for (int64_t i = 0; i < C; i++) {
            const double *wrow = w + i * OC;
            for (int64_t o = 0; o < OC; o++) y[o] += x[i] * wrow[o];
        }
    }
    kh_ref_activation_forward(out, out, B, OC, act);
}

kh_status kh_ref_dense_backward(double *dinp, double *dw, double *db, const double *dout, const double *out,
                                const double *inp, const double *w, int64_t B, int64_t C, int64_t OC, int act) {
    // dinp (B, C) overwritten; dw (C, OC) +=; db (OC) +=; dout, out (B, OC); inp (B, C); w (C, OC)
    double *dz = malloc((size_t)OC * sizeof *dz + 1); // (OC) one row of pre-activation gradients
    if (!dz) return KH_ERR_NOMEM;
    for (int64_t n = 0; n < B; n++) {
        const double *y = out + n * OC;
        const double *dy = dout + n * OC;
        const double *x = inp + n * C;
        kh_ref_act_dpre_row(act, y, dy, OC, dz, db); // the fused activation's gradient
        for (int64_t i = 0; i < C; i++) {
            const double *wrow = w + i * OC;
            double *dwrow = dw + i * OC;
            double acc = 0.0;
            for (int64_t o = 0; o < OC; o++) {
                dwrow[o] += x[i] * dz[o];
                acc += wrow[o] * dz[o];
            }
            if (dinp) dinp[n * C + i] = acc;
        }
    }
    free(dz);
    return KH_OK;
}
