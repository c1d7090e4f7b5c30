/* runtime_host.c — the host storage of a graph runtime model for CPU executors (khost/kit/graph_runtime.h):
 * one arena of the largest plan (one function runs at a time), the variables with their optimizer slots, each
 * plan's persistent buffers (GatherGrad accumulators), the staged feeds and the metric sums. All of it is
 * allocated at prepare from the host's allocator, none during a step. */
#include <string.h>

#include "khost/kit/graph_runtime.h"
#include "khost/kit/optimizer.h"

static kh_status oom(kh_grt_model *m, const char *what, int64_t bytes) {
    return kh_grt_fail(m->s, KH_ERR_NOMEM, "compile", "out of host memory for %s (%lld bytes)", what,
                       (long long)bytes);
}

kh_status kh_grt_host_alloc(kh_grt_model *m) {
    kh_grt_session *s = m->s;
    m->arena = kh_grt_alloc(s, (size_t)m->arena_bytes);
    if (!m->arena) return oom(m, "the arena", m->arena_bytes);
    int32_t nv = m->mg.n_vars;
    m->w = kh_grt_alloc(s, ((size_t)nv + 1) * sizeof *m->w);
    m->s1 = kh_grt_alloc(s, ((size_t)nv + 1) * sizeof *m->s1);
    m->s2 = kh_grt_alloc(s, ((size_t)nv + 1) * sizeof *m->s2);
    if (!m->w || !m->s1 || !m->s2) return oom(m, "variables", 0);
    memset(m->w, 0, ((size_t)nv + 1) * sizeof *m->w);
    memset(m->s1, 0, ((size_t)nv + 1) * sizeof *m->s1);
    memset(m->s2, 0, ((size_t)nv + 1) * sizeof *m->s2);
    int slots = kh_optimizer_slots(m->mg.opt.kind);
    for (int32_t v = 0; v < nv; v++) {
        size_t b = (size_t)m->mg.vars[v].numel * sizeof(float);
        m->w[v] = kh_grt_alloc(s, b);
        if (slots >= 1) m->s1[v] = kh_grt_alloc(s, b);
        if (slots >= 2) m->s2[v] = kh_grt_alloc(s, b);
        if (!m->w[v] || (slots >= 1 && !m->s1[v]) || (slots >= 2 && !m->s2[v]))
            return oom(m, m->mg.vars[v].name, (int64_t)b);
    }
    for (int f = 0; f < KH_GFN_COUNT; f++) {
        const kh_gplan *p = m->plan[f];
        if (!p || p->n_persistent == 0) continue;
        float **pers = kh_grt_alloc(s, (size_t)p->n_persistent * sizeof *pers);
        if (!pers) return oom(m, "accumulators", 0);
        memset(pers, 0, (size_t)p->n_persistent * sizeof *pers);
        m->persistent[f] = pers;
        for (int32_t k = 0; k < p->n_persistent; k++)
            if (!(pers[k] = kh_grt_alloc(s, (size_t)p->persistent_bytes[k])))
                return oom(m, "an embedding gradient", p->persistent_bytes[k]);
    }
    int64_t N = m->max_batch;
    m->feed_x = kh_grt_alloc(s, (size_t)(N * m->mg.input_numel) * 4);
    m->feed_labels = kh_grt_alloc(s, (size_t)N * 4);
    m->feed_dy = kh_grt_alloc(s, (size_t)(N * m->mg.out_numel) * 4);
    if (!m->feed_x || !m->feed_labels || !m->feed_dy) return oom(m, "the staged batch", N * m->mg.input_numel * 4);
    return KH_OK;
}

void kh_grt_host_free(kh_grt_model *m) {
    kh_grt_session *s = m->s;
    for (int32_t v = 0; v < m->mg.n_vars; v++) {
        if (m->w) kh_grt_free(s, m->w[v]);
        if (m->s1) kh_grt_free(s, m->s1[v]);
        if (m->s2) kh_grt_free(s, m->s2[v]);
    }
    kh_grt_free(s, m->w);
    kh_grt_free(s, m->s1);
    kh_grt_free(s, m->s2);
    for (int f = 0; f < KH_GFN_COUNT; f++) {
        if (!m->persistent[f]) continue;
        for (int32_t k = 0; k < m->plan[f]->n_persistent; k++) kh_grt_free(s, m->persistent[f][k]);
        kh_grt_free(s, m->persistent[f]);
    }
    kh_grt_free(s, m->arena);
    kh_grt_free(s, m->feed_x);
    kh_grt_free(s, m->feed_labels);
    kh_grt_free(s, m->feed_dy);
}

