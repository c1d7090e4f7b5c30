/* kit/ref/lstm.c — reference LSTM with Keras 2 semantics: z = x W + h U + b split into gates i, f, c, o
 * (kernel [in, 4u], recurrent [u, 4u], bias [4u]); sigmoid recurrent activation, tanh activation (the cell
 * formulas are kh_lstm_cell_d / kh_lstm_cell_backward_d); initial h = c = 0. `reverse` runs the sequence
 * backwards (Keras go_backwards) while keeping every saved value at its real time index. */
#include <stdlib.h>

#include "khost/kit/formulas.h"
#include "khost/kit/ref.h"

// The real time index of processing step s.
static int64_t step_time(int64_t s, int64_t T, int reverse) { return reverse ? T - 1 - s : s; }

void kh_ref_lstm_forward(double *out, double *h, double *c, double *gates, const double *inp, const double *W,
                         const double *Uw, const double *b, int64_t B, int64_t T, int64_t C, int64_t U,
                         int return_sequences, int reverse) {
    // out (B, T, U) or (B, U); h, c (B, T, U); gates (B, T, 4U); inp (B, T, C); W (C, 4U); Uw (U, 4U); b (4U)
    const int64_t G = 4 * U;
    for (int64_t n = 0; n < B; n++) {
        for (int64_t s = 0; s < T; s++) {
            int64_t t = step_time(s, T, reverse);
            const double *x = inp + (n * T + t) * C;
            const double *hprev = s > 0 ? h + (n * T + step_time(s - 1, T, reverse)) * U : NULL;
            const double *cprev = s > 0 ? c + (n * T + step_time(s - 1, T, reverse)) * U : NULL;
            double *z = gates + (n * T + t) * G; // pre-activations first, activated in place below
            for (int64_t j = 0; j < G; j++) z[j] = b[j];
            for (int64_t k = 0; k < C; k++) {
                for (int64_t j = 0; j < G; j++) z[j] += x[k] * W[k * G + j];
            }
            if (hprev) {
                for (int64_t k = 0; k < U; k++) {
                    for (int64_t j = 0; j < G; j++) z[j] += hprev[k] * Uw[k * G + j];
                }
            }
            double *ht = h + (n * T + t) * U, *ct = c + (n * T + t) * U;
            for (int64_t u = 0; u < U; u++) {
                double gi, gf, gg, go;
                kh_lstm_cell_d(z[u], z[U + u], z[2 * U + u], z[3 * U + u], cprev ? cprev[u] : 0.0, &gi, &gf, &gg,
                               &go, &ct[u], &ht[u]);
                z[u] = gi, z[U + u] = gf, z[2 * U + u] = gg, z[3 * U + u] = go;
            }
        }
        if (!out) continue;
        if (return_sequences) {
            for (int64_t i = 0; i < T * U; i++) out[n * T * U + i] = h[n * T * U + i];
        } else {
            const double *hl = h + (n * T + step_time(T - 1, T, reverse)) * U;
            for (int64_t u = 0; u < U; u++) out[n * U + u] = hl[u];
        }
    }
}

kh_status kh_ref_lstm_backward(double *dinp, double *dW, double *dU, double *db, const double *dout,
                               const double *h, const double *c, const double *gates, const double *inp,
                               const double *W, const double *Uw, int64_t B, int64_t T, int64_t C, int64_t U,
                               int return_sequences, int reverse) {
    // dinp (B, T, C) overwritten; dW (C, 4U), dU (U, 4U), db (4U) +=; dout (B, T, U) or (B, U)
    const int64_t G = 4 * U;
    // scratch per sample: dh_next (U), dc_next (U), dz (4U)
    double *scratch = malloc((size_t)(6 * U) * sizeof(double));
    if (!scratch) return KH_ERR_NOMEM;
    double *dh_next = scratch, *dc_next = scratch + U, *dz = scratch + 2 * U;
    for (int64_t n = 0; n < B; n++) {
        for (int64_t u = 0; u < U; u++) dh_next[u] = dc_next[u] = 0.0;
        for (int64_t s = T - 1; s >= 0; s--) {
            int64_t t = step_time(s, T, reverse);
            int64_t tp = s > 0 ? step_time(s - 1, T, reverse) : -1;
            const double *g = gates + (n * T + t) * G;
            const double *x = inp + (n * T + t) * C;
            const double *ct = c + (n * T + t) * U;
            for (int64_t u = 0; u < U; u++) {
                double dh = dh_next[u];
                if (return_sequences) dh += dout[(n * T + t) * U + u];
                else if (s == T - 1) dh += dout[n * U + u];
                double cprev = tp >= 0 ? c[(n * T + tp) * U + u] : 0.0;
                double dcp;
                kh_lstm_cell_backward_d(g[u], g[U + u], g[2 * U + u], g[3 * U + u], ct[u], cprev, dh, dc_next[u],
                                        &dz[u], &dz[U + u], &dz[2 * U + u], &dz[3 * U + u], &dcp);
                dc_next[u] = dcp; // only unit u reads it, so overwriting in place is safe
            }
            for (int64_t j = 0; j < G; j++) db[j] += dz[j];
            for (int64_t k = 0; k < C; k++) {
                double acc = 0.0;
                for (int64_t j = 0; j < G; j++) {
                    dW[k * G + j] += x[k] * dz[j];
                    acc += W[k * G + j] * dz[j];
                }
                if (dinp) dinp[(n * T + t) * C + k] = acc;
            }
            const double *hprev = tp >= 0 ? h + (n * T + tp) * U : NULL;
            for (int64_t k = 0; k < U; k++) {
                double acc = 0.0;
                for (int64_t j = 0; j < G; j++) {
                    if (hprev) dU[k * G + j] += hprev[k] * dz[j];
                    acc += Uw[k * G + j] * dz[j];
                }
                dh_next[k] = acc; // the first step's h_prev is the constant zero state: unused then
            }
        }
    }
    free(scratch);
    return KH_OK;
}
