/* kit/base/optimizer.c — an optimizer spec's Keras 2 defaults and the learning rate of each step, the one
 * definition every backend's update uses (cntk's fused passes, the graph backends' Apply ops). */
#include <math.h>

#include "khost/kit/formulas.h" /* KH_EPSILON */
#include "khost/kit/optimizer.h"
#include "khost/kit/ref.h"      /* declares the schedule below (the reference kit's public names) */

static double or_default(float v, double dflt) { return v > 0.0f ? (double)v : dflt; }

kh_optimizer_spec kh_optimizer_resolve(const kh_optimizer_spec *o) {
    kh_optimizer_spec r = *o;
    r.lr = (float)or_default(o->lr, o->kind == KH_OPT_ADADELTA ? 1.0 : o->kind == KH_OPT_SGD ? 0.01 : 0.001);
    r.rho = (float)or_default(o->rho, o->kind == KH_OPT_ADADELTA ? 0.95 : 0.9);
    r.beta_1 = (float)or_default(o->beta_1, 0.9);
    r.beta_2 = (float)or_default(o->beta_2, 0.999);
    r.epsilon = (float)or_default(o->epsilon, KH_EPSILON);
    return r;
}

/* `decay` (lr / (1 + decay * iterations)) and Adam's bias correction, iterations counted before the step: one
 * definition for the float64 reference and every backend. */
double kh_ref_lr_decayed(double lr, double decay, int64_t iterations) {
    return decay > 0.0 ? lr / (1.0 + decay * (double)iterations) : lr;
}

double kh_ref_adam_lr_t(double lr, double beta_1, double beta_2, int64_t iterations) {
    double t = (double)iterations + 1.0;
    return lr * sqrt(1.0 - pow(beta_2, t)) / (1.0 - pow(beta_1, t));
}

double kh_optimizer_step_lr(const kh_optimizer_spec *o, int64_t iterations) {
    double lr = kh_ref_lr_decayed((double)o->lr, (double)o->decay, iterations);
    return o->kind == KH_OPT_ADAM ? kh_ref_adam_lr_t(lr, (double)o->beta_1, (double)o->beta_2, iterations) : lr;
}

int kh_optimizer_slots(uint32_t kind) {
    switch (kind) {
    case KH_OPT_RMSPROP: return 1;
    case KH_OPT_ADAM: case KH_OPT_ADADELTA: return 2;
    default: return 0;
    }
}
