/* th_fail.c — the plugin's log lines, below every other file of it: they go to the host of the session, else
 * to the host the module entry was called with (a session's error text is the graph runtime's, th_fail). */
#include <stdarg.h>
#include <stdio.h>

#include "th.h"

void th_log(th_session *s, kh_log_level lvl, const char *fmt, ...) {
    const kh_host_api *h = s && s->rt.host ? s->rt.host : kh_grt_module_host();
    if (!h || !h->log) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    h->log(lvl, "theano", "%s", msg);
}
