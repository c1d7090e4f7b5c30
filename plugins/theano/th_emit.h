/* th_emit.h — theano's one code generator: the walk over an optimised graph function (th_emit.c) and the
 * dialects it writes through, each a table (th_dialect_c.c: C for the system compiler, OpenMP loops, BLAS
 * through the context, runtime helpers of rt/th_rt.h; th_dialect_cuda.c: CUDA C kernels for NVRTC and the launch
 * plan of th_cuda_plan.h).
 *
 * The walk owns what both dialects write the same way: the sizes of values (affine in n, the batch rows), the
 * function's header, the element-wise loops of Elemwise programs (th_expr_text), the optimizer updates, the
 * operands of matrix products and the window geometry of convolutions and pooling. A dialect gives its
 * spellings as data (integer literals, indentation, how kernel code names a scalar) and hooks for what truly
 * differs: a kernel is a __global__ function with a plan entry in CUDA and a block of th_main in C; an element
 * loop is a grid-stride loop or an OpenMP-parallel for; a GEMM is a cuBLAS plan entry or a cblas call. Ops the
 * dialects lower their own way (a runtime call in C, a kernel or a library call in CUDA) are in its op table. */
#ifndef TH_EMIT_H
#define TH_EMIT_H

#include "khost/kit/geometry.h"
#include "th_cuda_plan.h"

typedef struct th_emitter th_emitter;
typedef void (*th_op_emit)(th_emitter *em); /* emits em->node */

/* row-major C (M, N) = op(A) op(B) of nodes a, b into the node being emitted; lda, ldb: the operands' row
 * strides */
typedef struct th_em_gemm {
    int ta, tb;
    th_cu_affine M, N, K;
    int64_t lda, ldb;
    int32_t a, b;
} th_em_gemm;

typedef struct th_dialect {
    const char *name;                       /* in errors: "no C code for this op" */
    kh_status (*prelude)(th_sb *b, char *err, size_t errlen);
    const char *int_suffix;                 /* of 64-bit integer literals in sizes */
    const char *indent;                     /* statements of a kernel */
    const char *body;                       /* statements of an element loop */
    const char *scalar[TH_CUARG_KIND_END];  /* how kernel code reads a scalar argument */
    /* the function around the nodes, and the opening of each node */
    void (*fn_open)(th_emitter *em);
    void (*node_open)(th_emitter *em);
    void (*fn_close)(th_emitter *em);
    /* a kernel (named k<node>_<op>[_suffix]) over `threads` elements and its arguments: a pointer to node's
     * value (node >= 0) or else to var (a TH_CU_VAR / SLOT1 / SLOT2 reference), declared as decl
     * ("const float *x"); a scalar (th_cu_arg_kind) the kernel reads as scalar[kind] */
    void (*kernel_open)(th_emitter *em, const char *suffix, th_cu_affine threads);
    void (*arg_ptr)(th_emitter *em, int32_t node, th_cu_ref var, const char *decl);
    void (*arg_scalar)(th_emitter *em, uint32_t kind);
    void (*kernel_close)(th_emitter *em);
    /* element loops inside a kernel: k over count elements; or k over count = rows x cols elements with j, its
     * column, when need_col (C walks rows and columns, CUDA one grid-stride index) */
    void (*loop_open)(th_emitter *em, th_cu_affine count);
    void (*loop_rows_open)(th_emitter *em, th_cu_affine count, th_cu_affine rows, int64_t cols, int need_col);
    void (*loop_close)(th_emitter *em);
    /* library calls: a GEMM, and zeroing a node's `elements` floats */
    void (*gemm)(th_emitter *em, const th_em_gemm *g);
    void (*zeros)(th_emitter *em, th_cu_affine elements);
    /* the ops this dialect lowers its own way (NULL: the walk's, or unsupported), and then its table-driven ones
     * (NULL, or 0: not one of them) */
    th_op_emit ops[KH_GOP_END];
    int (*lower)(th_emitter *em);
} th_dialect;

extern const th_dialect th_dialect_c, th_dialect_cuda;

/* The state of one function's emission, shared by the walk and the dialect hooks. */
struct th_emitter {
    const th_emit_env *env;
    const th_dialect *d;
    const kh_graph *g;
    th_sb *out;          /* the source */
    th_sb *code;         /* where statements go: out, or the body of the open CUDA kernel */
    th_cu_plan *plan;    /* CUDA: the launch plan; C: NULL */
    kh_status st;
    char *err;
    size_t errlen;
    int32_t node;        /* the node being emitted */
    int part;            /* its part: 0, the probe's backward 1 */
    int open_part;       /* C: the part whose block is open, -1 none */
    int64_t scratch;     /* CUDA: bytes of scratch the node has claimed */
    int32_t kernel;      /* CUDA: the open kernel's plan entry, -1 none */
    th_sb sig, body;     /* CUDA: the open kernel's parameter list and body */
    int32_t prof_node;   /* C, profiling variant (env->profile): the node whose clock is running, -1 none */
};

/* Emit one function in a dialect (plan: the CUDA launch plan, NULL in C). */
kh_status th_emit(const th_emit_env *env, const th_dialect *d, th_sb *out, th_cu_plan *plan, char *err,
                  size_t errlen);

/* --- for the dialects ------------------------------------------------------------------------------------- */
void th_em_fail(th_emitter *em, kh_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* a statement (or several) into em->code */
void th_em_put(th_emitter *em, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* An op that is storage, not work (inputs, variables, reshapes): no code, no launch, no profile time. */
static inline int th_em_storage_op(uint32_t op) {
    return op == KH_GOP_INPUT || op == KH_GOP_VARIABLE || op == KH_GOP_RESHAPE;
}
static inline const kh_gnode *th_em_node(const th_emitter *em, int32_t i) { return &em->g->nodes[i]; }
static inline const int32_t *th_em_in(const th_emitter *em) { return kh_graph_inputs(em->g, em->node); }
static inline th_cu_affine th_aff(int64_t a, int64_t b) { return (th_cu_affine){a, b}; }
static inline th_cu_affine th_aff_scale(th_cu_affine x, int64_t k) { return th_aff(x.a * k, x.b * k); }
static inline int64_t th_last_dim(const kh_gnode *x) { return x->dims[x->rank - 1]; }

/* Sizes of node i: its elements; its rows as a matrix with the last axis as columns; (outer, len, inner) around
 * an axis. Batched values are a * n. */
th_cu_affine th_em_numel(const th_emitter *em, int32_t i);
th_cu_affine th_em_rows(const th_emitter *em, int32_t i);
th_cu_affine th_em_around(const th_emitter *em, int32_t i, int axis, int64_t *len, int64_t *inner);
/* an affine size as text in the dialect: "(n * 784)", "10LL", "(n * 3LL + 2LL)" */
const char *th_em_size(const th_emitter *em, th_cu_affine x, char *buf, size_t len);

/* The window of the convolution or pooling node being emitted (kh_conv2d_geometry over its input's shape and
 * its filter or window, strides and padding; d.OC is the filter count, or the channels for pooling). 0 (the
 * emitter failed) when inconsistent. */
int th_em_window(th_emitter *em, kh_conv2d_dims *d);

#endif
