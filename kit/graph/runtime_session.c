/* runtime_session.c — a graph backend as the session layer sees it (khost/kit/session.h): its capabilities,
 * its settings and the executor of each device kind at open, and the api table's model members
 * (khost/kit/graph_runtime.h). */
#include <stdio.h>

#include "khost/kit/graph_runtime.h"
#include "khost/kit/status.h"
#include "runtime_api.h"

/* The executor of a device kind, loading the GPU half on first use; NULL with *why set. */
static const kh_grt_exec *exec_of(const kh_grt_backend *be, uint32_t kind, const char **why) {
    if (kind == KH_DEVICE_CPU) return be->cpu;
    const kh_grt_half *h = be->cuda ? kh_half_load(be->cuda) : NULL;
    if (!h) *why = be->cuda ? kh_half_why(be->cuda) : "built without CUDA";
    return h ? &h->exec : NULL;
}

static kh_grt_desc g_desc; /* one graph backend per module */

static void grt_caps(uint32_t device_kind, kh_caps *c) {
    kh_graph_caps(c); /* what the graph layer lowers */
    const char *why = "";
    const kh_grt_exec *ex = exec_of(g_desc.be, device_kind, &why);
    if (ex) ex->caps(c);
    else snprintf(c->note, sizeof c->note, "%s", why);
}

/* The backend's settings, then the device kind's executor; a failure undoes the settings. */
static kh_status grt_open(kh_session *s, char *err, size_t errlen) {
    const kh_grt_backend *be = g_desc.be;
    kh_status st = be->configure ? be->configure(s, err, errlen) : KH_OK;
    if (st != KH_OK) return st;
    const char *why = "";
    const kh_grt_exec *ex = exec_of(be, s->dev.kind, &why);
    s->exec = ex;
    st = ex ? ex->open(s, err, errlen)
            : kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "%s open on %s: %s", be->name, s->dev.id, why);
    if (st != KH_OK && be->unconfigure) be->unconfigure(s);
    return st;
}

static void grt_close(kh_session *s) {
    kh_grt_ex(s)->close(s);
    if (kh_grt_be(s)->unconfigure) kh_grt_be(s)->unconfigure(s);
}

static kh_status grt_environment(kh_session *s, char *buf, size_t n) { return kh_grt_ex(s)->environment(s, buf, n); }

/* Called by the module entry (once per load in practice; every call writes the same values). */
const kh_module_desc *kh_grt_module(const kh_grt_backend *be, const kh_host_api *host) {
    g_desc.be = be;
    g_desc.sb = (kh_session_backend){
        .name = be->name,
        .version = be->version,
        .description = be->description,
        .session_size = be->session_size,
        .caps = grt_caps,
        .open = grt_open,
        .close = grt_close,
        .environment = grt_environment,
        .model = {
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
        },
    };
    return kh_session_module(&g_desc.sb, host);
}
