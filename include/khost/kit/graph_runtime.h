/* khost/kit/graph_runtime.h — kh_backend_api implemented once for backends over the graph layer
 * (khost/kit/graph.h; kit/graph/runtime*.c).
 *
 * The runtime owns everything a graph backend would otherwise write again: the module descriptor and the api
 * table, capabilities, sessions (device, threads, error text), compile (argument checks, lowering), variables
 * and their optimizer slots, the checks of every call's tensors, the step and dropout counters, feeds,
 * metrics, the probes (forward, backward, get_grad) and model_free. A backend supplies a kh_grt_backend: its
 * name, its hooks (settings, its own compile step: passes, code generation, plans) and one executor per device
 * kind (kh_grt_exec). The CPU executor is in the module; the CUDA one lives in the backend's GPU half
 * (khost/kit/half.h), whose exported table is a kh_grt_half: the same executor type.
 *
 * The backend's session and model embed the runtime's (kh_grt_session, kh_grt_model) as their FIRST member,
 * and the runtime allocates backend.session_size / model_size zeroed bytes: executors, in the module or in the
 * half, read the lowered graphs, plans and counters as fields (m->rt.mg) and reach their own state with one
 * cast, without an accessor call per field and without a second allocation.
 *
 * Host storage (kh_grt_host_*): a CPU executor's variables with their slots, one arena of the largest plan,
 * persistent accumulators, staged feeds and metric sums, allocated from the host's allocator at prepare and
 * freed by model_free; its set_var / get_var / read_node / read_metrics can be the kh_grt_host_* ones. */
#ifndef KHOST_KIT_GRAPH_RUNTIME_H
#define KHOST_KIT_GRAPH_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "khost/backend.h"
#include "khost/kit/alloc.h"
#include "khost/kit/graph.h"
#include "khost/kit/half.h"
#include "khost/kit/session.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A graph backend's session is the session layer's (khost/kit/session.h): host, dev, threads, err; its exec is
 * the kh_grt_exec of the device kind. */
typedef struct kh_session kh_grt_session;
typedef struct kh_grt_model kh_grt_model;

/* One device kind's executor. Every call but caps gets a session or model opened through this table. */
typedef struct kh_grt_exec {
    void (*caps)(kh_caps *c); /* available and note of the device kind (the rest is the graph layer's) */
    /* After the backend's settings (kh_grt_backend.configure); the error text names the backend and device. */
    kh_status (*open)(kh_grt_session *s, char *err, size_t errlen);
    void (*close)(kh_grt_session *s);
    kh_status (*environment)(kh_grt_session *s, char *buf, size_t n);
    /* After lowering and the backend's compile step (m->graph, m->plan, m->arena_bytes set): the storage, the
     * schedule, library algorithms. release undoes it, also after a failed or skipped prepare. */
    kh_status (*prepare)(kh_grt_model *m);
    void (*release)(kh_grt_model *m);
    /* Variable v (index into m->mg.vars) in canonical layout. */
    kh_status (*set_var)(kh_grt_model *m, int32_t v, const float *w);
    kh_status (*get_var)(kh_grt_model *m, int32_t v, float *w);
    /* Stage the feeds (x: n rows of the model input, f32 or i32, or NULL; labels: n i32 or NULL; dy: the probe
     * output gradient or NULL, given to part 1 of the probe, whose accumulators start from zero) and run part
     * `part` of function fn (the probe: 0 forward, 1 backward; else 0). The metric sums of train and eval add
     * into their phase. May be asynchronous (sync waits). */
    kh_status (*run)(kh_grt_model *m, kh_gfn fn, int part, int64_t n, double lr, uint64_t counter, const void *x,
                     const int32_t *labels, const float *dy);
    /* Node `node` of m->graph[fn] (n rows when batched) into host memory. */
    kh_status (*read_node)(kh_grt_model *m, kh_gfn fn, int32_t node, int64_t n, float *dst);
    /* The phase's metric sums into *out (overwritten); reset zeroes them. */
    kh_status (*read_metrics)(kh_grt_model *m, uint32_t phase, kh_metrics *out, int32_t reset);
    kh_status (*sync)(kh_grt_model *m);
} kh_grt_exec;

/* What a GPU half's one exported symbol returns (head checked by kh_half_load). */
typedef struct kh_grt_half {
    kh_half_header head;
    kh_grt_exec exec;
} kh_grt_half;