void *kh_grt_host_value(kh_grt_model *m, kh_gfn fn, int32_t node) {
    const kh_graph *g = m->graph[fn];
    const kh_gplan *p = m->plan[fn];
    int32_t r = node;
    for (;;) { /* a view is its input's storage; an in-place node its target's */
        if (g->nodes[r].op == KH_GOP_RESHAPE) r = kh_graph_inputs(g, r)[0];
        else if (p->e[r].inplace_of >= 0) r = p->e[r].inplace_of;
        else break;
    }
    const kh_gplan_entry *e = &p->e[r];
    const kh_gnode *nd = &g->nodes[r];
    switch (e->store) {
    case KH_GSTORE_ARENA: return (char *)m->arena + e->offset;
    case KH_GSTORE_PERSISTENT: return m->persistent[fn][e->offset];
    case KH_GSTORE_VARIABLE: {
        int32_t v = kh_model_graphs_var(&m->mg, nd->attr.layer, nd->attr.slot);
        return v >= 0 ? m->w[v] : NULL;
    }
    case KH_GSTORE_FEED:
        return nd->attr.input_id == KH_GIN_X ? m->feed_x
             : nd->attr.input_id == KH_GIN_LABELS ? (void *)m->feed_labels : (void *)m->feed_dy;
    default: return NULL;
    }
}

void kh_grt_host_stage(kh_grt_model *m, int64_t n, const void *x, const int32_t *labels, const float *dy) {
    if (x) memcpy(m->feed_x, x, (size_t)(n * m->mg.input_numel) * 4);
    if (labels) memcpy(m->feed_labels, labels, (size_t)n * 4);
    if (!dy) return;
    memcpy(m->feed_dy, dy, (size_t)(n * m->mg.out_numel) * 4);
    const kh_gplan *p = m->plan[KH_GFN_PROBE];
    for (int32_t k = 0; p && m->persistent[KH_GFN_PROBE] && k < p->n_persistent; k++)
        memset(m->persistent[KH_GFN_PROBE][k], 0, (size_t)p->persistent_bytes[k]);
}

void kh_grt_host_add_metrics(kh_grt_model *m, kh_gfn fn, double loss_sum, double correct, int64_t n) {
    if (fn != KH_GFN_TRAIN && fn != KH_GFN_EVAL) return;
    kh_metrics *k = &m->met[fn == KH_GFN_TRAIN ? KH_PHASE_TRAIN : KH_PHASE_EVAL];
    k->loss_sum += loss_sum;
    k->correct += correct;
    k->samples += n;
}

kh_status kh_grt_host_set_var(kh_grt_model *m, int32_t v, const float *w) {
    memcpy(m->w[v], w, (size_t)m->mg.vars[v].numel * sizeof(float));
    return KH_OK;
}

kh_status kh_grt_host_get_var(kh_grt_model *m, int32_t v, float *w) {
    memcpy(w, m->w[v], (size_t)m->mg.vars[v].numel * sizeof(float));
    return KH_OK;
}

kh_status kh_grt_host_read_node(kh_grt_model *m, kh_gfn fn, int32_t node, int64_t n, float *dst) {
    const void *src = kh_grt_host_value(m, fn, node);
    if (!src) return kh_grt_fail(m->s, KH_ERR_INTERNAL, "read", "node %d has no storage", node);
    memcpy(dst, src, (size_t)kh_graph_numel(m->graph[fn], node, n) * sizeof(float));
    return KH_OK;
}

kh_status kh_grt_host_read_metrics(kh_grt_model *m, uint32_t phase, kh_metrics *out, int32_t reset) {
    *out = m->met[phase];
    if (reset) memset(&m->met[phase], 0, sizeof m->met[phase]);
    return KH_OK;
}

kh_status kh_grt_host_sync(kh_grt_model *m) {
    (void)m;
    return KH_OK;
}
