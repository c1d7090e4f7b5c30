/* core/modules/host_api.c — the const table of host services handed to every module (its log is base/log.c). */
#define _POSIX_C_SOURCE 200809L
#include "modules/host_api.h"

#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const kh_registry *g_reg;

void kh_host_api_bind(const kh_registry *reg) { g_reg = reg; }

__attribute__((format(printf, 3, 4))) static void api_log(kh_log_level level, const char *module, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kh_vlogf((int)level, module, fmt, ap);
    va_end(ap);
}

static void *api_alloc(size_t size) {
    void *p = NULL;
    if (size == 0) size = 1;
    size_t rounded = (size + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, rounded) != 0) return NULL;
    return p;
}

static void api_free(void *p) { free(p); }

static const char *api_config_get(const char *section, const char *key) {
    return g_reg && section && key ? kh_registry_get(g_reg, section, key) : NULL;
}

static void api_progress(const char *what, int64_t done, int64_t total) {
    if (kh_host_log_level() < KH_LOG_INFO || !isatty(STDERR_FILENO)) return;
    fprintf(stderr, "\r%s %lld/%lld%s", what, (long long)done, (long long)total, done >= total ? "\n" : "");
}

static const kh_host_api g_api = {
    .struct_size = sizeof(kh_host_api),
    .abi_major = KH_ABI_MAJOR,
    .abi_minor = KH_ABI_MINOR,
    .host_version = KHOST_VERSION,
    .log = api_log,
    .alloc = api_alloc,
    .free = api_free,
    .config_get = api_config_get,
    .progress = api_progress,
};

const kh_host_api *kh_host_api_get(void) { return &g_api; }
