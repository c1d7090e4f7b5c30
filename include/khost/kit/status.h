/* khost/kit/status.h — error text and the names of statuses, layers, activations, optimizers and losses (kit/base/status.c). */
#ifndef KHOST_KIT_STATUS_H
#define KHOST_KIT_STATUS_H

#include <stddef.h>
#include <stdint.h>

#include "khost/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* snprintf into buf (always terminated, truncated if needed); returns `status` so callers can
 * `return kh_errf(err, n, KH_ERR_DATA, "%s: bad magic 0x%08x", path, magic);` */
kh_status kh_errf(char *buf, size_t n, kh_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* kh_errf into an object's own `char err[N]` member: `return KH_ERRF_TO(d, KH_ERR_DATA, "%s: short", path);`.
 * A macro because sizeof must see the array itself; passed to a function it would be only a pointer. */
#define KH_ERRF_TO(obj, status, ...) kh_errf((obj)->err, sizeof (obj)->err, (status), __VA_ARGS__)
const char *kh_status_name(kh_status s);
const char *kh_layer_kind_name(uint32_t kind);   /* "dense", "conv2d", ... ("?" when unknown) */
const char *kh_activation_name(uint32_t act);    /* "relu", ... */
const char *kh_optimizer_name(uint32_t opt);
const char *kh_loss_name(uint32_t loss);

#ifdef __cplusplus
}
#endif
#endif
