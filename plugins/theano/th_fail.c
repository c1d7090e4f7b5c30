/* th_fail.c — the plugin's error text, log lines and buffers, below every other file of it: a session's last
 * error names the backend, the device and the step; log lines go to the host of the session, else to the
 * host the module entry was called with. */
#include <stdarg.h>
#include <stdio.h>

#include "th.h"
#include "khost/kit/alloc.h"

static const kh_host_api *g_host;

void th_set_module_host(const kh_host_api *host) { g_host = host; }
const kh_host_api *th_module_host(void) { return g_host; }

kh_status th_fail(th_session *s, kh_status st, const char *what, const char *fmt, ...) {
    if (!s) return st;
    char why[440];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    snprintf(s->err, sizeof s->err, "theano %s on %s: %s", what, s->dev.id[0] ? s->dev.id : "cpu", why);
    return st;
}

void th_log(th_session *s, kh_log_level lvl, const char *fmt, ...) {
    const kh_host_api *h = s && s->host ? s->host : g_host;
    if (!h || !h->log) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    h->log(lvl, "theano", "%s", msg);
}

void *th_alloc(th_session *s, size_t bytes) { return kh_host_alloc(s->host, bytes); }

void th_free(th_session *s, void *p) { kh_host_free(s->host, p); }
