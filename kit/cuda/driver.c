/* kit/cuda/driver.c — the driver table of khost/kit/cuda_driver.h, loaded once per image. Plain C (no CUDA
 * toolkit): the host links it as the modules do. */
#include "khost/kit/cuda_driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "khost/kit/cuda_pick.h"

kh_cu_driver kh_cu;
static int g_tried;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct sym_def {
    void **slot;
    const char *name;
    int need;
} sym_def;

#define KH_CU_SYM_DEF(member, cu_name, symbol, need, params) {(void **)&kh_cu.member, symbol, need},
static const sym_def g_syms[] = {KH_CU_ENTRIES(KH_CU_SYM_DEF)};

/* Resolve every entry point; the first missing one of each need is named. The primary-context release has had
 * a _v2 since CUDA 11; an older driver's original has the same semantics. */
static void resolve(void *dl, char *host_missing, char *exec_missing, size_t n) {
    for (size_t k = 0; k < sizeof g_syms / sizeof g_syms[0]; k++) {
        *g_syms[k].slot = dlsym(dl, g_syms[k].name);
        if (!*g_syms[k].slot && g_syms[k].slot == (void **)&kh_cu.DevicePrimaryCtxRelease)
            *g_syms[k].slot = dlsym(dl, "cuDevicePrimaryCtxRelease");
        char *missing = g_syms[k].need == KH_CU_HOST ? host_missing : g_syms[k].need == KH_CU_EXEC ? exec_missing : NULL;
        if (!*g_syms[k].slot && missing && !missing[0]) snprintf(missing, n, "%s", g_syms[k].name);
    }
}

static void load_driver(void) {
    const char *name = getenv("KHOST_LIBCUDA"); /* the host's choice: in a module dlopen returns its handle */
    if (!name || !*name) name = "libcuda.so.1";
    snprintf(kh_cu.lib, sizeof kh_cu.lib, "%s", name);
    dlerror();
    void *dl = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *e = dlerror();
        snprintf(kh_cu.why, sizeof kh_cu.why, "no CUDA driver (%s not loadable: %s): no CUDA device", name,
                 e ? e : "dlopen failed");
        return;
    }
    /* never dlclose'd: libcuda's threads and handlers must not outlive its code */
    char host_missing[64] = "", exec_missing[64] = "";
    resolve(dl, host_missing, exec_missing, sizeof host_missing);
    if (host_missing[0]) {
        snprintf(kh_cu.why, sizeof kh_cu.why, "%s: missing symbol %s (a driver older than the API khost uses)", name,
                 host_missing);
        return;
    }
    int v = 0;
    if (kh_cu.DriverGetVersion(&v) == KH_CUDA_SUCCESS) kh_cu.version = v;
    char e[160];
    kh_CUresult r = kh_cu.Init(0);
    if (r != KH_CUDA_SUCCESS) {
        snprintf(kh_cu.why, sizeof kh_cu.why, "cuInit: %s", kh_cu_result_text(r, e, sizeof e));
        return;
    }
    kh_cu.host_ready = 1;
    if (exec_missing[0]) {
        snprintf(kh_cu.why, sizeof kh_cu.why, "%s: missing symbol %s (a driver older than the API khost uses)", name,
                 exec_missing);
        return;
    }
    kh_cu.ready = 1;
}

static void load_once(void) {
    pthread_mutex_lock(&g_lock);
    if (!g_tried) {
        g_tried = 1;
        load_driver();
    }
    pthread_mutex_unlock(&g_lock);
}

int kh_cu_load(char *why, size_t n) {
    load_once();
    if (!kh_cu.ready && why && n) snprintf(why, n, "%s", kh_cu.why);
    return kh_cu.ready;
}

int kh_cu_load_host(char *why, size_t n) {
    load_once();
    if (!kh_cu.host_ready && why && n) snprintf(why, n, "%s", kh_cu.why);
    return kh_cu.host_ready;
}

kh_status kh_cu_status(kh_CUresult r) { return r == KH_CUDA_ERROR_OUT_OF_MEMORY ? KH_ERR_NOMEM : KH_ERR_DEVICE; }

const char *kh_cu_result_text(kh_CUresult r, char *buf, size_t n) {
    const char *name = NULL, *desc = NULL;
    if (kh_cu.GetErrorName && kh_cu.GetErrorName(r, &name) != KH_CUDA_SUCCESS) name = NULL;
    if (kh_cu.GetErrorString && kh_cu.GetErrorString(r, &desc) != KH_CUDA_SUCCESS) desc = NULL;
    return kh_cu_errtext((int)r, name, desc, buf, n);
}
