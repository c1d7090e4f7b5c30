/* core/base/cpuload.h — how busy the machine is beside this process: all CPUs' ticks from /proc/stat against
 * this process's own from /proc/self/stat (its threads included), and the time the hypervisor stole. Two
 * samples bracket a measurement; the difference says whether it was taken alone. */
#ifndef KHOST_CORE_CPULOAD_H
#define KHOST_CORE_CPULOAD_H

typedef struct kh_cpuload {
    double wall;                    /* seconds, monotonic */
    unsigned long long busy, steal; /* all CPUs' ticks: user..softirq, steal */
    unsigned long long total;       /* every tick /proc/stat counts */
    unsigned long long self;        /* this process's utime + stime, ticks */
    int ok;
} kh_cpuload;

/* Busy beside us: more than a quarter of a core taken by other processes, or more than 2 % of the CPU time
 * stolen (the report's mark on a repetition, results/cellstats.h; a calibration not kept, devices/peak.c). */
#define KH_CPULOAD_BUSY_CORES 0.25
#define KH_CPULOAD_BUSY_STEAL_PCT 2.0

/* A sample now (ok 0 when /proc could not be read). */
void kh_cpuload_sample(kh_cpuload *n);
/* Between a and b: the CPU time of other processes over the wall time (in cores) and the stolen share of all
 * CPU time (%); 0, or -1 when either sample failed or no time passed. */
int kh_cpuload_between(const kh_cpuload *a, const kh_cpuload *b, double *other_cores, double *steal_pct);
#endif
