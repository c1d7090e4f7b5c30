/* khost/kit/optimizer.h — Keras 2 optimizer defaults and the per-step learning rate every backend uses (kit/base/optimizer.c). */
#ifndef KHOST_KIT_OPTIMIZER_H
#define KHOST_KIT_OPTIMIZER_H

#include <stdint.h>

#include "khost/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A spec with its zero fields replaced by Keras 2's defaults (lr, rho, betas, epsilon). */
kh_optimizer_spec kh_optimizer_resolve(const kh_optimizer_spec *o);
/* The learning rate of step `iterations` (0 first): lr / (1 + decay * iterations), and for Adam with the bias
 * correction sqrt(1 - b2^t) / (1 - b1^t) folded in — what every backend's update multiplies by. */
double kh_optimizer_step_lr(const kh_optimizer_spec *o, int64_t iterations);
/* Per-element state an optimizer keeps: SGD 0, RMSprop 1, Adam 2, Adadelta 2. */
int kh_optimizer_slots(uint32_t kind);

#ifdef __cplusplus
}
#endif
#endif
