/* tf_model.c — compiled models: lowering (khost/kit/graph.h), one memory plan per function, the storage of a CPU
 * model (one arena for all four functions, variables with their optimizer slots, persistent GatherGrad
 * accumulators, staged feeds, per-thread convolution scratch — all allocated here, none during a step), and
 * the model-level ABI calls, routed to the CPU executor or the CUDA one by the session's device. */
#include <stdlib.h>
#include <string.h>

#include "tf.h"
#include "tf_cuda.h"
#include "tf_cuda_plan.h"
#include "khost/kit/optimizer.h"

static int on_cuda(const tf_model *m) { return m->s->dev.kind == KH_DEVICE_CUDA; }
static tf_model *M(kh_bmodel *b) { return &b->m; }

// --- storage ------------------------------------------------------------------------------------------------
/* Each node's storage, and each input slot's, from the plan (CPU). */
static kh_status resolve(tf_model *m, int f_idx) {
    tf_fn *f = &m->fn[f_idx];
    const kh_graph *g = f->g;
    f->out = calloc((size_t)g->n_nodes + 1, sizeof *f->out);
    f->in_ptr = calloc((size_t)g->n_ins + 1, sizeof *f->in_ptr);
    if (!f->out || !f->in_ptr) return KH_ERR_NOMEM;
    void **pers = m->persistent[f_idx];
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const kh_gnode *nd = &g->nodes[i];
        const kh_gplan_entry *e = &f->plan.e[i];
        if (nd->op == KH_GOP_RESHAPE) f->out[i] = f->out[kh_graph_inputs(g, i)[0]];
        else if (e->inplace_of >= 0) f->out[i] = f->out[e->inplace_of];
        else if (e->store == KH_GSTORE_ARENA) f->out[i] = (char *)m->arena + e->offset;
        else if (e->store == KH_GSTORE_PERSISTENT) f->out[i] = pers[e->offset];
        else if (e->store == KH_GSTORE_VARIABLE) {
            int32_t v = kh_model_graphs_var(&m->mg, nd->attr.layer, nd->attr.slot);
            if (v < 0) return KH_ERR_INTERNAL;
            f->out[i] = m->vars[v].w;
        } else if (e->store == KH_GSTORE_FEED) {
            f->out[i] = nd->attr.input_id == KH_GIN_X ? (void *)m->feed_x
                      : nd->attr.input_id == KH_GIN_LABELS ? (void *)m->feed_labels : (void *)m->feed_dy;
        }
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const int32_t *in = kh_graph_inputs(g, i);
        for (int j = 0; j < g->nodes[i].n_in; j++) f->in_ptr[g->nodes[i].in_off + j] = f->out[in[j]];
    }
    return KH_OK;
}

static kh_status oom(tf_model *m, const char *what, int64_t bytes) {
    return tf_fail(m->s, KH_ERR_NOMEM, "compile", "out of host memory for %s (%lld bytes)", what, (long long)bytes);
}

