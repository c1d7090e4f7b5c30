/* tf_model.c — tensorflow's part of compiling for the graph runtime (khost/kit/graph_runtime.h): the refusal
 * of forms it does not implement, one memory plan per lowered function; and its CPU executor's model side:
 * the runtime's host storage plus per-thread convolution scratch and filter-gradient partials (all allocated
 * at prepare, none during a step), each node's storage resolved from the plan, runs through tf_exec.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf.h"
#include "tf_cuda_plan.h"
#include "khost/kit/status.h"

static tf_model *TF(kh_grt_model *m) { return (tf_model *)m; }

// --- the compile step (both devices) ----------------------------------------------------------------------------
/* Every node must have a kernel on the device it will run on: the IR has forms tensorflow does not implement
 * (tf_node_refused), and on the CPU a node without a kernel would be skipped silently by the executor. */
static kh_status refuse_unsupported(tf_model *m) {
    int on_cpu = m->s->rt.dev.kind == KH_DEVICE_CPU;
    for (int f = 0; f < KH_GFN_COUNT; f++) {
        const kh_graph *g = &m->rt.mg.fn[f];
        for (int32_t i = 0; i < g->n_nodes; i++) {
            char why[256];
            uint32_t op = g->nodes[i].op;
            if (tf_node_refused(g, i, why, sizeof why))
                return tf_fail(m->s, KH_ERR_UNSUPPORTED, "compile", "function %d %s", f, why);
            if (on_cpu && !tf_cpu_kernel(op) && op != KH_GOP_INPUT && op != KH_GOP_VARIABLE && op != KH_GOP_RESHAPE)
                return tf_fail(m->s, KH_ERR_UNSUPPORTED, "compile", "function %d node %d: no CPU kernel for %s", f, i,
                               kh_gop_name(op));
        }
    }
    return KH_OK;
}

kh_status tf_prepare(kh_grt_model *rtm, const kh_model_spec *spec) {
    tf_model *m = TF(rtm);
    m->s = (tf_session *)rtm->s;
    if (!(m->layer_kinds = malloc(((size_t)spec->n_layers + 1) * sizeof *m->layer_kinds)))
        return tf_fail(m->s, KH_ERR_NOMEM, "compile", "out of host memory");
    for (int32_t l = 0; l < spec->n_layers; l++) m->layer_kinds[l] = spec->layers[l].kind;
    kh_status st = refuse_unsupported(m);
    for (int f = 0; f < KH_GFN_COUNT && st == KH_OK; f++) {
        if (m->rt.mg.fn[f].n_nodes == 0) continue;
        m->fn[f].g = &m->rt.mg.fn[f];
        st = kh_graph_plan(m->fn[f].g, TF_ALIGN, &m->fn[f].plan);
        if (st != KH_OK) return tf_fail(m->s, st, "compile", "memory plan of function %d failed", f);
        m->rt.graph[f] = m->fn[f].g;
        m->rt.plan[f] = &m->fn[f].plan;
    }
    return st;
}

void tf_release(kh_grt_model *rtm) {
    tf_model *m = TF(rtm);
    free(m->layer_kinds);
    for (int f = 0; f < KH_GFN_COUNT; f++) kh_gplan_free(&m->fn[f].plan);
}

// --- the CPU executor's model side ------------------------------------------------------------------------------
/* Each node's storage, and each input slot's, from the plan. */
static kh_status resolve(tf_model *m, int f_idx) {
    tf_fn *f = &m->fn[f_idx];
    const kh_graph *g = f->g;
    f->out = calloc((size_t)g->n_nodes + 1, sizeof *f->out);
    f->in_ptr = calloc((size_t)g->n_ins + 1, sizeof *f->in_ptr);
    if (!f->out || !f->in_ptr) return KH_ERR_NOMEM;
    for (int32_t i = 0; i < g->n_nodes; i++) f->out[i] = kh_grt_host_value(&m->rt, (kh_gfn)f_idx, i);
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const int32_t *in = kh_graph_inputs(g, i);
        for (int j = 0; j < g->nodes[i].n_in; j++) f->in_ptr[g->nodes[i].in_off + j] = f->out[in[j]];
    }
    return KH_OK;
}

static kh_status oom(tf_model *m, const char *what, int64_t bytes) {
    return tf_fail(m->s, KH_ERR_NOMEM, "compile", "out of host memory for %s (%lld bytes)", what, (long long)bytes);
}

