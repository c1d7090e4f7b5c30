/* kit/ref/activation.c — reference Activation layer (linear, relu, sigmoid, tanh, softmax over the last
 * axis) and the per-element pre-activation gradient that Dense and Conv2D use for their fused activation.
 * Element-wise math comes from khost/kit/formulas.h so the oracle runs the same formulas as the kernels. */
#include <math.h>

#include "khost/kit/formulas.h"
#include "khost/kit/ref.h"

// ---------------------------------------------------------------------------------------------------------
// softmax of one row, shifted by its maximum so exp never overflows

static void softmax_row(double *out, const double *inp, int64_t C) {
    double maxv = inp[0];
    for (int64_t j = 1; j < C; j++) {
        if (inp[j] > maxv) maxv = inp[j];
    }
    double sum = 0.0;
    for (int64_t j = 0; j < C; j++) {
        out[j] = exp(inp[j] - maxv);
        sum += out[j];
    }
    for (int64_t j = 0; j < C; j++) out[j] /= sum;
}

double kh_ref_softmax_dot(const double *y, const double *dy, int64_t C) {
    double s = 0.0;
    for (int64_t j = 0; j < C; j++) s += y[j] * dy[j];
    return s;
}

double kh_ref_act_dpre(int act, double y, double dy, double s) {
    // softmax Jacobian-vector product: dz_j = y_j (dy_j - sum_k y_k dy_k)
    if (act == KH_ACT_SOFTMAX) return y * (dy - s);
    return dy * kh_act_grad_y_d(act, y);
}

// ---------------------------------------------------------------------------------------------------------

void kh_ref_activation_forward(double *out, const double *inp, int64_t rows, int64_t C, int act) {
    // out (rows, C), inp (rows, C)
    for (int64_t r = 0; r < rows; r++) {
        const double *x = inp + r * C;
        double *y = out + r * C;
        if (act == KH_ACT_SOFTMAX) {
            softmax_row(y, x, C);
        } else {
            for (int64_t j = 0; j < C; j++) y[j] = kh_act_forward_d(act, x[j]);
        }
    }
}

void kh_ref_activation_backward(double *dinp, const double *dout, const double *out, int64_t rows, int64_t C,
                                int act) {
    // dinp (rows, C) overwritten, dout (rows, C), out (rows, C)
    for (int64_t r = 0; r < rows; r++) {
        const double *y = out + r * C;
        const double *dy = dout + r * C;
        kh_ref_act_dpre_row(act, y, dy, C, dinp + r * C, NULL);
    }
}

void kh_ref_act_dpre_row(int act, const double *y, const double *dy, int64_t C, double *dz, double *db) {
    double s = act == KH_ACT_SOFTMAX ? kh_ref_softmax_dot(y, dy, C) : 0.0;
    for (int64_t j = 0; j < C; j++) dz[j] = kh_ref_act_dpre(act, y[j], dy[j], s);
    for (int64_t j = 0; db && j < C; j++) db[j] += dz[j];
}
