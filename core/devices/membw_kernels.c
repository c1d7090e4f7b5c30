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

KH_WIDEST KH_NO_SANITIZE static void copy(float *restrict a, const float *restrict b, long n) {
    for (long i = 0; i < n; i++) a[i] = b[i];
}

KH_WIDEST KH_NO_SANITIZE static void triad(float *restrict a, const float *restrict b, const float *restrict c,
                                           long n) {
    for (long i = 0; i < n; i++) a[i] = b[i] + 0.5f * c[i];
}

KH_WIDEST KH_NO_SANITIZE static void update(float *restrict a, float *restrict b, float *restrict c, long n) {
    for (long i = 0; i < n; i++) {
        float x = a[i], y = b[i], z = c[i]; /* a rotation: values keep their size over any number of passes */
        a[i] = y, b[i] = z, c[i] = x;
    }
}

KH_WIDEST KH_NO_SANITIZE static float read_sum(const float *restrict b, long n) {
    float lane[16] = {0};
    long i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) lane[j] += b[i + j];
    float s = 0;
    for (int j = 0; j < 16; j++) s += lane[j];
    for (; i < n; i++) s += b[i];
    return s;
}

float kh_membw_pass(kh_membw_kernel k, float *a, float *b, float *c, long n) {
    switch (k) {
    case KH_MEMBW_COPY: copy(a, b, n); return a[0];
    case KH_MEMBW_TRIAD: triad(a, b, c, n); return a[0];
    case KH_MEMBW_UPDATE: update(a, b, c, n); return a[0];
    case KH_MEMBW_READ: return read_sum(b, n);
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
