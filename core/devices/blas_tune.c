/* core/devices/blas_tune.c — OpenBLAS kernel selection.
 *
 * OpenBLAS picks its kernels when it is loaded (a library constructor reading CPUID, or OPENBLAS_CORETYPE).
 * Debian's 0.3.21 does not know some current CPU models — a hypervisor's generic "Intel Xeon Processor" with
 * AVX-512 is one — and then falls back to its Prescott (SSE3) kernels: on such a machine one core's 512x512
 * SGEMM runs 4.5x slower with them than with the SkylakeX kernels (tools/openblas-kernels). Every CPU backend
 * here calls OpenBLAS, so khost chooses from the CPU's feature flags before any module (and so OpenBLAS) is
 * loaded: AVX-512 F/BW/VL/DQ -> SkylakeX, AVX2 + FMA -> Haswell, otherwise OpenBLAS's own choice
 * (kh_blas_coretype_for_isa). Cells spawned by `matrix` inherit it, and so do the tests: ctest runs every test
 * under this choice and the dispatch-dependent ones under every core type kh_blas_coretypes_runnable names
 * (tests/dispatch). A value already in OPENBLAS_CORETYPE always wins (some machines set one on purpose);
 * KHOST_OPENBLAS_CORETYPE=keep leaves OpenBLAS alone, any other value is used as the core type. The backends
 * report the kernels in use in each record's environment ("blas=openblas-0.3.21 (SkylakeX kernels)"), and
 * tools/bench-compare gives the PyTorch reference (which uses the same OpenBLAS for its matrix products) the
 * same setting. */
#define _POSIX_C_SOURCE 200809L
#include "devices/blas_tune.h"

#include <stdlib.h>
#include <string.h>

const char *kh_cpu_isa(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return "avx512";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2";
    return __builtin_cpu_supports("avx") ? "avx" : "sse";
#else
    return "unknown";
#endif
}

/* OpenBLAS's x86-64 core types that matter here, widest last, with what the CPU must run for each: its AVX2
 * kernels (Haswell), its AVX-512 ones (SkylakeX), and those plus AVX512-BF16 (Cooperlake, which OpenBLAS picks
 * by itself where the CPU has BF16). Debian's 0.3.21 has no SapphireRapids kernels of its own. */
static int cpu_runs(const char *core_type) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    int avx512 = !strcmp(kh_cpu_isa(), "avx512");
    if (!strcmp(core_type, "Haswell")) return avx512 || !strcmp(kh_cpu_isa(), "avx2");
    if (!strcmp(core_type, "SkylakeX")) return avx512;
    if (!strcmp(core_type, "Cooperlake")) return avx512 && __builtin_cpu_supports("avx512bf16");
#else
    (void)core_type;
#endif
    return 0;
}

static const char *const core_types[] = {"Haswell", "SkylakeX", "Cooperlake"};

int kh_blas_coretypes_runnable(const char **out, int max) {
    int n = 0;
    for (size_t i = 0; i < sizeof core_types / sizeof *core_types; i++)
        if (cpu_runs(core_types[i]) && n < max) out[n++] = core_types[i];
    return n;
}

const char *kh_blas_coretype_for_isa(const char *isa) {
    if (!isa) return NULL;
    return !strcmp(isa, "avx512") ? "SkylakeX" : !strcmp(isa, "avx2") ? "Haswell" : NULL;
}

const char *kh_blas_tune(void) {
    if (getenv("OPENBLAS_CORETYPE")) return NULL;
    const char *k = getenv("KHOST_OPENBLAS_CORETYPE");
    if (k && !strcmp(k, "keep")) return NULL;
    const char *t = k && *k ? k : kh_blas_coretype_for_isa(kh_cpu_isa());
    if (t && setenv("OPENBLAS_CORETYPE", t, 1) != 0) return NULL;
    return t;
}
