/* task_host.c — see task_host.h. */
#define _POSIX_C_SOURCE 200809L
#include "task_host.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long th_progress_calls;
char th_described[16384];

static void th_log(kh_log_level level, const char *module, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void th_log(kh_log_level level, const char *module, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[%d] %s: ", (int)level, module ? module : "?");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void *th_alloc(size_t n) {
    void *p = NULL;
    return posix_memalign(&p, 64, n ? n : 1) == 0 ? p : NULL;
}

static const char *th_config(const char *section, const char *key) {
    (void)section;
    (void)key;
    return NULL;
}

static void th_progress(const char *what, int64_t done, int64_t total) {
    (void)what;
    if (done < 0 || done > total) fprintf(stderr, "progress out of range: %lld of %lld\n", (long long)done, (long long)total);
    th_progress_calls++;
}

const kh_host_api th_host = {
    .struct_size = sizeof(kh_host_api), .abi_major = KH_ABI_MAJOR, .abi_minor = KH_ABI_MINOR,
    .host_version = "test", .log = th_log, .alloc = th_alloc, .free = free, .config_get = th_config,
    .progress = th_progress,
};

const kh_task_api *th_open_task(const char *name, const kh_module_desc **desc) {
    const char *build = getenv("KHOST_BUILD");
    char path[4096];
    snprintf(path, sizeof path, "%s/tasks/%s.so", build && *build ? build : ".", name);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        return NULL;
    }
    kh_entry_fn entry;
    void *sym = dlsym(h, KH_ENTRY_NAME);
    memcpy(&entry, &sym, sizeof entry); /* object to function pointer, as POSIX dlsym requires */
    if (!entry) {
        fprintf(stderr, "%s: no %s\n", path, KH_ENTRY_NAME);
        return NULL;
    }
    const kh_module_desc *d = entry(&th_host);
    if (!d || d->kind != KH_MODULE_TASK || !d->api) {
        fprintf(stderr, "%s: bad descriptor\n", path);
        return NULL;
    }
    if (desc) *desc = d;
    return d->api; /* the handle stays open for the life of the test */
}

void th_print(void *ctx, const char *line) {
    (void)ctx;
    printf("  %s\n", line);
    size_t at = strlen(th_described);
    snprintf(th_described + at, sizeof th_described - at, "%s\n", line);
}
