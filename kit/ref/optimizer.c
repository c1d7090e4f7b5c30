/* kit/ref/optimizer.c — reference optimizers with Keras 2 semantics (SGD without momentum, RMSprop,
 * Adam, Adadelta) in float64: the per-element updates are khost/kit/formulas.h's. The per-step schedule
 * (kh_ref_lr_decayed, kh_ref_adam_lr_t) is kit/base/optimizer.c's, the one every backend uses too. */
#include "khost/kit/formulas.h"
#include "khost/kit/ref.h"

void kh_ref_sgd_update(double *w, const double *g, int64_t n, double lr) {
    // w (n), g (n)
    for (int64_t i = 0; i < n; i++) w[i] -= lr * g[i];
}

void kh_ref_rmsprop_update(double *w, double *a, const double *g, int64_t n, double lr, double rho, double eps) {
    // w, a (accumulator), g: (n)
    for (int64_t i = 0; i < n; i++) kh_rmsprop_update_d(&w[i], &a[i], g[i], lr, rho, eps);
}

void kh_ref_adam_update(double *w, double *m, double *v, const double *g, int64_t n, double lr_t, double beta_1,
                        double beta_2, double eps) {
    // w, m, v, g: (n)
    for (int64_t i = 0; i < n; i++) kh_adam_update_d(&w[i], &m[i], &v[i], g[i], lr_t, beta_1, beta_2, eps);
}

void kh_ref_adadelta_update(double *w, double *a, double *d, const double *g, int64_t n, double lr, double rho,
                            double eps) {
    // w, a (grad accumulator), d (delta accumulator), g: (n)
    for (int64_t i = 0; i < n; i++) kh_adadelta_update_d(&w[i], &a[i], &d[i], g[i], lr, rho, eps);
}
