/* kit/cuda/session.c — a backend's session on a CUDA device (khost/kit/cuda.h): the host's primary context
 * through the driver table, streams, and the library handles. Unverified on a GPU. */
#include "khost/kit/cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/cuda_driver.h"
#include "khost/kit/status.h"

void kh_cuda_session_close(kh_cuda_session *cs) {
    if (!cs || !kh_cu.ready) return;
    if (cs->ctx) kh_cu.CtxSetCurrent(cs->ctx);
    if (cs->stream) kh_cu.StreamSynchronize(cs->stream);
    if (cs->dnn) cudnnDestroy(cs->dnn);
    if (cs->blas) cublasDestroy(cs->blas);
    if (cs->copy) kh_cu.StreamDestroy(cs->copy);
    if (cs->stream) kh_cu.StreamDestroy(cs->stream);
    if (cs->retained) { /* back to nothing current, as open found it, before the context may go */
        kh_cu.CtxSetCurrent(NULL);
        kh_cu.DevicePrimaryCtxRelease(cs->dev);
    }
    memset(cs, 0, sizeof *cs);
}

/* The context: the current one when it is the host's (and the device's), else the device's primary one. */
static CUresult bind_context(const kh_device *dev, kh_cuda_session *cs, const char **what, const char **bad) {
    CUcontext cur = NULL;
    *what = "cuCtxGetCurrent";
    CUresult r = kh_cu.CtxGetCurrent(&cur);
    if (r != CUDA_SUCCESS) return r;
    if (cur) {
        if (dev->cu_context && cur != (CUcontext)dev->cu_context) {
            *bad = "the current CUDA context is not the device's primary context the host retained";
            return CUDA_SUCCESS;
        }
        CUdevice d = -1;
        *what = "cuCtxGetDevice";
        if ((r = kh_cu.CtxGetDevice(&d)) != CUDA_SUCCESS) return r;
        if (d != cs->dev) {
            *bad = "the current CUDA context belongs to another device";
            return CUDA_SUCCESS;
        }
        cs->ctx = cur;
        return CUDA_SUCCESS;
    }
    *what = "cuDevicePrimaryCtxRetain";
    if ((r = kh_cu.DevicePrimaryCtxRetain(&cs->ctx, cs->dev)) != CUDA_SUCCESS) return r;
    cs->retained = 1;
    *what = "cuCtxSetCurrent";
    return kh_cu.CtxSetCurrent(cs->ctx);
}

kh_status kh_cuda_session_open(const kh_device *dev, const kh_cuda_open_opts *o, kh_cuda_session *cs, char *err,
                               size_t errlen) {
    memset(cs, 0, sizeof *cs);
    const char *pl = o->plugin, *id = dev->id;
    char why[400];
    if (!kh_cu_load(why, sizeof why)) return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "%s open on %s: %s", pl, id, why);
    if (dev->math != KH_MATH_FP32 && dev->math != KH_MATH_TF32)
        return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "%s open on %s: math mode %u (fp32 and tf32 only)", pl, id,
                       dev->math);
    int count = 0;
    const char *what = "cuDeviceGetCount", *bad = NULL;
    CUresult r = kh_cu.DeviceGetCount(&count);
    if (r == CUDA_SUCCESS && (dev->ordinal < 0 || dev->ordinal >= count))
        return kh_errf(err, errlen, KH_ERR_INVALID, "%s open on %s: ordinal %d, %d CUDA device(s)", pl, id,
                       dev->ordinal, count);
    if (r == CUDA_SUCCESS) what = "cuDeviceGet", r = kh_cu.DeviceGet(&cs->dev, dev->ordinal);
    if (r == CUDA_SUCCESS) r = bind_context(dev, cs, &what, &bad);
    if (r == CUDA_SUCCESS && bad) {
        kh_cuda_session_close(cs);
        return kh_errf(err, errlen, KH_ERR_DEVICE, "%s open on %s: %s", pl, id, bad);
    }
    int major = 0, minor = 0;
    if (r == CUDA_SUCCESS) {
        what = "cuDeviceGetAttribute";
        r = kh_cu.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, cs->dev);
    }
    if (r == CUDA_SUCCESS) r = kh_cu.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, cs->dev);
    if (r == CUDA_SUCCESS) {
        kh_status as = kh_cuda_arch_check(major, minor, o->min_arch, pl, id, err, errlen);
        if (as != KH_OK) {
            kh_cuda_session_close(cs);
            return as;
        }
        what = "cuStreamCreate";
        r = kh_cu.StreamCreate(&cs->stream, CU_STREAM_NON_BLOCKING);
    }
    if (r == CUDA_SUCCESS && o->copy_stream) r = kh_cu.StreamCreate(&cs->copy, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
        kh_cuda_session_close(cs);
        char e[160];
        return kh_errf(err, errlen, kh_cu_status(r),
                       "%s open on %s: %s: %s", pl, id, what, kh_cu_result_text(r, e, sizeof e));
    }
    cs->cc = major * 10 + minor;
    snprintf(cs->arch, sizeof cs->arch, "sm_%d", cs->cc);
    /* fp32 is FP32 with FMA, no TF32 tensor cores (the CPU path's and the float64 reference's arithmetic) */
    cs->tf32 = dev->math == KH_MATH_TF32;
    kh_status hs = kh_cuda_handles(cs->stream, cs->tf32, &cs->blas, &cs->dnn, why, sizeof why);
    if (hs != KH_OK) {
        kh_cuda_session_close(cs);
        return kh_errf(err, errlen, hs, "%s open on %s: %s", pl, id, why);
    }
    return KH_OK;
}

void kh_cuda_session_env(const kh_cuda_session *cs, const kh_device *dev, char *buf, size_t n) {
    char libs[96];
    kh_cuda_lib_versions(cs ? cs->blas : NULL, libs, sizeof libs);
    int drv = kh_cu.ready ? kh_cu.version : dev->driver_version;
    snprintf(buf, n, "driver=%d.%d %s device=\"%s\" cc=%d.%d math=%s", drv / 1000, (drv % 1000) / 10, libs, dev->name,
             dev->cc_major, dev->cc_minor, cs && cs->tf32 ? "tf32" : "fp32");
}

kh_status kh_cuda_session_new(const kh_device *dev, const kh_cuda_open_opts *o, void (*caps)(kh_caps *c), size_t size,
                              void **out, char *err, size_t errlen) {
    *out = NULL;
    kh_caps c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    caps(&c);
    if (!c.available) return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "%s open on %s: %s", o->plugin, dev->id, c.note);
    kh_cuda_session *cs = calloc(1, size);
    if (!cs) return kh_errf(err, errlen, KH_ERR_NOMEM, "%s open on %s: out of host memory", o->plugin, dev->id);
    kh_status st = kh_cuda_session_open(dev, o, cs, err, errlen);
    if (st != KH_OK) {
        free(cs);
        return st;
    }
    *out = cs;
    return KH_OK;
}

void kh_cuda_session_free(void *state) {
    if (!state) return;
    kh_cuda_session_close(state);
    free(state);
}
