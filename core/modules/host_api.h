/* core/modules/host_api.h — the host-services table given to every module, and the host's logging. */
#ifndef KHOST_CORE_HOST_API_H
#define KHOST_CORE_HOST_API_H

#include "khost/abi.h"
#include "modules/registry.h"

/* The one table; config_get reads the registry bound with kh_host_api_bind (may be NULL). */
const kh_host_api *kh_host_api_get(void);
void kh_host_api_bind(const kh_registry *reg);
/* Verbosity for host->log: KH_LOG_WARN by default, KH_LOG_ERROR with --quiet, KH_LOG_DEBUG with -v. */
void kh_host_set_log_level(int level);
void kh_logf(int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
#endif
