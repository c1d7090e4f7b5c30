/* core/devices/peak.h — a device's peak FLOP rate and memory bandwidth ceilings, the roofs of the roofline a
 * cell is placed under. cpu: measured once per machine (an sgemm, and each memory level's streaming bandwidth:
 * devices/membw.h; a second or two) and cached in $XDG_CACHE_HOME/khost/; CUDA: the published figures of known
 * devices (one level, the device memory). */
#ifndef KHOST_CORE_PEAK_H
#define KHOST_CORE_PEAK_H

#include <stddef.h>

#include "devices/membw.h"
#include "khost/backend.h"

typedef struct kh_peak {
    double gflops;     /* FP32 sgemm (cpu: OpenBLAS 1024^3; CUDA: the published peak); 0 when unknown */
    double fma_gflops; /* cpu: the FMA units' throughput (devices/fma_kernel.c); 0 when unknown */
    double gbps;   /* the outermost level's (DRAM's) bandwidth / 1e9; 0 when unknown */
    kh_mem_level levels[KH_MEM_LEVELS_MAX]; /* fastest first, the last one DRAM */
    int n_levels;
    char source[256]; /* where the figures came from, for the record */
} kh_peak;

/* Fill *out for dev. Returns 0 with the figures, -1 with out->source saying why they are unknown. */
int kh_peak_get(const kh_device *dev, kh_peak *out);
/* The cpu's figures: from the cache, or measured (and cached) when fresh or when the cache has none. */
int kh_peak_cpu(kh_peak *out, int fresh);
/* The roofline's compute ceiling: the higher of the sgemm and FMA figures. */
double kh_peak_flop_ceiling(const kh_peak *p);
/* The roofline bound for an arithmetic intensity (FLOP per byte) against the outermost level:
 * min(compute ceiling, intensity x bandwidth). */
double kh_peak_bound(const kh_peak *p, double flop_per_byte);
#endif
