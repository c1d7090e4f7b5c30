/* core/devices/peak.h — a device's peak FLOP rate and memory bandwidth, the roof of the roofline a cell is placed
 * under. cpu: measured once per machine (an sgemm and a memory copy, about a second) and cached in
 * $XDG_CACHE_HOME/khost/; CUDA: the published figures of known devices. */
#ifndef KHOST_CORE_PEAK_H
#define KHOST_CORE_PEAK_H

#include <stddef.h>

#include "khost/backend.h"

typedef struct kh_peak {
    double gflops; /* FP32; 0 when unknown */
    double gbps;   /* bytes per second / 1e9; 0 when unknown */
    char source[256]; /* where the figures came from, for the record */
} kh_peak;

/* Fill *out for dev. Returns 0 with the figures, -1 with out->source saying why they are unknown. */
int kh_peak_get(const kh_device *dev, kh_peak *out);
/* The roofline bound for an arithmetic intensity (FLOP per byte): min(peak, intensity x bandwidth). */
double kh_peak_bound(const kh_peak *p, double flop_per_byte);
#endif