/* A GPU half's executor, written as functions <prefix>_caps, _open, _close, _environment, _compile (the exec's
 * prepare), _free (release), _set_var, _get_var, _run, _read_node, _read_metrics, _sync with kh_grt_exec's
 * signatures: KH_GRT_EXEC_DECLARE(prefix) declares them, KH_GRT_HALF_EXPORT(entry, version, prefix, session
 * type, model type) defines the half's one exported symbol, returning its kh_grt_half (head: the version and
 * the two structure sizes the loader checks). */
#define KH_GRT_EXEC_DECLARE(prefix)                                                                            \
    void prefix##_caps(kh_caps *c);                                                                            \
    kh_status prefix##_open(kh_grt_session *s, char *err, size_t errlen);                                      \
    void prefix##_close(kh_grt_session *s);                                                                    \
    kh_status prefix##_environment(kh_grt_session *s, char *buf, size_t n);                                    \
    kh_status prefix##_compile(kh_grt_model *m);                                                               \
    void prefix##_free(kh_grt_model *m);                                                                       \
    kh_status prefix##_set_var(kh_grt_model *m, int32_t v, const float *w);                                    \
    kh_status prefix##_get_var(kh_grt_model *m, int32_t v, float *w);                                          \
    kh_status prefix##_run(kh_grt_model *m, kh_gfn fn, int part, int64_t n, double lr, uint64_t counter,       \
                           const void *x, const int32_t *labels, const float *dy);                             \
    kh_status prefix##_read_node(kh_grt_model *m, kh_gfn fn, int32_t node, int64_t n, float *dst);             \
    kh_status prefix##_read_metrics(kh_grt_model *m, uint32_t phase, kh_metrics *out, int32_t reset);          \
    kh_status prefix##_sync(kh_grt_model *m)

