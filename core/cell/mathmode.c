/* core/cell/mathmode.c — see mathmode.h. */
#include "cell/mathmode.h"
#include "results/results.h"

#include <stdio.h>
#include <string.h>

int kh_math_parse(const char *s, uint32_t *out) {
    if (s && !strcmp(s, "fp32")) *out = KH_MATH_FP32;
    else if (s && !strcmp(s, "tf32")) *out = KH_MATH_TF32;
    else return -1;
    return 0;
}

const char *kh_math_name(uint32_t math) {
    return math == KH_MATH_FP32 ? "fp32" : math == KH_MATH_TF32 ? "tf32" : "unknown";
}

uint32_t kh_math_effective(uint32_t asked, const kh_device *dev, uint16_t module_abi_minor, const char *module,
                           char *note, size_t n) {
    if (note && n) note[0] = 0;
    if (asked == KH_MATH_FP32) return KH_MATH_FP32;
    if (dev->kind != KH_DEVICE_CUDA) {
        if (note && n) snprintf(note, n, "%s ignored on %s: the cpu has no TF32, strict fp32", kh_math_name(asked), dev->id);
        return KH_MATH_FP32;
    }
    if (module_abi_minor < 4) {
        if (note && n)
            snprintf(note, n, "%s ignored: %s was built against ABI 1.%u, which has no math mode (its own fp32)",
                     kh_math_name(asked), module ? module : "the module", (unsigned)module_abi_minor);
        return KH_MATH_FP32;
    }
    return asked;
}

int kh_math_record_matches(const kh_cell_record *r, const char *asked) {
    if (!asked) asked = "fp32";
    const char *had = r->math_note[0] ? r->math_note : r->math[0] ? r->math : "fp32";
    return strncmp(had, asked, strlen(asked)) == 0;
}
