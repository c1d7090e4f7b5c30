/* core/devices/membw.h — the memory hierarchy's bandwidth ceilings on cpu, as STREAM and the Empirical Roofline
 * Toolkit measure them: each cache level's capacity from sysfs, and for every level (the last one DRAM) the
 * best bandwidth of four streaming kernels run on every online CPU at once over buffers that fit that level
 * (DRAM: at least four times the last-level cache per array). */
#ifndef KHOST_CORE_MEMBW_H
#define KHOST_CORE_MEMBW_H

#define KH_MEM_LEVELS_MAX 5

typedef struct kh_mem_level {
    char name[8];        /* "L2", "L3", "DRAM" */
    double bytes;        /* capacity over the CPUs measured (distinct instances summed); 0 for DRAM: unbounded */
    double buffer_bytes; /* what the measurement streamed over, all threads' arrays together */
    double gbps;         /* the best of the kernels, bytes counted as STREAM does (reads + writes) / 1e9 */
    char kernel[8];      /* which kernel gave it: "copy", "triad", "update", "read" */
    double kernel_gbps[4]; /* each kernel's best, in kh_membw_kernel order; 0 when not measured here (cached) */
} kh_mem_level;

/* The unified cache levels from L2 on that the first `threads` online CPUs see, fastest first, then DRAM; each
 * level's buffer size set for measuring. Returns the number of levels (at least 1: DRAM alone when sysfs
 * says nothing). */
int kh_mem_levels_detect(kh_mem_level *lv, int max, int threads);
/* Measure every level's gbps with `threads` threads; 0, or -1 when memory or threads could not be had (the
 * levels not measured keep gbps 0). */
int kh_mem_levels_measure(kh_mem_level *lv, int n, int threads);

/* The streaming kernels (membw_kernels.c, built for the widest vector ISA the machine runs): `passes` passes
 * over n floats of each array; returns a value the caller keeps so the read passes are not optimised away. */
typedef enum { KH_MEMBW_COPY, KH_MEMBW_TRIAD, KH_MEMBW_UPDATE, KH_MEMBW_READ, KH_MEMBW_KERNELS } kh_membw_kernel;
float kh_membw_pass(kh_membw_kernel k, float *a, float *b, float *c, long n, int passes);
/* Bytes one pass moves per float of each array (copy 8, triad 12, update 24, read 4). */
double kh_membw_bytes_per_float(kh_membw_kernel k);
const char *kh_membw_kernel_name(kh_membw_kernel k);
#endif
