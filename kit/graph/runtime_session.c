/* runtime_session.c — the graph runtime's module descriptor and api table, capabilities, sessions, the
 * executor of each device kind, and the error text every call of a graph backend fails with
 * (khost/kit/graph_runtime.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/alloc.h"
#include "khost/kit/graph_runtime.h"
#include "khost/kit/status.h"
#include "runtime_api.h"

/* get_caps and open carry no session: the module's backend and host are set once, by its entry. */
static const kh_grt_backend *g_be;
static const kh_host_api *g_host;

const kh_host_api *kh_grt_module_host(void) { return g_host; }

kh_status kh_grt_fail(kh_grt_session *s, kh_status st, const char *what, const char *fmt, ...) {
    if (!s) return st;
    char why[440];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    snprintf(s->err, sizeof s->err, "%s %s on %s: %s", s->be->name, what, s->dev.id[0] ? s->dev.id : "cpu", why);
    return st;
}

void *kh_grt_alloc(kh_grt_session *s, size_t bytes) { return kh_host_alloc(s->host, bytes); }
void kh_grt_free(kh_grt_session *s, void *p) { kh_host_free(s->host, p); }

/* The executor of a device kind, loading the GPU half on first use; NULL with *why set. */
static const kh_grt_exec *exec_of(const kh_grt_backend *be, uint32_t kind, const char **why) {
    if (kind == KH_DEVICE_CPU) return be->cpu;
    const kh_grt_half *h = be->cuda ? kh_half_load(be->cuda) : NULL;
    if (!h) *why = be->cuda ? kh_half_why(be->cuda) : "built without CUDA";
    return h ? &h->exec : NULL;
}

static kh_status grt_get_caps(uint32_t device_kind, kh_caps *out) {
    if (!out) return KH_ERR_INVALID;
    kh_caps c;
    memset(&c, 0, sizeof c);
    c.struct_size = out->struct_size;
    kh_graph_caps(&c); /* what the graph layer lowers */
    if (device_kind == KH_DEVICE_CPU || device_kind == KH_DEVICE_CUDA) {
        const char *why = "";
        const kh_grt_exec *ex = exec_of(g_be, device_kind, &why);
        if (ex) ex->caps(&c);
        else snprintf(c.note, sizeof c.note, "%s", why);
    } else {
        snprintf(c.note, sizeof c.note, "unknown device kind %u", device_kind);
    }
    size_t n = out->struct_size < sizeof c ? out->struct_size : sizeof c;
    if (n < sizeof c.struct_size) return KH_ERR_INVALID;
    memcpy(out, &c, n);
    return KH_OK;
}

static kh_status grt_open(const kh_host_api *host, const kh_device *dev, kh_bsession **out, char *err,
                          size_t errlen) {
    if (!out) return KH_ERR_INVALID;
    *out = NULL;
    const kh_grt_backend *be = g_be;
    if (!dev) return kh_errf(err, errlen, KH_ERR_INVALID, "%s open: no device", be->name);
    const char *id = dev->id[0] ? dev->id : "?";
    if (dev->kind != KH_DEVICE_CPU && dev->kind != KH_DEVICE_CUDA)
        return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "%s open on %s: unknown device kind %u", be->name, id,
                       dev->kind);
    kh_grt_session *s = calloc(1, be->session_size);
    if (!s) return kh_errf(err, errlen, KH_ERR_NOMEM, "%s open on %s: out of memory", be->name, id);
    s->be = be;
    s->host = host ? host : g_host;
    size_t dn = dev->struct_size < sizeof s->dev ? dev->struct_size : sizeof s->dev;
    memcpy(&s->dev, dev, dn);
    s->dev.struct_size = sizeof s->dev;
    if (!s->dev.id[0])
        snprintf(s->dev.id, sizeof s->dev.id, dev->kind == KH_DEVICE_CUDA ? "cuda:%d" : "cpu", dev->ordinal);
    s->threads = KH_HAS_MEMBER(kh_device, dev->struct_size, threads) && dev->threads > 0 ? dev->threads : 1;
    kh_status st = be->configure ? be->configure(s, err, errlen) : KH_OK;
    if (st != KH_OK) {
        free(s);
        return st;
    }
    const char *why = "";
    s->ex = exec_of(be, dev->kind, &why);
    st = s->ex ? s->ex->open(s, err, errlen)
               : kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "%s open on %s: %s", be->name, id, why);
    if (st != KH_OK) {
        if (be->unconfigure) be->unconfigure(s);
        free(s);
        return st;
    }
    *out = (kh_bsession *)s;
    return KH_OK;
}

static void grt_close(kh_bsession *b) {
    kh_grt_session *s = (kh_grt_session *)b;
    if (!s) return;
    s->ex->close(s);
    if (s->be->unconfigure) s->be->unconfigure(s);
    free(s);
}

static const char *grt_last_error(kh_bsession *b) { return b ? ((kh_grt_session *)b)->err : "no session"; }

static kh_status grt_environment(kh_bsession *b, char *buf, size_t n) {
    if (!b || !buf || n == 0) return KH_ERR_INVALID;
    kh_grt_session *s = (kh_grt_session *)b;
    return s->ex->environment(s, buf, n);
}

static kh_backend_api g_api;
static kh_module_desc g_desc;

/* Called by the module entry (once per load in practice; every call writes the same values). */
const kh_module_desc *kh_grt_module(const kh_grt_backend *be, const kh_host_api *host) {
    g_be = be;
    g_host = host;
    g_api = (kh_backend_api){
        .struct_size = sizeof(kh_backend_api),
        .get_caps = grt_get_caps,
        .open = grt_open,
        .close = grt_close,
        .last_error = grt_last_error,
        .environment = grt_environment,
        .compile = kh_grt_compile,
        .model_free = kh_grt_model_free,
        .set_weight = kh_grt_set_weight,
        .get_weight = kh_grt_get_weight,
        .train_batch = kh_grt_train_batch,
        .eval_batch = kh_grt_eval_batch,
        .predict = kh_grt_predict,
        .read_metrics = kh_grt_read_metrics,
        .sync = kh_grt_sync,
        .forward = kh_grt_forward,
        .backward = kh_grt_backward,
        .get_grad = kh_grt_get_grad,
        /* the backend's optional members */
        .profile = be->profile,
        .compile_info = be->compile_info,
        .memory_info = kh_grt_memory_info,
    };
    g_desc = (kh_module_desc){
        KH_MODULE_DESC_HEAD,
        .kind = KH_MODULE_BACKEND,
        .name = be->name,
        .version = be->version,
        .description = be->description,
        .api = &g_api,
    };
    return &g_desc;
}
