/* core/cell/layout.h — the host side of the negotiated tensor ABI: batches are converted from what the task
 * produces (NHWC images, index sequences) to what the backend asked for in its caps. */
#ifndef KHOST_CORE_LAYOUT_H
#define KHOST_CORE_LAYOUT_H

#include <stdint.h>

#include "khost/tensor.h"

/* (n, h, w, c) -> (n, c, h, w), float. */
void kh_layout_nhwc_to_nchw(float *dst, const float *src, int64_t n, int64_t h, int64_t w, int64_t c);
/* (n, c, h, w) -> (n, h, w, c), float. */
void kh_layout_nchw_to_nhwc(float *dst, const float *src, int64_t n, int64_t c, int64_t h, int64_t w);
/* i32 indices (count) -> one-hot float (count, depth); an index outside [0, depth) gives -1 (error). */
int kh_layout_onehot(float *dst, const int32_t *src, int64_t count, int32_t depth);
/* Convert a task batch `src` into `dst` (whose data buffer the caller sized) for a backend:
 * to_nchw: rank-4 NHWC float becomes NCHW; onehot_depth > 0: NT indices become NTC one-hot.
 * Otherwise dst aliases src's data. Returns 0, or -1 on a bad index. */
int kh_layout_convert(kh_tensor *dst, const kh_tensor *src, int to_nchw, int32_t onehot_depth, void *buf);
#endif
