/* khost/kit/graph_runtime_cuda.h — the graph runtime's device storage: the CUDA counterpart of its host storage
 * (kh_grt_host_*, khost/kit/graph_runtime.h), written once for every graph backend's GPU half
 * (kit/cuda/grt_device.c, in khost_kit_cuda).
 *
 * What a compiled model keeps on the device, all of it allocated at prepare and none during a step: one arena of
 * the largest function plan (the offsets of the plans the CPU path uses), the variables with their optimizer
 * slots, each function's persistent accumulators, device copies of the feeds at max_batch with the kit's staging
 * (kh_cuda_stage: two pinned buffers used in turn, on the session's stream) (the host prepares batch i+1 while the device trains on batch i; the queue never holds
 * more than two), and the metric sums (train loss, correct; eval loss, correct) as four doubles on the device.
 * Everything goes through the kit's driver table (khost/kit/cuda_driver.h) on the session's context and stream;
 * every allocation is zeroed and counted in the model's dev_mem; an out-of-memory names the buffer, its size and
 * the device's free memory. Errors are the session's ("<backend> <what> on cuda:N: <why>"). The executors keep
 * their own launches; a runtime-API half passes the device pointers to its kernels as they are (one address space).
 * Tested against a fake driver (tests/kit/test_grt_device.c); never run on a GPU. */
#ifndef KHOST_KIT_GRAPH_RUNTIME_CUDA_H
#define KHOST_KIT_GRAPH_RUNTIME_CUDA_H

#include <stdint.h>

#include <cuda.h>

#include "khost/kit/cuda.h"
#include "khost/kit/cuda_driver.h"
#include "khost/kit/graph_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kh_grt_dev {
    CUcontext ctx;                      /* made current before every call (the host normally has) */
    CUstream stream;
    CUdeviceptr arena;                  /* m->arena_bytes */
    CUdeviceptr *w, *s1, *s2;           /* per variable: weights and optimizer slots (0 where none) */
    CUdeviceptr *pers[KH_GFN_COUNT];    /* per function: its plan's persistent accumulators */
    int32_t n_pers[KH_GFN_COUNT];
    CUdeviceptr feed[3];                /* x, labels, dy (KH_GIN_*) at max_batch */
    size_t feed_bytes[3];
    kh_cuda_stage stage;                /* pinned staging on the session's stream, used in turn: x | labels | dy */
    CUdeviceptr met;                    /* 4 doubles: train loss, correct; eval loss, correct */
    double *h_met;                      /* pinned 4 doubles */
    int64_t samples[2];                 /* per phase, counted on the host */
    int32_t idx_bound, label_bound;     /* index input in [0, idx_bound), labels in [0, label_bound); 0: unchecked */
} kh_grt_dev;

/* A device address as the pointer a kernel takes. */
#define KH_DEVPTR(p) ((void *)(uintptr_t)(p))

/* One zeroed, counted buffer (kh_cuda_buffer_alloc; freed with kh_cuda_buffer_free), the failure as the session's
 * error; what names it in the out-of-memory message. */
kh_status kh_grt_dev_alloc(kh_grt_model *m, kh_grt_dev *d, CUdeviceptr *p, size_t bytes, const char *what);
/* After the backend's compile step (m->arena_bytes, m->plan[f], m->graph[f] set): everything above. A failure
 * leaves what was made for kh_grt_dev_release. */
kh_status kh_grt_dev_prepare(kh_grt_model *m, kh_grt_dev *d, CUcontext ctx, CUstream stream);
/* Synchronise and free everything prepare made (safe on a zeroed or half-prepared d). */
void kh_grt_dev_release(kh_grt_model *m, kh_grt_dev *d);

/* Stage a run's feeds (x: n rows of the model input, labels: n, dy: the probe's output gradient; each may be NULL)
 * through the next pinned buffer: indices and labels checked against the bounds on the host (KH_ERR_INVALID
 * naming the value and its position), then uploaded on the stream. */
kh_status kh_grt_dev_stage(kh_grt_model *m, kh_grt_dev *d, int64_t n, const void *x, const int32_t *labels,
                           const float *dy);
/* Zero function f's accumulators on the stream (the probe's backward starts from zero). */
kh_status kh_grt_dev_clear_accumulators(kh_grt_model *m, kh_grt_dev *d, kh_gfn f);
/* The metric slot function f accumulates into (train, eval), else 0; count n samples of a run of f. */
CUdeviceptr kh_grt_dev_metric_slot(const kh_grt_dev *d, kh_gfn f);
void kh_grt_dev_count(kh_grt_dev *d, kh_gfn f, int64_t n);

/* Synchronous host <-> device copies of variable v (canonical layout), of any device bytes, and the phase's
 * metric sums (reset zeroes them). */
kh_status kh_grt_dev_set_var(kh_grt_model *m, kh_grt_dev *d, int32_t v, const float *w);
kh_status kh_grt_dev_get_var(kh_grt_model *m, kh_grt_dev *d, int32_t v, float *w);
kh_status kh_grt_dev_read(kh_grt_model *m, kh_grt_dev *d, void *dst, CUdeviceptr src, size_t bytes, const char *what);
kh_status kh_grt_dev_read_metrics(kh_grt_model *m, kh_grt_dev *d, uint32_t phase, kh_metrics *out, int32_t reset);
kh_status kh_grt_dev_sync(kh_grt_model *m, kh_grt_dev *d, const char *what);

#ifdef __cplusplus
}
#endif
#endif
