/* kit/base/blas_name.c — how records name the OpenBLAS a backend calls: version and the kernels in use (the
 * backend passes OpenBLAS's own strings; the kit does not link BLAS). */
#include <stdio.h>
#include <string.h>

#include "khost/kit/blas.h"

const char *kh_openblas_describe(const char *config, const char *corename, char *buf, size_t n) {
    /* config: "OpenBLAS 0.3.21 NO_AFFINITY Zen MAX_THREADS=64" */
    char ver[32] = "unknown";
    if (config && strncmp(config, "OpenBLAS ", 9) == 0) {
        size_t i = 0;
        for (const char *p = config + 9; *p && *p != ' ' && i + 1 < sizeof ver; p++) ver[i++] = *p;
        ver[i] = 0;
    }
    snprintf(buf, n, "openblas-%s (%s kernels)", ver, corename ? corename : "unknown");
    return buf;
}
