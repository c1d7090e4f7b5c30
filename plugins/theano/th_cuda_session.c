/* th_cuda_session.c — theano's GPU device kind: the driver table (see th_cuda_exec.h for how the runner gets
 * at the driver API), capabilities (a driver, a device, NVRTC, cuDNN of the major version built against),
 * sessions (the host's primary context, one stream, cuBLAS and cuDNN bound to it), the environment string, error
 * text and checked device allocation. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "th_cuda_exec.h"
#include "khost/kit/cuda.h"
#include "khost/kit/status.h"

th_cu_driver th_cu;
static int g_tried;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

// --- the driver table ----------------------------------------------------------------------------------------
typedef struct sym_def {
    void **slot;
    const char *name;
    int optional;
} sym_def;

static void load_driver(void) {
    const char *name = getenv("KHOST_LIBCUDA"); /* the core's choice: dlopen then returns the core's handle */
    if (!name || !*name) name = "libcuda.so.1";
    snprintf(th_cu.lib, sizeof th_cu.lib, "%s", name);
    void *dl = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        snprintf(th_cu.why, sizeof th_cu.why, "no CUDA driver (%s not loadable): no CUDA device", name);
        return;
    }
    const sym_def syms[] = {
        {(void **)&th_cu.Init, "cuInit", 0}, {(void **)&th_cu.DriverGetVersion, "cuDriverGetVersion", 0},
        {(void **)&th_cu.GetErrorName, "cuGetErrorName", 0}, {(void **)&th_cu.GetErrorString, "cuGetErrorString", 0},
        {(void **)&th_cu.DeviceGetCount, "cuDeviceGetCount", 0}, {(void **)&th_cu.DeviceGet, "cuDeviceGet", 0},
        {(void **)&th_cu.DeviceGetAttribute, "cuDeviceGetAttribute", 0},
        {(void **)&th_cu.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 0},
        {(void **)&th_cu.DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", 0},
        {(void **)&th_cu.CtxGetCurrent, "cuCtxGetCurrent", 0}, {(void **)&th_cu.CtxSetCurrent, "cuCtxSetCurrent", 0},
        {(void **)&th_cu.CtxGetDevice, "cuCtxGetDevice", 0}, {(void **)&th_cu.MemGetInfo, "cuMemGetInfo_v2", 0},
        {(void **)&th_cu.MemAlloc, "cuMemAlloc_v2", 0}, {(void **)&th_cu.MemFree, "cuMemFree_v2", 0},
        {(void **)&th_cu.MemAllocHost, "cuMemAllocHost_v2", 0}, {(void **)&th_cu.MemFreeHost, "cuMemFreeHost", 0},
        {(void **)&th_cu.MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", 0},
        {(void **)&th_cu.MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", 0},
        {(void **)&th_cu.MemsetD8Async, "cuMemsetD8Async", 0}, {(void **)&th_cu.StreamCreate, "cuStreamCreate", 0},
        {(void **)&th_cu.StreamDestroy, "cuStreamDestroy_v2", 0},
        {(void **)&th_cu.StreamSynchronize, "cuStreamSynchronize", 0}, {(void **)&th_cu.EventCreate, "cuEventCreate", 0},
        {(void **)&th_cu.EventDestroy, "cuEventDestroy_v2", 0}, {(void **)&th_cu.EventRecord, "cuEventRecord", 0},
        {(void **)&th_cu.EventSynchronize, "cuEventSynchronize", 0},
        {(void **)&th_cu.ModuleLoadData, "cuModuleLoadData", 0}, {(void **)&th_cu.ModuleUnload, "cuModuleUnload", 0},
        {(void **)&th_cu.ModuleGetFunction, "cuModuleGetFunction", 0},
        {(void **)&th_cu.LaunchKernel, "cuLaunchKernel", 0},
        {(void **)&th_cu.FuncGetParamInfo, "cuFuncGetParamInfo", 1},
    };
    for (size_t k = 0; k < sizeof syms / sizeof syms[0]; k++) {
        *syms[k].slot = dlsym(dl, syms[k].name);
        if (!*syms[k].slot && !syms[k].optional) {
            snprintf(th_cu.why, sizeof th_cu.why, "%s has no %s (a driver older than the API theano uses)", name,
                     syms[k].name);
            return; /* never dlclose'd: libcuda's threads and handlers must not outlive its code */
        }
    }
    char e[160];
    CUresult r = th_cu.Init(0);
    if (r != CUDA_SUCCESS) {
        snprintf(th_cu.why, sizeof th_cu.why, "no CUDA device (cuInit: %s)", th_cu_errtext(r, e, sizeof e));
        return;
    }
    if ((r = th_cu.DriverGetVersion(&th_cu.version)) != CUDA_SUCCESS) {
        snprintf(th_cu.why, sizeof th_cu.why, "cuDriverGetVersion: %s", th_cu_errtext(r, e, sizeof e));
        return;
    }
    th_cu.ready = 1;
}

int th_cu_load(char *why, size_t n) {
    pthread_mutex_lock(&g_lock);
    if (!g_tried) {
        g_tried = 1;
        load_driver();
    }
    pthread_mutex_unlock(&g_lock);
    if (!th_cu.ready && why && n) snprintf(why, n, "%s", th_cu.why);
    return th_cu.ready;
}

const char *th_cu_errtext(CUresult r, char *buf, size_t n) {
    const char *name = NULL, *desc = NULL;
    if (th_cu.GetErrorName && th_cu.GetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
    if (th_cu.GetErrorString && th_cu.GetErrorString(r, &desc) != CUDA_SUCCESS) desc = NULL;
    return kh_cu_errtext((int)r, name, desc, buf, n);
}

// --- capabilities ----------------------------------------------------------------------------------------------
#define NEVER_RUN "NEVER RUN ON A GPU"

void th_cuda_caps(kh_caps *c) {
    char why[384];
    c->available = 0;
    if (!th_cu_load(why, sizeof why)) {
        snprintf(c->note, sizeof c->note, "%s", why);
        return;
    }
    int count = 0;
    char e[160];
    CUresult r = th_cu.DeviceGetCount(&count);
    if (r != CUDA_SUCCESS || count == 0) {
        snprintf(c->note, sizeof c->note, "no CUDA device (%s)", r != CUDA_SUCCESS ? th_cu_errtext(r, e, sizeof e) : "0 devices");
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
static void sess_destroy(th_cuda_session *cs) {
    if (!cs) return;
    if (cs->ctx) th_cu.CtxSetCurrent(cs->ctx);
    if (cs->stream) th_cu.StreamSynchronize(cs->stream);
    if (cs->dnn) cudnnDestroy(cs->dnn);
    if (cs->blas) cublasDestroy(cs->blas);
    if (cs->stream) th_cu.StreamDestroy(cs->stream);
    if (cs->retained) th_cu.DevicePrimaryCtxRelease(cs->dev);
    free(cs);
}

kh_status th_cuda_open(kh_grt_session *rts, char *err, size_t errlen) {
    th_session *s = (th_session *)rts;
    const char *id = s->rt.dev.id;
    kh_caps c;
    memset(&c, 0, sizeof c);
    th_cuda_caps(&c);
    if (!c.available) return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "theano open on %s: %s", id, c.note);
    if (s->rt.dev.math != KH_MATH_FP32 && s->rt.dev.math != KH_MATH_TF32)
        return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "theano open on %s: math mode %u (fp32 and tf32 only)", id,
                       s->rt.dev.math);
    th_cuda_session *cs = calloc(1, sizeof *cs);
    if (!cs) return kh_errf(err, errlen, KH_ERR_NOMEM, "theano open on %s: out of host memory", id);
    char e[160];
    const char *what = "cuDeviceGet";
    CUresult r = th_cu.DeviceGet(&cs->dev, s->rt.dev.ordinal);
    CUcontext cur = NULL;
    if (r == CUDA_SUCCESS) what = "cuCtxGetCurrent", r = th_cu.CtxGetCurrent(&cur);
    if (r == CUDA_SUCCESS && cur && s->rt.dev.cu_context && cur != (CUcontext)s->rt.dev.cu_context) {
        sess_destroy(cs);
        return kh_errf(err, errlen, KH_ERR_DEVICE,
                       "theano open on %s: the current CUDA context is not the device's primary context the host retained",
                       id);
    }
    if (r == CUDA_SUCCESS && cur) {
        /* the host's primary context: it must be the one of the device asked for */
        CUdevice d = -1;
        what = "cuCtxGetDevice";
        r = th_cu.CtxGetDevice(&d);
        if (r == CUDA_SUCCESS && d != cs->dev) {
            sess_destroy(cs);
            return kh_errf(err, errlen, KH_ERR_DEVICE, "theano open on %s: the current CUDA context is device %d's", id, d);
        }
        cs->ctx = cur;
    } else if (r == CUDA_SUCCESS) {
        /* nothing current (a caller other than the host): the device's primary context, never a new one */
        what = "cuDevicePrimaryCtxRetain";
        r = th_cu.DevicePrimaryCtxRetain(&cs->ctx, cs->dev);
        if (r == CUDA_SUCCESS) {
            cs->retained = 1;
            what = "cuCtxSetCurrent";
            r = th_cu.CtxSetCurrent(cs->ctx);
        }
    }
    int major = 0, minor = 0;
    if (r == CUDA_SUCCESS) {
        what = "cuDeviceGetAttribute";
        r = th_cu.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, cs->dev);
    }
    if (r == CUDA_SUCCESS) r = th_cu.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, cs->dev);
    if (r == CUDA_SUCCESS) what = "cuStreamCreate", r = th_cu.StreamCreate(&cs->stream, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
        sess_destroy(cs);
        return kh_errf(err, errlen, r == CUDA_ERROR_OUT_OF_MEMORY ? KH_ERR_NOMEM : KH_ERR_DEVICE,
                       "theano open on %s: %s (%s)", id, th_cu_errtext(r, e, sizeof e), what);
    }
    cs->cc = major * 10 + minor;
    snprintf(cs->arch, sizeof cs->arch, "sm_%d", cs->cc);
    /* cuBLAS and cuDNN on the stream, in the session's math: fp32 is FP32 with FMA, no TF32 tensor cores (the CPU
     * path's and the reference's arithmetic); tf32 allows them (kh_cuda_handles) */
    cs->tf32 = s->rt.dev.math == KH_MATH_TF32;
    char why[400];
    kh_status hs = kh_cuda_handles((cudaStream_t)cs->stream, cs->tf32, &cs->blas, &cs->dnn, why, sizeof why);
    if (hs != KH_OK) {
        sess_destroy(cs);
        return kh_errf(err, errlen, hs, "theano open on %s: %s", id, why);
    }
    s->cuda = cs;
    return KH_OK;
}

void th_cuda_close(kh_grt_session *rts) {
    th_session *s = (th_session *)rts;
    sess_destroy(s->cuda);
    s->cuda = NULL;
}

kh_status th_cuda_environment(kh_grt_session *rts, char *buf, size_t n) {
    th_session *s = (th_session *)rts;
    char ver[32], libs[96];
    kh_cuda_lib_versions(s->cuda ? s->cuda->blas : NULL, libs, sizeof libs);
    snprintf(buf, n, "optimize=%d driver=%d.%d nvrtc=%s arch=%s %s device=\"%s\" runner=driver-api math=%s",
             s->set.passes, th_cu.version / 1000,
             (th_cu.version % 1000) / 10, th_nvrtc_version(ver, sizeof ver), s->cuda ? s->cuda->arch : "?", libs,
             s->rt.dev.name, s->cuda && s->cuda->tf32 ? "tf32" : "fp32");
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

/* "cuLaunchKernel(th_cu.LaunchKernel(...))" -> the first identifier after the last '.' before '(' */
static void call_name(const char *call, char *out, size_t n) {
    const char *p = strchr(call, '(');
    size_t len = p ? (size_t)(p - call) : strlen(call);
    const char *dot = memchr(call, '.', len);
    if (dot) {
        len -= (size_t)(dot + 1 - call);
        call = dot + 1;
    }
    snprintf(out, n, "%.*s", (int)len, call);
}

kh_status thc_err_cu(th_model *m, int f, int32_t node, const char *what, CUresult e, const char *call) {
    char fn[96], t[160];
    call_name(call, fn, sizeof fn);
    return thc_fail(m, f, node, what, e == CUDA_ERROR_OUT_OF_MEMORY ? KH_ERR_NOMEM : KH_ERR_DEVICE, "%s (cu%s)",
                    th_cu_errtext(e, t, sizeof t), fn);
}

kh_status thc_err_blas(th_model *m, int f, int32_t node, const char *what, cublasStatus_t e, const char *call) {
    char fn[96], t[320];
    call_name(call, fn, sizeof fn);
    return thc_fail(m, f, node, what, kh_cublas_status(e), "%s (%s)", kh_cublas_errtext(e, t, sizeof t), fn);
}

kh_status thc_err_dnn(th_model *m, int f, int32_t node, const char *what, cudnnStatus_t e, const char *call) {
    char fn[96], t[320];
    call_name(call, fn, sizeof fn);
    return thc_fail(m, f, node, what, kh_cudnn_status(e), "%s (%s)", kh_cudnn_errtext(e, t, sizeof t), fn);
}

// --- memory ------------------------------------------------------------------------------------------------------
kh_status thc_alloc(th_model *m, CUdeviceptr *p, size_t bytes, const char *what) {
    *p = 0;
    if (bytes == 0) bytes = 256;
    CUresult r = th_cu.MemAlloc(p, bytes);
    if (r == CUDA_SUCCESS) r = th_cu.MemsetD8Async(*p, 0, bytes, m->s->cuda->stream);
    if (r == CUDA_SUCCESS) {
        kh_mem_count_add(&m->rt.dev_mem, (int64_t)bytes);
        return KH_OK;
    }
    if (*p) th_cu.MemFree(*p);
    *p = 0;
    size_t fr = 0, tot = 0;
    th_cu.MemGetInfo(&fr, &tot);
    char t[160];
    double mb = 1.0 / (1024.0 * 1024.0);
    return th_fail(m->s, r == CUDA_ERROR_OUT_OF_MEMORY ? KH_ERR_NOMEM : KH_ERR_DEVICE, "compile",
                   "%s for %s (%.1f MiB; %.0f of %.0f MiB free)",
                   r == CUDA_ERROR_OUT_OF_MEMORY ? "out of device memory" : th_cu_errtext(r, t, sizeof t), what,
                   (double)bytes * mb, (double)fr * mb, (double)tot * mb);
}

void thc_free(CUdeviceptr p) {
    if (p) th_cu.MemFree(p);
}

kh_status thc_bind(th_model *m, const char *what) {
    THC_CU(m, -1, -1, what, th_cu.CtxSetCurrent(m->s->cuda->ctx));
    return KH_OK;
}
