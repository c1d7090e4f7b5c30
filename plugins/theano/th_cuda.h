/* th_cuda.h — theano's GPU path (th_cuda_session.c, th_cuda_model.c, th_cuda_run.c) as the graph runtime's
 * executor table (khost/kit/graph_runtime.h). The GPU path is built into the GPU half, theano-cuda/theano_cuda.so,
 * which theano.so loads with khost/kit/half.h the first time the CUDA kind is asked for: theano.so itself links
 * no CUDA library, so cpu cells map none.
 *
 * The graph runtime lowers the spec (LSTMs as scans) and th_model.c runs the passes and plans each function, as
 * on the CPU; then th_cuda_compile emits each function as CUDA C (th_emit.c in the CUDA dialect), compiles it with
 * NVRTC for the device's architecture, loads the CUBIN with cuModuleLoadData on the host's primary context, and
 * allocates the device memory (one arena of the largest plan, variables with their optimizer slots,
 * accumulators, staged feeds, the scratch the plans ask for, metric doubles). A run enqueues the launch plan on
 * the session's stream: cuLaunchKernel, cuBLAS SGEMMs, cuDNN convolutions; it never synchronises. */
#ifndef TH_CUDA_H
#define TH_CUDA_H

#include "th.h"
#include "khost/kit/half.h"

typedef struct th_cuda_session th_cuda_session; /* th_cuda_exec.h */
typedef struct th_cuda_model th_cuda_model;

/* The GPU path as a graph-runtime executor (kh_grt_exec; th_cuda_half.c puts these into the half's table). */
/* Capabilities of the CUDA device kind: available only with a driver, a device, NVRTC and cuDNN. */
void th_cuda_caps(kh_caps *c);
kh_status th_cuda_open(kh_grt_session *s, char *err, size_t errlen);
void th_cuda_close(kh_grt_session *s);
kh_status th_cuda_environment(kh_grt_session *s, char *buf, size_t n);

/* After lowering, passes and plans (m->rt.mg, m->fn[f].g and .plan): code, modules, device memory. */
kh_status th_cuda_compile(kh_grt_model *m);
void th_cuda_free(kh_grt_model *m);
/* Variable v (index into m->rt.mg.vars), canonical layout, host <-> device (synchronous). */
kh_status th_cuda_set_var(kh_grt_model *m, int32_t v, const float *w);
kh_status th_cuda_get_var(kh_grt_model *m, int32_t v, float *w);
/* Stage the feeds (x: n rows of the model input; labels: n i32 or NULL; dy: the probe's output gradient or
 * NULL; indices and labels validated on the host) and enqueue part `part` of function fn. Metrics of train and
 * eval accumulate on the device. */
kh_status th_cuda_run(kh_grt_model *m, kh_gfn fn, int part, int64_t n, double lr, uint64_t counter, const void *x,
                      const int32_t *labels, const float *dy);
/* Node `node` of the optimised function fn (n rows when batched) into host memory; synchronises. */
kh_status th_cuda_read_node(kh_grt_model *m, kh_gfn fn, int32_t node, int64_t n, float *dst);
kh_status th_cuda_read_metrics(kh_grt_model *m, uint32_t phase, kh_metrics *out, int32_t reset);
kh_status th_cuda_sync(kh_grt_model *m);

/* The half's one exported symbol (TH_CUDA_HALF_ENTRY) returns a kh_grt_half; version and sizes are checked by
 * the loader (the graph runtime, through th_entry.c's kh_half). */
#define TH_CUDA_HALF_ENTRY "theano_cuda_half_entry"
#define TH_CUDA_HALF_VERSION 2u

#endif
