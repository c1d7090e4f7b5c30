/* tf_ops_cpu.h — shared by the CPU kernel files: the per-file kernel tables and the element-wise splitter. */
#ifndef KHOST_TF_OPS_CPU_H
#define KHOST_TF_OPS_CPU_H

#include "tf.h"

/* Element-wise kernels split over the pool above this many elements (a part's work must outweigh the
 * hand-off: ~64 KiB of floats per part). */
#define TF_EW_GRAIN (16384)

void tf_ew_for(tf_run *r, int64_t n, tf_range_fn fn, void *ctx);
tf_kernel tf_cpu_kernel_math(uint32_t op);
tf_kernel tf_cpu_kernel_image(uint32_t op);
tf_kernel tf_cpu_kernel_shape(uint32_t op);
tf_kernel tf_cpu_kernel_apply(uint32_t op);

#endif
