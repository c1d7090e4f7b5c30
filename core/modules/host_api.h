/* core/modules/host_api.h — the host-services table given to every module. */
#ifndef KHOST_CORE_HOST_API_H
#define KHOST_CORE_HOST_API_H

#include "khost/abi.h"
#include "modules/registry.h"

/* The one table; config_get reads the registry bound with kh_host_api_bind (may be NULL). */
const kh_host_api *kh_host_api_get(void);
void kh_host_api_bind(const kh_registry *reg);
#endif
