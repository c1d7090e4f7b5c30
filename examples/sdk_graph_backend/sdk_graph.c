/* examples/sdk_graph_backend/sdk_graph.c — a third-party graph backend, built out of tree against the installed
 * SDK (docs/WRITING_MODULES.md, "A graph backend"). The kit's graph runtime (<khost/kit/graph_runtime.h>)
 * implements the whole ABI — sessions, compile and lowering, the checks of every call, variables, feeds,
 * metrics, probes — and this file gives it one CPU executor: each run evaluates the lowered function with the
 * kit's float64 graph interpreter (kh_graph_eval_ref) over variables and optimizer slots kept in doubles.
 * Slow and exact; a real backend puts its kernels (or generated code) where run() calls the interpreter. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <khost/khost.h>
#include <khost/kit/graph_runtime.h>
#include <khost/kit/optimizer.h>
#include <khost/kit/status.h>

/* The runtime's model first: the runtime allocates sizeof(sg_model) and hands the executor a kh_grt_model *. */
typedef struct sg_model {
    kh_grt_model rt;
    double **w, **slot[2]; /* per variable (rt.mg.vars): weights and optimizer slots */
    double *feed[3];       /* KH_GIN_X, KH_GIN_LABELS, KH_GIN_DY as doubles */
    double **values[KH_GFN_COUNT]; /* per function: every node's value of its last run */
} sg_model;

static sg_model *SG(kh_grt_model *m) { return (sg_model *)m; }

static double *var_of(void *ctx, int32_t layer, int32_t slot) {
    sg_model *m = ctx;
    return m->w[kh_model_graphs_var(&m->rt.mg, layer, slot)];
}

static double *slot_of(void *ctx, int32_t layer, int32_t slot, int k) {
    sg_model *m = ctx;
    return m->slot[k][kh_model_graphs_var(&m->rt.mg, layer, slot)];
}

// --- the backend's compile step: every lowered function runs as it is --------------------------------------------
static kh_status sg_compile(kh_grt_model *m, const kh_model_spec *spec) {
    (void)spec;
    for (int f = 0; f < KH_GFN_COUNT; f++)
        if (m->mg.fn[f].n_nodes > 0) m->graph[f] = &m->mg.fn[f];
    return KH_OK;
}

// --- the executor ---------------------------------------------------------------------------------------------------
static void cpu_caps(kh_caps *c) {
    c->available = 1;
    snprintf(c->note, sizeof c->note, "float64 graph interpreter over the kit's graph runtime");
}

static kh_status cpu_open(kh_grt_session *s, char *err, size_t errlen) {
    (void)s, (void)err, (void)errlen;
    return KH_OK;
}

static void cpu_close(kh_grt_session *s) { (void)s; }

static kh_status cpu_environment(kh_grt_session *s, char *buf, size_t n) {
    snprintf(buf, n, "interpreter=kh_graph_eval_ref threads=%d", s->threads);
    return KH_OK;
}

static void free_values(sg_model *m, int f) {
    if (!m->values[f]) return;
    for (int32_t i = 0; i < m->rt.graph[f]->n_nodes; i++) free(m->values[f][i]);
    free(m->values[f]);
    m->values[f] = NULL;
}

static void cpu_release(kh_grt_model *rtm) {
    sg_model *m = SG(rtm);
    for (int f = 0; f < KH_GFN_COUNT; f++) free_values(m, f);
    for (int32_t v = 0; v < rtm->mg.n_vars; v++) {
        if (m->w) free(m->w[v]);
        for (int k = 0; k < 2; k++)
            if (m->slot[k]) free(m->slot[k][v]);
    }
    free(m->w);
    free(m->slot[0]);
    free(m->slot[1]);
    for (int k = 0; k < 3; k++) free(m->feed[k]);
}

static kh_status cpu_prepare(kh_grt_model *rtm) {
    sg_model *m = SG(rtm);
    size_t nv = (size_t)rtm->mg.n_vars + 1;
    int ok = (m->w = calloc(nv, sizeof *m->w)) && (m->slot[0] = calloc(nv, sizeof *m->slot[0])) &&
             (m->slot[1] = calloc(nv, sizeof *m->slot[1]));
    for (int32_t v = 0; ok && v < rtm->mg.n_vars; v++) { /* slots start at zero, as every optimizer wants */
        size_t numel = (size_t)rtm->mg.vars[v].numel;
        ok = (m->w[v] = calloc(numel, sizeof(double))) && (m->slot[0][v] = calloc(numel, sizeof(double))) &&
             (m->slot[1][v] = calloc(numel, sizeof(double)));
    }
    int64_t N = rtm->max_batch;
    ok = ok && (m->feed[KH_GIN_X] = calloc((size_t)(N * rtm->mg.input_numel), sizeof(double))) &&
         (m->feed[KH_GIN_LABELS] = calloc((size_t)N, sizeof(double))) &&
         (m->feed[KH_GIN_DY] = calloc((size_t)(N * rtm->mg.out_numel), sizeof(double)));
    return ok ? KH_OK : kh_grt_fail(rtm->s, KH_ERR_NOMEM, "compile", "out of host memory");
}

