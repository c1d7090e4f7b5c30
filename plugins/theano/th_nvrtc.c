#define _GNU_SOURCE
/* th_nvrtc.c — generated CUDA C to a CUBIN with NVRTC, loaded with dlopen: the plugin (and the code-generation
 * tests) build and load everywhere, and a machine without NVRTC says so instead of failing to load the module.
 * Only NVRTC's stable C ABI is used (nvrtcResult is an int-sized enum, nvrtcProgram an opaque pointer), declared
 * here so no CUDA header is needed. The library is found as: $KHOST_NVRTC, the one the build found
 * (TH_NVRTC_LIBRARY), then libnvrtc.so.13 and libnvrtc.so.12 on the loader's path. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "th_cuda_plan.h"
#include "khost/kit/status.h"

typedef int th_nvrtcResult;
typedef struct th_nvrtcProgram_st *th_nvrtcProgram;

static struct {
    int tried, ready;
    char why[512], lib[512];
    int major, minor;
    th_nvrtcResult (*Version)(int *, int *);
    th_nvrtcResult (*CreateProgram)(th_nvrtcProgram *, const char *, const char *, int, const char *const *,
                                    const char *const *);
    th_nvrtcResult (*CompileProgram)(th_nvrtcProgram, int, const char *const *);
    th_nvrtcResult (*GetProgramLogSize)(th_nvrtcProgram, size_t *);
    th_nvrtcResult (*GetProgramLog)(th_nvrtcProgram, char *);
    th_nvrtcResult (*GetCUBINSize)(th_nvrtcProgram, size_t *);
    th_nvrtcResult (*GetCUBIN)(th_nvrtcProgram, char *);
    th_nvrtcResult (*DestroyProgram)(th_nvrtcProgram *);
    const char *(*GetErrorString)(th_nvrtcResult);
} nv;
static pthread_mutex_t nv_lock = PTHREAD_MUTEX_INITIALIZER;

static void *sym(void *dl, const char *name, int *ok) {
    void *p = dlsym(dl, name);
    if (!p && *ok) {
        snprintf(nv.why, sizeof nv.why, "%s has no %s", nv.lib, name);
        *ok = 0;
    }
    return p;
}

static void load(void) {
    const char *env = getenv("KHOST_NVRTC");
    const char *cands[5];
    int nc = 0;
    if (env && *env) cands[nc++] = env;
#ifdef TH_NVRTC_LIBRARY
    cands[nc++] = TH_NVRTC_LIBRARY;
#endif
    cands[nc++] = "libnvrtc.so.13";
    cands[nc++] = "libnvrtc.so.12";
    void *dl = NULL;
    char tried[400] = "";
    for (int k = 0; k < nc && !dl; k++) {
        dl = dlopen(cands[k], RTLD_NOW | RTLD_LOCAL);
        if (dl) snprintf(nv.lib, sizeof nv.lib, "%s", cands[k]);
        else snprintf(tried + strlen(tried), sizeof tried - strlen(tried), "%s%s", k ? ", " : "", cands[k]);
        if (env && *env && k == 0 && !dl) break; /* an explicit choice that fails is not replaced silently */
    }
    if (!dl) {
        snprintf(nv.why, sizeof nv.why, "NVRTC not found (tried %s%s)", tried,
                 env && *env ? " — $KHOST_NVRTC" : "; set KHOST_NVRTC to its path");
        return;
    }
    int ok = 1;
    *(void **)&nv.Version = sym(dl, "nvrtcVersion", &ok);
    *(void **)&nv.CreateProgram = sym(dl, "nvrtcCreateProgram", &ok);
    *(void **)&nv.CompileProgram = sym(dl, "nvrtcCompileProgram", &ok);
    *(void **)&nv.GetProgramLogSize = sym(dl, "nvrtcGetProgramLogSize", &ok);
    *(void **)&nv.GetProgramLog = sym(dl, "nvrtcGetProgramLog", &ok);
    *(void **)&nv.GetCUBINSize = sym(dl, "nvrtcGetCUBINSize", &ok);
    *(void **)&nv.GetCUBIN = sym(dl, "nvrtcGetCUBIN", &ok);
    *(void **)&nv.DestroyProgram = sym(dl, "nvrtcDestroyProgram", &ok);
    *(void **)&nv.GetErrorString = sym(dl, "nvrtcGetErrorString", &ok);
    if (ok && nv.Version(&nv.major, &nv.minor) != 0) {
        snprintf(nv.why, sizeof nv.why, "%s: nvrtcVersion failed", nv.lib);
        ok = 0;
    }
    if (!ok) { /* kept loaded: a library's threads and handlers must not outlive its code */
        return;
    }
    nv.ready = 1; /* never dlclose'd, like the driver */
}

