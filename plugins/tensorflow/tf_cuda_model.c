/* tf_cuda_model.c — the CUDA executor of a compiled model: device memory from the same memory plans as the
 * CPU path (tf_cuda_plan.c resolves every node to the arena, a variable, a feed or an accumulator of the graph
 * runtime's device storage, khost/kit/graph_runtime_cuda.h, which also stages each batch through pinned buffers
 * and keeps the metric sums), running a part of a function as one launch per node in graph order on the
 * session's stream; run returns without synchronising.
 *
 * Debugging: TF_CUDA_SYNC_EACH_OP=1 synchronises after every node, so an asynchronous fault (an illegal
 * address in a kernel) is reported against the node that caused it. */
#include <stdlib.h>
#include <string.h>

#include "tf_cuda_exec.h"
#include "khost/kit/optimizer.h"

#define STREAM(m) ((m)->cuda->cs->k.stream)

// --- free ------------------------------------------------------------------------------------------------
void tf_cuda_free(kh_grt_model *rtm) {
    tf_model *m = (tf_model *)rtm;
    tf_cuda_model *cm = m->cuda;
    if (!cm) return;
    if (cm->cs) cudaStreamSynchronize(cm->cs->k.stream);
    for (int f = 0; f < KH_GFN_COUNT; f++) {
        tfc_fn *fn = &cm->fn[f];
        if (fn->conv)
            for (int32_t i = 0; i < cm->lay.n_nodes[f]; i++) tfc_release_node(m, f, i);
        free(fn->conv);
        free(fn->ptr);
        free(fn->part);
    }
    tfc_free_dev(cm->wt);
    tfc_free_dev(cm->xpad);
    tfc_free_dev(cm->ws);
    kh_grt_dev_release(rtm, &cm->dev);
    tf_cu_layout_free(&cm->lay);
    cudaGetLastError();
    free(cm);
    m->cuda = NULL;
}

// --- compile ---------------------------------------------------------------------------------------------
static kh_status host_oom(tf_model *m, const char *what) {
    return tf_fail(m->s, KH_ERR_NOMEM, "compile", "out of host memory for %s", what);
}

/* Per-node device pointers of function f (into the graph runtime's device storage), its parts, its launch state. */
static kh_status prepare_fn(tf_model *m, int f) {
    tf_cuda_model *cm = m->cuda;
    const kh_grt_dev *d = &cm->dev;
    tfc_fn *fn = &cm->fn[f];
    const kh_graph *g = &m->rt.mg.fn[f];
    int32_t n = g->n_nodes;
    fn->ptr = calloc((size_t)n + 1, sizeof *fn->ptr);
    fn->part = calloc((size_t)n + 1, 1);
    fn->conv = calloc((size_t)n + 1, sizeof *fn->conv);
    if (!fn->ptr || !fn->part || !fn->conv) return host_oom(m, "the executor");
    fn->met = KH_DEVPTR(kh_grt_dev_metric_slot(d, (kh_gfn)f));
    for (int32_t i = 0; i < n; i++) {
        const tf_cu_ref *r = &cm->lay.ref[f][i];
        CUdeviceptr b = 0;
        switch (r->base) {
        case TF_CU_BASE_ARENA: b = d->arena; break;
        case TF_CU_BASE_VAR: b = d->w[r->index]; break;
        case TF_CU_BASE_FEED: b = d->feed[r->index]; break;
        case TF_CU_BASE_PERSISTENT: b = r->index < d->n_pers[f] ? d->pers[f][r->index] : 0; break;
        default: break;
        }
        fn->ptr[i] = b ? KH_DEVPTR(b + (CUdeviceptr)r->offset) : NULL;
        /* part 0 is the whole function, except the probe: its forward (phase 0); part 1: the probe's backward */
        int ph = g->nodes[i].phase;
        fn->part[i] = f != KH_GFN_PROBE ? 1u : ph == 0 ? 1u : 2u;
        kh_status st = tfc_prepare_node(m, f, i);
        if (st != KH_OK) return st;
    }
    return KH_OK;
}

