/* cntk_entry.c — the module's one exported symbol, its descriptor, capabilities and device sessions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cntk.h"
#include "cuda/gpu.h"
#include "khost/kit/status.h"
#include "khost/kit/alloc.h"

static const kh_host_api *g_host; /* set once by the entry point; read-only afterwards */

// --- memory ----------------------------------------------------------------------------------------------
void *cntk_alloc(cntk_session *s, size_t bytes) { return kh_host_alloc(s->host, bytes); }

void cntk_free(cntk_session *s, void *p) { kh_host_free(s->host, p); }

// --- capabilities and sessions ---------------------------------------------------------------------------
static kh_status cntk_get_caps(uint32_t device_kind, kh_caps *out) {
    if (!out) return KH_ERR_INVALID;
    kh_caps c;
    memset(&c, 0, sizeof c);
    c.struct_size = out->struct_size;
    for (uint32_t k = KH_LAYER_DENSE; k < KH_LAYER_KIND_END; k++) c.layer_kinds |= 1u << k;
    for (uint32_t a = 0; a < KH_ACT_END; a++) c.activations |= 1u << a;
    c.losses = (1u << KH_LOSS_NONE) | (1u << KH_LOSS_CATEGORICAL_CROSSENTROPY) | (1u << KH_LOSS_BINARY_CROSSENTROPY);
    c.optimizers = (1u << KH_OPT_SGD) | (1u << KH_OPT_RMSPROP) | (1u << KH_OPT_ADAM) | (1u << KH_OPT_ADADELTA);
    c.flags = KH_CAP_CONV_SAME | KH_CAP_ONEHOT_INPUT | KH_CAP_LSTM_SEQUENCES | KH_CAP_PREDICT | KH_CAP_PROBES;
    c.image_layout = KH_LAYOUT_NCHW;
    if (device_kind == KH_DEVICE_CPU) {
        c.available = cntk_blas_available();
        char note[sizeof c.note];
        snprintf(c.note, sizeof c.note, "%s", c.available ? cntk_cpu_note(note, sizeof note)
                                                          : "built without BLAS: CPU path unavailable");
    } else if (device_kind == KH_DEVICE_CUDA) {
        cntk_cuda_caps(&c); /* cuDNN/cuBLAS: available only with a usable driver and device */
    } else {
        c.available = 0;
        snprintf(c.note, sizeof c.note, "unknown device kind %u", device_kind);
    }
    size_t n = out->struct_size < sizeof c ? out->struct_size : sizeof c;
    if (n < sizeof c.struct_size) return KH_ERR_INVALID;
    memcpy(out, &c, n);
    return KH_OK;
}

static kh_status cntk_open(const kh_host_api *host, const kh_device *dev, kh_bsession **out, char *err,
                           size_t errlen) {
    if (!out) return KH_ERR_INVALID;
    *out = NULL;
    if (!dev) return kh_errf(err, errlen, KH_ERR_INVALID, "cntk open: no device");
    const char *id = dev->id[0] ? dev->id : "?";
    if (dev->kind != KH_DEVICE_CPU && dev->kind != KH_DEVICE_CUDA)
        return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "cntk open on %s: unknown device kind %u", id, dev->kind);
    if (dev->kind == KH_DEVICE_CPU && !cntk_blas_available())
        return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "cntk open on %s: built without BLAS", id);
    cntk_session *s = calloc(1, sizeof *s);
    if (!s) return kh_errf(err, errlen, KH_ERR_NOMEM, "cntk open on %s: out of memory", id);
    s->host = host ? host : g_host;
    size_t dn = dev->struct_size < sizeof s->dev ? dev->struct_size : sizeof s->dev;
    memcpy(&s->dev, dev, dn);
    s->dev.struct_size = sizeof s->dev;
    if (!s->dev.id[0]) snprintf(s->dev.id, sizeof s->dev.id, dev->kind == KH_DEVICE_CUDA ? "cuda:%d" : "cpu",
                                  dev->ordinal);
    if (dev->kind == KH_DEVICE_CUDA) { /* streams and cuDNN/cuBLAS handles; no thread pool */
        kh_status cst = cntk_cuda_open(s, err, errlen);
        if (cst != KH_OK) {
            free(s);
            return cst;
        }
        s->threads = 1;
        *out = s;
        return KH_OK;
    }
    s->threads = KH_HAS_MEMBER(kh_device, dev->struct_size, threads) && dev->threads > 0 ? dev->threads : 1;
    /* [plugin cntk] onednn_chain: 1 (default) keeps a tensor two oneDNN convolutions pass in its blocked layout
     * (cpu/conv_onednn.c); 0 reorders it at both layers' edges, for measuring what the chain saves */
    const char *chain = s->host && s->host->config_get ? s->host->config_get("plugin cntk", "onednn_chain") : NULL;
    if (chain && *chain && strcmp(chain, "0") && strcmp(chain, "1")) {
        kh_status bad = kh_errf(err, errlen, KH_ERR_INVALID,
                                "cntk open on %s: [plugin cntk] onednn_chain = '%s': expected 0 or 1", id, chain);
        free(s);
        return bad;
    }
    s->onednn_chain = !chain || strcmp(chain, "0") != 0;
    kh_status st = cntk_pool_create(s->threads, &s->pool);
    if (st != KH_OK) {
        int want = s->threads;
        free(s);
        return kh_errf(err, errlen, st, "cntk open on %s: cannot start %d worker threads", id, want);
    }
    s->threads = cntk_pool_threads(s->pool);
    cntk_blas_set_threads(1); /* BLAS calls stay on the calling thread; the pool splits big GEMMs */
    *out = s;
    return KH_OK;
}

