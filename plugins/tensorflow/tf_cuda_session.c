/* tf_cuda_session.c — the CUDA device kind of the tensorflow backend: capabilities (a driver? a device?
 * cuDNN of the major version built against?), sessions (one stream; cuBLAS and cuDNN handles bound to it, on
 * the host's primary context), the environment string, and the executor's error text and checked allocation.
 *
 * Contexts: the host retains the device's primary context and makes it current before every call. The CUDA
 * runtime (linked statically, so the module loads where libcuda.so.1 is missing) uses the context current on
 * the thread; cudaSetDevice(ordinal) at open binds that same primary context, never a new one. */
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
    int rt = 0, drv = 0, count = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv); /* 0 when libcuda.so.1 cannot be loaded */
    size_t dnn = cudnnGetVersion();
    c->available = 0;
    if (drv == 0) {
        snprintf(c->note, sizeof c->note, "no CUDA driver (libcuda.so.1 not loadable): no CUDA device");
        return;
    }
    if (drv < rt) {
        snprintf(c->note, sizeof c->note, "CUDA driver %d.%d is older than the runtime %d.%d built in", drv / 1000,
                 (drv % 1000) / 10, rt / 1000, (rt % 1000) / 10);
        return;
    }
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        snprintf(c->note, sizeof c->note, "no CUDA device (%s)", e != cudaSuccess ? cudaGetErrorName(e) : "0 devices");
        cudaGetLastError();
        return;
    }
    if (dnn / 10000 != CUDNN_MAJOR) {
        snprintf(c->note, sizeof c->note, "cuDNN %zu loaded, built against %d.x", dnn, CUDNN_MAJOR);
        return;
    }
    c->available = 1;
    snprintf(c->note, sizeof c->note,
             "one stream, an op per launch: cuBLAS MatMul, cuDNN %zu.%zu Conv2D, own kernels; NHWC; sm_%d+ (%d device%s)",
             dnn / 10000, (dnn % 10000) / 100, TF_CUDA_MIN_ARCH, count, count == 1 ? "" : "s");
}

// --- sessions --------------------------------------------------------------------------------------------
static void sess_destroy(tf_cuda_session *cs) {
    if (!cs) return;
    if (cs->stream) cudaStreamSynchronize(cs->stream);
    if (cs->dnn) cudnnDestroy(cs->dnn);
    if (cs->blas) cublasDestroy(cs->blas);
    if (cs->stream) cudaStreamDestroy(cs->stream);
    cudaGetLastError();
    free(cs);
}

kh_status tf_cuda_open(kh_grt_session *rts, char *err, size_t errlen) {
    tf_session *s = (tf_session *)rts;
    const char *id = s->rt.dev.id;
    kh_caps c;
    memset(&c, 0, sizeof c);
    tf_cuda_caps(&c);
    if (!c.available) return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "tensorflow open on %s: %s", id, c.note);
    int count = 0;
    cudaGetDeviceCount(&count);
    if (s->rt.dev.ordinal < 0 || s->rt.dev.ordinal >= count)
        return kh_errf(err, errlen, KH_ERR_INVALID, "tensorflow open on %s: ordinal %d, %d CUDA device(s)", id,
                       s->rt.dev.ordinal, count);
    struct cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, s->rt.dev.ordinal);
    if (e != cudaSuccess)
        return kh_errf(err, errlen, KH_ERR_DEVICE, "tensorflow open on %s: %s (cudaGetDeviceProperties)", id,
                       cudaGetErrorName(e));
    kh_status as = kh_cuda_arch_check(prop.major, prop.minor, TF_CUDA_MIN_ARCH, "tensorflow", id, err, errlen);
    if (as != KH_OK) return as;
    if (s->rt.dev.math != KH_MATH_FP32 && s->rt.dev.math != KH_MATH_TF32)
        return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "tensorflow open on %s: math mode %u (fp32 and tf32 only)", id,
                       s->rt.dev.math);
    tf_cuda_session *cs = calloc(1, sizeof *cs);
    if (!cs) return kh_errf(err, errlen, KH_ERR_NOMEM, "tensorflow open on %s: out of host memory", id);
    cs->ordinal = s->rt.dev.ordinal;
    const char *what = "cudaSetDevice";
    if ((e = cudaSetDevice(cs->ordinal)) != cudaSuccess) goto cuda_fail;
    what = "cudaStreamCreateWithFlags";
    if ((e = cudaStreamCreateWithFlags(&cs->stream, cudaStreamNonBlocking)) != cudaSuccess) goto cuda_fail;
    /* cuBLAS and cuDNN on the stream, in the session's math: fp32 is FP32 with FMA, no TF32 tensor cores (parity
     * with the CPU path and the float64 reference); tf32 allows them (kh_cuda_handles) */
    cs->tf32 = s->rt.dev.math == KH_MATH_TF32;
    char why[400];
    kh_status hs = kh_cuda_handles(cs->stream, cs->tf32, &cs->blas, &cs->dnn, why, sizeof why);
    if (hs != KH_OK) {
        sess_destroy(cs);
        return kh_errf(err, errlen, hs, "tensorflow open on %s: %s", id, why);
    }
    s->cuda = cs;
    return KH_OK;
