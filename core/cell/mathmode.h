/* core/cell/mathmode.h — the --math option of run, matrix and verify (kh_device.math, ABI 1.4): its names,
 * and what a session of a device gets and a record says. */
#ifndef KHOST_CORE_MATHMODE_H
#define KHOST_CORE_MATHMODE_H

#include <stddef.h>
#include <stdint.h>

#include "khost/backend.h"
#include "khost/abi.h"

/* "fp32" -> KH_MATH_FP32, "tf32" -> KH_MATH_TF32; 0 ok, -1 anything else. */
int kh_math_parse(const char *s, uint32_t *out);
/* "fp32" | "tf32" | "unknown" */
const char *kh_math_name(uint32_t math);

/* The math a session on dev gets for an asked mode, given the module's ABI minor: the cpu has no TF32 and a
 * module older than 1.4 does not read kh_device.math (both: fp32). note (may be NULL) gets why the asked mode
 * was not applied, or "". */
uint32_t kh_math_effective(uint32_t asked, const kh_device *dev, uint16_t module_abi_minor, const char *module,
                           char *note, size_t n);

/* Whether a record answers a run asked for `asked` (NULL: the default, fp32): its mode, or the one its note
 * says was ignored ("tf32 ignored ..."); a record from before --math was strict fp32. For --resume. */
struct kh_cell_record;
int kh_math_record_matches(const struct kh_cell_record *r, const char *asked);

#endif
