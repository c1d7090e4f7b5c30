/* cpu/onednn.h — the CPU executor's use of oneDNN (built with CNTK_HAVE_DNNL only): one engine and stream
 * per model, one scratchpad owned by the plugin and shared by every primitive (layers run one at a time),
 * and checked wrappers that name the primitive and the layer in every error.
 * Primitives are created once per shape at compile time; a step only sets data handles and executes.
 */
#ifndef KHOST_CNTK_ONEDNN_H
#define KHOST_CNTK_ONEDNN_H

#include <oneapi/dnnl/dnnl.h>

#include "cpu/cpu.h"

struct cntk_dnnl {
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    void *scratch;        /* (scratch_bytes) the user scratchpad, allocated after every layer's setup */
    size_t scratch_bytes;
    int threads;          /* OpenMP threads for primitives: the session's */
};

/* A primitive with the memory object that hands it the shared scratchpad (NULL when it needs none). */
typedef struct cntk_dprim {
    dnnl_primitive_t p;
    dnnl_memory_t scratch;
    const char *name; /* "convolution forward", ...: for errors */
} cntk_dprim;

/* A reorder between a user buffer and a primitive's layout; p is NULL when the two layouts are equal. */
typedef struct cntk_dreorder {
    cntk_dprim r;
    dnnl_memory_t from, to;
} cntk_dreorder;

/* Layer errors: "cntk <kind>[i] <op> on <device>: oneDNN <what>: <status>". */
kh_status cntk_dnnl_fail(cntk_cpu_model *m, const cntk_cpu_layer *L, const char *op, const char *what,
                         dnnl_status_t st);
#define CNTK_DNNL_TRY(m, L, op, what, call)                                                                  \
    do {                                                                                                     \
        dnnl_status_t st_ = (call);                                                                          \
        if (st_ != dnnl_success) return cntk_dnnl_fail((m), (L), (op), (what), st_);                         \
    } while (0)

kh_status cntk_dnnl_open(cntk_cpu_model *m);
/* Whether the model's Dense and Activation layers run on oneDNN too: only when its convolutions do. Each switch
 * between oneDNN's OpenMP team and cntk's pool costs a hand-off, and after a primitive libgomp's workers spin
 * (its default wait policy) beside the pool: in a model of Dense and LSTM layers the faster inner products
 * did not pay for that (bench/compare/2026-12-04-cntk-dense-onednn-before/: mnist_mlp, both LSTM tasks slower). */
int cntk_dnnl_joins(const cntk_cpu_model *m);
/* Allocate the scratchpad sized by the primitives created so far (end of compile). */
kh_status cntk_dnnl_finish(cntk_cpu_model *m);
void cntk_dnnl_close(cntk_cpu_model *m);

/* Primitive attributes with the user scratchpad mode; *attr is destroyed by the caller. */
kh_status cntk_dnnl_attr(cntk_cpu_model *m, const cntk_cpu_layer *L, dnnl_primitive_attr_t *attr);
/* Create the primitive of pd (which the caller still owns) and its scratchpad memory. */
kh_status cntk_dnnl_prim(cntk_cpu_model *m, const cntk_cpu_layer *L, const char *name,
                         const_dnnl_primitive_desc_t pd, cntk_dprim *out);
void cntk_dnnl_prim_free(cntk_dprim *p);
/* Execute with args (nargs of them, room for one more: the scratchpad is appended) and wait. */
kh_status cntk_dnnl_run(cntk_cpu_model *m, const cntk_cpu_layer *L, const cntk_dprim *p, int nargs,
                        dnnl_exec_arg_t *args);

/* A memory object over handle (DNNL_MEMORY_NONE: set before each execute). */
kh_status cntk_dnnl_mem(cntk_cpu_model *m, const cntk_cpu_layer *L, const dnnl_memory_desc_t *md, void *handle,
                        dnnl_memory_t *out);
/* A buffer of md's size from the host allocator and a memory object over it; free *buf with cntk_free. */
kh_status cntk_dnnl_buffer(cntk_cpu_model *m, const cntk_cpu_layer *L, const dnnl_memory_desc_t *md,
                           void **buf, dnnl_memory_t *out);
/* A reorder from -> to when the descriptors differ; both memory objects are created without handles. */
kh_status cntk_dnnl_reorder(cntk_cpu_model *m, const cntk_cpu_layer *L, const char *name,
                            const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to, cntk_dreorder *out);
/* Run it from src to dst (either may be an existing memory's handle). */
kh_status cntk_dnnl_reorder_run(cntk_cpu_model *m, const cntk_cpu_layer *L, const cntk_dreorder *r,
                                void *src, void *dst);
void cntk_dnnl_reorder_free(cntk_dreorder *r);

/* One argument of a primitive: its layout, the memory object the primitive reads or writes, and, when the
 * layout differs from the user's, the buffer it lives in and the reorder to or from the user's buffer
 * (cpu/onednn_arg.c). */
typedef struct cntk_darg {
    dnnl_memory_desc_t md;
    dnnl_memory_t mem;
    void *buf;        /* own buffer (NULL: mem takes the user's handle at each step, or aliases another) */
    int alias;        /* mem is over another argument's buffer, filled by that argument's reorder */
    cntk_dreorder r;  /* user -> md for inputs, md -> user for outputs */
} cntk_darg;

/* user: the plain layout; want: the primitive's; output: written by the primitive; like: an argument already
 * holding the same tensor, whose buffer a is made over when it is in the same layout. */
kh_status cntk_darg_setup(cntk_cpu_model *m, const cntk_cpu_layer *L, const char *name, int output,
                          const dnnl_memory_desc_t *user, const dnnl_memory_desc_t *want, const cntk_darg *like,
                          cntk_darg *a);
void cntk_darg_free(cntk_cpu_model *m, cntk_darg *a);
/* Before the primitive: an argument in the user's layout takes the user's buffer as its handle; an input in
 * its own layout is reordered from it (reorder = 1). */
kh_status cntk_darg_bind(cntk_cpu_model *m, const cntk_cpu_layer *L, const cntk_darg *a, const void *user,
                         int reorder);
kh_status cntk_darg_in(cntk_cpu_model *m, const cntk_cpu_layer *L, const cntk_darg *a, const void *user);
/* After the primitive: an output in its own layout goes back to the user's buffer. */
kh_status cntk_darg_out(cntk_cpu_model *m, const cntk_cpu_layer *L, const cntk_darg *a, void *user);
/* From now on the user's buffer holds the tensor in a->md (a chained neighbour keeps it so): no own buffer,
 * no reorder. */
kh_status cntk_darg_native(cntk_cpu_model *m, const cntk_cpu_layer *L, cntk_darg *a);

/* A 4-D (N, C, H, W) layout's channel block when it is NCHW (1) or nChw<cb>c (cb) with nothing padded, so
 * element (s, c, h, w) is at ((s * C/cb + c/cb) * H * W + h * W + w) * cb + c % cb; 0 for any other layout. */
int64_t cntk_dnnl_channel_block(const dnnl_memory_desc_t *md);

/* pd from op desc d with the user scratchpad and, for post_relu, relu as a post-op; hint: the forward's pd
 * for a backward. */
kh_status cntk_dnnl_pd(cntk_cpu_model *m, const cntk_cpu_layer *L, const char *name, const_dnnl_op_desc_t d,
                       const_dnnl_primitive_desc_t hint, int post_relu, dnnl_primitive_desc_t *pd);

#endif
