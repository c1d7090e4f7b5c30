/* cpu/session.c — the CPU executor's session side: whether the device kind is available (a build with BLAS),
 * a session's settings and worker pool, and the environment string its records carry. */
#include <stdio.h>
#include <string.h>

#include "cpu/cpu.h"
#include "khost/kit/status.h"

void cntk_cpu_caps(kh_caps *c) {
    c->available = cntk_blas_available();
    char note[sizeof c->note];
    snprintf(c->note, sizeof c->note, "%s", c->available ? cntk_cpu_note(note, sizeof note)
                                                         : "built without BLAS: CPU path unavailable");
}

/* BLAS calls stay on the calling thread; the pool splits big GEMMs. */
kh_status cntk_cpu_open(cntk_session *s, char *err, size_t errlen) {
    const char *id = s->base.dev.id;
    if (!cntk_blas_available()) return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "cntk open on %s: built without BLAS", id);
    /* [plugin cntk] onednn_chain: 1 (default) keeps a tensor two oneDNN convolutions pass in its blocked layout
     * (cpu/conv_onednn.c); 0 reorders it at both layers' edges, for measuring what the chain saves */
    const kh_host_api *host = s->base.host;
    const char *chain = host && host->config_get ? host->config_get("plugin cntk", "onednn_chain") : NULL;
    if (chain && *chain && strcmp(chain, "0") && strcmp(chain, "1"))
        return kh_errf(err, errlen, KH_ERR_INVALID, "cntk open on %s: [plugin cntk] onednn_chain = '%s': expected 0 or 1",
                       id, chain);
    s->onednn_chain = !chain || strcmp(chain, "0") != 0;
    kh_status st = cntk_pool_create(s->base.threads, &s->pool);
    if (st != KH_OK) return kh_errf(err, errlen, st, "cntk open on %s: cannot start %d worker threads", id, s->base.threads);
    s->base.threads = cntk_pool_threads(s->pool);
    cntk_blas_set_threads(1);
    return KH_OK;
}

void cntk_cpu_close(cntk_session *s) { cntk_pool_destroy(s->pool); }

kh_status cntk_cpu_environment(cntk_session *s, char *buf, size_t n) {
    char ver[64], path[32];
    const char *isa = cntk_onednn_isa();
    snprintf(buf, n, "blas=%s (single-threaded calls) threads=%d cpu_path=%s%s%s%s", cntk_blas_version(ver, sizeof ver),
             s->base.threads, cntk_cpu_path(path, sizeof path), isa ? " onednn_isa=" : "", isa ? isa : "",
             cntk_cpu_onednn() && !s->onednn_chain ? " onednn_chain=0" : "");
    return KH_OK;
}
