/* core/devices/fma_kernel.c — the cpu's FMA throughput, the compute ceiling as the Empirical Roofline Toolkit
 * measures it: independent multiply-add chains held in registers, no memory traffic. The roofline's FLOP
 * ceiling is the higher of this and the sgemm (devices/peak.c): a backend's convolution kernels can beat
 * OpenBLAS's sgemm on one machine, never the FMA units. Built with -O3 and FMA contraction for each vector ISA
 * (the loader picks the clone the CPU runs); never sanitised. */
#include "devices/fma_kernel.h"

typedef float v16 __attribute__((vector_size(64)));

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KH_WIDEST __attribute__((target_clones("avx512f", "arch=haswell", "default")))
#else
#define KH_WIDEST
#endif

/* Ten chains of 16 lanes: enough in flight to cover an FMA's latency on two units (4 cycles x 2 per vector
 * register) with AVX-512; the values converge to a / (1 - m) and never overflow or go subnormal. */
KH_WIDEST __attribute__((no_sanitize("address", "undefined"), noinline)) float kh_fma_chains(long iters, float m,
                                                                                               float a) {
    v16 acc[10];
    for (int k = 0; k < 10; k++)
        for (int j = 0; j < 16; j++) acc[k][j] = 1.0f + 0.01f * (float)(k + j);
    v16 mv = m - (v16){0}, av = a - (v16){0};
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < 10; k++) acc[k] = acc[k] * mv + av;
    v16 s = acc[0];
    for (int k = 1; k < 10; k++) s += acc[k];
    float r = 0;
    for (int j = 0; j < 16; j++) r += s[j];
    return r;
}

double kh_fma_flops_per_iter(void) { return 10.0 * 16 * 2; }
