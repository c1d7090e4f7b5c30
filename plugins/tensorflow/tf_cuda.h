/* tf_cuda.h — the CUDA executor (tf_cuda_*.c, tf_cuda_kernels.cu) as the graph runtime's executor table
 * (khost/kit/graph_runtime.h). The executor is built into the GPU half, tensorflow-cuda/tensorflow_cuda.so, which
 * tensorflow.so loads with khost/kit/half.h the first time the CUDA kind is asked for: tensorflow.so itself
 * links no CUDA library, so cpu cells map none. The graph runtime owns lowering and the host side of the ABI,
 * tf_model.c the memory plans; the CUDA executor owns device memory (one arena sized by the same plans, variables and
 * slots, persistent accumulators, staged inputs), the stream, library handles and the per-op launches. */
#ifndef KHOST_TF_CUDA_H
#define KHOST_TF_CUDA_H

#include "tf.h"
#include "khost/kit/half.h"

/* The CUDA executor (kh_grt_exec; tf_cuda_half.c exports it as the half's table): caps (available only with a
 * usable driver and device), sessions, compile (after lowering and planning: device memory, library algorithms),
 * variables, runs (asynchronous: metrics accumulate on the device), read-backs (synchronous). */
KH_GRT_EXEC_DECLARE(tf_cuda);

/* The half's one exported symbol (TF_CUDA_HALF_ENTRY) returns a kh_grt_half; version and sizes are checked by
 * the loader (the graph runtime, through tf_entry.c's kh_half). */
#define TF_CUDA_HALF_ENTRY "tensorflow_cuda_half_entry"
#define TF_CUDA_HALF_VERSION 2u

#endif
