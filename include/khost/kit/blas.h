/* khost/kit/blas.h — the OpenBLAS description every record carries (kit/base/blas_name.c). */
#ifndef KHOST_KIT_BLAS_H
#define KHOST_KIT_BLAS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "openblas-0.3.21 (SkylakeX kernels)" from openblas_get_config() and openblas_get_corename() (the kernels in
 * use: see core/devices/blas_tune.c), into buf; returns buf. */
const char *kh_openblas_describe(const char *config, const char *corename, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
