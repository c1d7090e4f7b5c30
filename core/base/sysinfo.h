/* core/base/sysinfo.h — the CPU's model name and the UTC time, for records and caches (base/sysinfo.c). */
#ifndef KHOST_CORE_SYSINFO_H
#define KHOST_CORE_SYSINFO_H

#include <stddef.h>

/* "model name" of /proc/cpuinfo, or "unknown". */
void kh_env_cpu_model(char *buf, size_t n);
/* Current UTC time as ISO 8601. */
void kh_env_now_iso(char *buf, size_t n);
#endif
