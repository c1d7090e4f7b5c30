/* th.h — the theano backend: the model's graph is optimised (passes/), emitted as one C source per function
 * (th_emit.c in the C dialect, th_dialect_c.c), compiled by the system C compiler through the generated-code cache and dlopen'ed; the
 * generated functions run over a static arena laid out by the shared memory plan. */
#ifndef TH_H
#define TH_H

#include <stdint.h>

#include "khost/backend.h"
#include "khost/kit/alloc.h"
#include "khost/kit/graph.h"
#include "rt/th_rt.h"
#include "th_sb.h"

#define TH_VERSION "0.1.0"
#define TH_GENERATOR_VERSION "theano-codegen 3" /* part of every cache key: bump when emitted code changes */
#define TH_ALIGN 64

typedef struct th_settings {
    char cc[256];        /* C compiler (default "cc") */
    char cflags[512];    /* flags (default "-O3 -march=native -ffp-contract=fast -fno-math-errno ...") */
    char cache_dir[512]; /* "" = $XDG_CACHE_HOME/khost/theano */
    char dump_dir[512];  /* "" = no dump; else each function's passes, optimised graph and source go there */
    int32_t passes;      /* 0: no graph optimisation (for measuring what the passes give) */
    int32_t deterministic; /* GPU: 1 (default) prefer deterministic cuDNN algorithms, 0 take the fastest working */
} th_settings;

struct th_cache;

typedef struct th_session {
    const kh_host_api *host;
    struct th_cache *cache; /* the generated-code cache (th_build.c) */
    kh_device dev;
    int threads;
    th_settings set;
    char err[512];
    struct th_cuda_session *cuda; /* the GPU path's session state (th_cuda.h); NULL on the cpu */
} th_session;

struct kh_bsession {
    th_session s;
};

typedef struct th_var {
    float *w, *s1, *s2;
    int64_t numel;
} th_var;

typedef struct th_fn_unit {
    kh_graph g;          /* the optimised graph */
    kh_gplan plan;
    int32_t *map;        /* lowered node -> optimised node (-1: gone) */
    void *dl;            /* dlopen handle */
    th_fn run;
    th_rt_ctx ctx;
    float **persistent;
} th_fn_unit;

typedef struct th_model {
    th_session *s;
    kh_model_graphs mg;
    th_fn_unit fn[KH_GFN_COUNT];
    int64_t max_batch;
    uint64_t seed;
    int64_t iterations, n_forward;
    uint64_t probe_counter;
    int32_t last_n, have_grad;
    th_var *vars;
    float **w, **s1, **s2;
    char *arena;
    int64_t arena_bytes;
    float *scratch;
    int64_t scratch_floats;
    void *feed_x;
    int32_t *feed_labels;
    float *feed_dy;
    kh_metrics met[2];
    double codegen_s, cc_s, load_s;
    int32_t cache_misses, units;
    struct th_cuda_model *cuda; /* the GPU path's model (th_cuda.h); NULL on the cpu */
    kh_mem_count dev_mem;       /* what the GPU path allocated on the device for this model (memory_info) */
} th_model;

struct kh_bmodel {
    th_model m;
};

/* th_entry.c */
kh_status th_fail(th_session *s, kh_status st, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void *th_alloc(th_session *s, size_t bytes);
void th_free(th_session *s, void *p);
void th_log(th_session *s, kh_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The host the module entry was called with (th_fail.c): sessions opened without one log through it. */
void th_set_module_host(const kh_host_api *host);
const kh_host_api *th_module_host(void);

/* th_blas.c */
int th_blas_available(void);
th_sgemm_fn th_blas_sgemm(void);
void th_blas_threads(int threads);
const char *th_blas_version(char *buf, size_t n);

/* th_dump.c: [plugin theano] dump_dir output of one compiled function (source NULL: none) */
struct th_opt_report;
void th_dump_fn(th_session *s, const char *fn_name, const kh_graph *lowered, const kh_graph *opt,
                const struct th_opt_report *rep, const char *source, size_t len);

/* th_prelude.c: the support code at the top of a generated C source (th_rt.h), or of a CUDA source
 * (rt/th_rt_cuda.h, system includes dropped: NVRTC has no system headers) */
kh_status th_prelude(th_sb *b, char *err, size_t errlen);
kh_status th_prelude_cuda(th_sb *b, char *err, size_t errlen);

/* th_emit.c: the C source of one function (the C dialect); *scratch_floats grows to the scratch its runtime
 * helpers need (im2col patches, partial sums, scan state). */
typedef struct th_emit_env {
    const kh_graph *g;
    const kh_gplan *plan;
    const kh_model_graphs *mg;
    kh_gfn fn;
    int64_t *scratch_floats;
} th_emit_env;
kh_status th_emit_c(const th_emit_env *env, th_sb *out, char *err, size_t errlen);

/* th_expr_text.c: the text of one element of an Elemwise program, as C expressions over i<j>[k] (one op->text
 * table for both dialects) */
void th_expr_text(th_sb *b, const kh_gexpr *e, const char *index, const char *vec_index, const char *key_prefix,
                  const char *ftype);
/* A primitive element-wise op (Add, BiasAdd, Relu, Dropout, AddN of up to KH_GEXPR_MAX_IN inputs, ...) as a one-
 * (or few-) instruction program, so both dialects generate every element-wise loop one way; 0 when it has none. */
int th_expr_single(const kh_gnode *nd, kh_gexpr *e);
/* The update of one element k by an Apply op (kh_adam_update(&w[k], &s1[k], &s2[k], gk, lr, ...) or the plain
 * step) over w, s1, s2, the gradient element gk and the step's lr, for both dialects. */
const char *th_update_text(uint32_t op, const kh_optimizer_spec *o, char *buf, size_t n);

/* th_build.c: compile a source into a loaded function (through the cache) */
kh_status th_build_open(th_session *s, char *err, size_t errlen);
void th_build_close(th_session *s);
const char *th_build_cache_dir(const th_session *s);
kh_status th_build(th_session *s, const char *source, size_t len, const char *what, void **dl, th_fn *fn,
                   int *hit, double *cc_s, double *load_s);

/* th_model.c: ABI calls */
kh_status th_api_compile(kh_bsession *s, const kh_model_spec *spec, const kh_compile_opts *opts, kh_bmodel **out);
void th_api_model_free(kh_bmodel *m);
kh_status th_api_set_weight(kh_bmodel *m, int32_t layer, int32_t slot, const kh_tensor *w);
kh_status th_api_get_weight(kh_bmodel *m, int32_t layer, int32_t slot, kh_tensor *w);
kh_status th_api_train_batch(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y);
kh_status th_api_eval_batch(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y);
kh_status th_api_predict(kh_bmodel *m, const kh_tensor *x, kh_tensor *out);
kh_status th_api_read_metrics(kh_bmodel *m, uint32_t phase, kh_metrics *out, int32_t reset);
kh_status th_api_sync(kh_bmodel *m);
kh_status th_api_memory_info(kh_bmodel *m, kh_memory_info *out);
kh_status th_api_forward(kh_bmodel *m, const kh_tensor *x, kh_tensor *out);
kh_status th_api_backward(kh_bmodel *m, const kh_tensor *dy, kh_tensor *dx);
kh_status th_api_get_grad(kh_bmodel *m, int32_t layer, int32_t slot, kh_tensor *g);
kh_status th_api_compile_info(kh_bmodel *m, kh_compile_info *out);

#endif
