/* tf_cuda_model.c — the CUDA executor of a compiled model: device memory from the same memory plans as the
 * CPU path (tf_cuda_plan.c resolves every node to the arena, a variable, a feed or an accumulator), staging
 * through pinned buffers, running a part of a function as one launch per node in graph order on the
 * session's stream, metrics accumulated on the device, weights and node values read back.
 *
 * Staging: the host batch is copied into pinned buffer k (indices and labels validated on the way: a bad
 * index is KH_ERR_INVALID, never a device fault) and uploaded on the compute stream; run returns without
 * synchronising. Buffer k is reused two calls later, after waiting for its upload: the host prepares batch
 * i+1 while the device still trains on batch i, and the queue never holds more than two batches.
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
        if (fn->pers)
            for (int32_t k = 0; k < fn->n_pers; k++) tfc_free_dev(fn->pers[k]);
        free(fn->pers);
    }
    for (int32_t v = 0; v < m->rt.mg.n_vars; v++) {
        if (cm->w) tfc_free_dev(cm->w[v]);
        if (cm->s1) tfc_free_dev(cm->s1[v]);
        if (cm->s2) tfc_free_dev(cm->s2[v]);
    }
    free(cm->w);
    free(cm->s1);
    free(cm->s2);
    for (int k = 0; k < 3; k++) tfc_free_dev(cm->d_feed[k]);
    for (int k = 0; k < 2; k++) {
        if (cm->pin[k]) cudaFreeHost(cm->pin[k]);
        if (cm->staged[k]) cudaEventDestroy(cm->staged[k]);
    }
    tfc_free_dev(cm->d_met);
    if (cm->h_met) cudaFreeHost(cm->h_met);
    tfc_free_dev(cm->wt);
    tfc_free_dev(cm->xpad);
    tfc_free_dev(cm->ws);
    tfc_free_dev(cm->arena);
    tf_cu_layout_free(&cm->lay);
    cudaGetLastError();
    free(cm);
    m->cuda = NULL;
}

// --- compile ---------------------------------------------------------------------------------------------
static kh_status host_oom(tf_model *m, const char *what) {
    return tf_fail(m->s, KH_ERR_NOMEM, "compile", "out of host memory for %s", what);
}

static kh_status alloc_vars(tf_model *m) {
    tf_cuda_model *cm = m->cuda;
    int32_t nv = m->rt.mg.n_vars;
    cm->w = calloc((size_t)nv + 1, sizeof *cm->w);
    cm->s1 = calloc((size_t)nv + 1, sizeof *cm->s1);
    cm->s2 = calloc((size_t)nv + 1, sizeof *cm->s2);
    if (!cm->w || !cm->s1 || !cm->s2) return host_oom(m, "the variable table");
    int slots = kh_optimizer_slots(m->rt.mg.opt.kind);
    for (int32_t v = 0; v < nv; v++) {
        size_t b = (size_t)m->rt.mg.vars[v].numel * sizeof(float);
        kh_status st = tfc_malloc(m, (void **)&cm->w[v], b, m->rt.mg.vars[v].name);
        if (st == KH_OK && slots >= 1) st = tfc_malloc(m, (void **)&cm->s1[v], b, "an optimizer slot");
        if (st == KH_OK && slots >= 2) st = tfc_malloc(m, (void **)&cm->s2[v], b, "an optimizer slot");
        if (st != KH_OK) return st;
        TFC_CUDA(m, NULL, -1, "compile", cudaMemsetAsync(cm->w[v], 0, b, STREAM(m)));
        if (cm->s1[v]) TFC_CUDA(m, NULL, -1, "compile", cudaMemsetAsync(cm->s1[v], 0, b, STREAM(m)));
        if (cm->s2[v]) TFC_CUDA(m, NULL, -1, "compile", cudaMemsetAsync(cm->s2[v], 0, b, STREAM(m)));
    }
    return KH_OK;
}

static kh_status alloc_feeds(tf_model *m) {
    tf_cuda_model *cm = m->cuda;
    int64_t N = m->rt.max_batch;
    cm->feed_bytes[KH_GIN_X] = (size_t)(N * m->rt.mg.input_numel) * 4u;
    cm->feed_bytes[KH_GIN_LABELS] = (size_t)N * 4u;
    cm->feed_bytes[KH_GIN_DY] = (size_t)(N * m->rt.mg.out_numel) * 4u;
    const char *names[3] = {"the staged input", "the staged labels", "the staged output gradient"};
    size_t total = 0;
    for (int k = 0; k < 3; k++) {
        kh_status st = tfc_malloc(m, &cm->d_feed[k], cm->feed_bytes[k], names[k]);
        if (st != KH_OK) return st;
        total += cm->feed_bytes[k];
    }
    for (int k = 0; k < 2; k++) {
        if (cudaHostAlloc(&cm->pin[k], total, cudaHostAllocDefault) != cudaSuccess) {
            cm->pin[k] = NULL;
            cudaGetLastError();
            return host_oom(m, "the pinned staging buffers");
        }
        TFC_CUDA(m, NULL, -1, "compile", cudaEventCreateWithFlags(&cm->staged[k], cudaEventDisableTiming));
    }
    kh_status st = tfc_malloc(m, (void **)&cm->d_met, 4 * sizeof(double), "the metrics");
    if (st != KH_OK) return st;
    TFC_CUDA(m, NULL, -1, "compile", cudaMemsetAsync(cm->d_met, 0, 4 * sizeof(double), STREAM(m)));
    if (cudaHostAlloc((void **)&cm->h_met, 4 * sizeof(double), cudaHostAllocDefault) != cudaSuccess) {
        cm->h_met = NULL;
        cudaGetLastError();
        return host_oom(m, "the metrics");
    }
    return KH_OK;
}

/* Per-node device pointers of function f, its parts, its accumulators, its launch state. */
static kh_status prepare_fn(tf_model *m, int f) {
    tf_cuda_model *cm = m->cuda;
    tfc_fn *fn = &cm->fn[f];
    const kh_graph *g = &m->rt.mg.fn[f];
    const kh_gplan *p = &m->fn[f].plan;
    int32_t n = g->n_nodes;
    fn->ptr = calloc((size_t)n + 1, sizeof *fn->ptr);
    fn->part = calloc((size_t)n + 1, 1);
    fn->conv = calloc((size_t)n + 1, sizeof *fn->conv);
    if (!fn->ptr || !fn->part || !fn->conv) return host_oom(m, "the executor");
    if (p->n_persistent > 0) {
        fn->pers = calloc((size_t)p->n_persistent, sizeof *fn->pers);
        if (!fn->pers) return host_oom(m, "the accumulators");
        fn->n_pers = p->n_persistent;
        for (int32_t k = 0; k < p->n_persistent; k++) {
            kh_status st = tfc_malloc(m, &fn->pers[k], (size_t)p->persistent_bytes[k], "an embedding gradient");
            if (st != KH_OK) return st;
            /* zero once: each Apply clears the rows it consumed, the probe clears before each backward */
            TFC_CUDA(m, NULL, -1, "compile", cudaMemsetAsync(fn->pers[k], 0, (size_t)p->persistent_bytes[k], STREAM(m)));
        }
    }
    fn->met = f == KH_GFN_TRAIN ? cm->d_met : f == KH_GFN_EVAL ? cm->d_met + 2 : NULL;
    for (int32_t i = 0; i < n; i++) {
        const tf_cu_ref *r = &cm->lay.ref[f][i];
        switch (r->base) {
        case TF_CU_BASE_ARENA: fn->ptr[i] = (char *)cm->arena + r->offset; break;
        case TF_CU_BASE_VAR: fn->ptr[i] = (char *)cm->w[r->index] + r->offset; break;
        case TF_CU_BASE_FEED: fn->ptr[i] = (char *)cm->d_feed[r->index] + r->offset; break;
        case TF_CU_BASE_PERSISTENT: fn->ptr[i] = (char *)fn->pers[r->index] + r->offset; break;
        default: fn->ptr[i] = NULL; break;
        }
        /* part 0 is the whole function, except the probe: its forward (phase 0); part 1: the probe's backward */
        int ph = g->nodes[i].phase;
        fn->part[i] = f != KH_GFN_PROBE ? 1u : ph == 0 ? 1u : 2u;
        kh_status st = tfc_prepare_node(m, f, i);
        if (st != KH_OK) return st;
    }
    kh_graph_feed_bounds(g, &m->cuda->idx_bound, &m->cuda->label_bound);
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
    kh_gplan plans[KH_GFN_COUNT];
    for (int f = 0; f < KH_GFN_COUNT; f++) plans[f] = m->fn[f].plan;
    char why[256];
    kh_status st = tf_cu_layout_build(&m->rt.mg, plans, &cm->lay, why, sizeof why);
    if (st != KH_OK) return tf_fail(s, st, "compile", "device layout: %s", why);
    if (cm->lay.arena_bytes != m->rt.arena_bytes)
        return tf_fail(s, KH_ERR_INTERNAL, "compile", "device arena %lld B, the plans need %lld B",
                       (long long)cm->lay.arena_bytes, (long long)m->rt.arena_bytes);
    if ((st = tfc_malloc(m, &cm->arena, (size_t)cm->lay.arena_bytes, "the arena")) != KH_OK) return st;
    if ((st = alloc_vars(m)) != KH_OK) return st;
    if ((st = alloc_feeds(m)) != KH_OK) return st;
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

// --- variables -------------------------------------------------------------------------------------------
kh_status tf_cuda_set_var(kh_grt_model *rtm, int32_t v, const float *w) {
    tf_model *m = (tf_model *)rtm;
    size_t b = (size_t)m->rt.mg.vars[v].numel * sizeof(float);
    TFC_CUDA(m, NULL, -1, "set_weight", cudaMemcpyAsync(m->cuda->w[v], w, b, cudaMemcpyHostToDevice, STREAM(m)));
    TFC_CUDA(m, NULL, -1, "set_weight", cudaStreamSynchronize(STREAM(m)));
    return KH_OK;
}

kh_status tf_cuda_get_var(kh_grt_model *rtm, int32_t v, float *w) {
    tf_model *m = (tf_model *)rtm;
    size_t b = (size_t)m->rt.mg.vars[v].numel * sizeof(float);
    TFC_CUDA(m, NULL, -1, "get_weight", cudaMemcpyAsync(w, m->cuda->w[v], b, cudaMemcpyDeviceToHost, STREAM(m)));
    TFC_CUDA(m, NULL, -1, "get_weight", cudaStreamSynchronize(STREAM(m)));
    return KH_OK;
}

// --- run -------------------------------------------------------------------------------------------------
static kh_status stage(tf_model *m, int64_t n, const void *x, const int32_t *labels, const float *dy) {
    tf_cuda_model *cm = m->cuda;
    int k = cm->next_pin;
    /* pin[k] was last uploaded two calls ago: wait for that copy before overwriting it */
    TFC_CUDA(m, NULL, -1, "run", cudaEventSynchronize(cm->staged[k]));
    char *pin = cm->pin[k];
    char *at[3] = {pin, pin + cm->feed_bytes[0], pin + cm->feed_bytes[0] + cm->feed_bytes[1]};
    size_t bytes[3] = {x ? (size_t)(n * m->rt.mg.input_numel) * 4u : 0, labels ? (size_t)n * 4u : 0,
                       dy ? (size_t)(n * m->rt.mg.out_numel) * 4u : 0};
    if (x) {
        memcpy(at[0], x, bytes[0]);
        if (m->rt.mg.input_dtype == KH_I32 && cm->idx_bound > 0) {
            const int32_t *idx = (const int32_t *)at[0];
            for (int64_t j = 0; j < n * m->rt.mg.input_numel; j++)
                if (idx[j] < 0 || idx[j] >= cm->idx_bound)
                    return tf_fail(m->s, KH_ERR_INVALID, "run", "index %d at position %lld outside [0, %d)", idx[j],
                                   (long long)j, cm->idx_bound);
        }
    }
    if (labels) {
        memcpy(at[1], labels, bytes[1]);
        for (int64_t j = 0; cm->label_bound > 0 && j < n; j++)
            if (labels[j] < 0 || labels[j] >= cm->label_bound)
                return tf_fail(m->s, KH_ERR_INVALID, "run", "label %d of sample %lld outside [0, %d)", labels[j],
                               (long long)j, cm->label_bound);
    }
    if (dy) memcpy(at[2], dy, bytes[2]);
    for (int q = 0; q < 3; q++)
        if (bytes[q] > 0)
            TFC_CUDA(m, NULL, -1, "run",
                     cudaMemcpyAsync(cm->d_feed[q], at[q], bytes[q], cudaMemcpyHostToDevice, STREAM(m)));
    TFC_CUDA(m, NULL, -1, "run", cudaEventRecord(cm->staged[k], STREAM(m)));
    cm->next_pin = k ^ 1;
    return KH_OK;
}

kh_status tf_cuda_run(kh_grt_model *rtm, kh_gfn fn, int part, int64_t n, double lr, uint64_t counter, const void *x,
                      const int32_t *labels, const float *dy) {
    tf_model *m = (tf_model *)rtm;
    tf_cuda_model *cm = m->cuda;
    const kh_graph *g = &m->rt.mg.fn[fn];
    tfc_fn *f = &cm->fn[fn];
    if (!f->ptr) return tf_fail(m->s, KH_ERR_INTERNAL, "run", "function %d was not compiled", (int)fn);
    kh_status st = stage(m, n, x, labels, dy);
    if (st != KH_OK) return st;
    if (fn == KH_GFN_PROBE && part == 1)
        for (int32_t k = 0; k < f->n_pers; k++)
            TFC_CUDA(m, NULL, -1, "backward",
                     cudaMemsetAsync(f->pers[k], 0, (size_t)m->fn[fn].plan.persistent_bytes[k], STREAM(m)));
    uint8_t bit = (uint8_t)(1u << part);
    for (int32_t i = 0; i < g->n_nodes; i++) {
        if (!(f->part[i] & bit)) continue;
        if ((st = tfc_launch(m, fn, i, n, lr, counter)) != KH_OK) return st;
        if (cm->sync_each) TFC_CUDA(m, g, i, "run", cudaStreamSynchronize(STREAM(m)));
    }
    if (fn == KH_GFN_TRAIN) cm->samples[KH_PHASE_TRAIN] += n;
    else if (fn == KH_GFN_EVAL) cm->samples[KH_PHASE_EVAL] += n;
    return KH_OK;
}

kh_status tf_cuda_read_node(kh_grt_model *rtm, kh_gfn fn, int32_t node, int64_t n, float *dst) {
    tf_model *m = (tf_model *)rtm;
    void *src = m->cuda->fn[fn].ptr ? m->cuda->fn[fn].ptr[node] : NULL;
    if (!src) return tf_fail(m->s, KH_ERR_INTERNAL, "read", "node %d of function %d has no storage", node, (int)fn);
    size_t b = (size_t)kh_graph_numel(&m->rt.mg.fn[fn], node, n) * sizeof(float);
    TFC_CUDA(m, NULL, -1, "read", cudaMemcpyAsync(dst, src, b, cudaMemcpyDeviceToHost, STREAM(m)));
    TFC_CUDA(m, NULL, -1, "read", cudaStreamSynchronize(STREAM(m)));
    return KH_OK;
}

kh_status tf_cuda_read_metrics(kh_grt_model *rtm, uint32_t phase, kh_metrics *out, int32_t reset) {
    tf_model *m = (tf_model *)rtm;
    tf_cuda_model *cm = m->cuda;
    TFC_CUDA(m, NULL, -1, "read_metrics",
             cudaMemcpyAsync(cm->h_met, cm->d_met, 4 * sizeof(double), cudaMemcpyDeviceToHost, STREAM(m)));
    TFC_CUDA(m, NULL, -1, "read_metrics", cudaStreamSynchronize(STREAM(m)));
    out->loss_sum = cm->h_met[2 * phase];
    out->correct = cm->h_met[2 * phase + 1];
    out->samples = cm->samples[phase];
    if (reset) {
        TFC_CUDA(m, NULL, -1, "read_metrics", cudaMemsetAsync(cm->d_met + 2 * phase, 0, 2 * sizeof(double), STREAM(m)));
        cm->samples[phase] = 0;
    }
    return KH_OK;
}

kh_status tf_cuda_sync(kh_grt_model *rtm) {
    tf_model *m = (tf_model *)rtm;
    TFC_CUDA(m, NULL, -1, "sync", cudaStreamSynchronize(STREAM(m)));
    return KH_OK;
}
