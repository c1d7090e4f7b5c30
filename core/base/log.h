/* core/base/log.h — the host's log (base/log.c). */
#ifndef KHOST_CORE_LOG_H
#define KHOST_CORE_LOG_H

#include <stdarg.h>

#include "khost/abi.h" /* KH_LOG_ levels */

/* Verbosity for the log and host->log: KH_LOG_WARN by default, KH_LOG_ERROR with --quiet, KH_LOG_DEBUG with -v. */
void kh_host_set_log_level(int level);
int kh_host_log_level(void);
void kh_logf(int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* One message from module (NULL: the host itself) at level, if the verbosity admits it. */
void kh_vlogf(int level, const char *module, const char *fmt, va_list ap)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 0)))
#endif
    ;
#endif