cuda_fail:
    sess_destroy(cs);
    cudaGetLastError();
    char et[320];
    return kh_errf(err, errlen, e == cudaErrorMemoryAllocation ? KH_ERR_NOMEM : KH_ERR_DEVICE,
                   "tensorflow open on %s: %s: %s", id, what, kh_cudart_errtext(e, et, sizeof et));
}

void tf_cuda_close(kh_grt_session *rts) {
    tf_session *s = (tf_session *)rts;
    sess_destroy(s->cuda);
    s->cuda = NULL;
}

kh_status tf_cuda_environment(kh_grt_session *rts, char *buf, size_t n) {
    tf_session *s = (tf_session *)rts;
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    char libs[96];
    kh_cuda_lib_versions(s->cuda ? s->cuda->blas : NULL, libs, sizeof libs);
    snprintf(buf, n, "cuda=%d.%d driver=%d.%d %s device=\"%s\" cc=%d.%d executor=single-stream math=%s", rt / 1000,
             (rt % 1000) / 10, drv / 1000, (drv % 1000) / 10, libs, s->rt.dev.name, s->rt.dev.cc_major, s->rt.dev.cc_minor,
             s->cuda && s->cuda->tf32 ? "tf32" : "fp32");
    size_t u = strlen(buf);
    if (s->cuda && s->cuda->conv_algos[0] && u < n)
        snprintf(buf + u, n - u, " cudnn_algos=%s", s->cuda->conv_algos);
    return KH_OK;
}

// --- errors ----------------------------------------------------------------------------------------------
/* "cudnnConvolutionForward(c->..., ...)" -> "cudnnConvolutionForward" */
static void call_name(const char *call, char *out, size_t n) {
    size_t k = 0;
    while (call[k] && call[k] != '(' && k + 1 < n) {
        out[k] = call[k];
        k++;
    }
    out[k] = 0;
}

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
    call_name(call, fn, sizeof fn);
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
    *p = NULL;
    if (bytes == 0) bytes = 256;
    cudaError_t e = cudaMalloc(p, bytes);
    if (e == cudaSuccess) {
        kh_mem_count_add(&m->rt.dev_mem, (int64_t)bytes);
        return KH_OK;
    }
    *p = NULL;
    cudaGetLastError();
    size_t fr = 0, tot = 0;
    cudaMemGetInfo(&fr, &tot);
    double mb = 1.0 / (1024.0 * 1024.0);
    return tf_fail(m->s, e == cudaErrorMemoryAllocation ? KH_ERR_NOMEM : KH_ERR_DEVICE, "compile",
                   "%s for %s (%.1f MiB; %.0f of %.0f MiB free)",
                   e == cudaErrorMemoryAllocation ? "out of device memory" : cudaGetErrorName(e), what,
                   (double)bytes * mb, (double)fr * mb, (double)tot * mb);
}

void tfc_free_dev(void *p) {
    if (p) cudaFree(p);
}
