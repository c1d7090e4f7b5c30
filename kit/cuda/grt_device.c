/* kit/cuda/grt_device.c — the graph runtime's device storage (khost/kit/graph_runtime_cuda.h), through the
 * kit's driver table. */
#include "khost/kit/graph_runtime_cuda.h"

#include <stdlib.h>
#include <string.h>

#include "khost/kit/cuda.h"
#include "khost/kit/optimizer.h"

/* The driver's status as the session's error: out-of-memory is KH_ERR_NOMEM, the rest KH_ERR_DEVICE. */
static kh_status cu_fail(kh_grt_model *m, const char *what, CUresult r, const char *call) {
    char t[160];
    return kh_grt_fail(m->s, kh_cu_status(r), what, "%s (%s)",
                       kh_cu_result_text(r, t, sizeof t), call);
}

#define CU(m, what, call)                                                \
    do {                                                                 \
        CUresult r_ = (call);                                            \
        if (r_ != CUDA_SUCCESS) return cu_fail((m), (what), r_, #call); \
    } while (0)

static kh_status bind(kh_grt_model *m, const kh_grt_dev *d, const char *what) {
    CU(m, what, kh_cu.CtxSetCurrent(d->ctx));
    return KH_OK;
}

kh_status kh_grt_dev_alloc(kh_grt_model *m, kh_grt_dev *d, CUdeviceptr *p, size_t bytes, const char *what) {
    char why[300];
    kh_status st = kh_cuda_buffer_alloc(&m->dev_mem, d->stream, p, bytes, what, why, sizeof why);
    return st == KH_OK ? st : kh_grt_fail(m->s, st, "compile", "%s", why);
}

static kh_status host_oom(kh_grt_model *m, const char *what) {
    return kh_grt_fail(m->s, KH_ERR_NOMEM, "compile", "out of host memory for %s", what);
}

static kh_status alloc_vars(kh_grt_model *m, kh_grt_dev *d) {
    int32_t nv = m->mg.n_vars;
    d->w = calloc((size_t)nv + 1, sizeof *d->w);
    d->s1 = calloc((size_t)nv + 1, sizeof *d->s1);
    d->s2 = calloc((size_t)nv + 1, sizeof *d->s2);
    if (!d->w || !d->s1 || !d->s2) return host_oom(m, "the variable table");
    int slots = kh_optimizer_slots(m->mg.opt.kind);
    for (int32_t v = 0; v < nv; v++) {
        size_t b = (size_t)m->mg.vars[v].numel * sizeof(float);
        kh_status st = kh_grt_dev_alloc(m, d, &d->w[v], b, m->mg.vars[v].name);
        if (st == KH_OK && slots >= 1) st = kh_grt_dev_alloc(m, d, &d->s1[v], b, "an optimizer slot");
        if (st == KH_OK && slots >= 2) st = kh_grt_dev_alloc(m, d, &d->s2[v], b, "an optimizer slot");
        if (st != KH_OK) return st;
    }
    return KH_OK;
}

static kh_status alloc_feeds(kh_grt_model *m, kh_grt_dev *d) {
    int64_t N = m->max_batch;
    d->feed_bytes[KH_GIN_X] = (size_t)(N * m->mg.input_numel) * 4u;
    d->feed_bytes[KH_GIN_LABELS] = (size_t)N * 4u;
    d->feed_bytes[KH_GIN_DY] = (size_t)(N * m->mg.out_numel) * 4u;
    const char *names[3] = {"the staged input", "the staged labels", "the staged output gradient"};
    size_t total = 0;
    for (int k = 0; k < 3; k++) {
        kh_status st = kh_grt_dev_alloc(m, d, &d->feed[k], d->feed_bytes[k], names[k]);
        if (st != KH_OK) return st;
        total += d->feed_bytes[k];
    }
    char why[300];
    kh_status st = kh_cuda_stage_init(&d->stage, d->stream, NULL, total, why, sizeof why);
    if (st != KH_OK) return kh_grt_fail(m->s, st, "compile", "input staging: %s", why);
    st = kh_grt_dev_alloc(m, d, &d->met, 4 * sizeof(double), "the metrics");
    if (st != KH_OK) return st;
    CU(m, "compile", kh_cu.MemAllocHost((void **)&d->h_met, 4 * sizeof(double)));
    return KH_OK;
}

/* Zeroed once: each Apply clears the rows it consumed, the probe clears before each backward. */
static kh_status alloc_accumulators(kh_grt_model *m, kh_grt_dev *d, int f) {
    const kh_gplan *p = m->plan[f];
    if (!p || p->n_persistent <= 0) return KH_OK;
    d->pers[f] = calloc((size_t)p->n_persistent, sizeof *d->pers[f]);
    if (!d->pers[f]) return host_oom(m, "the accumulators");
    d->n_pers[f] = p->n_persistent;
    for (int32_t k = 0; k < p->n_persistent; k++) {
        kh_status st = kh_grt_dev_alloc(m, d, &d->pers[f][k], (size_t)p->persistent_bytes[k], "an embedding gradient");
        if (st != KH_OK) return st;
    }
    return KH_OK;
}

kh_status kh_grt_dev_prepare(kh_grt_model *m, kh_grt_dev *d, CUcontext ctx, CUstream stream) {
    d->ctx = ctx;
    d->stream = stream;
    kh_status st = bind(m, d, "compile");
    if (st == KH_OK) st = kh_grt_dev_alloc(m, d, &d->arena, (size_t)m->arena_bytes, "the arena");
    if (st == KH_OK) st = alloc_vars(m, d);
    if (st == KH_OK) st = alloc_feeds(m, d);
    for (int f = 0; f < KH_GFN_COUNT && st == KH_OK; f++) {
        st = alloc_accumulators(m, d, f);
        if (m->graph[f]) kh_graph_feed_bounds(m->graph[f], &d->idx_bound, &d->label_bound);
    }
    return st;
}

void kh_grt_dev_release(kh_grt_model *m, kh_grt_dev *d) {
    if (d->ctx) kh_cu.CtxSetCurrent(d->ctx);
    if (d->stream) kh_cu.StreamSynchronize(d->stream);
    for (int f = 0; f < KH_GFN_COUNT; f++) {
        for (int32_t k = 0; d->pers[f] && k < d->n_pers[f]; k++) kh_cuda_buffer_free(d->pers[f][k]);
        free(d->pers[f]);
    }
    for (int32_t v = 0; v < m->mg.n_vars; v++) {
        if (d->w) kh_cuda_buffer_free(d->w[v]);
        if (d->s1) kh_cuda_buffer_free(d->s1[v]);
        if (d->s2) kh_cuda_buffer_free(d->s2[v]);
    }
    free(d->w);
    free(d->s1);
    free(d->s2);
    for (int k = 0; k < 3; k++) kh_cuda_buffer_free(d->feed[k]);
    kh_cuda_stage_free(&d->stage);
    if (d->h_met) kh_cu.MemFreeHost(d->h_met);
    kh_cuda_buffer_free(d->met);
    kh_cuda_buffer_free(d->arena);
    memset(d, 0, sizeof *d);
}

/* Indices and labels are checked on the host: a bad one is KH_ERR_INVALID here, never a device fault. */
static kh_status check_feeds(kh_grt_model *m, const kh_grt_dev *d, int64_t n, const void *x, const int32_t *labels) {
    if (x && m->mg.input_dtype == KH_I32 && d->idx_bound > 0) {
        const int32_t *idx = x;
        for (int64_t j = 0; j < n * m->mg.input_numel; j++)
            if (idx[j] < 0 || idx[j] >= d->idx_bound)
                return kh_grt_fail(m->s, KH_ERR_INVALID, "run", "index %d at position %lld outside [0, %d)", idx[j],
                                   (long long)j, d->idx_bound);
    }
    for (int64_t j = 0; labels && d->label_bound > 0 && j < n; j++)
        if (labels[j] < 0 || labels[j] >= d->label_bound)
            return kh_grt_fail(m->s, KH_ERR_INVALID, "run", "label %d of sample %lld outside [0, %d)", labels[j],
                               (long long)j, d->label_bound);
    return KH_OK;
}

kh_status kh_grt_dev_stage(kh_grt_model *m, kh_grt_dev *d, int64_t n, const void *x, const int32_t *labels,
                           const float *dy) {
    kh_status st = check_feeds(m, d, n, x, labels);
    if (st == KH_OK) st = bind(m, d, "run");
    if (st != KH_OK) return st;
    int k;
    void *pin;
    char why[300];
    if ((st = kh_cuda_stage_next(&d->stage, &k, &pin, why, sizeof why)) != KH_OK) return kh_grt_fail(m->s, st, "run", "%s", why);
    const void *src[3] = {x, labels, dy};
    size_t bytes[3] = {x ? (size_t)(n * m->mg.input_numel) * 4u : 0, labels ? (size_t)n * 4u : 0,
                       dy ? (size_t)(n * m->mg.out_numel) * 4u : 0};
    size_t off = 0;
    for (int q = 0; q < 3 && st == KH_OK; off += d->feed_bytes[q], q++)
        if (bytes[q] > 0) {
            memcpy((char *)pin + off, src[q], bytes[q]);
            st = kh_cuda_stage_upload(&d->stage, k, d->feed[q], off, bytes[q], why, sizeof why);
        }
    if (st == KH_OK) st = kh_cuda_stage_ready(&d->stage, k, why, sizeof why);
    return st == KH_OK ? st : kh_grt_fail(m->s, st, "run", "%s", why);
}

kh_status kh_grt_dev_clear_accumulators(kh_grt_model *m, kh_grt_dev *d, kh_gfn f) {
    for (int32_t k = 0; k < d->n_pers[f]; k++)
        CU(m, "backward", kh_cu.MemsetD8Async(d->pers[f][k], 0, (size_t)m->plan[f]->persistent_bytes[k], d->stream));
    return KH_OK;
}

CUdeviceptr kh_grt_dev_metric_slot(const kh_grt_dev *d, kh_gfn f) {
    return f == KH_GFN_TRAIN ? d->met : f == KH_GFN_EVAL ? d->met + 2 * sizeof(double) : 0;
}

void kh_grt_dev_count(kh_grt_dev *d, kh_gfn f, int64_t n) {
    if (f == KH_GFN_TRAIN) d->samples[KH_PHASE_TRAIN] += n;
    else if (f == KH_GFN_EVAL) d->samples[KH_PHASE_EVAL] += n;
}

kh_status kh_grt_dev_set_var(kh_grt_model *m, kh_grt_dev *d, int32_t v, const float *w) {
    kh_status st = bind(m, d, "set_weight");
    if (st != KH_OK) return st;
    CU(m, "set_weight", kh_cu.MemcpyHtoDAsync(d->w[v], w, (size_t)m->mg.vars[v].numel * sizeof(float), d->stream));
    CU(m, "set_weight", kh_cu.StreamSynchronize(d->stream));
    return KH_OK;
}

kh_status kh_grt_dev_get_var(kh_grt_model *m, kh_grt_dev *d, int32_t v, float *w) {
    return kh_grt_dev_read(m, d, w, d->w[v], (size_t)m->mg.vars[v].numel * sizeof(float), "get_weight");
}

kh_status kh_grt_dev_read(kh_grt_model *m, kh_grt_dev *d, void *dst, CUdeviceptr src, size_t bytes, const char *what) {
    kh_status st = bind(m, d, what);
    if (st != KH_OK) return st;
    CU(m, what, kh_cu.MemcpyDtoHAsync(dst, src, bytes, d->stream));
    CU(m, what, kh_cu.StreamSynchronize(d->stream));
    return KH_OK;
}

kh_status kh_grt_dev_read_metrics(kh_grt_model *m, kh_grt_dev *d, uint32_t phase, kh_metrics *out, int32_t reset) {
    kh_status st = kh_grt_dev_read(m, d, d->h_met, d->met, 4 * sizeof(double), "read_metrics");
    if (st != KH_OK) return st;
    out->loss_sum = d->h_met[2 * phase];
    out->correct = d->h_met[2 * phase + 1];
    out->samples = d->samples[phase];
    if (reset) {
        CU(m, "read_metrics", kh_cu.MemsetD8Async(d->met + 2 * phase * sizeof(double), 0, 2 * sizeof(double), d->stream));
        d->samples[phase] = 0;
    }
    return KH_OK;
}

kh_status kh_grt_dev_sync(kh_grt_model *m, kh_grt_dev *d, const char *what) {
    kh_status st = bind(m, d, what);
    if (st != KH_OK) return st;
    CU(m, what, kh_cu.StreamSynchronize(d->stream));
    return KH_OK;
}
