/* th_cuda_plan.h — theano's GPU path as the code generator leaves it: one CUDA C source per graph function
 * (th_emit.c in the CUDA dialect, th_dialect_cuda.c) and its launch plan, the table the host runs the function by. Plain C, no CUDA headers: the
 * generator, the NVRTC compile and the plan are built and tested on machines without a GPU.
 *
 * A function runs as its plan's entries in order on one stream: a generated kernel (by name, with its grid,
 * block and argument list), a cuBLAS SGEMM, a cuDNN convolution, a memset, or a loop that repeats the entries
 * after it once per time step of an LSTM scan. Every size is a constant of the plan except n, the batch rows
 * of the call: sizes that depend on it are affine, a * n + b. Pointers are references into the model's device
 * storage (th_cu_ref), resolved once when the model is allocated. */
#ifndef TH_CUDA_PLAN_H
#define TH_CUDA_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "th.h"

/* --- device storage ----------------------------------------------------------------------------------- */
typedef enum th_cu_base {
    TH_CU_NONE = 0,       /* no storage: a null pointer */
    TH_CU_ARENA,          /* offset bytes into the model's arena (the memory plan's offsets) */
    TH_CU_VAR,            /* variable `index` (into mg->vars) */
    TH_CU_SLOT1,          /* its first optimizer slot */
    TH_CU_SLOT2,          /* its second optimizer slot */
    TH_CU_FEED,           /* staged input `index` (kh_ginput) */
    TH_CU_PERSISTENT,     /* the function's persistent buffer `index` (GatherGrad accumulators) */
    TH_CU_SCRATCH,        /* offset bytes into the model's scratch: a node's temporaries, free after the node */
    TH_CU_METRICS,        /* offset bytes into the metric doubles: train (loss, correct), eval (loss, correct) */
    TH_CU_BASE_END
} th_cu_base;

typedef struct th_cu_ref {
    uint32_t base;        /* th_cu_base */
    int32_t index;
    int64_t offset;       /* bytes from the base */
    int64_t step;         /* bytes added per scan step t (GEMM operands inside a loop), else 0 */
} th_cu_ref;

/* a size a * n + b */
typedef struct th_cu_affine {
    int64_t a, b;
} th_cu_affine;
static inline int64_t th_cu_eval(th_cu_affine x, int64_t n) { return x.a * n + x.b; }

/* --- kernels ------------------------------------------------------------------------------------------ */
typedef enum th_cu_arg_kind {
    TH_CUARG_PTR = 0,     /* a pointer (8 bytes): ref */
    TH_CUARG_N,           /* int64_t n, the batch rows of the call */
    TH_CUARG_LR,          /* float: the step's learning rate (kh_optimizer_step_lr) */
    TH_CUARG_SEED,        /* uint64_t: the model's dropout seed */
    TH_CUARG_COUNTER,     /* uint64_t: the function's forward counter (dropout key) */
    TH_CUARG_STEP,        /* int32_t t: the scan step of the enclosing loop */
    TH_CUARG_KIND_END
} th_cu_arg_kind;

typedef struct th_cu_arg {
    uint32_t kind;        /* th_cu_arg_kind */
    th_cu_ref ref;        /* TH_CUARG_PTR */
} th_cu_arg;

/* bytes and alignment of an argument as the kernel declares it */
size_t th_cu_arg_size(uint32_t kind);

#define TH_CU_MAX_ARGS 40
#define TH_CU_NAME 64
#define TH_CU_GRID_CAP (65536 * 8) /* grid-stride loops cover the rest */
#define TH_CU_BLOCK_HOST 256      /* threads per block: TH_CU_BLOCK of rt/th_rt_cuda.h */

/* --- library calls -------------------------------------------------------------------------------------- */
/* Row-major C (M, N) = op(A) op(B) + beta C with leading dimensions (row strides, in elements) lda, ldb, ldc:
 * op(A) is (M, K). The host issues it as the column-major C^T = op(B)^T op(A)^T. */
typedef struct th_cu_gemm {
    int32_t ta, tb;
    th_cu_affine M, N, K;
    int64_t lda, ldb, ldc;
    float beta;
    th_cu_ref A, B, C;
} th_cu_gemm;

typedef enum th_cu_conv_op { TH_CU_CONV_FWD = 0, TH_CU_CONV_BWD_DATA, TH_CU_CONV_BWD_FILTER } th_cu_conv_op;

/* A cuDNN convolution in NHWC (cross-correlation, FP32, FMA math). x is (n, Hp, Wp, C) — the input, or for an
 * asymmetric 'same' padding its explicitly padded copy in scratch, convolved 'valid' —, the filter is in cuDNN's
 * NHWC filter layout (F, KH, KW, C) (HWIO variables are transposed by generated kernels around the call), y is
 * (n, OH, OW, F). FWD: (x, w) -> y; BWD_DATA: (w, dy) -> dx into x; BWD_FILTER: (x, dy) -> dw into w. */
typedef struct th_cu_conv {
    uint32_t op;          /* th_cu_conv_op */
    int32_t H, W, C, KH, KW, F, OH, OW, SH, SW;
    int32_t pad_h, pad_w; /* symmetric padding cuDNN applies (0 when asym) */
    int32_t asym, Hp, Wp; /* asymmetric 'same': the padded input's size */
    th_cu_ref x, w, y;
} th_cu_conv;