static kh_status alloc_cpu(tf_model *m) {
    tf_session *s = m->s;
    m->arena = tf_alloc(s, (size_t)m->arena_bytes);
    if (!m->arena) return oom(m, "the arena", m->arena_bytes);
    m->vars = tf_alloc(s, ((size_t)m->mg.n_vars + 1) * sizeof *m->vars);
    if (!m->vars) return oom(m, "variables", 0);
    int slots = kh_optimizer_slots(m->mg.opt.kind);
    for (int32_t v = 0; v < m->mg.n_vars; v++) {
        tf_var *tv = &m->vars[v];
        tv->numel = m->mg.vars[v].numel;
        size_t b = (size_t)tv->numel * sizeof(float);
        tv->w = tf_alloc(s, b);
        if (slots >= 1) tv->s1 = tf_alloc(s, b);
        if (slots >= 2) tv->s2 = tf_alloc(s, b);
        if (!tv->w || (slots >= 1 && !tv->s1) || (slots >= 2 && !tv->s2)) return oom(m, m->mg.vars[v].name, (int64_t)b);
    }
    for (int f = 0; f < KH_GFN_COUNT; f++) {
        const kh_gplan *p = &m->fn[f].plan;
        if (p->n_persistent == 0) continue;
        void **pers = tf_alloc(s, (size_t)p->n_persistent * sizeof *pers);
        m->persistent[f] = pers;
        if (!pers) return oom(m, "accumulators", 0);
        for (int32_t k = 0; k < p->n_persistent; k++) {
            pers[k] = tf_alloc(s, (size_t)p->persistent_bytes[k]);
            if (!pers[k]) return oom(m, "an embedding gradient", p->persistent_bytes[k]);
        }
    }
    int64_t N = m->max_batch;
    m->feed_x = tf_alloc(s, (size_t)(N * m->mg.input_numel) * 4);
    m->feed_labels = tf_alloc(s, (size_t)N * 4);
    m->feed_dy = tf_alloc(s, (size_t)(N * m->mg.out_numel) * 4);
    if (!m->feed_x || !m->feed_labels || !m->feed_dy) return oom(m, "the staged batch", N * m->mg.input_numel * 4);
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

// --- compile / free -------------------------------------------------------------------------------------------
/* Every node must have a kernel on the device it will run on: the IR has forms tensorflow does not implement
 * (tf_node_refused), and on the CPU a node without a kernel would be skipped silently by the executor. */
static kh_status refuse_unsupported(tf_model *m) {
    for (int f = 0; f < KH_GFN_COUNT; f++) {
        const kh_graph *g = &m->mg.fn[f];
        for (int32_t i = 0; i < g->n_nodes; i++) {
            char why[256];
            uint32_t op = g->nodes[i].op;
            if (tf_node_refused(g, i, why, sizeof why))
                return tf_fail(m->s, KH_ERR_UNSUPPORTED, "compile", "function %d %s", f, why);
            if (!on_cuda(m) && !tf_cpu_kernel(op) && op != KH_GOP_INPUT && op != KH_GOP_VARIABLE &&
                op != KH_GOP_RESHAPE)
                return tf_fail(m->s, KH_ERR_UNSUPPORTED, "compile", "function %d node %d: no CPU kernel for %s", f, i,
                               kh_gop_name(op));
        }
    }
    return KH_OK;
}

kh_status tf_api_compile(kh_bsession *bs, const kh_model_spec *spec, const kh_compile_opts *opts, kh_bmodel **out) {
    if (!out) return KH_ERR_INVALID;
    *out = NULL;
    if (!bs) return KH_ERR_INVALID;
    tf_session *s = &bs->s;
    if (!spec) return tf_fail(s, KH_ERR_INVALID, "compile", "no model spec");
    if (!opts || opts->max_batch <= 0) return tf_fail(s, KH_ERR_INVALID, "compile", "max_batch must be positive");
    kh_bmodel *b = calloc(1, sizeof *b);
    if (!b) return tf_fail(s, KH_ERR_NOMEM, "compile", "out of host memory");
    tf_model *m = &b->m;
    m->s = s;
    m->max_batch = opts->max_batch;
    m->seed = opts->seed;
    kh_graph_lower_opts lo = {.max_batch = opts->max_batch,
                              .deterministic = KH_HAS_MEMBER(kh_compile_opts, opts->struct_size, deterministic)
                                                   ? opts->deterministic : 0};
    char why[256];
    kh_status st = kh_graph_lower(spec, &lo, &m->mg, why, sizeof why);
    if (st != KH_OK) {
        free(b);
        return tf_fail(s, st, "compile", "%s", why);
    }
    if (!(m->layer_kinds = malloc(((size_t)spec->n_layers + 1) * sizeof *m->layer_kinds)))
        st = tf_fail(s, KH_ERR_NOMEM, "compile", "out of host memory");
    for (int32_t l = 0; st == KH_OK && l < spec->n_layers; l++) m->layer_kinds[l] = spec->layers[l].kind;
    if (st == KH_OK) st = refuse_unsupported(m);
    for (int f = 0; f < KH_GFN_COUNT && st == KH_OK; f++) {
        if (m->mg.fn[f].n_nodes == 0) continue;
        m->fn[f].g = &m->mg.fn[f];
        st = kh_graph_plan(m->fn[f].g, TF_ALIGN, &m->fn[f].plan);
        if (st != KH_OK) st = tf_fail(s, st, "compile", "memory plan of function %d failed", f);
        else if (m->fn[f].plan.arena_bytes > m->arena_bytes) m->arena_bytes = m->fn[f].plan.arena_bytes;
    }
    if (st == KH_OK) st = on_cuda(m) ? tf_gpu()->compile(m) : alloc_cpu(m);
    if (st != KH_OK) {
        tf_api_model_free(b);
        return st;
    }
    *out = b;
    return KH_OK;
}

void tf_api_model_free(kh_bmodel *b) {
    if (!b) return;
    tf_model *m = &b->m;
    tf_session *s = m->s;
    free(m->layer_kinds);
    if (m->cuda) tf_gpu()->free_model(m);
    for (int f = 0; f < KH_GFN_COUNT; f++) {
        tf_fn *fn = &m->fn[f];
        if (fn->succ_off || fn->pending) tf_exec_release(m, fn);
        free(fn->out);
        free(fn->in_ptr);
        if (fn->partials) {
            for (int32_t i = 0; fn->g && i < fn->g->n_nodes; i++) tf_free(s, fn->partials[i]);
            tf_free(s, fn->partials);
        }
        if (m->persistent[f]) {
            for (int32_t k = 0; k < fn->plan.n_persistent; k++) tf_free(s, m->persistent[f][k]);
            tf_free(s, m->persistent[f]);
        }
        kh_gplan_free(&fn->plan);
    }
    if (m->vars) {
        for (int32_t v = 0; v < m->mg.n_vars; v++) {
            tf_free(s, m->vars[v].w);
            tf_free(s, m->vars[v].s1);
            tf_free(s, m->vars[v].s2);
        }
        tf_free(s, m->vars);
    }
    tf_free(s, m->arena);
    tf_free(s, m->feed_x);
    tf_free(s, m->feed_labels);
    tf_free(s, m->feed_dy);
    tf_free(s, m->im2col);
    kh_model_graphs_free(&m->mg);
    free(b);
}

// --- weights --------------------------------------------------------------------------------------------------
static kh_status check_slot(tf_model *m, int32_t layer, int32_t slot, const kh_tensor *t, const char *op,
                            int32_t *v_out) {
    char why[300];
    kh_status st = kh_model_graphs_check_weight(&m->mg, layer, slot, t, v_out, why, sizeof why);
    return st == KH_OK ? st : tf_fail(m->s, st, op, "%s", why);
}

kh_status tf_api_set_weight(kh_bmodel *b, int32_t layer, int32_t slot, const kh_tensor *w) {
    if (!b) return KH_ERR_INVALID;
    tf_model *m = M(b);
    int32_t v;
    kh_status st = check_slot(m, layer, slot, w, "set_weight", &v);
    if (st != KH_OK) return st;
    if (on_cuda(m)) return tf_gpu()->set_var(m, v, w->data);
    memcpy(m->vars[v].w, w->data, (size_t)m->vars[v].numel * sizeof(float));
    return KH_OK;
}

kh_status tf_api_get_weight(kh_bmodel *b, int32_t layer, int32_t slot, kh_tensor *w) {
    if (!b) return KH_ERR_INVALID;
    tf_model *m = M(b);
    int32_t v;
    kh_status st = check_slot(m, layer, slot, w, "get_weight", &v);
    if (st != KH_OK) return st;
    if (on_cuda(m)) return tf_gpu()->get_var(m, v, w->data);
    memcpy(w->data, m->vars[v].w, (size_t)m->vars[v].numel * sizeof(float));
    return KH_OK;
}

// --- staging --------------------------------------------------------------------------------------------------
static kh_status check_x(tf_model *m, const kh_tensor *x, const char *op, int64_t *n) {
    char why[300];
    kh_status st = kh_model_graphs_check_x(&m->mg, m->max_batch, x, n, why, sizeof why);
    return st == KH_OK ? st : tf_fail(m->s, st, op, "%s", why);
}

static kh_status check_y(tf_model *m, const kh_tensor *y, int64_t n, const char *op) {
    char why[300];
    kh_status st = kh_model_graphs_check_labels(&m->mg, y, n, why, sizeof why);
    return st == KH_OK ? st : tf_fail(m->s, st, op, "%s", why);
}

static void stage(tf_model *m, const kh_tensor *x, const kh_tensor *y, int64_t n) {
    memcpy(m->feed_x, x->data, (size_t)(n * m->mg.input_numel) * 4);
    if (y) memcpy(m->feed_labels, y->data, (size_t)n * 4);
}

static void add_metrics(tf_model *m, kh_gfn fn, uint32_t phase, int64_t n) {
    const tf_fn *f = &m->fn[fn];
    m->met[phase].loss_sum += ((const float *)f->out[f->g->outputs[KH_GOUT_LOSS_SUM]])[0];
    m->met[phase].correct += ((const float *)f->out[f->g->outputs[KH_GOUT_CORRECT]])[0];
    m->met[phase].samples += n;
}

static kh_status need_fn(tf_model *m, kh_gfn fn, const char *op) {
    if (m->fn[fn].g) return KH_OK;
    return tf_fail(m->s, KH_ERR_UNSUPPORTED, op, "the model has no loss (compiled for probes only)");
}

// --- training, evaluation, prediction ---------------------------------------------------------------------------
kh_status tf_api_train_batch(kh_bmodel *b, const kh_tensor *x, const kh_tensor *y) {
    if (!b) return KH_ERR_INVALID;
    tf_model *m = M(b);
    int64_t n = 0;
    kh_status st = need_fn(m, KH_GFN_TRAIN, "train_batch");
    if (st == KH_OK) st = check_x(m, x, "train_batch", &n);
    if (st == KH_OK) st = check_y(m, y, n, "train_batch");
    if (st != KH_OK) return st;
    double lr = kh_optimizer_step_lr(&m->mg.opt, m->iterations);
    uint64_t counter = m->n_forward++;
    if (on_cuda(m)) st = tf_gpu()->run(m, KH_GFN_TRAIN, 0, n, lr, counter, x->data, y->data, NULL);
    else {
        stage(m, x, y, n);
        st = tf_exec_run(m, &m->fn[KH_GFN_TRAIN], 0, n, lr, counter);
        if (st == KH_OK) add_metrics(m, KH_GFN_TRAIN, KH_PHASE_TRAIN, n);
    }
    if (st == KH_OK) m->iterations++;
    return st;
}

kh_status tf_api_eval_batch(kh_bmodel *b, const kh_tensor *x, const kh_tensor *y) {
    if (!b) return KH_ERR_INVALID;
    tf_model *m = M(b);
    int64_t n = 0;
    kh_status st = need_fn(m, KH_GFN_EVAL, "eval_batch");
    if (st == KH_OK) st = check_x(m, x, "eval_batch", &n);
    if (st == KH_OK) st = check_y(m, y, n, "eval_batch");
    if (st != KH_OK) return st;
    if (on_cuda(m)) return tf_gpu()->run(m, KH_GFN_EVAL, 0, n, 0.0, 0, x->data, y->data, NULL);
    stage(m, x, y, n);
    st = tf_exec_run(m, &m->fn[KH_GFN_EVAL], 0, n, 0.0, 0);
    if (st == KH_OK) add_metrics(m, KH_GFN_EVAL, KH_PHASE_EVAL, n);
    return st;
}

static kh_status check_out(tf_model *m, const kh_tensor *out, int64_t n, int64_t per, const char *op) {
    char why[300];
    kh_status st = kh_model_graphs_check_out(out, n, per, why, sizeof why);
    return st == KH_OK ? st : tf_fail(m->s, st, op, "%s", why);
}

static kh_status read_node(tf_model *m, kh_gfn fn, int32_t node, int64_t n, float *dst) {
    if (on_cuda(m)) return tf_gpu()->read_node(m, fn, node, n, dst);
    memcpy(dst, m->fn[fn].out[node], (size_t)kh_graph_numel(m->fn[fn].g, node, n) * sizeof(float));
    return KH_OK;
}

kh_status tf_api_predict(kh_bmodel *b, const kh_tensor *x, kh_tensor *out) {
    if (!b) return KH_ERR_INVALID;
    tf_model *m = M(b);
    int64_t n = 0;
    kh_status st = check_x(m, x, "predict", &n);
    if (st == KH_OK) st = check_out(m, out, n, m->mg.out_numel, "predict");
    if (st != KH_OK) return st;
    if (on_cuda(m)) st = tf_gpu()->run(m, KH_GFN_PREDICT, 0, n, 0.0, 0, x->data, NULL, NULL);
    else {
        stage(m, x, NULL, n);
        st = tf_exec_run(m, &m->fn[KH_GFN_PREDICT], 0, n, 0.0, 0);
    }
    return st == KH_OK ? read_node(m, KH_GFN_PREDICT, m->fn[KH_GFN_PREDICT].g->outputs[KH_GOUT_Y], n, out->data) : st;
}

kh_status tf_api_read_metrics(kh_bmodel *b, uint32_t phase, kh_metrics *out, int32_t reset) {
    if (!b) return KH_ERR_INVALID;
    tf_model *m = M(b);
    if (!out || phase > KH_PHASE_EVAL) return tf_fail(m->s, KH_ERR_INVALID, "read_metrics", "bad phase %u", phase);
    if (on_cuda(m)) return tf_gpu()->read_metrics(m, phase, out, reset);
    *out = m->met[phase];
    if (reset) memset(&m->met[phase], 0, sizeof m->met[phase]);
    return KH_OK;
}

/* The CPU executor is synchronous; the CUDA one waits for its stream. */
kh_status tf_api_sync(kh_bmodel *b) {
    if (!b) return KH_ERR_INVALID;
    return on_cuda(M(b)) ? tf_gpu()->sync(M(b)) : KH_OK;
}

kh_status tf_api_memory_info(kh_bmodel *b, kh_memory_info *out) {
    if (!b) return KH_ERR_INVALID;
    return kh_mem_count_report(&M(b)->dev_mem, on_cuda(M(b)),
                               "cudaMalloc by tensorflow for this model: weights, optimizer slots, arena, staging, "
                               "cuDNN workspaces (cuBLAS's and cuDNN's own allocations not counted)", out);
}

// --- probes ---------------------------------------------------------------------------------------------------
kh_status tf_api_forward(kh_bmodel *b, const kh_tensor *x, kh_tensor *out) {
    if (!b) return KH_ERR_INVALID;
    tf_model *m = M(b);
    int64_t n = 0;
    kh_status st = check_x(m, x, "forward", &n);
    if (st == KH_OK) st = check_out(m, out, n, m->mg.out_numel, "forward");
    if (st != KH_OK) return st;
    m->probe_counter = m->n_forward++;
    if (on_cuda(m)) st = tf_gpu()->run(m, KH_GFN_PROBE, 0, n, 0.0, m->probe_counter, x->data, NULL, NULL);
    else {
        stage(m, x, NULL, n);
        st = tf_exec_run(m, &m->fn[KH_GFN_PROBE], 0, n, 0.0, m->probe_counter);
    }
    if (st != KH_OK) return st;
    m->last_n = (int32_t)n;
    m->have_grad = 0;
    return read_node(m, KH_GFN_PROBE, m->fn[KH_GFN_PROBE].g->outputs[KH_GOUT_Y], n, out->data);
}

kh_status tf_api_backward(kh_bmodel *b, const kh_tensor *dy, kh_tensor *dx) {
    if (!b) return KH_ERR_INVALID;
    tf_model *m = M(b);
    if (m->last_n <= 0) return tf_fail(m->s, KH_ERR_INVALID, "backward", "no forward() before backward()");
    int64_t n = m->last_n;
    if (!dy || !dy->data || dy->dtype != KH_F32 || kh_tensor_numel(dy) != n * m->mg.out_numel)
        return tf_fail(m->s, KH_ERR_INVALID, "backward", "dy must be f32 with %lld values",
                       (long long)(n * m->mg.out_numel));
    int32_t dxn = m->fn[KH_GFN_PROBE].g->outputs[KH_GOUT_DX];
    if (dx && dxn >= 0 && check_out(m, dx, n, m->mg.input_numel, "backward") != KH_OK) return KH_ERR_INVALID;
    kh_status st;
    tf_fn *f = &m->fn[KH_GFN_PROBE];
    if (on_cuda(m)) st = tf_gpu()->run(m, KH_GFN_PROBE, 1, n, 0.0, m->probe_counter, NULL, NULL, dy->data);
    else {
        memcpy(m->feed_dy, dy->data, (size_t)(n * m->mg.out_numel) * 4);
        /* accumulators of a probe start from zero at every backward (no Apply consumes them) */
        for (int32_t k = 0; k < f->plan.n_persistent; k++)
            memset(m->persistent[KH_GFN_PROBE][k], 0, (size_t)f->plan.persistent_bytes[k]);
        st = tf_exec_run(m, f, 1, n, 0.0, m->probe_counter);
    }
    if (st != KH_OK) return st;
    m->have_grad = 1;
    if (dx && dxn >= 0) return read_node(m, KH_GFN_PROBE, dxn, n, dx->data);
    return KH_OK;
}

kh_status tf_api_get_grad(kh_bmodel *b, int32_t layer, int32_t slot, kh_tensor *g) {
    if (!b) return KH_ERR_INVALID;
    tf_model *m = M(b);
    int32_t v;
    kh_status st = check_slot(m, layer, slot, g, "get_grad", &v);
    if (st != KH_OK) return st;
    if (!m->have_grad) return tf_fail(m->s, KH_ERR_INVALID, "get_grad", "no backward() since the last forward()");
    int32_t node = m->mg.probe_grads[v];
    if (node < 0) {
        /* the graph's variable table, not m->vars: only the CPU path allocates that */
        memset(g->data, 0, (size_t)m->mg.vars[v].numel * sizeof(float));
        return KH_OK;
    }
    return read_node(m, KH_GFN_PROBE, node, m->last_n, g->data);
}
