/* core/base/log.c — the host's log on stderr, one whole line per message, and its verbosity (base/log.h). The
 * host-services table gives modules the same log (modules/host_api.c). */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int g_level = KH_LOG_WARN;

void kh_host_set_log_level(int level) { g_level = level; }
int kh_host_log_level(void) { return g_level; }

static const char *level_name(int level) {
    switch (level) {
    case KH_LOG_ERROR: return "error";
    case KH_LOG_WARN: return "warning";
    case KH_LOG_INFO: return "info";
    default: return "debug";
    }
}

void kh_vlogf(int level, const char *module, const char *fmt, va_list ap) {
    if (level > g_level) return;
    /* one fprintf per line keeps lines whole when a child and its parent share stderr */
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n') msg[--n] = 0;
    fprintf(stderr, "khost: %s%s%s: %s\n", module ? module : "", module ? " " : "", level_name(level), msg);
}

void kh_logf(int level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kh_vlogf(level, NULL, fmt, ap);
    va_end(ap);
}
