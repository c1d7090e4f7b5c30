/* khost/tensor.h — the tensor that crosses the ABI: host memory, dense, row-major.
 *
 * Ownership: the caller owns `data`; the callee reads (or, for outputs, writes) it only during the call.
 * An output tensor arrives with dtype, rank and dims filled in by the caller and `data` sized for them.
 */
#ifndef KHOST_TENSOR_H
#define KHOST_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KH_MAX_RANK 5

typedef enum kh_dtype { KH_F32 = 1, KH_I32 = 2, KH_U8 = 3 } kh_dtype;

/* What the axes mean. N = batch, C = channels/features, H/W = image rows/cols, T = time steps. */
typedef enum kh_layout {
    KH_LAYOUT_ANY = 0,  /* no meaning attached (weights, flat buffers) */
    KH_LAYOUT_NC = 1,   /* (N, C) features, labels (N) use NC with rank 1 */
    KH_LAYOUT_NHWC = 2, /* (N, H, W, C) Keras "channels_last", what tasks produce */
    KH_LAYOUT_NCHW = 3, /* (N, C, H, W) */
    KH_LAYOUT_NTC = 4,  /* (N, T, C) sequences of vectors */
    KH_LAYOUT_NT = 5    /* (N, T) sequences of token / character indices (i32) */
} kh_layout;

/* FROZEN: passed by pointer to almost every call, input and output alike, in every module; what a tensor
 * is (dtype, layout, rank, dims, data) is complete, and a different kind of tensor would be a new struct. */
typedef struct kh_tensor {
    uint32_t dtype;  /* kh_dtype */
    uint32_t layout; /* kh_layout */
    int32_t rank;
    int64_t dims[KH_MAX_RANK];
    void *data;
} kh_tensor;

static inline size_t kh_dtype_size(uint32_t dtype) { return dtype == KH_U8 ? 1u : 4u; }

static inline int64_t kh_tensor_numel(const kh_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= t->dims[i];
    return n;
}

static inline size_t kh_tensor_bytes(const kh_tensor *t) {
    return (size_t)kh_tensor_numel(t) * kh_dtype_size(t->dtype);
}

#ifdef __cplusplus
}
#endif
#endif
