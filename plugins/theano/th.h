/* th.h — the theano backend: the model's graph is optimised (passes/), emitted as one C source per function
 * (th_emit.c in the C dialect, th_dialect_c.c), compiled by the system C compiler through the generated-code cache and dlopen'ed; the
 * generated functions run over a static arena laid out by the shared memory plan. */
#ifndef TH_H
#define TH_H

#include <stdint.h>

#include "khost/backend.h"
#include "khost/kit/graph.h"
#include "khost/kit/graph_runtime.h"
#include "rt/th_rt.h"
#include "th_sb.h"

#define TH_VERSION "0.1.0"
#define TH_GENERATOR_VERSION "theano-codegen 4" /* part of every cache key: bump when emitted code changes */
#define TH_ALIGN 64

/* The entry th_main_prof of a training function's profiling variant (th_emit_env.profile): th_main's run, with
 * node_s[i] += the seconds node i of the function took (a node without work gets none), measured with now (the
 * kit's kh_now: the generated code includes no clock). */
typedef int (*th_prof_fn)(th_rt_ctx *c, int64_t n, int part, double *node_s, double (*now)(void));

typedef struct th_settings {
    char cc[256];        /* C compiler (default "cc") */
    char cflags[512];    /* flags (default "-O3 -march=native -ffp-contract=fast -fno-math-errno ...") */
    char cache_dir[512]; /* "" = $XDG_CACHE_HOME/khost/theano */
    char dump_dir[512];  /* "" = no dump; else each function's passes, optimised graph and source go there */
    int32_t passes;      /* 0: no graph optimisation (for measuring what the passes give) */
    int32_t deterministic; /* GPU: 1 (default) prefer deterministic cuDNN algorithms, 0 take the fastest working */
} th_settings;

struct th_cache;

/* A session: the graph runtime's (host, device, threads, error text) first. */
typedef struct th_session {
    kh_grt_session rt;
    struct th_cache *cache; /* the generated-code cache (th_build.c) */
    th_settings set;
    struct th_cuda_session *cuda; /* the GPU path's session state (th_cuda.h); NULL on the cpu */
} th_session;

typedef struct th_fn_unit {
    kh_graph g;          /* the optimised graph */
    kh_gplan plan;
    int32_t *map;        /* lowered node -> optimised node (-1: gone) */
    void *dl;            /* dlopen handle */
    th_fn run;
    th_rt_ctx ctx;
    float **persistent;
} th_fn_unit;

/* A model: the graph runtime's first (lowered graphs, counters; on the cpu the host storage the generated
 * functions run over: variables with their slots, one arena, accumulators, feeds), then the compiled functions. */
typedef struct th_model {
    kh_grt_model rt;
    th_session *s;       /* rt.s as this backend's session */
    th_fn_unit fn[KH_GFN_COUNT];
    float *scratch;
    int64_t scratch_floats;
    double codegen_s, cc_s, load_s;
    int32_t cache_misses, units;
    struct th_cuda_model *cuda; /* the GPU path's model (th_cuda.h); NULL on the cpu */
    uint32_t *layer_kinds;      /* the spec's layer kinds (profile rows); rt.mg.shapes.n_layers of them */
    /* the profile call (th_profile.c, cpu): the training function's profiling variant, built on its first use */
    void *prof_dl;
    th_prof_fn prof_run;
    double *prof_node_s;        /* non-NULL only while profile times steps: train runs prof_run into it */
} th_model;

/* Errors and memory are the graph runtime's; log lines go to the session's host, else the module's (th_fail.c). */
#define th_fail(s, ...) kh_grt_fail(&(s)->rt, __VA_ARGS__)
static inline void *th_alloc(th_session *s, size_t bytes) { return kh_grt_alloc(&s->rt, bytes); }
static inline void th_free(th_session *s, void *p) { kh_grt_free(&s->rt, p); }
void th_log(th_session *s, kh_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

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
 * helpers need (im2col patches, partial sums, scan state). With profile set (C only) the source is the
 * function's profiling variant instead: the same statements, a clock read after each node's, and the entry
 * th_main_prof (th_prof_fn) in place of th_main; th_profile.c builds it when the profile call first needs it,
 * so the th_main every other call runs is the same source, the same cache entry and the same code as without
 * profiling. */
typedef struct th_emit_env {
    const kh_graph *g;
    const kh_gplan *plan;
    const kh_model_graphs *mg;
    kh_gfn fn;
    int64_t *scratch_floats;
    int profile;
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
/* the same for a source whose entry point is `entry` (th_main_prof), returned as the symbol's address */
kh_status th_build_sym(th_session *s, const char *source, size_t len, const char *what, const char *entry, void **dl,
                       void **fn, int *hit, double *cc_s, double *load_s);

/* th_model.c: theano's compile step for the graph runtime (passes, plans, C code) and its CPU executor */
kh_status th_prepare(kh_grt_model *m, const kh_model_spec *spec);
void th_release(kh_grt_model *m);
void th_ready(kh_grt_model *m);
kh_status th_api_compile_info(kh_bmodel *m, kh_compile_info *out);
/* th_profile.c: kh_backend_api.profile (ABI 1.1), cpu only */
kh_status th_api_profile(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y, int32_t warmup, int32_t steps,
                         kh_profile *out);
/* the CPU executor's model side (th_entry.c puts it into th_cpu_exec with the session side) */
kh_status th_cpu_prepare(kh_grt_model *m);
void th_cpu_release(kh_grt_model *m);
kh_status th_cpu_run(kh_grt_model *m, kh_gfn fn, int part, int64_t n, double lr, uint64_t counter, const void *x,
                     const int32_t *labels, const float *dy);
extern const kh_grt_exec th_cpu_exec;

#endif
