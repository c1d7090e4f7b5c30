/* tests/dispatch/blas_dispatch_probe.c — what khost's CPU dispatch chooses on this machine, for the test
 * harness (coretypes.cmake.in, read by ctest) and tools/fresh-check: the same functions khost calls before it
 * loads a module (core/devices/blas_tune.c), under the same environment rules. Prints
 *   isa=<kh_cpu_isa()>
 *   chosen=<the OPENBLAS_CORETYPE a cell runs under; empty: OpenBLAS's own choice>
 *   runnable=<the core types this CPU can execute, ;-separated> */
#include <stdio.h>
#include <stdlib.h>

#include "devices/blas_tune.h"

int main(void) {
    kh_blas_tune();
    const char *chosen = getenv("OPENBLAS_CORETYPE");
    const char *types[8];
    int n = kh_blas_coretypes_runnable(types, 8);
    printf("isa=%s\nchosen=%s\nrunnable=", kh_cpu_isa(), chosen ? chosen : "");
    for (int i = 0; i < n; i++) printf("%s%s", i ? ";" : "", types[i]);
    printf("\n");
    return ferror(stdout) ? 1 : 0;
}
