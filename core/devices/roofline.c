/* core/devices/roofline.c — the hierarchical roofline bound (see roofline.h; docs/PERFORMANCE.md, "GFLOP/s
 * and the roofline"). */
#include "devices/roofline.h"

#include <math.h>

int kh_roofline_level(const kh_peak *p, double working_set) {
    if (p->n_levels <= 0) return -1;
    for (int i = 0; i < p->n_levels - 1; i++)
        if (p->levels[i].bytes > 0 && working_set <= 2 * p->levels[i].bytes) return i;
    return p->n_levels - 1;
}

/* the least seconds a phase can take: its FLOPs at the peak, its bytes at its level's ceiling */
static double least_time(const kh_peak *p, const kh_flops_phase *ph, int *level) {
    double t = ph->flops > 0 ? ph->flops / (kh_peak_flop_ceiling(p) * 1e9) : 0;
    *level = kh_roofline_level(p, ph->working_set);
    double bw = *level >= 0 ? p->levels[*level].gbps : p->gbps;
    if (ph->bytes > 0 && bw > 0) {
        double tb = ph->bytes / (bw * 1e9);
        if (tb > t) t = tb;
    }
    return t;
}

int kh_roofline_bound(const kh_peak *p, const kh_flops_phase *train, const kh_flops_phase *eval, kh_roofline *out) {
    out->gflops = 0, out->level = -1, out->gbps = 0, out->working_set = train->working_set;
    if (!(kh_peak_flop_ceiling(p) > 0)) return -1;
    int lt, le;
    double t = least_time(p, train, &lt) + least_time(p, eval, &le);
    double flops = train->flops + eval->flops;
    out->level = lt;
    out->gbps = lt >= 0 ? p->levels[lt].gbps : p->gbps;
    out->gflops = t > 0 && isfinite(t) ? flops / t / 1e9 : kh_peak_flop_ceiling(p);
    return 0;
}