int th_nvrtc_load(char *why, size_t n) {
    pthread_mutex_lock(&nv_lock);
    if (!nv.tried) {
        nv.tried = 1;
        load();
    }
    pthread_mutex_unlock(&nv_lock);
    if (!nv.ready && why && n) snprintf(why, n, "%s", nv.why);
    return nv.ready;
}

const char *th_nvrtc_version(char *buf, size_t n) {
    if (!th_nvrtc_load(NULL, 0)) snprintf(buf, n, "none");
    else snprintf(buf, n, "%d.%d", nv.major, nv.minor);
    return buf;
}

const char *th_nvrtc_library(void) { return th_nvrtc_load(NULL, 0) ? nv.lib : "none"; }

const char *th_nvrtc_options(const char *arch, char *buf, size_t n) {
    snprintf(buf, n, "--gpu-architecture=%s " TH_NVRTC_FLAGS, arch);
    return buf;
}

static const char *nv_err(th_nvrtcResult r) {
    const char *s = nv.GetErrorString ? nv.GetErrorString(r) : NULL;
    return s ? s : "NVRTC error";
}

kh_status th_nvrtc_compile_log(const char *source, const char *arch, void **cubin, size_t *len, char *log,
                               size_t loglen, char *err, size_t errlen) {
    *cubin = NULL;
    *len = 0;
    if (log && loglen) log[0] = 0;
    char why[512];
    if (!th_nvrtc_load(why, sizeof why)) return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "%s", why);
    if (strncmp(arch, "sm_", 3) != 0 || strlen(arch) > 16)
        return kh_errf(err, errlen, KH_ERR_INVALID, "NVRTC: architecture '%s' is not sm_XX", arch);
    th_nvrtcProgram prog = NULL;
    th_nvrtcResult r = nv.CreateProgram(&prog, source, "theano_generated.cu", 0, NULL, NULL);
    if (r != 0) return kh_errf(err, errlen, r == 1 ? KH_ERR_NOMEM : KH_ERR_INTERNAL, "nvrtcCreateProgram: %s", nv_err(r));
    char opt_arch[40];
    snprintf(opt_arch, sizeof opt_arch, "--gpu-architecture=%s", arch);
    const char *opts[] = {opt_arch, TH_NVRTC_FLAGS};
    r = nv.CompileProgram(prog, 2, opts);
    size_t ls = 0;
    char *text = NULL;
    if (nv.GetProgramLogSize(prog, &ls) == 0 && ls > 1 && (text = malloc(ls + 1)) != NULL) {
        if (nv.GetProgramLog(prog, text) != 0) text[0] = 0;
        text[ls] = 0;
    }
    if (log && loglen && text) snprintf(log, loglen, "%s", text);
    kh_status st = KH_OK;
    if (r != 0) {
        st = kh_errf(err, errlen, KH_ERR_INTERNAL, "NVRTC %d.%d could not compile the generated CUDA C for %s (%s): %s",
                     nv.major, nv.minor, arch, nv_err(r), text && text[0] ? text : "(no log)");
    } else if ((r = nv.GetCUBINSize(prog, len)) != 0 || *len == 0) {
        st = kh_errf(err, errlen, KH_ERR_INTERNAL, "nvrtcGetCUBINSize: %s", r ? nv_err(r) : "empty image");
    } else if (!(*cubin = malloc(*len))) {
        st = kh_errf(err, errlen, KH_ERR_NOMEM, "out of host memory for a %zu-byte CUBIN", *len);
    } else if ((r = nv.GetCUBIN(prog, *cubin)) != 0) {
        st = kh_errf(err, errlen, KH_ERR_INTERNAL, "nvrtcGetCUBIN: %s", nv_err(r));
    }
    if (st != KH_OK) {
        free(*cubin);
        *cubin = NULL;
        *len = 0;
    }
    free(text);
    nv.DestroyProgram(&prog);
    return st;
}

kh_status th_nvrtc_compile(const char *source, const char *arch, void **cubin, size_t *len, char *err, size_t errlen) {
    return th_nvrtc_compile_log(source, arch, cubin, len, NULL, 0, err, errlen);
}
