/* core/cell/noise.h — how loaded the machine was while a cell measured (cell/noise.c): the CPU time other
 * processes took and the time the hypervisor stole during the timed epochs (/proc/stat against this process's
 * own /proc/self/stat), the load average before they began, and the CPU frequency and governor where the
 * kernel shows them. Written into the record's environment:
 *   noise_other_cores  CPU time of other processes / wall time (0.9: nearly a core busy with something else)
 *   noise_steal_pct    stolen time, % of all CPU time            noise_load1_before  /proc/loadavg's first
 *   cpu_mhz            mean current frequency of the CPUs        cpu_governor        cpu0's scaling governor
 *   noise_window_s     the seconds they cover: /proc counts in ticks (10 ms), so a window under a second says
 *                      little, and the report judges only windows of a second or more (results/cellstats.h: kh_rep_noisy) */
#ifndef KHOST_CORE_NOISE_H
#define KHOST_CORE_NOISE_H

#include "base/cpuload.h"
#include "results/results.h"

typedef kh_cpuload kh_noise; /* sampled with kh_cpuload_sample */
/* Before the timed epochs: the load average and the frequency and governor, into r's environment. */
void kh_noise_before(kh_cell_record *r);
/* After them: what happened between a and b, into r's environment (nothing when either sample failed). */
void kh_noise_after(kh_cell_record *r, const kh_noise *a, const kh_noise *b);
#endif