#define KH_GRT_HALF_EXPORT(entry, version_, prefix, session_t, model_t)                                        \
    static const kh_grt_half prefix##_half_table = {                                                           \
        .head = {.version = (version_), .n_sizes = 2, .sizes = {sizeof(session_t), sizeof(model_t)}},          \
        .exec = {.caps = prefix##_caps, .open = prefix##_open, .close = prefix##_close,                        \
                 .environment = prefix##_environment, .prepare = prefix##_compile, .release = prefix##_free,   \
                 .set_var = prefix##_set_var, .get_var = prefix##_get_var, .run = prefix##_run,                \
                 .read_node = prefix##_read_node, .read_metrics = prefix##_read_metrics,                       \
                 .sync = prefix##_sync}};                                                                      \
    KH_EXPORT const kh_half_header *entry(void);                                                               \
    KH_EXPORT const kh_half_header *entry(void) { return &prefix##_half_table.head; }

/* A graph backend: one static object per module. */
typedef struct kh_grt_backend {
    const char *name;        /* "tensorflow": module name and the first word of every error */
    const char *version;
    const char *description;
    size_t session_size;     /* sizeof the backend's session; a kh_grt_session is its first member */
    size_t model_size;       /* sizeof the backend's model; a kh_grt_model is its first member */
    int rnn_scan;            /* lowering: recurrent layers as scans (kh_graph_lower_opts.rnn_scan) */
    const kh_grt_exec *cpu;  /* the CPU executor */
    kh_half *cuda;           /* the GPU half (a kh_grt_half table); built = 0 where there is none */
    /* Settings, after the runtime filled the session's base (threads may be changed here). unconfigure undoes
     * it (close, a failed open); both optional. */
    kh_status (*configure)(kh_grt_session *s, char *err, size_t errlen);
    void (*unconfigure)(kh_grt_session *s);
    /* After lowering (m->mg): the backend's own compile step; it sets m->graph[f] (the graph function f runs,
     * NULL for an empty function), m->plan[f] (its memory plan) and m->node_map[f] (lowered node -> node of
     * m->graph[f], -1 gone; NULL: the same graph). release frees what it made, also after a failure. */
    kh_status (*prepare)(kh_grt_model *m, const kh_model_spec *spec);
    void (*release)(kh_grt_model *m);
    void (*ready)(kh_grt_model *m); /* optional: after the executor's prepare succeeded (a log line) */
    /* Optional kh_backend_api members, copied into the api table as they are (NULL: absent). */
    kh_status (*profile)(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y, int32_t warmup, int32_t steps,
                         kh_profile *out);
    kh_status (*compile_info)(kh_bmodel *m, kh_compile_info *out);
    /* What the GPU half's device-memory count (kh_grt_model.dev_mem) covers, for memory_info (ABI 1.4). */
    const char *device_memory_what;
} kh_grt_backend;

struct kh_grt_model {
    kh_grt_session *s;
    kh_model_graphs mg;
    int64_t max_batch;
    uint64_t seed;
    double lower_s;        /* seconds kh_graph_lower took */
    const kh_graph *graph[KH_GFN_COUNT];    /* set by the backend's prepare */
    const kh_gplan *plan[KH_GFN_COUNT];
    const int32_t *node_map[KH_GFN_COUNT];
    int64_t arena_bytes;   /* the largest plan's arena: one function runs at a time */
    int64_t iterations;    /* optimizer steps */
    uint64_t n_forward;    /* training-mode forwards: the dropout counter */
    uint64_t probe_counter; /* the counter of the last probe forward, reused by its backward */
    int32_t last_n;        /* batch of the last probe forward; 0 = none */
    int32_t have_grad;
    /* host storage (kh_grt_host_alloc; NULL otherwise) */
    void *arena;
    float **w, **s1, **s2; /* per variable: weights and optimizer slots (NULL where the optimizer has none) */
    float **persistent[KH_GFN_COUNT]; /* per function: its plan's persistent buffers (accumulators) */
    void *feed_x;          /* (max_batch, input_numel) f32, or i32 for index input */
    int32_t *feed_labels;
    float *feed_dy;        /* (max_batch, out_numel) */
    kh_metrics met[2];
    kh_mem_count dev_mem;  /* what a GPU executor allocated on the device for this model (memory_info) */
};

/* The module descriptor of a graph backend (its khost_module_entry returns this); the host given here is the
 * one sessions opened without a host use. */
const kh_module_desc *kh_grt_module(const kh_grt_backend *be, const kh_host_api *host);
#define kh_grt_module_host kh_session_module_host
/* The runtime's model behind an ABI handle (for the optional members). */
kh_grt_model *kh_grt_model_of(kh_bmodel *b);
/* The ABI's train_batch (what profile repeats). */
kh_status kh_grt_train_batch(kh_bmodel *b, const kh_tensor *x, const kh_tensor *y);

/* The session's error "<backend> <what> on <device>: <why>" (returns st), and the host's allocator: the session
 * layer's, under the runtime's names. */
#define kh_grt_fail kh_session_fail
#define kh_grt_alloc kh_session_alloc
#define kh_grt_free kh_session_free

/* Host storage for a CPU executor (see above). */
kh_status kh_grt_host_alloc(kh_grt_model *m);
void kh_grt_host_free(kh_grt_model *m);
/* Where node `node` of m->graph[fn] lives in host storage (views and in-place nodes followed); NULL for a node
 * without storage. */
void *kh_grt_host_value(kh_grt_model *m, kh_gfn fn, int32_t node);
/* Copy the given feeds into host storage; with dy, zero the probe's accumulators (no Apply consumes them). */
void kh_grt_host_stage(kh_grt_model *m, int64_t n, const void *x, const int32_t *labels, const float *dy);
/* Add one run's sums to its function's phase (train, eval; other functions have none). */
void kh_grt_host_add_metrics(kh_grt_model *m, kh_gfn fn, double loss_sum, double correct, int64_t n);
kh_status kh_grt_host_set_var(kh_grt_model *m, int32_t v, const float *w);
kh_status kh_grt_host_get_var(kh_grt_model *m, int32_t v, float *w);
kh_status kh_grt_host_read_node(kh_grt_model *m, kh_gfn fn, int32_t node, int64_t n, float *dst);
kh_status kh_grt_host_read_metrics(kh_grt_model *m, uint32_t phase, kh_metrics *out, int32_t reset);
kh_status kh_grt_host_sync(kh_grt_model *m); /* a synchronous executor: nothing to wait for */
/* The kh_grt_exec members of an executor that keeps everything in host storage, in a designated initializer:
 * const kh_grt_exec e = {.caps = ..., .open = ..., ..., .run = my_run, KH_GRT_HOST_STORAGE}; */
#define KH_GRT_HOST_STORAGE                                                                                    \
    .set_var = kh_grt_host_set_var, .get_var = kh_grt_host_get_var, .read_node = kh_grt_host_read_node,        \
    .read_metrics = kh_grt_host_read_metrics, .sync = kh_grt_host_sync

#ifdef __cplusplus
}
#endif
#endif
