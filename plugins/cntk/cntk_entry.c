/* cntk_entry.c — the module's one exported symbol: the cntk backend described to the kit's backend-session layer
 * (khost/kit/session.h): the layer set it computes, the executor of each device kind (cpu/ in this module, the
 * CUDA one in the GPU half, loaded on first use), and the model members of cntk_api.c. */
#include <stdio.h>

#include "cntk_api.h"
#include "cpu/cpu.h"
#include "cuda/half.h"
#include "khost/kit/status.h"

/* The executor of a device kind; NULL with *why set when the GPU half cannot be loaded. */
static const cntk_exec *exec_of(uint32_t device_kind, const char **why) {
    return device_kind == KH_DEVICE_CUDA ? cntk_cuda_exec(why) : &cntk_cpu_exec;
}

static void cntk_caps(uint32_t device_kind, kh_caps *c) {
    for (uint32_t k = KH_LAYER_DENSE; k < KH_LAYER_KIND_END; k++) c->layer_kinds |= 1u << k;
    for (uint32_t a = 0; a < KH_ACT_END; a++) c->activations |= 1u << a;
    c->losses = (1u << KH_LOSS_NONE) | (1u << KH_LOSS_CATEGORICAL_CROSSENTROPY) | (1u << KH_LOSS_BINARY_CROSSENTROPY);
    c->optimizers = (1u << KH_OPT_SGD) | (1u << KH_OPT_RMSPROP) | (1u << KH_OPT_ADAM) | (1u << KH_OPT_ADADELTA);
    c->flags = KH_CAP_CONV_SAME | KH_CAP_ONEHOT_INPUT | KH_CAP_LSTM_SEQUENCES | KH_CAP_PREDICT | KH_CAP_PROBES;
    c->image_layout = KH_LAYOUT_NCHW;
    const char *why = "";
    const cntk_exec *ex = exec_of(device_kind, &why);
    if (ex) ex->caps(c);
    else snprintf(c->note, sizeof c->note, "%s", why);
}

static kh_status cntk_open(kh_session *ks, char *err, size_t errlen) {
    cntk_session *s = (cntk_session *)ks;
    const char *why = "";
    const cntk_exec *ex = exec_of(ks->dev.kind, &why);
    if (!ex) return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "cntk open on %s: %s", ks->dev.id, why);
    ks->exec = ex;
    if (ks->dev.kind == KH_DEVICE_CUDA) ks->threads = 1; /* streams and cuDNN/cuBLAS handles; no thread pool */
    return ex->open(s, err, errlen);
}

static void cntk_close(kh_session *ks) { cntk_exec_of((cntk_session *)ks)->close((cntk_session *)ks); }

static kh_status cntk_environment(kh_session *ks, char *buf, size_t n) {
    return cntk_exec_of((cntk_session *)ks)->environment((cntk_session *)ks, buf, n);
}

/* --list shows the description: it names the CPU path this build has (the caps note says it too). */
#ifdef CNTK_HAVE_DNNL
#define CNTK_CPU_DESC "oneDNN convolutions (blocked layouts, kept between chained ones; with them Dense and activations), OpenBLAS GEMM on CPU"
#else
#define CNTK_CPU_DESC "OpenBLAS GEMM, im2col on CPU (NCHW)"
#endif

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) {
    static kh_session_backend backend = {
        .name = "cntk",
        .version = CNTK_VERSION,
        .description = "vendor-library strategy: cuDNN/cuBLAS on GPU (fused cuDNN RNN); " CNTK_CPU_DESC,
        .session_size = sizeof(cntk_session),
        .caps = cntk_caps,
        .open = cntk_open,
        .close = cntk_close,
        .environment = cntk_environment,
    };
    backend.model = cntk_model_api;
    return kh_session_module(&backend, host);
}
