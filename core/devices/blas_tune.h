/* core/devices/blas_tune.h — choose OpenBLAS's kernels from the CPU's features before any module loads it. */
#ifndef KHOST_BLAS_TUNE_H
#define KHOST_BLAS_TUNE_H

/* Sets OPENBLAS_CORETYPE for this process and its children when neither it nor KHOST_OPENBLAS_CORETYPE=keep
 * is set (see blas_tune.c). Call before any module is loaded. Returns the core type set, or NULL. */
const char *kh_blas_tune(void);
/* The widest x86 vector extension set the CPU runs: "avx512" (F+BW+VL+DQ), "avx2" (AVX2+FMA), "avx", "sse";
 * "unknown" elsewhere. kh_blas_tune's choice and every record's cpu_isa come from it. */
const char *kh_cpu_isa(void);
/* The OpenBLAS core type khost asks for on a CPU of that ISA ("SkylakeX", "Haswell"), NULL for OpenBLAS's own
 * choice: the one table kh_blas_tune and the test harness use. */
const char *kh_blas_coretype_for_isa(const char *isa);
/* The OpenBLAS core types this CPU can execute among Haswell, SkylakeX and Cooperlake, narrowest first, into
 * out (at most max); returns how many. */
int kh_blas_coretypes_runnable(const char **out, int max);

#endif
