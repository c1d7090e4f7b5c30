/* kit/session/session.c — the backend-session layer (khost/kit/session.h): the module descriptor, sessions,
 * the error text and the compile frame every backend shares. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/alloc.h"
#include "khost/kit/session.h"
#include "khost/kit/status.h"

/* get_caps and open carry no session: the module's backend and host are set once, by its entry. */
static const kh_session_backend *g_backend;
static const kh_host_api *g_host;

const kh_host_api *kh_session_module_host(void) { return g_host; }

static const char *device_name(const kh_session *s) { return s->dev.id[0] ? s->dev.id : "cpu"; }

/* "<backend> <what> on <device>: <why>" into the session's error. */
static kh_status write_err(kh_session *s, kh_status st, const char *what, const char *fmt, va_list ap) {
    char why[400];
    vsnprintf(why, sizeof why, fmt, ap);
    snprintf(s->err, sizeof s->err, "%s %s on %s: %s", s->backend->name, what, device_name(s), why);
    return st;
}

kh_status kh_session_fail(kh_session *s, kh_status st, const char *what, const char *fmt, ...) {
    if (!s) return st;
    va_list ap;
    va_start(ap, fmt);
    write_err(s, st, what, fmt, ap);
    va_end(ap);
    return st;
}

kh_status kh_session_layer_fail(kh_session *s, kh_status st, uint32_t kind, int32_t index, const char *op,
                                const char *fmt, ...) {
    if (!s) return st;
    char what[96];
    snprintf(what, sizeof what, "%s[%d] %s", kh_layer_kind_name(kind), index, op);
    va_list ap;
    va_start(ap, fmt);
    write_err(s, st, what, fmt, ap);
    va_end(ap);
    return st;
}

void *kh_session_alloc(kh_session *s, size_t bytes) { return kh_host_alloc(s->host, bytes); }
void kh_session_free(kh_session *s, void *p) { kh_host_free(s->host, p); }

kh_status kh_session_need(kh_session *s, const char *op, const char *names, int present) {
    return present ? KH_OK : kh_session_fail(s, KH_ERR_INVALID, op, "missing %s", names);
}

// --- the session members of the api table ----------------------------------------------------------------
static kh_status session_get_caps(uint32_t device_kind, kh_caps *out) {
    if (!out) return KH_ERR_INVALID;
    kh_caps c;
    memset(&c, 0, sizeof c);
    c.struct_size = out->struct_size;
    if (device_kind == KH_DEVICE_CPU || device_kind == KH_DEVICE_CUDA) g_backend->caps(device_kind, &c);
    else snprintf(c.note, sizeof c.note, "unknown device kind %u", device_kind);
    size_t n = out->struct_size < sizeof c ? out->struct_size : sizeof c;
    if (n < sizeof c.struct_size) return KH_ERR_INVALID;
    memcpy(out, &c, n);
    return KH_OK;
}

static kh_status session_open(const kh_host_api *host, const kh_device *dev, kh_bsession **out, char *err,
                              size_t errlen) {
    if (!out) return KH_ERR_INVALID;
    *out = NULL;
    const kh_session_backend *be = g_backend;
    if (!dev) return kh_errf(err, errlen, KH_ERR_INVALID, "%s open: no device", be->name);
    const char *id = dev->id[0] ? dev->id : "?";
    if (dev->kind != KH_DEVICE_CPU && dev->kind != KH_DEVICE_CUDA)
        return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "%s open on %s: unknown device kind %u", be->name, id,
                       dev->kind);
    kh_session *s = calloc(1, be->session_size);
    if (!s) return kh_errf(err, errlen, KH_ERR_NOMEM, "%s open on %s: out of memory", be->name, id);
    s->backend = be;
    s->host = host ? host : g_host;
    size_t dn = dev->struct_size < sizeof s->dev ? dev->struct_size : sizeof s->dev;
    memcpy(&s->dev, dev, dn);
    s->dev.struct_size = sizeof s->dev;
    if (!s->dev.id[0])
        snprintf(s->dev.id, sizeof s->dev.id, dev->kind == KH_DEVICE_CUDA ? "cuda:%d" : "cpu", dev->ordinal);
    s->threads = KH_HAS_MEMBER(kh_device, dev->struct_size, threads) && dev->threads > 0 ? dev->threads : 1;
    kh_status st = be->open(s, err, errlen);
    if (st != KH_OK) {
        free(s);
        return st;
    }
    *out = (kh_bsession *)s;
    return KH_OK;
}

static void session_close(kh_bsession *b) {
    kh_session *s = (kh_session *)b;
    if (!s) return;
    s->backend->close(s);
    free(s);
}

static const char *session_last_error(kh_bsession *b) { return b ? ((kh_session *)b)->err : "no session"; }

static kh_status session_environment(kh_bsession *b, char *buf, size_t n) {
    if (!b || !buf || n == 0) return KH_ERR_INVALID;
    kh_session *s = (kh_session *)b;
    return s->backend->environment(s, buf, n);
}

kh_status kh_session_compile(kh_bsession *bs, const kh_model_spec *spec, const kh_compile_opts *opts,
                             size_t model_size, kh_status (*build)(kh_bmodel *m, const kh_model_spec *spec,
                                                                   const kh_compile_opts *opts),
                             void (*model_free)(kh_bmodel *m), kh_bmodel **out) {
    if (!out) return KH_ERR_INVALID;
    *out = NULL;
    if (!bs) return KH_ERR_INVALID;
    kh_session *s = (kh_session *)bs;
    if (!spec) return kh_session_fail(s, KH_ERR_INVALID, "compile", "no model spec");
    if (!opts || opts->max_batch <= 0) return kh_session_fail(s, KH_ERR_INVALID, "compile", "max_batch must be positive");
    kh_bmodel *m = calloc(1, model_size);
    if (!m) return kh_session_fail(s, KH_ERR_NOMEM, "compile", "out of host memory");
    *(kh_session **)(void *)m = s;
    kh_status st = build(m, spec, opts);
    if (st != KH_OK) {
        model_free(m);
        return st;
    }
    *out = m;
    return KH_OK;
}

static kh_backend_api g_api;
static kh_module_desc g_desc;

/* Called by the module entry (once per load in practice; every call writes the same values). */
const kh_module_desc *kh_session_module(const kh_session_backend *b, const kh_host_api *host) {
    g_backend = b;
    g_host = host;
    g_api = b->model;
    g_api.struct_size = sizeof(kh_backend_api);
    g_api.get_caps = session_get_caps;
    g_api.open = session_open;
    g_api.close = session_close;
    g_api.last_error = session_last_error;
    g_api.environment = session_environment;
    g_desc = (kh_module_desc){
        KH_MODULE_DESC_HEAD,
        .kind = KH_MODULE_BACKEND,
        .name = b->name,
        .version = b->version,
        .description = b->description,
        .api = &g_api,
    };
    return &g_desc;
}
