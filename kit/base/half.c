/* kit/base/half.c — a backend's GPU half, found beside the module and loaded once (khost/kit/half.h). */
#define _GNU_SOURCE /* dladdr */
#include "khost/kit/half.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* The kit is linked statically into each module, so this function's own address lies inside the module that
 * asks: dladdr on it names that module's file, whose folder holds the half. */
static int module_folder(char *buf, size_t n) {
    Dl_info di;
    memset(&di, 0, sizeof di);
    if (!dladdr((void *)&module_folder, &di) || !di.dli_fname) return -1;
    const char *slash = strrchr(di.dli_fname, '/');
    if (!slash) return snprintf(buf, n, ".") >= (int)n ? -1 : 0;
    return snprintf(buf, n, "%.*s", (int)(slash - di.dli_fname), di.dli_fname) >= (int)n ? -1 : 0;
}

static int same_shape(const kh_half_header *a, const kh_half_header *b) {
    if (a->version != b->version || a->n_sizes != b->n_sizes || a->n_sizes > KH_HALF_MAX_SIZES) return 0;
    for (uint32_t i = 0; i < a->n_sizes; i++)
        if (a->sizes[i] != b->sizes[i]) return 0;
    return 1;
}

static void describe(const kh_half_header *t, char *buf, size_t n) {
    int k = snprintf(buf, n, "version %u, structures", t->version);
    uint32_t ns = t->n_sizes < KH_HALF_MAX_SIZES ? t->n_sizes : KH_HALF_MAX_SIZES;
    for (uint32_t i = 0; i < ns && k > 0 && (size_t)k < n; i++)
        k += snprintf(buf + k, n - (size_t)k, "%s%u", i ? "/" : " ", t->sizes[i]);
    if (k > 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, " bytes");
}

static void load(kh_half *h) {
    if (!h->built) {
        snprintf(h->why, sizeof h->why, "built without CUDA (toolkit, cuBLAS or cuDNN not found at configure time)");
        return;
    }
    char folder[3072], path[4096];
    if (module_folder(folder, sizeof folder) != 0) {
        snprintf(h->why, sizeof h->why, KH_HALF_NOT_LOADABLE "cannot find the folder of %s.so (dladdr failed)",
                 h->module);
        return;
    }
    snprintf(path, sizeof path, "%s/%s/%s", folder, h->dir, h->file);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        if (e && strstr(e, path)) snprintf(h->why, sizeof h->why, KH_HALF_NOT_LOADABLE "%s", e); /* names the file */
        else snprintf(h->why, sizeof h->why, KH_HALF_NOT_LOADABLE "%s: %s", path, e ? e : "dlopen failed");
        return;
    }
    kh_half_entry_fn fn;
    *(void **)(&fn) = dlsym(lib, h->entry);
    const kh_half_header *t = fn ? fn() : NULL;
    if (!t) {
        snprintf(h->why, sizeof h->why, KH_HALF_NOT_LOADABLE "%s: no %s table", path, h->entry);
        return; /* the object stays mapped: it may be the -z nodelete half of another build */
    }
    if (!same_shape(t, &h->want)) {
        char got[160], want[160];
        describe(t, got, sizeof got);
        describe(&h->want, want, sizeof want);
        snprintf(h->why, sizeof h->why, KH_HALF_NOT_LOADABLE "%s is from another build (table %s; %s.so expects %s)",
                 path, got, h->module, want);
        return;
    }
    h->table = t;
}

const void *kh_half_load(kh_half *h) {
    if (!__atomic_load_n(&h->done, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&h->lock);
        if (!h->done) {
            load(h);
            __atomic_store_n(&h->done, 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&h->lock);
    }
    return h->table;
}

const void *kh_half_loaded(const kh_half *h) {
    return __atomic_load_n(&h->done, __ATOMIC_ACQUIRE) ? h->table : NULL;
}

const char *kh_half_why(const kh_half *h) {
    return __atomic_load_n(&h->done, __ATOMIC_ACQUIRE) ? h->why : "";
}
