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

/* The CUDA executor (kh_grt_exec; tf_cuda_half.c puts these into the half's table). */
/* Capabilities of the CUDA device kind: available only with a usable driver and device. */
void tf_cuda_caps(kh_caps *c);
kh_status tf_cuda_open(kh_grt_session *s, char *err, size_t errlen);
void tf_cuda_close(kh_grt_session *s);
kh_status tf_cuda_environment(kh_grt_session *s, char *buf, size_t n);

/* After lowering and planning (m->rt.mg, m->fn[].plan): allocate device memory, choose library algorithms. */
kh_status tf_cuda_compile(kh_grt_model *m);
void tf_cuda_free(kh_grt_model *m);
/* Variable v (index into m->rt.mg.vars) in canonical layout, host <-> device. */
kh_status tf_cuda_set_var(kh_grt_model *m, int32_t v, const float *w);
kh_status tf_cuda_get_var(kh_grt_model *m, int32_t v, float *w);
/* Stage the feeds (x: n rows of the model input, f32 or i32; labels: n i32 or NULL; dy: probe output gradient
 * or NULL) and launch part `part` of function `fn` on the stream. Asynchronous: metrics (LossSum, CorrectCount
 * of train/eval) are accumulated on the device into the phase's slot. */
kh_status tf_cuda_run(kh_grt_model *m, kh_gfn fn, int part, int64_t n, double lr, uint64_t counter, const void *x,
                      const int32_t *labels, const float *dy);
/* Copy node `node` of function fn (n rows when batched) to host memory; synchronises. */
kh_status tf_cuda_read_node(kh_grt_model *m, kh_gfn fn, int32_t node, int64_t n, float *dst);
/* The device-side metric sums of a phase (loss sum, correct) into *out; reset zeroes them. */
kh_status tf_cuda_read_metrics(kh_grt_model *m, uint32_t phase, kh_metrics *out, int32_t reset);
kh_status tf_cuda_sync(kh_grt_model *m);

/* The half's one exported symbol (TF_CUDA_HALF_ENTRY) returns a kh_grt_half; version and sizes are checked by
 * the loader (the graph runtime, through tf_entry.c's kh_half). */
#define TF_CUDA_HALF_ENTRY "tensorflow_cuda_half_entry"
#define TF_CUDA_HALF_VERSION 2u

#endif
