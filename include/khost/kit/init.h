/* khost/kit/init.h — Keras 2 weight initialisers drawn from kh_rng (kit/base/init.c). */
#ifndef KHOST_KIT_INIT_H
#define KHOST_KIT_INIT_H

#include "khost/abi.h"
#include "khost/kit/rng.h"
#include "khost/kit/spec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fill w (p->numel floats) for parameter p using init p->init, drawing from r. LSTM bias: zeros with the
 * forget quarter [u, 2u) set to 1. Orthogonal: QR of a normal matrix (rows = prod(dims[:-1])), as Keras. */
kh_status kh_init_param(kh_rng *r, const kh_param_shape *p, float *w);

#ifdef __cplusplus
}
#endif
#endif
