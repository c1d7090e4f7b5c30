/* tf_cuda.h — the CUDA executor (tf_cuda_*.c, tf_cuda_kernels.cu) and the table through which the rest of the
 * backend reaches it. The executor is built into the GPU half, tensorflow-cuda/tensorflow_cuda.so, which
 * tensorflow.so loads with khost/kit/half.h the first time the CUDA kind is asked for: tensorflow.so itself
 * links no CUDA library, so cpu cells map none. The model code owns lowering, the memory plans and the host
 * side of the ABI; the CUDA executor owns device memory (one arena sized by the same plans, variables and
 * slots, persistent accumulators, staged inputs), the stream, library handles and the per-op launches. */
#ifndef KHOST_TF_CUDA_H
#define KHOST_TF_CUDA_H

#include "tf.h"
#include "khost/kit/half.h"

/* Capabilities of the CUDA device kind: available only with a usable driver and device. */
void tf_cuda_caps(kh_caps *c);
kh_status tf_cuda_open(tf_session *s, char *err, size_t errlen);
void tf_cuda_close(tf_session *s);
kh_status tf_cuda_environment(tf_session *s, char *buf, size_t n);

/* After lowering and planning (m->mg, m->fn[].plan): allocate device memory, choose library algorithms. */
kh_status tf_cuda_compile(tf_model *m);
void tf_cuda_free(tf_model *m);
/* Variable v (index into m->mg.vars) in canonical layout, host <-> device. */
kh_status tf_cuda_set_var(tf_model *m, int32_t v, const float *w);
kh_status tf_cuda_get_var(tf_model *m, int32_t v, float *w);
/* Stage the feeds (x: n rows of the model input, f32 or i32; labels: n i32 or NULL; dy: probe output gradient
 * or NULL) and launch part `part` of function `fn` on the stream. Asynchronous: metrics (LossSum, CorrectCount
 * of train/eval) are accumulated on the device into the phase's slot. */
kh_status tf_cuda_run(tf_model *m, kh_gfn fn, int part, int64_t n, double lr, uint64_t counter, const void *x,
                      const int32_t *labels, const float *dy);
/* Copy node `node` of function fn (n rows when batched) to host memory; synchronises. */
kh_status tf_cuda_read_node(tf_model *m, kh_gfn fn, int32_t node, int64_t n, float *dst);
/* The device-side metric sums of a phase (loss sum, correct) added into *out; reset zeroes them. */
kh_status tf_cuda_read_metrics(tf_model *m, uint32_t phase, kh_metrics *out, int32_t reset);
kh_status tf_cuda_sync(tf_model *m);


/* The half's one exported symbol (TF_CUDA_HALF_ENTRY) returns this table; tf_cuda_half.c fills it with the
 * functions above. Version and sizes are checked by the loader (tf_entry.c). */
#define TF_CUDA_HALF_ENTRY "tensorflow_cuda_half_entry"
#define TF_CUDA_HALF_VERSION 1u

typedef struct tf_cuda_table {
    kh_half_header head; /* version, sizeof(tf_session), sizeof(tf_model) */
    void (*caps)(kh_caps *c);
    kh_status (*open)(tf_session *s, char *err, size_t errlen);
    void (*close)(tf_session *s);
    kh_status (*environment)(tf_session *s, char *buf, size_t n);
    kh_status (*compile)(tf_model *m);
    void (*free_model)(tf_model *m);
    kh_status (*set_var)(tf_model *m, int32_t v, const float *w);
    kh_status (*get_var)(tf_model *m, int32_t v, float *w);
    kh_status (*run)(tf_model *m, kh_gfn fn, int part, int64_t n, double lr, uint64_t counter, const void *x,
                     const int32_t *labels, const float *dy);
    kh_status (*read_node)(tf_model *m, kh_gfn fn, int32_t node, int64_t n, float *dst);
    kh_status (*read_metrics)(tf_model *m, uint32_t phase, kh_metrics *out, int32_t reset);
    kh_status (*sync)(tf_model *m);
} tf_cuda_table;

/* tensorflow.so's side: the half (loading it on first use), or NULL with tf_cuda_why() saying why. */
const tf_cuda_table *tf_cuda_half(void);
/* The half once a session was opened through it; every call on a CUDA session or model goes through this. */
const tf_cuda_table *tf_gpu(void);
const char *tf_cuda_why(void);

#endif