static kh_status cpu_prepare(kh_grt_model *rtm) {
    tf_model *m = TF(rtm);
    tf_session *s = m->s;
    kh_status st = kh_grt_host_alloc(rtm);
    if (st != KH_OK) return st;
    int slots_threads = tf_pool_workers(s->pool) + 1;
    for (int f = 0; f < KH_GFN_COUNT; f++)
        if (m->fn[f].g) tf_cpu_scratch_needs(m->fn[f].g, &m->im2col_floats);
    if (m->im2col_floats > 0) {
        m->im2col = tf_alloc(s, (size_t)(m->im2col_floats * slots_threads) * sizeof(float));
        if (!m->im2col) return oom(m, "convolution scratch", m->im2col_floats * slots_threads * 4);
    }
    for (int f = 0; f < KH_GFN_COUNT; f++) {
        const kh_graph *g = m->fn[f].g;
        if (!g) continue;
        m->fn[f].partials = tf_alloc(s, (size_t)g->n_nodes * sizeof *m->fn[f].partials);
        if (!m->fn[f].partials) return oom(m, "convolution scratch", 0);
        memset(m->fn[f].partials, 0, (size_t)g->n_nodes * sizeof *m->fn[f].partials);
        for (int32_t i = 0; i < g->n_nodes; i++) {
            int64_t kf = tf_cpu_filter_partial_floats(g, i);
            if (kf == 0) continue;
            m->fn[f].partials[i] = tf_alloc(s, (size_t)(kf * s->set.intra_op) * sizeof(float));
            if (!m->fn[f].partials[i]) return oom(m, "filter-gradient partials", kf * s->set.intra_op * 4);
        }
    }
    for (int f = 0; f < KH_GFN_COUNT; f++) {
        if (!m->fn[f].g) continue;
        if (resolve(m, f) != KH_OK || tf_exec_prepare(m, &m->fn[f]) != KH_OK) return oom(m, "the executor", 0);
    }
    return KH_OK;
}

static void cpu_release(kh_grt_model *rtm) {
    tf_model *m = TF(rtm);
    tf_session *s = m->s;
    for (int f = 0; f < KH_GFN_COUNT; f++) {
        tf_fn *fn = &m->fn[f];
        if (fn->succ_off || fn->pending) tf_exec_release(m, fn);
        free(fn->out);
        free(fn->in_ptr);
        if (fn->partials) {
            for (int32_t i = 0; fn->g && i < fn->g->n_nodes; i++) tf_free(s, fn->partials[i]);
            tf_free(s, fn->partials);
        }
    }
    tf_free(s, m->im2col);
}

static kh_status cpu_run(kh_grt_model *rtm, kh_gfn fn, int part, int64_t n, double lr, uint64_t counter,
                         const void *x, const int32_t *labels, const float *dy) {
    tf_model *m = TF(rtm);
    tf_fn *f = &m->fn[fn];
    kh_grt_host_stage(rtm, n, x, labels, dy);
    kh_status st = tf_exec_run(m, f, part, n, lr, counter);
    if (st == KH_OK && (fn == KH_GFN_TRAIN || fn == KH_GFN_EVAL))
        kh_grt_host_add_metrics(rtm, fn, ((const float *)f->out[f->g->outputs[KH_GOUT_LOSS_SUM]])[0],
                                ((const float *)f->out[f->g->outputs[KH_GOUT_CORRECT]])[0], n);
    return st;
}

// --- the CPU executor's session side -----------------------------------------------------------------------------
static void cpu_caps(kh_caps *c) {
    c->available = tf_blas_available();
    snprintf(c->note, sizeof c->note, "%s", c->available ? "dataflow executor, OpenBLAS MatMul, im2col Conv2D, NHWC"
                                                         : "built without BLAS: CPU path unavailable");
}

static kh_status cpu_open(kh_grt_session *rts, char *err, size_t errlen) {
    tf_session *s = (tf_session *)rts;
    if (!tf_blas_available())
        return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "tensorflow open on %s: built without BLAS", rts->dev.id);
    if (rts->threads > 1 && tf_pool_create(rts->threads - 1, &s->pool) != KH_OK)
        return kh_errf(err, errlen, KH_ERR_INTERNAL, "tensorflow open on %s: cannot start %d worker threads",
                       rts->dev.id, rts->threads - 1);
    tf_blas_single_threaded(); /* BLAS calls stay on the thread that runs the op */
    return KH_OK;
}

static void cpu_close(kh_grt_session *rts) { tf_pool_destroy(((tf_session *)rts)->pool); }

static kh_status cpu_environment(kh_grt_session *rts, char *buf, size_t n) {
    tf_session *s = (tf_session *)rts;
    char ver[64];
    snprintf(buf, n, "blas=%s (single-threaded calls) threads=%d inter_op=%d intra_op=%d inline_cost=%lld",
             tf_blas_version(ver, sizeof ver), rts->threads, s->set.inter_op, s->set.intra_op,
             (long long)s->set.inline_cost);
    return KH_OK;
}

const kh_grt_exec tf_cpu_exec = {
    .caps = cpu_caps,
    .open = cpu_open,
    .close = cpu_close,
    .environment = cpu_environment,
    .prepare = cpu_prepare,
    .release = cpu_release,
    .run = cpu_run,
    KH_GRT_HOST_STORAGE,
};
