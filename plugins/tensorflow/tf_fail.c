/* tf_fail.c — how a run fails: a run of a compiled function keeps the first failing node's op, index and layer
 * (later failures keep the first), so every kernel file reports through one function below it (a session's
 * error is the graph runtime's, tf_fail). Built into tensorflow.so and into its GPU half. */
#include <stdarg.h>
#include <stdio.h>

#include "tf.h"

kh_status tf_run_fail(tf_run *r, int32_t i, kh_status st, const char *fmt, ...) {
    int32_t expected = 0;
    if (!atomic_compare_exchange_strong(&r->failed, &expected, (int32_t)st)) return st;
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    const kh_gnode *nd = &r->f->g->nodes[i];
    if (nd->attr.layer >= 0)
        snprintf(r->err, sizeof r->err, "%s (node %d, layer %d): %s", kh_gop_name(nd->op), i, nd->attr.layer, why);
    else
        snprintf(r->err, sizeof r->err, "%s (node %d): %s", kh_gop_name(nd->op), i, why);
    return st;
}
