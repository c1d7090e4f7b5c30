/* kit/cuda/rt.c — CUDA runtime errors as text (see khost/kit/cuda.h); apart from libs.c so that a module without
 * the runtime (theano: the driver API only) never pulls it in from the static kit. */
#include "khost/kit/cuda.h"

#include <stdio.h>

const char *kh_cudart_errtext(cudaError_t e, char *buf, size_t n) {
    snprintf(buf, n, "%s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
    return buf;
}
