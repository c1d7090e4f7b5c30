/* th_cuda_session.c — theano's GPU device kind: capabilities (a driver, a device, NVRTC, cuDNN of the major
 * version built against), sessions (the kit's: the host's primary context, one stream, cuBLAS and cuDNN bound
 * to it), the environment string, error text and checked device allocation. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "th_cuda_exec.h"
#include "khost/kit/cuda.h"
#include "khost/kit/status.h"

// --- capabilities ----------------------------------------------------------------------------------------------
#define NEVER_RUN "NEVER RUN ON A GPU"

void th_cuda_caps(kh_caps *c) {
    char why[384];
    c->available = 0;
    if (!kh_cu_load(why, sizeof why)) {
        snprintf(c->note, sizeof c->note, "%s", why);
        return;
    }
    int count = 0;
    char e[160];
    CUresult r = kh_cu.DeviceGetCount(&count);
    if (r != CUDA_SUCCESS || count == 0) {
        snprintf(c->note, sizeof c->note, "no CUDA device (%s)", r != CUDA_SUCCESS ? kh_cu_result_text(r, e, sizeof e) : "0 devices");
        return;
    }
    if (!th_nvrtc_load(why, sizeof why)) {
        snprintf(c->note, sizeof c->note, "%s", why);
        return;
    }
    size_t dnn = cudnnGetVersion();
    if (dnn / 10000 != CUDNN_MAJOR) {
        snprintf(c->note, sizeof c->note, "cuDNN %zu loaded, built against %d.x", dnn, CUDNN_MAJOR);
        return;
    }
    char ver[32];
    c->available = 1;
    snprintf(c->note, sizeof c->note, "generated CUDA C, NVRTC %s, driver API; cuBLAS GEMM, cuDNN %zu conv; NHWC (" NEVER_RUN ")",
             th_nvrtc_version(ver, sizeof ver), dnn / 10000);
}

// --- sessions ----------------------------------------------------------------------------------------------------
kh_status th_cuda_open(kh_grt_session *rts, char *err, size_t errlen) {
    /* any architecture: NVRTC compiles the generated code for the device's own (cs->k.arch) */
    const kh_cuda_open_opts o = {.plugin = "theano", .min_arch = 0};
    return kh_cuda_session_new(&rts->dev, &o, th_cuda_caps, sizeof(th_cuda_session), (void **)&((th_session *)rts)->cuda,
                               err, errlen);
}

void th_cuda_close(kh_grt_session *rts) {
    th_session *s = (th_session *)rts;
    kh_cuda_session_free(s->cuda);
    s->cuda = NULL;
}

kh_status th_cuda_environment(kh_grt_session *rts, char *buf, size_t n) {
    th_session *s = (th_session *)rts;
    char ver[32], common[320];
    kh_cuda_session_env(s->cuda ? &s->cuda->k : NULL, &s->rt.dev, common, sizeof common);
    snprintf(buf, n, "optimize=%d nvrtc=%s arch=%s %s runner=driver-api", s->set.passes,
             th_nvrtc_version(ver, sizeof ver), s->cuda ? s->cuda->k.arch : "?", common);
    size_t u = strlen(buf);
    if (s->cuda && s->cuda->conv_algos[0] && u < n)
        snprintf(buf + u, n - u, " cudnn_algos=%s", s->cuda->conv_algos);
    return KH_OK;
}

// --- errors ------------------------------------------------------------------------------------------------------
kh_status thc_fail(th_model *m, int f, int32_t node, const char *what, kh_status st, const char *fmt, ...) {
    char w[160], why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    const kh_graph *g = f >= 0 && f < KH_GFN_COUNT ? &m->fn[f].g : NULL;
    if (g && node >= 0 && node < g->n_nodes) {
        const kh_gnode *nd = &g->nodes[node];
        if (nd->attr.layer >= 0) snprintf(w, sizeof w, "%s (node %d, layer %d)", kh_gop_name(nd->op), node, nd->attr.layer);
        else snprintf(w, sizeof w, "%s (node %d)", kh_gop_name(nd->op), node);
    } else {
        snprintf(w, sizeof w, "%s", what);
    }
    return th_fail(m->s, st, w, "%s", why);
}

kh_status thc_err_cu(th_model *m, int f, int32_t node, const char *what, CUresult e, const char *call) {
    char fn[96], t[160];
    kh_call_name(call, fn, sizeof fn);
    return thc_fail(m, f, node, what, kh_cu_status(e), "%s (cu%s)",
                    kh_cu_result_text(e, t, sizeof t), fn);
}

kh_status thc_err_blas(th_model *m, int f, int32_t node, const char *what, cublasStatus_t e, const char *call) {
    char fn[96], t[320];
    kh_call_name(call, fn, sizeof fn);
    return thc_fail(m, f, node, what, kh_cublas_status(e), "%s (%s)", kh_cublas_errtext(e, t, sizeof t), fn);
}

kh_status thc_err_dnn(th_model *m, int f, int32_t node, const char *what, cudnnStatus_t e, const char *call) {
    char fn[96], t[320];
    kh_call_name(call, fn, sizeof fn);
    return thc_fail(m, f, node, what, kh_cudnn_status(e), "%s (%s)", kh_cudnn_errtext(e, t, sizeof t), fn);
}

// --- memory ------------------------------------------------------------------------------------------------------
kh_status thc_alloc(th_model *m, CUdeviceptr *p, size_t bytes, const char *what) {
    return kh_grt_dev_alloc(&m->rt, &m->cuda->dev, p, bytes, what);
}

void thc_free(CUdeviceptr p) { kh_cuda_buffer_free(p); }

kh_status thc_bind(th_model *m, const char *what) {
    THC_CU(m, -1, -1, what, kh_cu.CtxSetCurrent(m->s->cuda->k.ctx));
    return KH_OK;
}
