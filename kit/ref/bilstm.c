/* kit/ref/bilstm.c — reference Bidirectional(LSTM), merge_mode 'concat': direction 0 runs forward,
 * direction 1 runs the reversed sequence (go_backwards); their outputs are concatenated forward first.
 * With return_sequences the backward half is aligned with real time (Keras reverses it back), which is what
 * kh_ref_lstm_forward's time-indexed saved values give directly. */
#include <stdlib.h>

#include "khost/kit/ref.h"

// Gather direction d's slice of the concatenated output into one buffer and scatter it back.
static void take_half(double *dst, const double *cat, int64_t rows, int64_t U, int d) {
    // dst (rows, U) <- cat (rows, 2U)[:, d*U : (d+1)*U]
    for (int64_t r = 0; r < rows; r++)
        for (int64_t u = 0; u < U; u++) dst[r * U + u] = cat[r * 2 * U + d * U + u];
}

void kh_ref_bilstm_forward(double *out, double *h[2], double *c[2], double *gates[2], const double *inp,
                           const double *W[2], const double *Uw[2], const double *b[2], int64_t B, int64_t T,
                           int64_t C, int64_t U, int return_sequences) {
    // out (B, T, 2U) or (B, 2U); h[d], c[d] (B, T, U); gates[d] (B, T, 4U); inp (B, T, C)
    for (int d = 0; d < 2; d++)
        kh_ref_lstm_forward(NULL, h[d], c[d], gates[d], inp, W[d], Uw[d], b[d], B, T, C, U, return_sequences, d);
    for (int64_t n = 0; n < B; n++) {
        if (return_sequences) {
            for (int64_t t = 0; t < T; t++)
                for (int d = 0; d < 2; d++)
                    for (int64_t u = 0; u < U; u++)
                        out[(n * T + t) * 2 * U + d * U + u] = h[d][(n * T + t) * U + u];
        } else {
            // forward's last step is t = T-1; the reversed run ends at t = 0
            for (int64_t u = 0; u < U; u++) {
                out[n * 2 * U + u] = h[0][(n * T + T - 1) * U + u];
                out[n * 2 * U + U + u] = h[1][(n * T + 0) * U + u];
            }
        }
    }
}

kh_status kh_ref_bilstm_backward(double *dinp, double *dW[2], double *dU[2], double *db[2], const double *dout,
                                 const double *h[2], const double *c[2], const double *gates[2], const double *inp,
                                 const double *W[2], const double *Uw[2], int64_t B, int64_t T, int64_t C, int64_t U,
                                 int return_sequences) {
    // dinp (B, T, C) overwritten (sum of both directions); dout (B, T, 2U) or (B, 2U)
    int64_t rows = return_sequences ? B * T : B;
    double *dhalf = malloc((size_t)(rows * U) * sizeof(double));           // (rows, U)
    double *dx = dinp ? malloc((size_t)(B * T * C) * sizeof(double)) : NULL; // (B, T, C)
    kh_status st = KH_OK;
    if (!dhalf || (dinp && !dx)) {
        st = KH_ERR_NOMEM;
        goto done;
    }
    for (int d = 0; d < 2 && st == KH_OK; d++) {
        take_half(dhalf, dout, rows, U, d);
        st = kh_ref_lstm_backward(dx, dW[d], dU[d], db[d], dhalf, h[d], c[d], gates[d], inp, W[d], Uw[d], B, T, C,
                                  U, return_sequences, d);
        if (st == KH_OK && dinp) {
            for (int64_t i = 0; i < B * T * C; i++) dinp[i] = d == 0 ? dx[i] : dinp[i] + dx[i];
        }
    }
done:
    free(dhalf);
    free(dx);
    return st;
}