kh_status tf_cuda_compile(kh_grt_model *rtm) {
    tf_model *m = (tf_model *)rtm;
    tf_session *s = m->s;
    if (!s->cuda) return tf_fail(s, KH_ERR_INTERNAL, "compile", "no CUDA session state");
    tf_cuda_model *cm = calloc(1, sizeof *cm);
    if (!cm) return tf_fail(s, KH_ERR_NOMEM, "compile", "out of host memory");
    m->cuda = cm;
    cm->cs = s->cuda;
    cm->cs->conv_algos[0] = 0;
    const char *se = getenv("TF_CUDA_SYNC_EACH_OP");
    cm->sync_each = se && *se && *se != '0';
    cm->dev.ctx = cm->cs->k.ctx;
    cm->dev.stream = cm->cs->k.stream;
    kh_gplan plans[KH_GFN_COUNT];
    for (int f = 0; f < KH_GFN_COUNT; f++) plans[f] = m->fn[f].plan;
    char why[256];
    kh_status st = tf_cu_layout_build(&m->rt.mg, plans, &cm->lay, why, sizeof why);
    if (st != KH_OK) return tf_fail(s, st, "compile", "device layout: %s", why);
    if (cm->lay.arena_bytes != m->rt.arena_bytes)
        return tf_fail(s, KH_ERR_INTERNAL, "compile", "device arena %lld B, the plans need %lld B",
                       (long long)cm->lay.arena_bytes, (long long)m->rt.arena_bytes);
    /* the arena (lay.arena_bytes, checked equal above), variables, feeds, accumulators, metrics */
    if ((st = kh_grt_dev_prepare(rtm, &cm->dev, cm->cs->k.ctx, cm->cs->k.stream)) != KH_OK) return st;
    for (int f = 0; f < KH_GFN_COUNT; f++)
        if (m->rt.mg.fn[f].n_nodes > 0 && (st = prepare_fn(m, f)) != KH_OK) return st;
    if (cm->ws_bytes > 0 && (st = tfc_malloc(m, &cm->ws, cm->ws_bytes, "the cuDNN workspace")) != KH_OK) return st;
    if (cm->xpad_floats > 0 &&
        (st = tfc_malloc(m, (void **)&cm->xpad, (size_t)cm->xpad_floats * sizeof(float), "the padded input")) != KH_OK)
        return st;
    if (cm->wt_floats > 0 &&
        (st = tfc_malloc(m, (void **)&cm->wt, (size_t)cm->wt_floats * sizeof(float), "the filter scratch")) != KH_OK)
        return st;
    TFC_CUDA(m, NULL, -1, "compile", cudaStreamSynchronize(STREAM(m)));
    return KH_OK;
}

// --- variables ------------------------------------------------------------------------------------------
kh_status tf_cuda_set_var(kh_grt_model *rtm, int32_t v, const float *w) {
    return kh_grt_dev_set_var(rtm, &((tf_model *)rtm)->cuda->dev, v, w);
}

kh_status tf_cuda_get_var(kh_grt_model *rtm, int32_t v, float *w) {
    return kh_grt_dev_get_var(rtm, &((tf_model *)rtm)->cuda->dev, v, w);
}

// --- run -------------------------------------------------------------------------------------------------
kh_status tf_cuda_run(kh_grt_model *rtm, kh_gfn fn, int part, int64_t n, double lr, uint64_t counter, const void *x,
                      const int32_t *labels, const float *dy) {
    tf_model *m = (tf_model *)rtm;
    tf_cuda_model *cm = m->cuda;
    const kh_graph *g = &m->rt.mg.fn[fn];
    tfc_fn *f = &cm->fn[fn];
    if (!f->ptr) return tf_fail(m->s, KH_ERR_INTERNAL, "run", "function %d was not compiled", (int)fn);
    kh_status st = kh_grt_dev_stage(rtm, &cm->dev, n, x, labels, dy);
    if (st == KH_OK && fn == KH_GFN_PROBE && part == 1) st = kh_grt_dev_clear_accumulators(rtm, &cm->dev, fn);
    if (st != KH_OK) return st;
    uint8_t bit = (uint8_t)(1u << part);
    for (int32_t i = 0; i < g->n_nodes; i++) {
        if (!(f->part[i] & bit)) continue;
        if ((st = tfc_launch(m, fn, i, n, lr, counter)) != KH_OK) return st;
        if (cm->sync_each) TFC_CUDA(m, g, i, "run", cudaStreamSynchronize(STREAM(m)));
    }
    kh_grt_dev_count(&cm->dev, fn, n);
    return KH_OK;
}

kh_status tf_cuda_read_node(kh_grt_model *rtm, kh_gfn fn, int32_t node, int64_t n, float *dst) {
    tf_model *m = (tf_model *)rtm;
    void *src = m->cuda->fn[fn].ptr ? m->cuda->fn[fn].ptr[node] : NULL;
    if (!src) return tf_fail(m->s, KH_ERR_INTERNAL, "read", "node %d of function %d has no storage", node, (int)fn);
    size_t b = (size_t)kh_graph_numel(&m->rt.mg.fn[fn], node, n) * sizeof(float);
    return kh_grt_dev_read(rtm, &m->cuda->dev, dst, (CUdeviceptr)(uintptr_t)src, b, "read");
}

kh_status tf_cuda_read_metrics(kh_grt_model *rtm, uint32_t phase, kh_metrics *out, int32_t reset) {
    return kh_grt_dev_read_metrics(rtm, &((tf_model *)rtm)->cuda->dev, phase, out, reset);
}

kh_status tf_cuda_sync(kh_grt_model *rtm) { return kh_grt_dev_sync(rtm, &((tf_model *)rtm)->cuda->dev, "sync"); }
