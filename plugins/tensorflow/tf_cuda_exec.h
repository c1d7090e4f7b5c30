/* tf_cuda_exec.h — internals of the tensorflow CUDA executor (tf_cuda_session.c, tf_cuda_model.c,
 * tf_cuda_ops.c): session and model state, checked-call macros, the per-op launch entry points.
 *
 * Execution model (TensorFlow's GPU path with its single-threaded executor): one stream per session, cuBLAS
 * and cuDNN bound to it; a function runs by launching its nodes in graph order (a valid topological order
 * that already includes the memory plan's control edges) on that stream, one kernel or library call per op.
 * Device memory mirrors the CPU model and is the graph runtime's device storage (khost/kit/graph_runtime_cuda.h,
 * through the driver table): one arena sized by the largest function plan (offsets from the same plans),
 * variables with their optimizer slots, the GatherGrad accumulators, device copies of the feeds, and two doubles
 * per phase for the metrics; the kernels take its addresses as pointers (one address space with the runtime
 * API). Everything is allocated at compile time. */
#ifndef KHOST_TF_CUDA_EXEC_H
#define KHOST_TF_CUDA_EXEC_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "tf.h"
#include "khost/kit/cuda.h"
#include "khost/kit/graph_runtime_cuda.h"
#include "tf_cuda.h"
#include "tf_cuda_kernels.h"
#include "tf_cuda_plan.h"

struct tf_cuda_session {
    kh_cuda_session k; /* the host's primary context, the stream, cuBLAS and cuDNN (the kit opens it) */
    /* the cuDNN algorithm of every convolution of the last compiled model's training function, for the record's
     * environment: "L<layer>.<fwd|bwd_data|bwd_filter>=<algo>[~ when non-deterministic] ..." ("..." if cut) */
    char conv_algos[256];
};

/* cuDNN state of one convolution node: descriptors for the current batch, algorithms chosen at compile. */
typedef struct tfc_conv {
    tf_cu_geom g;
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    int algo;            /* the node's one algorithm (forward, backward data or backward filter) */
    int det;             /* 1: cuDNN reports that algorithm deterministic */
    int asym, Hp, Wp;    /* asymmetric 'same': cuDNN sees the input padded explicitly to (Hp, Wp), 'valid' */
    int64_t desc_n;      /* batch the tensor descriptors describe */
} tfc_conv;

typedef struct tfc_fn {
    void **ptr;          /* per node: device storage (NULL: none) */
    uint8_t *part;       /* per node: bit p set when the node belongs to part p */
    tfc_conv **conv;     /* per node: cuDNN state of a convolution, else NULL */
    double *met;         /* this function's metric slot (train, eval), else NULL */
} tfc_fn;

struct tf_cuda_model {
    tf_cuda_session *cs;
    tf_cu_layout lay;
    kh_grt_dev dev;          /* the graph runtime's device storage: arena, variables, feeds, metrics */
    float *wt;               /* a convolution's filter in cuDNN's NHWC filter layout (F, KH, KW, C) */
    int64_t wt_floats;
    float *xpad;             /* an explicitly padded convolution input (or its gradient) */
    int64_t xpad_floats;
    void *ws;                /* the shared cuDNN workspace */
    size_t ws_bytes;
    int sync_each;           /* TF_CUDA_SYNC_EACH_OP=1 */
    tfc_fn fn[KH_GFN_COUNT];
};

/* --- errors: "tensorflow <op> (node i, layer l) on cuda:N: <NAME> (<call>)" ---------------------------------
 * g == NULL or node < 0: "tensorflow <what> on cuda:N: ...". Out-of-memory statuses are KH_ERR_NOMEM,
 * everything else KH_ERR_DEVICE. */
kh_status tfc_err_cuda(tf_model *m, const kh_graph *g, int32_t node, const char *what, cudaError_t e, const char *call);
kh_status tfc_err_dnn(tf_model *m, const kh_graph *g, int32_t node, const char *what, cudnnStatus_t e, const char *call);
kh_status tfc_err_blas(tf_model *m, const kh_graph *g, int32_t node, const char *what, cublasStatus_t e,
                       const char *call);
/* A failure that is not a library status, named the same way. */
kh_status tfc_fail(tf_model *m, const kh_graph *g, int32_t node, const char *what, kh_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;

#define TFC_CUDA(m, g, i, what, call)                                                     \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) return tfc_err_cuda((m), (g), (i), (what), e_, #call);     \
    } while (0)
#define TFC_DNN(m, g, i, what, call)                                                      \
    do {                                                                                  \
        cudnnStatus_t e_ = (call);                                                        \
        if (e_ != CUDNN_STATUS_SUCCESS) return tfc_err_dnn((m), (g), (i), (what), e_, #call); \
    } while (0)
#define TFC_BLAS(m, g, i, what, call)                                                     \
    do {                                                                                  \
        cublasStatus_t e_ = (call);                                                       \
        if (e_ != CUBLAS_STATUS_SUCCESS) return tfc_err_blas((m), (g), (i), (what), e_, #call); \
    } while (0)

/* A device buffer of the storage layer (kh_grt_dev_alloc: zeroed, counted, an out-of-memory message naming the
 * buffer, its size and the device's free memory), as a pointer. */
kh_status tfc_malloc(tf_model *m, void **p, size_t bytes, const char *what);
void tfc_free_dev(void *p);

/* --- per-op launches (tf_cuda_ops.c) ------------------------------------------------------------------------ */
/* At compile: check the op has a launch, create cuDNN state and choose algorithms (convolutions), and grow
 * the shared workspace and filter scratch needs (m->cuda->ws_bytes, wt_floats). */
kh_status tfc_prepare_node(tf_model *m, int f, int32_t i);
void tfc_release_node(tf_model *m, int f, int32_t i);
/* Enqueue node i of function f for a batch of n. */
kh_status tfc_launch(tf_model *m, int f, int32_t i, int64_t n, double lr, uint64_t counter);

#endif
