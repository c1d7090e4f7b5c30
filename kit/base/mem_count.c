/* kit/base/mem_count.c — a backend's device-memory count as kh_backend_api.memory_info reports it (alloc.h). */
#include <stdio.h>

#include "khost/kit/alloc.h"

kh_status kh_mem_count_report(const kh_mem_count *c, int counted, const char *what, kh_memory_info *out) {
    if (!out) return KH_ERR_INVALID;
    if (!counted || !c) return KH_OK;
    if (KH_HAS_MEMBER(kh_memory_info, out->struct_size, device_bytes)) out->device_bytes = c->now;
    if (KH_HAS_MEMBER(kh_memory_info, out->struct_size, device_peak_bytes)) out->device_peak_bytes = c->peak;
    if (KH_HAS_MEMBER(kh_memory_info, out->struct_size, what)) snprintf(out->what, sizeof out->what, "%s", what);
    return KH_OK;
}
