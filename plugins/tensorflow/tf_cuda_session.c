/* tf_cuda_session.c — the CUDA device kind of the tensorflow backend: capabilities (a driver? a device?
 * cuDNN of the major version built against?), sessions (one stream; cuBLAS and cuDNN handles bound to it, on
 * the host's primary context), the environment string, and the executor's error text and checked allocation.
 *
 * Contexts: the host retains the device's primary context and makes it current before every call; the kit's
 * session (kh_cuda_session_open) checks it is that one and creates none. The CUDA runtime (linked statically,
 * so the module loads where libcuda.so.1 is missing) runs on the context current on the thread. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf_cuda_exec.h"
#include "khost/kit/cuda.h"
#include "khost/kit/status.h"

#ifndef TF_CUDA_MIN_ARCH
#define TF_CUDA_MIN_ARCH 90 /* lowest SASS/PTX target compiled in (CMake passes it from KHOST_CUDA_ARCHS) */
#endif

// --- capabilities ----------------------------------------------------------------------------------------
void tf_cuda_caps(kh_caps *c) {
    int count = 0;
    size_t dnn = 0;
    c->available = 0;
    if (!kh_cudart_usable(&count, &dnn, c->note, sizeof c->note)) return;
    c->available = 1;
    snprintf(c->note, sizeof c->note,
             "one stream, an op per launch: cuBLAS MatMul, cuDNN %zu.%zu Conv2D, own kernels; NHWC; sm_%d+ (%d device%s)",
             dnn / 10000, (dnn % 10000) / 100, TF_CUDA_MIN_ARCH, count, count == 1 ? "" : "s");
}

// --- sessions --------------------------------------------------------------------------------------------
kh_status tf_cuda_open(kh_grt_session *rts, char *err, size_t errlen) {
    const kh_cuda_open_opts o = {.plugin = "tensorflow", .min_arch = TF_CUDA_MIN_ARCH};
    return kh_cuda_session_new(&rts->dev, &o, tf_cuda_caps, sizeof(tf_cuda_session), (void **)&((tf_session *)rts)->cuda,
                               err, errlen);
}

void tf_cuda_close(kh_grt_session *rts) {
    tf_session *s = (tf_session *)rts;
    kh_cuda_session_free(s->cuda);
    cudaGetLastError(); /* the runtime's sticky error must not reach the next session */
    s->cuda = NULL;
}

kh_status tf_cuda_environment(kh_grt_session *rts, char *buf, size_t n) {
    tf_session *s = (tf_session *)rts;
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    char common[320];
    kh_cuda_session_env(s->cuda ? &s->cuda->k : NULL, &s->rt.dev, common, sizeof common);
    snprintf(buf, n, "cuda=%d.%d %s executor=single-stream", rt / 1000, (rt % 1000) / 10, common);
    size_t u = strlen(buf);
    if (s->cuda && s->cuda->conv_algos[0] && u < n)
        snprintf(buf + u, n - u, " cudnn_algos=%s", s->cuda->conv_algos);
    return KH_OK;
}

// --- errors ----------------------------------------------------------------------------------------------
static void node_what(const kh_graph *g, int32_t node, const char *what, char *buf, size_t n) {
    if (!g || node < 0 || node >= g->n_nodes) {
        snprintf(buf, n, "%s", what);
        return;
    }
    const kh_gnode *nd = &g->nodes[node];
    if (nd->attr.layer >= 0) snprintf(buf, n, "%s (node %d, layer %d)", kh_gop_name(nd->op), node, nd->attr.layer);
    else snprintf(buf, n, "%s (node %d)", kh_gop_name(nd->op), node);
}

kh_status tfc_fail(tf_model *m, const kh_graph *g, int32_t node, const char *what, kh_status st, const char *fmt, ...) {
    char w[128], why[320];
    node_what(g, node, what, w, sizeof w);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return tf_fail(m->s, st, w, "%s", why);
}

static kh_status report(tf_model *m, const kh_graph *g, int32_t node, const char *what, kh_status st, const char *name,
                        const char *call) {
    char fn[96];
    kh_call_name(call, fn, sizeof fn);
    return tfc_fail(m, g, node, what, st, "%s (%s)", name, fn);
}

kh_status tfc_err_cuda(tf_model *m, const kh_graph *g, int32_t node, const char *what, cudaError_t e, const char *call) {
    cudaGetLastError(); /* clear a non-sticky error so later calls report their own */
    char t[320];
    return report(m, g, node, what, e == cudaErrorMemoryAllocation ? KH_ERR_NOMEM : KH_ERR_DEVICE,
                  kh_cudart_errtext(e, t, sizeof t), call);
}

kh_status tfc_err_dnn(tf_model *m, const kh_graph *g, int32_t node, const char *what, cudnnStatus_t e, const char *call) {
    char t[320];
    return report(m, g, node, what, kh_cudnn_status(e), kh_cudnn_errtext(e, t, sizeof t), call);
}

kh_status tfc_err_blas(tf_model *m, const kh_graph *g, int32_t node, const char *what, cublasStatus_t e,
                       const char *call) {
    char t[320];
    return report(m, g, node, what, kh_cublas_status(e), kh_cublas_errtext(e, t, sizeof t), call);
}

// --- memory ----------------------------------------------------------------------------------------------
kh_status tfc_malloc(tf_model *m, void **p, size_t bytes, const char *what) {
    CUdeviceptr d = 0;
    kh_status st = kh_grt_dev_alloc(&m->rt, &m->cuda->dev, &d, bytes, what);
    *p = KH_DEVPTR(d);
    return st;
}

void tfc_free_dev(void *p) { kh_cuda_buffer_free((CUdeviceptr)(uintptr_t)p); }
