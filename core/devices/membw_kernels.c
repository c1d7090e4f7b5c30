/* core/devices/membw_kernels.c — the streaming kernels of membw.h. They are the ceilings a backend's own
 * loops are held to, so they must run as wide as the machine allows: the file is built with -O3 and each
 * kernel cloned per vector ISA (the loader picks the clone the CPU runs), and never instrumented by a
 * sanitizer (a slower ceiling would be a false one). The kernels' shapes cover what the backends stream:
 * copy (one read, one write), triad (two reads, one write), update (three arrays each read and written, an
 * optimizer's pass over w and its slots) and read (one read, summed over sixteen lanes). */
#include "devices/membw.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KH_WIDEST __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KH_WIDEST
#endif
#define KH_NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))

/* Each kernel makes `passes` passes itself: a call per pass would be timed too, and at L1's sizes (a few
 * hundred vectors a pass) that call is a good part of the pass. */
KH_WIDEST KH_NO_SANITIZE static float copy(float *restrict a, const float *restrict b, long n, int passes) {
    for (int p = 0; p < passes; p++) {
        for (long i = 0; i < n; i++) a[i] = b[i];
        __asm__ volatile("" ::: "memory"); /* every pass is made: the stores must happen again */
    }
    return a[0];
}

KH_WIDEST KH_NO_SANITIZE static float triad(float *restrict a, const float *restrict b, const float *restrict c,
                                            long n, int passes) {
    for (int p = 0; p < passes; p++) {
        for (long i = 0; i < n; i++) a[i] = b[i] + 0.5f * c[i];
        __asm__ volatile("" ::: "memory");
    }
    return a[0];
}

KH_WIDEST KH_NO_SANITIZE static float update(float *restrict a, float *restrict b, float *restrict c, long n,
                                             int passes) {
    for (int p = 0; p < passes; p++) {
        for (long i = 0; i < n; i++) {
            float x = a[i], y = b[i], z = c[i]; /* a rotation: values keep their size over any number of passes */
            a[i] = y, b[i] = z, c[i] = x;
        }
        __asm__ volatile("" ::: "memory");
    }
    return a[0];
}

/* 64 lanes: four independent chains of 16-float adds, so the adds' latency never limits the loads */
KH_WIDEST KH_NO_SANITIZE static float read_sum(const float *restrict b, long n, int passes) {
    float s = 0;
    for (int p = 0; p < passes; p++) {
        float lane[64] = {0};
        long i = 0;
        for (; i + 64 <= n; i += 64)
            for (int j = 0; j < 64; j++) lane[j] += b[i + j];
        for (int j = 0; j < 64; j++) s += lane[j];
        for (; i < n; i++) s += b[i];
        __asm__ volatile("" ::: "memory");
    }
    return s;
}

float kh_membw_pass(kh_membw_kernel k, float *a, float *b, float *c, long n, int passes) {
    switch (k) {
    case KH_MEMBW_COPY: return copy(a, b, n, passes);
    case KH_MEMBW_TRIAD: return triad(a, b, c, n, passes);
    case KH_MEMBW_UPDATE: return update(a, b, c, n, passes);
    case KH_MEMBW_READ: return read_sum(b, n, passes);
    default: return 0;
    }
}

double kh_membw_bytes_per_float(kh_membw_kernel k) {
    static const double bytes[KH_MEMBW_KERNELS] = {8, 12, 24, 4};
    return k >= 0 && k < KH_MEMBW_KERNELS ? bytes[k] : 0;
}

const char *kh_membw_kernel_name(kh_membw_kernel k) {
    static const char *names[KH_MEMBW_KERNELS] = {"copy", "triad", "update", "read"};
    return k >= 0 && k < KH_MEMBW_KERNELS ? names[k] : "?";
}