/* --- the plan ------------------------------------------------------------------------------------------- */
typedef enum th_cu_entry_kind {
    TH_CUL_KERNEL = 1,    /* a generated kernel */
    TH_CUL_GEMM,          /* cuBLAS SGEMM */
    TH_CUL_CONV,          /* cuDNN convolution */
    TH_CUL_MEMSET,        /* dst = 0, bytes */
    TH_CUL_LOOP           /* the next `body` entries, for t = 0..steps-1 (reverse: steps-1..0) */
} th_cu_entry_kind;

typedef struct th_cu_launch {
    uint32_t kind;        /* th_cu_entry_kind */
    int32_t node;         /* the graph node it computes (part of) */
    int32_t part;         /* 0; the probe's backward: 1 */
    int32_t skip_t0;      /* inside a loop: not run at t == 0 (the first forward step, the last backward one) */
    /* TH_CUL_KERNEL: grid = fixed_grid when > 0, else min(ceil(threads(n) / block), TH_CU_GRID_CAP) */
    char name[TH_CU_NAME];
    th_cu_affine threads;
    int32_t block, fixed_grid;
    int32_t n_args;
    th_cu_arg args[TH_CU_MAX_ARGS];
    /* TH_CUL_GEMM */
    th_cu_gemm gemm;
    /* TH_CUL_CONV */
    th_cu_conv conv;
    /* TH_CUL_MEMSET */
    th_cu_ref dst;
    th_cu_affine bytes;
    /* TH_CUL_LOOP */
    int32_t steps, reverse, body;
} th_cu_launch;

typedef struct th_cu_plan {
    int32_t n, cap;
    th_cu_launch *v;
    int64_t scratch_bytes;   /* the most scratch one node uses (nodes run one after the other) */
    int32_t n_kernels;       /* generated kernels (distinct names) */
    int32_t n_gemm, n_conv;  /* library calls per run (a loop's body counted once) */
} th_cu_plan;

/* th_cu_plan.c */
void th_cu_plan_free(th_cu_plan *p);
/* Grid of a kernel entry for a batch of n (0: nothing to do). */
int64_t th_cu_grid(const th_cu_launch *e, int64_t n);
/* "kernel", "cublas", "cudnn", "memset", "loop" */
const char *th_cu_entry_library(uint32_t kind);

/* Where node i's value lives, as the CPU path resolves it: a Reshape is its input, an in-place node the node it
 * reuses, then the memory plan's store. KH_ERR_INTERNAL for a node without storage. */
kh_status th_cu_value(const th_emit_env *env, int32_t i, th_cu_ref *r);

/* th_emit.c: the CUDA C source of one optimised graph function (the support code of th_rt_cuda.h first) and its
 * launch plan (the CUDA dialect). env->scratch_floats is not used. */
kh_status th_emit_cuda(const th_emit_env *env, th_sb *src, th_cu_plan *plan, char *err, size_t errlen);

/* --- NVRTC (th_nvrtc.c: libnvrtc loaded with dlopen, so every build has it) ---------------------------------- */
/* Options besides --gpu-architecture=sm_XX. No fast math: the kernels compute the formulas as the CPU does. */
#define TH_NVRTC_FLAGS "--std=c++17"
/* Load NVRTC once per process: 1 when usable, else 0 with the reason in why. Tries $KHOST_NVRTC, then the
 * library the build found (TH_NVRTC_LIBRARY), then libnvrtc.so.13 and .12. */
int th_nvrtc_load(char *why, size_t n);
/* "13.0" ("none" when not loadable); the library loaded; the full option string for an architecture (what a
 * cache key must include besides the source, the NVRTC version and the driver version) */
const char *th_nvrtc_version(char *buf, size_t n);
const char *th_nvrtc_library(void);
const char *th_nvrtc_options(const char *arch, char *buf, size_t n);
/* Compile a source for `arch` ("sm_90") to a CUBIN (malloc'ed, caller frees). On failure err holds the reason
 * and the compile log. KH_ERR_UNSUPPORTED when NVRTC is not loadable. */
kh_status th_nvrtc_compile(const char *source, const char *arch, void **cubin, size_t *len, char *err,
                           size_t errlen);
/* The same, also returning the compile log (warnings of a successful compile) in log. */
kh_status th_nvrtc_compile_log(const char *source, const char *arch, void **cubin, size_t *len, char *log,
                               size_t loglen, char *err, size_t errlen);

/* --- CUBIN inspection (th_cubin.c) --------------------------------------------------------------------------- */
/* 1 when the CUBIN (an ELF image) defines a kernel of that name. */
int th_cubin_has_kernel(const void *cubin, size_t len, const char *name);
/* The kernel's parameters as the compiler laid them out: count, and each one's offset and size in bytes
 * (arrays of max entries). -1 when the image or its .nv.info.<name> section cannot be read. */
int th_cubin_params(const void *cubin, size_t len, const char *name, int max, int32_t *offset, int32_t *size);
/* The launch plan's argument layout (offsets with natural alignment) against the CUBIN's, for every kernel
 * entry: KH_OK or KH_ERR_INTERNAL naming the first kernel that differs or is missing. */
kh_status th_cubin_check_plan(const void *cubin, size_t len, const th_cu_plan *plan, char *err, size_t errlen);

#endif
