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

/* The GPU path as a graph-runtime executor (kh_grt_exec; th_cuda_half.c exports it as the half's table): caps
 * (available only with a driver, a device, NVRTC and cuDNN), sessions, compile (after lowering, passes and plans:
 * code, modules, device memory), variables (synchronous), runs (indices and labels validated on the host; metrics
 * of train and eval accumulate on the device), read-backs (synchronous). */
KH_GRT_EXEC_DECLARE(th_cuda);

/* The half's one exported symbol (TH_CUDA_HALF_ENTRY) returns a kh_grt_half; version and sizes are checked by
 * the loader (the graph runtime, through th_entry.c's kh_half). */
#define TH_CUDA_HALF_ENTRY "theano_cuda_half_entry"
#define TH_CUDA_HALF_VERSION 2u

#endif
