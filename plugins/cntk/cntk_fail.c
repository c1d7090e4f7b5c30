/* cntk_fail.c — the session's error text, "cntk <what> on <device>: <why>". Compiled into cntk.so and into the
 * CUDA half (cntk_cuda.so), which writes the same session's error buffer. */
#include <stdarg.h>
#include <stdio.h>

#include "cntk.h"
#include "khost/kit/status.h"

kh_status cntk_fail(cntk_session *s, kh_status st, const char *what, const char *fmt, ...) {
    if (!s) return st;
    char why[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    snprintf(s->err, sizeof s->err, "cntk %s on %s: %s", what, s->dev.id[0] ? s->dev.id : "cpu", why);
    return st;
}

kh_status cntk_layer_fail(cntk_session *s, kh_status st, uint32_t kind, int32_t index, const char *op,
                          const char *fmt, ...) {
    if (!s) return st;
    char why[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    snprintf(s->err, sizeof s->err, "cntk %s[%d] %s on %s: %s", kh_layer_kind_name(kind), index, op,
             s->dev.id[0] ? s->dev.id : "cpu", why);
    return st;
}
