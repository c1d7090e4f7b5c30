/* khost/kit/geometry.h — the window geometry of Conv2D and MaxPooling2D (TensorFlow's 'valid' and 'same'
 * padding, any stride): one definition for the float64 oracle, every backend's kernels and theano's code
 * generators (kit/geometry/conv2d.c). */
#ifndef KHOST_KIT_GEOMETRY_H
#define KHOST_KIT_GEOMETRY_H

#include <stdint.h>

#include "khost/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kh_conv2d_dims {
    int64_t B, H, W, C;   /* input (B, H, W, C) */
    int64_t KH, KW, OC;   /* kernel (KH, KW, C, OC); pooling: window KH x KW, OC == C */
    int64_t SH, SW;       /* strides */
    int64_t OH, OW;       /* output (B, OH, OW, OC) */
    int64_t pad_top, pad_left; /* 'same': pad_total = max((out-1)*s + k - in, 0), before = total / 2 */
    int64_t pad_bottom, pad_right; /* the rest of pad_total, after: one more than before when it is odd */
} kh_conv2d_dims;
/* Fill the geometry; KH_ERR_INVALID when the window does not fit ('valid' with k > in) or sizes are < 1. */
kh_status kh_conv2d_geometry(kh_conv2d_dims *d, int64_t B, int64_t H, int64_t W, int64_t C, int64_t KH,
                             int64_t KW, int64_t OC, int64_t SH, int64_t SW, int padding);

#ifdef __cplusplus
}
#endif
#endif