static void cntk_close(kh_bsession *s) {
    if (!s) return;
    if (s->cuda) cntk_cuda_close(s);
    cntk_pool_destroy(s->pool);
    free(s);
}

static const char *cntk_last_error(kh_bsession *s) { return s ? s->err : "cntk: no session"; }

static kh_status cntk_environment(kh_bsession *s, char *buf, size_t n) {
    if (!s || !buf || n == 0) return KH_ERR_INVALID;
    if (s->dev.kind == KH_DEVICE_CUDA) return cntk_cuda_environment(s, buf, n);
    char ver[64], path[32];
    const char *isa = cntk_onednn_isa();
    snprintf(buf, n, "blas=%s (single-threaded calls) threads=%d cpu_path=%s%s%s%s", cntk_blas_version(ver, sizeof ver),
             s->threads, cntk_cpu_path(path, sizeof path), isa ? " onednn_isa=" : "", isa ? isa : "",
             cntk_cpu_onednn() && !s->onednn_chain ? " onednn_chain=0" : "");
    return KH_OK;
}

// --- the descriptor --------------------------------------------------------------------------------------
static const kh_backend_api cntk_backend_api = {
    .struct_size = sizeof(kh_backend_api),
    .get_caps = cntk_get_caps,
    .open = cntk_open,
    .close = cntk_close,
    .last_error = cntk_last_error,
    .environment = cntk_environment,
    .compile = cntk_api_compile,
    .model_free = cntk_api_model_free,
    .set_weight = cntk_api_set_weight,
    .get_weight = cntk_api_get_weight,
    .train_batch = cntk_api_train_batch,
    .eval_batch = cntk_api_eval_batch,
    .predict = cntk_api_predict,
    .read_metrics = cntk_api_read_metrics,
    .sync = cntk_api_sync,
    .forward = cntk_api_forward,
    .backward = cntk_api_backward,
    .get_grad = cntk_api_get_grad,
    .profile = cntk_api_profile,
    .memory_info = cntk_api_memory_info,
};

/* --list shows the description: it names the CPU path this build has (the caps note says it too). */
#ifdef CNTK_HAVE_DNNL
#define CNTK_CPU_DESC "oneDNN convolutions (blocked layouts, kept between chained ones; with them Dense and activations), OpenBLAS GEMM on CPU"
#else
#define CNTK_CPU_DESC "OpenBLAS GEMM, im2col on CPU (NCHW)"
#endif

static const kh_module_desc g_desc = {
    KH_MODULE_DESC_HEAD,
    .kind = KH_MODULE_BACKEND,
    .name = "cntk",
    .version = CNTK_VERSION,
    .description = "vendor-library strategy: cuDNN/cuBLAS on GPU (fused cuDNN RNN); " CNTK_CPU_DESC,
    .api = &cntk_backend_api,
};

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) {
    g_host = host;
    return &g_desc;
}
