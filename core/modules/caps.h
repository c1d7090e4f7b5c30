/* core/modules/caps.h — does a backend's capability set cover a model spec? */
#ifndef KHOST_CORE_CAPS_H
#define KHOST_CORE_CAPS_H

#include <stddef.h>

#include "khost/backend.h"

/* 0 when every layer, option, loss and optimizer of spec is supported; else -1 and why names the first
 * missing piece ("layer 3 conv2d padding=same"). */
/* "device kind not available: <the backend's note>" — why a cell on an unavailable device kind cannot run. */
void kh_caps_unavailable_reason(const kh_caps *caps, char *why, size_t n);
int kh_caps_check(const kh_caps *caps, const kh_model_spec *spec, char *why, size_t n);
/* "dense activation dropout ..." list of the supported layer kinds. */
void kh_caps_describe(const kh_caps *caps, char *buf, size_t n);
#endif
