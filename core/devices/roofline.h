/* core/devices/roofline.h — the hierarchical roofline a cell is held to: each phase of an epoch (its
 * training steps, its evaluation steps) takes at least its FLOPs at the compute ceiling (kh_peak_flop_ceiling) and at least its compulsory bytes
 * at the bandwidth of the memory level its step's working set lives in; the bound is the epoch's FLOPs over
 * the sum of those least times. */
#ifndef KHOST_CORE_ROOFLINE_H
#define KHOST_CORE_ROOFLINE_H

#include "devices/peak.h"
#include "khost/kit/flops.h"

typedef struct kh_roofline {
    double gflops;      /* the bound; 0 when the peak is unknown */
    int level;          /* the training phase's level, an index into the peak's levels; -1 when none */
    double gbps;        /* that level's ceiling */
    double working_set; /* the training step's working set, bytes */
} kh_roofline;

/* The level a step with this working set runs from: the fastest whose capacity holds at least half of it (a
 * set up to twice a level's size still finds most of its reuse there), else the last (DRAM). -1 when p has no
 * levels. */
int kh_roofline_level(const kh_peak *p, double working_set);
/* The bound for an epoch of these two phases (either may be all zero); 0, or -1 when p has no FLOP peak. */
int kh_roofline_bound(const kh_peak *p, const kh_flops_phase *train, const kh_flops_phase *eval, kh_roofline *out);
#endif
