/* kit/base/init.c — Keras 2's weight initialisers, drawn from kh_rng so every backend starts from the
 * same weights for the same seed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/rng.h"
#include "khost/kit/spec.h"
#include "khost/kit/init.h"

/* Orthonormalise the rows (rows <= cols) of a (rows, cols) matrix in place: modified Gram-Schmidt in
 * double. Keras takes the SVD factor of a normal matrix; Gram-Schmidt gives an orthonormal basis of the
 * same span, which is what the recurrent kernel needs (documented difference: a different rotation). */
static int orthonormal_rows(double *a, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; i++) {
        double *ri = a + i * cols;
        for (int64_t j = 0; j < i; j++) {
            const double *rj = a + j * cols;
            double dot = 0;
            for (int64_t k = 0; k < cols; k++) dot += ri[k] * rj[k];
            for (int64_t k = 0; k < cols; k++) ri[k] -= dot * rj[k];
        }
        double nrm = 0;
        for (int64_t k = 0; k < cols; k++) nrm += ri[k] * ri[k];
        nrm = sqrt(nrm);
        if (nrm < 1e-12) return -1;
        for (int64_t k = 0; k < cols; k++) ri[k] /= nrm;
    }
    return 0;
}

static kh_status init_orthogonal(kh_rng *r, const kh_param_shape *p, float *w) {
    int64_t cols = p->dims[p->rank - 1];
    int64_t rows = p->numel / cols;
    int transpose = rows > cols; /* orthonormalise along the shorter side */
    int64_t R = transpose ? cols : rows, C = transpose ? rows : cols;
    double *a = malloc((size_t)(R * C) * sizeof *a);
    if (!a) return KH_ERR_NOMEM;
    int ok = -1;
    for (int attempt = 0; attempt < 4 && ok != 0; attempt++) {
        for (int64_t i = 0; i < R * C; i++) a[i] = kh_rng_normal(r);
        ok = orthonormal_rows(a, R, C);
    }
    if (ok != 0) {
        free(a);
        return KH_ERR_INTERNAL;
    }
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) w[i * cols + j] = (float)(transpose ? a[j * C + i] : a[i * C + j]);
    free(a);
    return KH_OK;
}

kh_status kh_init_param(kh_rng *r, const kh_param_shape *p, float *w) {
    switch (p->init) {
    case KH_INIT_GLOROT_UNIFORM: {
        double limit = sqrt(6.0 / (double)(p->fan_in + p->fan_out));
        for (int64_t i = 0; i < p->numel; i++) w[i] = (float)((2.0 * kh_rng_uniform(r) - 1.0) * limit);
        return KH_OK;
    }
    case KH_INIT_UNIFORM_005:
        for (int64_t i = 0; i < p->numel; i++) w[i] = (float)((2.0 * kh_rng_uniform(r) - 1.0) * 0.05);
        return KH_OK;
    case KH_INIT_ZEROS:
        memset(w, 0, (size_t)p->numel * sizeof *w);
        return KH_OK;
    case KH_INIT_LSTM_BIAS: {
        /* bias [4u] in gate order i, f, c, o: unit_forget_bias sets the f quarter to 1 */
        int64_t u = p->numel / 4;
        for (int64_t i = 0; i < p->numel; i++) w[i] = (i >= u && i < 2 * u) ? 1.0f : 0.0f;
        return KH_OK;
    }
    case KH_INIT_ORTHOGONAL:
        return init_orthogonal(r, p, w);
    default:
        return KH_ERR_INVALID;
    }
}
