/* kit/ref/optimizer.c — reference optimizers with Keras 2 semantics (SGD without momentum, RMSprop,
 * Adam, Adadelta): the per-element updates are khost/kit/formulas.h's; this file adds the per-step schedule,
 * `decay` (lr / (1 + decay * iterations)) and Adam's bias correction, iterations counted before the step. */
#include <math.h>

#include "khost/kit/formulas.h"
#include "khost/kit/ref.h"

double kh_ref_lr_decayed(double lr, double decay, int64_t iterations) {
    return decay > 0.0 ? lr / (1.0 + decay * (double)iterations) : lr;
}

double kh_ref_adam_lr_t(double lr, double beta_1, double beta_2, int64_t iterations) {
    double t = (double)iterations + 1.0;
    return lr * sqrt(1.0 - pow(beta_2, t)) / (1.0 - pow(beta_1, t));
}

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