static kh_status cpu_set_var(kh_grt_model *rtm, int32_t v, const float *w) {
    for (int64_t i = 0; i < rtm->mg.vars[v].numel; i++) SG(rtm)->w[v][i] = w[i];
    return KH_OK;
}

static kh_status cpu_get_var(kh_grt_model *rtm, int32_t v, float *w) {
    for (int64_t i = 0; i < rtm->mg.vars[v].numel; i++) w[i] = (float)SG(rtm)->w[v][i];
    return KH_OK;
}

/* The interpreter evaluates a whole function: the probe's forward (part 0) runs it with dy = 0, its backward
 * (part 1) again with the given dy and the same dropout counter, so the forward values are the same. */
static kh_status cpu_run(kh_grt_model *rtm, kh_gfn fn, int part, int64_t n, double lr, uint64_t counter,
                         const void *x, const int32_t *labels, const float *dy) {
    sg_model *m = SG(rtm);
    const kh_graph *g = rtm->graph[fn];
    int64_t nx = n * rtm->mg.input_numel, ny = n * rtm->mg.out_numel;
    if (x && rtm->mg.input_dtype == KH_I32)
        for (int64_t i = 0; i < nx; i++) m->feed[KH_GIN_X][i] = ((const int32_t *)x)[i];
    else if (x)
        for (int64_t i = 0; i < nx; i++) m->feed[KH_GIN_X][i] = ((const float *)x)[i];
    for (int64_t i = 0; labels && i < n; i++) m->feed[KH_GIN_LABELS][i] = labels[i];
    for (int64_t i = 0; fn == KH_GFN_PROBE && i < ny; i++) m->feed[KH_GIN_DY][i] = part == 1 && dy ? dy[i] : 0.0;
    kh_graph_ref_env env = {.feeds = {m->feed[0], m->feed[1], m->feed[2]}, .var = var_of, .slot = slot_of,
                            .ctx = m, .seed = rtm->seed, .counter = counter, .lr = lr, .opt = rtm->mg.opt};
    free_values(m, fn);
    if (!(m->values[fn] = calloc((size_t)g->n_nodes + 1, sizeof *m->values[fn])))
        return kh_grt_fail(rtm->s, KH_ERR_NOMEM, "run", "out of host memory");
    char why[256];
    kh_status st = kh_graph_eval_ref(g, n, &env, m->values[fn], why, sizeof why);
    if (st != KH_OK) return kh_grt_fail(rtm->s, st, "run", "%s", why);
    if (fn == KH_GFN_TRAIN || fn == KH_GFN_EVAL) /* the runtime's metric sums, read by kh_grt_host_read_metrics */
        kh_grt_host_add_metrics(rtm, fn, m->values[fn][g->outputs[KH_GOUT_LOSS_SUM]][0],
                                m->values[fn][g->outputs[KH_GOUT_CORRECT]][0], n);
    return KH_OK;
}

static kh_status cpu_read_node(kh_grt_model *rtm, kh_gfn fn, int32_t node, int64_t n, float *dst) {
    const double *v = SG(rtm)->values[fn] ? SG(rtm)->values[fn][node] : NULL;
    if (!v) return kh_grt_fail(rtm->s, KH_ERR_INVALID, "read", "function %d has not run", (int)fn);
    int64_t k = kh_graph_numel(rtm->graph[fn], node, n);
    for (int64_t i = 0; i < k; i++) dst[i] = (float)v[i];
    return KH_OK;
}

static const kh_grt_exec g_cpu = {
    .caps = cpu_caps,
    .open = cpu_open,
    .close = cpu_close,
    .environment = cpu_environment,
    .prepare = cpu_prepare,
    .release = cpu_release,
    .set_var = cpu_set_var,
    .get_var = cpu_get_var,
    .run = cpu_run,
    .read_node = cpu_read_node,
    .read_metrics = kh_grt_host_read_metrics,
    .sync = kh_grt_host_sync,
};

static const kh_grt_backend g_backend = {
    .name = "sdk_graph",
    .version = "0.1.0",
    .description = "example graph backend: the kit's graph runtime with a float64 interpreter as its executor",
    .session_size = sizeof(kh_grt_session),
    .model_size = sizeof(sg_model),
    .cpu = &g_cpu, /* no .cuda: the CUDA kind says "built without CUDA" */
    .prepare = sg_compile,
};

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) { return kh_grt_module(&g_backend, host); }
