/* th_model.c — compiled models: lowering (khost/kit/graph.h), the passes, one memory plan, C source and compiled
 * function per graph function, the storage they run over (one arena shared by the functions, variables with
 * their optimizer slots, GatherGrad accumulators, staged feeds, im2col scratch — all allocated here, none
 * during a step), and the model-level ABI calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>

#include "passes/th_passes.h"
#include "th.h"
#include "th_cuda.h"
#include "khost/kit/clock.h"
#include "khost/kit/optimizer.h"

static th_model *M(kh_bmodel *b) { return &b->m; }
static const char *const g_fn_names[KH_GFN_COUNT] = {"train", "eval", "predict", "probe"};


static kh_status oom(th_model *m, const char *what, int64_t bytes) {
    return th_fail(m->s, KH_ERR_NOMEM, "compile", "out of host memory for %s (%lld bytes)", what, (long long)bytes);
}

/* Optimise, plan, emit and build one function. */
static kh_status build_fn(th_model *m, int f) {
    th_fn_unit *u = &m->fn[f];
    const kh_graph *lg = &m->mg.fn[f];
    char why[512];
    u->map = malloc(((size_t)lg->n_nodes + 1) * sizeof *u->map);
    if (!u->map) return oom(m, "the node map", 0);
    double t0 = kh_now();
    th_opt_report rep;
    kh_status st = th_optimize(lg, m->s->set.passes, &u->g, u->map, &rep, why, sizeof why);
    if (st != KH_OK) return th_fail(m->s, st, "compile", "%s function: %s", g_fn_names[f], why);
    for (int k = 0; k < rep.n; k++)
        th_log(m->s, KH_LOG_DEBUG, "%s: pass %-14s %5d -> %5d nodes, %d rewrites, %.1f ms", g_fn_names[f],
               rep.run[k].name, rep.run[k].nodes_before, rep.run[k].nodes_after, rep.run[k].changed,
               rep.run[k].seconds * 1e3);
    st = kh_graph_plan(&u->g, TH_ALIGN, &u->plan);
    if (st != KH_OK) return th_fail(m->s, st, "compile", "memory plan of the %s function failed", g_fn_names[f]);
    if (u->plan.arena_bytes > m->arena_bytes) m->arena_bytes = u->plan.arena_bytes;
    if (m->s->cuda) { /* the GPU path emits and compiles every function in th_cuda_compile */
        m->codegen_s += kh_now() - t0;
        th_dump_fn(m->s, g_fn_names[f], lg, &u->g, &rep, NULL, 0);
        return KH_OK;
    }
    th_sb src = {0};
    th_emit_env env = {.g = &u->g, .plan = &u->plan, .mg = &m->mg, .fn = (kh_gfn)f, .scratch_floats = &m->scratch_floats};
    st = th_emit_c(&env, &src, why, sizeof why);
    m->codegen_s += kh_now() - t0;
    if (st != KH_OK) {
        th_sb_free(&src);
        return th_fail(m->s, st, "compile", "%s function: %s", g_fn_names[f], why);
    }
    th_dump_fn(m->s, g_fn_names[f], lg, &u->g, &rep, src.s, src.len);
    int hit = 0;
    double cc_s = 0, load_s = 0;
    st = th_build(m->s, src.s, src.len, g_fn_names[f], &u->dl, &u->run, &hit, &cc_s, &load_s);
    th_sb_free(&src);
    m->cc_s += cc_s;
    m->load_s += load_s;
    m->units++;
    if (!hit) m->cache_misses++;
    return st;
}

static kh_status alloc_storage(th_model *m) {
    th_session *s = m->s;
    m->arena = th_alloc(s, (size_t)m->arena_bytes);
    if (!m->arena) return oom(m, "the arena", m->arena_bytes);
    int32_t nv = m->mg.n_vars;
    m->vars = th_alloc(s, ((size_t)nv + 1) * sizeof *m->vars);
    m->w = th_alloc(s, ((size_t)nv + 1) * sizeof *m->w);
    m->s1 = th_alloc(s, ((size_t)nv + 1) * sizeof *m->s1);
    m->s2 = th_alloc(s, ((size_t)nv + 1) * sizeof *m->s2);
    if (!m->vars || !m->w || !m->s1 || !m->s2) return oom(m, "variables", 0);
    int slots = kh_optimizer_slots(m->mg.opt.kind);
    for (int32_t v = 0; v < nv; v++) {
        th_var *tv = &m->vars[v];
        tv->numel = m->mg.vars[v].numel;
        size_t b = (size_t)tv->numel * sizeof(float);
        tv->w = th_alloc(s, b);
        if (slots >= 1) tv->s1 = th_alloc(s, b);
        if (slots >= 2) tv->s2 = th_alloc(s, b);
        if (!tv->w || (slots >= 1 && !tv->s1) || (slots >= 2 && !tv->s2)) return oom(m, m->mg.vars[v].name, (int64_t)b);
        m->w[v] = tv->w;
        m->s1[v] = tv->s1;
        m->s2[v] = tv->s2;
    }
    int64_t N = m->max_batch;
    m->feed_x = th_alloc(s, (size_t)(N * m->mg.input_numel) * 4);
    m->feed_labels = th_alloc(s, (size_t)N * 4);
    m->feed_dy = th_alloc(s, (size_t)(N * m->mg.out_numel) * 4);
    if (!m->feed_x || !m->feed_labels || !m->feed_dy) return oom(m, "the staged batch", N * m->mg.input_numel * 4);
    /* scratch_floats is what one thread needs; every thread of the parallel loops has its own */
    int64_t stride = (m->scratch_floats + 15) / 16 * 16;
    if (stride > 0 && !(m->scratch = th_alloc(s, (size_t)(stride * s->threads) * sizeof(float))))
        return oom(m, "scratch", stride * s->threads * 4);
    for (int f = 0; f < KH_GFN_COUNT; f++) {
        th_fn_unit *u = &m->fn[f];
        if (!u->run) continue;
        if (u->plan.n_persistent > 0) {
            u->persistent = th_alloc(s, (size_t)u->plan.n_persistent * sizeof *u->persistent);
            if (!u->persistent) return oom(m, "accumulators", 0);
            for (int32_t k = 0; k < u->plan.n_persistent; k++)
                if (!(u->persistent[k] = th_alloc(s, (size_t)u->plan.persistent_bytes[k])))
                    return oom(m, "an embedding gradient", u->plan.persistent_bytes[k]);
        }
        th_rt_ctx *c = &u->ctx;
        c->arena = m->arena;
        c->w = m->w;
        c->s1 = m->s1;
        c->s2 = m->s2;
        c->persistent = u->persistent;
        c->feed_x = m->feed_x;
        c->labels = m->feed_labels;
        c->feed_dy = m->feed_dy;
        c->scratch = m->scratch;
        c->scratch_stride = stride;
        c->threads = s->threads;
        c->sgemm = th_blas_sgemm();
        c->seed = m->seed;
        c->bad_index = -1;
    }
    return KH_OK;
}

kh_status th_api_compile(kh_bsession *bs, const kh_model_spec *spec, const kh_compile_opts *opts, kh_bmodel **out) {
    if (!out) return KH_ERR_INVALID;
    *out = NULL;
    if (!bs) return KH_ERR_INVALID;
    th_session *s = &bs->s;
    if (!spec) return th_fail(s, KH_ERR_INVALID, "compile", "no model spec");
    if (!opts || opts->max_batch <= 0) return th_fail(s, KH_ERR_INVALID, "compile", "max_batch must be positive");
    kh_bmodel *b = calloc(1, sizeof *b);
    if (!b) return th_fail(s, KH_ERR_NOMEM, "compile", "out of host memory");
    th_model *m = &b->m;
    m->s = s;
    m->max_batch = opts->max_batch;
    m->seed = opts->seed;
    double t0 = kh_now();
    kh_graph_lower_opts lo = {.max_batch = opts->max_batch,
                              .rnn_scan = 1, /* recurrent layers as scans: one generated time loop each */
                              .deterministic = KH_HAS_MEMBER(kh_compile_opts, opts->struct_size, deterministic)
                                                   ? opts->deterministic : 0};
    char why[256];
    kh_status st = kh_graph_lower(spec, &lo, &m->mg, why, sizeof why);
    if (st != KH_OK) {
        free(b);
        return th_fail(s, st, "compile", "%s", why);
    }
    m->codegen_s += kh_now() - t0;
    for (int f = 0; f < KH_GFN_COUNT && st == KH_OK; f++)
        if (m->mg.fn[f].n_nodes > 0) st = build_fn(m, f);
    if (st == KH_OK) st = s->cuda ? th_gpu()->compile(m) : alloc_storage(m);
    if (st != KH_OK) {
        th_api_model_free(b);
        return st;
    }
    th_log(s, KH_LOG_INFO, "compiled %d functions: codegen %.2f s, cc %.2f s, load %.3f s (%d compiled, %d cached)",
           m->units, m->codegen_s, m->cc_s, m->load_s, m->cache_misses, m->units - m->cache_misses);
    *out = b;
    return KH_OK;
}

void th_api_model_free(kh_bmodel *b) {
    if (!b) return;
    th_model *m = &b->m;
    th_session *s = m->s;
    if (m->cuda) th_gpu()->free_model(m);
    for (int f = 0; f < KH_GFN_COUNT; f++) {
        th_fn_unit *u = &m->fn[f];
        if (u->dl) dlclose(u->dl);
        if (u->persistent) {
            for (int32_t k = 0; k < u->plan.n_persistent; k++) th_free(s, u->persistent[k]);
            th_free(s, u->persistent);
        }
        kh_gplan_free(&u->plan);
        kh_graph_release(&u->g);
        free(u->map);
    }
    if (m->vars) {
        for (int32_t v = 0; v < m->mg.n_vars; v++) {
            th_free(s, m->vars[v].w);
            th_free(s, m->vars[v].s1);
            th_free(s, m->vars[v].s2);
        }
    }
    th_free(s, m->vars);
    th_free(s, m->w);
    th_free(s, m->s1);
    th_free(s, m->s2);
    th_free(s, m->arena);
    th_free(s, m->feed_x);
    th_free(s, m->feed_labels);
    th_free(s, m->feed_dy);
    th_free(s, m->scratch);
    kh_model_graphs_free(&m->mg);
    free(b);
}

// --- weights --------------------------------------------------------------------------------------------------
static kh_status check_slot(th_model *m, int32_t layer, int32_t slot, const kh_tensor *t, const char *op,
                            int32_t *v_out) {
    char why[300];
    kh_status st = kh_model_graphs_check_weight(&m->mg, layer, slot, t, v_out, why, sizeof why);
    return st == KH_OK ? st : th_fail(m->s, st, op, "%s", why);
}

kh_status th_api_set_weight(kh_bmodel *b, int32_t layer, int32_t slot, const kh_tensor *w) {
    if (!b) return KH_ERR_INVALID;
    int32_t v = -1;
    kh_status st = check_slot(M(b), layer, slot, w, "set_weight", &v);
    if (st == KH_OK && M(b)->cuda) return th_gpu()->set_var(M(b), v, w->data);
    if (st == KH_OK) memcpy(M(b)->vars[v].w, w->data, (size_t)M(b)->vars[v].numel * sizeof(float));
    return st;
}

kh_status th_api_get_weight(kh_bmodel *b, int32_t layer, int32_t slot, kh_tensor *w) {
    if (!b) return KH_ERR_INVALID;
    int32_t v = -1;
    kh_status st = check_slot(M(b), layer, slot, w, "get_weight", &v);
    if (st == KH_OK && M(b)->cuda) return th_gpu()->get_var(M(b), v, w->data);
    if (st == KH_OK) memcpy(w->data, M(b)->vars[v].w, (size_t)M(b)->vars[v].numel * sizeof(float));
    return st;
}

// --- staging and running ----------------------------------------------------------------------------------------
static kh_status check_x(th_model *m, const kh_tensor *x, const char *op, int64_t *n) {
    char why[300];
    kh_status st = kh_model_graphs_check_x(&m->mg, m->max_batch, x, n, why, sizeof why);
    return st == KH_OK ? st : th_fail(m->s, st, op, "%s", why);
}

/* Labels index the probabilities in the generated loss code: every one must be a class of the output. */
static kh_status check_y(th_model *m, const kh_tensor *y, int64_t n, const char *op) {
    char why[300];
    kh_status st = kh_model_graphs_check_labels(&m->mg, y, n, why, sizeof why);
    return st == KH_OK ? st : th_fail(m->s, st, op, "%s", why);
}

static kh_status check_out(th_model *m, const kh_tensor *out, int64_t n, int64_t per, const char *op) {
    char why[300];
    kh_status st = kh_model_graphs_check_out(out, n, per, why, sizeof why);
    return st == KH_OK ? st : th_fail(m->s, st, op, "%s", why);
}

static kh_status run(th_model *m, kh_gfn f, int part, const kh_tensor *x, const kh_tensor *y, int64_t n, double lr,
                     uint64_t counter, const char *op) {
    th_fn_unit *u = &m->fn[f];
    if (m->cuda) return th_gpu()->run(m, f, part, n, lr, counter, x ? x->data : NULL, y ? (const int32_t *)y->data : NULL, NULL);
    if (!u->run) return th_fail(m->s, KH_ERR_UNSUPPORTED, op, "the model has no loss (compiled for probes only)");
    if (x) memcpy(m->feed_x, x->data, (size_t)(n * m->mg.input_numel) * 4);
    if (y) memcpy(m->feed_labels, y->data, (size_t)n * 4);
    u->ctx.lr = (float)lr;
    u->ctx.counter = counter;
    if (u->run(&u->ctx, n, part) != 0)
        return th_fail(m->s, KH_ERR_INVALID, op, "embedding index %d outside the table", u->ctx.bad_index);
    return KH_OK;
}

static void add_metrics(th_model *m, kh_gfn f, uint32_t phase, int64_t n) {
    m->met[phase].loss_sum += m->fn[f].ctx.loss_sum;
    m->met[phase].correct += m->fn[f].ctx.correct;
    m->met[phase].samples += n;
}

static kh_status read_node(th_model *m, kh_gfn f, int32_t node, int64_t n, float *dst) {
    if (m->cuda) return th_gpu()->read_node(m, f, node, n, dst);
    const th_fn_unit *u = &m->fn[f];
    int32_t r = node;
    while (u->g.nodes[r].op == KH_GOP_RESHAPE) r = kh_graph_inputs(&u->g, r)[0];
    while (u->plan.e[r].inplace_of >= 0) r = u->plan.e[r].inplace_of;
    const kh_gplan_entry *er = &u->plan.e[r];
    const void *src = er->store == KH_GSTORE_ARENA ? (const void *)(m->arena + er->offset)
                    : er->store == KH_GSTORE_VARIABLE ? (const void *)m->w[kh_model_graphs_var(&m->mg, u->g.nodes[r].attr.layer, u->g.nodes[r].attr.slot)]
                    : er->store == KH_GSTORE_PERSISTENT ? (const void *)u->persistent[er->offset]
                    : u->g.nodes[r].attr.input_id == KH_GIN_DY ? (const void *)m->feed_dy
                    : u->g.nodes[r].attr.input_id == KH_GIN_LABELS ? (const void *)m->feed_labels
                    : (const void *)m->feed_x;
    memcpy(dst, src, (size_t)kh_graph_numel(&u->g, node, n) * sizeof(float));
    return KH_OK;
}

kh_status th_api_train_batch(kh_bmodel *b, const kh_tensor *x, const kh_tensor *y) {
    if (!b) return KH_ERR_INVALID;
    th_model *m = M(b);
    int64_t n = 0;
    kh_status st = check_x(m, x, "train_batch", &n);
    if (st == KH_OK) st = check_y(m, y, n, "train_batch");
    if (st != KH_OK) return st;
    st = run(m, KH_GFN_TRAIN, 0, x, y, n, kh_optimizer_step_lr(&m->mg.opt, m->iterations), m->n_forward, "train_batch");
    if (st != KH_OK) return st;
    m->n_forward++;
    m->iterations++;
    add_metrics(m, KH_GFN_TRAIN, KH_PHASE_TRAIN, n);
    return KH_OK;
}

kh_status th_api_eval_batch(kh_bmodel *b, const kh_tensor *x, const kh_tensor *y) {
    if (!b) return KH_ERR_INVALID;
    th_model *m = M(b);
    int64_t n = 0;
    kh_status st = check_x(m, x, "eval_batch", &n);
    if (st == KH_OK) st = check_y(m, y, n, "eval_batch");
    if (st == KH_OK) st = run(m, KH_GFN_EVAL, 0, x, y, n, 0.0, 0, "eval_batch");
    if (st == KH_OK) add_metrics(m, KH_GFN_EVAL, KH_PHASE_EVAL, n);
    return st;
}

kh_status th_api_predict(kh_bmodel *b, const kh_tensor *x, kh_tensor *out) {
    if (!b) return KH_ERR_INVALID;
    th_model *m = M(b);
    int64_t n = 0;
    kh_status st = check_x(m, x, "predict", &n);
    if (st == KH_OK) st = check_out(m, out, n, m->mg.out_numel, "predict");
    if (st == KH_OK) st = run(m, KH_GFN_PREDICT, 0, x, NULL, n, 0.0, 0, "predict");
    return st == KH_OK ? read_node(m, KH_GFN_PREDICT, m->fn[KH_GFN_PREDICT].g.outputs[KH_GOUT_Y], n, out->data) : st;
}

kh_status th_api_read_metrics(kh_bmodel *b, uint32_t phase, kh_metrics *out, int32_t reset) {
    if (!b) return KH_ERR_INVALID;
    th_model *m = M(b);
    if (!out || phase > KH_PHASE_EVAL) return th_fail(m->s, KH_ERR_INVALID, "read_metrics", "bad phase %u", phase);
    if (m->cuda) return th_gpu()->read_metrics(m, phase, out, reset); /* accumulated on the device */
    *out = m->met[phase];
    if (reset) memset(&m->met[phase], 0, sizeof m->met[phase]);
    return KH_OK;
}

kh_status th_api_compile_info(kh_bmodel *b, kh_compile_info *out) {
    if (!b || !out) return KH_ERR_INVALID;
    const th_model *m = M(b);
    out->cache = m->cache_misses > 0 ? KH_COMPILE_MISS : KH_COMPILE_HIT;
    out->units = m->units;
    out->codegen_s = m->codegen_s;
    out->compile_s = m->cc_s;
    out->load_s = m->load_s;
    return KH_OK;
}

/* Generated C functions run synchronously on the calling thread; the GPU path's run on the session's stream. */
kh_status th_api_sync(kh_bmodel *b) {
    if (!b) return KH_ERR_INVALID;
    return M(b)->cuda ? th_gpu()->sync(M(b)) : KH_OK;
}

kh_status th_api_memory_info(kh_bmodel *b, kh_memory_info *out) {
    if (!b) return KH_ERR_INVALID;
    return kh_mem_count_report(&M(b)->dev_mem, M(b)->cuda != NULL,
                               "cuMemAlloc by theano for this model: weights, optimizer slots, arena, scratch, feeds, "
                               "cuDNN workspace (cuBLAS's and cuDNN's own allocations not counted)", out);
}

// --- probes ---------------------------------------------------------------------------------------------------
kh_status th_api_forward(kh_bmodel *b, const kh_tensor *x, kh_tensor *out) {
    if (!b) return KH_ERR_INVALID;
    th_model *m = M(b);
    int64_t n = 0;
    kh_status st = check_x(m, x, "forward", &n);
    if (st == KH_OK) st = check_out(m, out, n, m->mg.out_numel, "forward");
    if (st != KH_OK) return st;
    m->probe_counter = m->n_forward++;
    st = run(m, KH_GFN_PROBE, 0, x, NULL, n, 0.0, m->probe_counter, "forward");
    if (st != KH_OK) return st;
    m->last_n = (int32_t)n;
    m->have_grad = 0;
    return read_node(m, KH_GFN_PROBE, m->fn[KH_GFN_PROBE].g.outputs[KH_GOUT_Y], n, out->data);
}

kh_status th_api_backward(kh_bmodel *b, const kh_tensor *dy, kh_tensor *dx) {
    if (!b) return KH_ERR_INVALID;
    th_model *m = M(b);
    if (m->last_n <= 0) return th_fail(m->s, KH_ERR_INVALID, "backward", "no forward() before backward()");
    int64_t n = m->last_n;
    if (!dy || !dy->data || dy->dtype != KH_F32 || kh_tensor_numel(dy) != n * m->mg.out_numel)
        return th_fail(m->s, KH_ERR_INVALID, "backward", "dy must be f32 with %lld values", (long long)(n * m->mg.out_numel));
    th_fn_unit *u = &m->fn[KH_GFN_PROBE];
    int32_t dxn = u->g.outputs[KH_GOUT_DX];
    if (dx && dxn >= 0 && check_out(m, dx, n, m->mg.input_numel, "backward") != KH_OK) return KH_ERR_INVALID;
    if (m->cuda) { /* th_cuda_run clears the accumulators and stages dy */
        kh_status st = th_gpu()->run(m, KH_GFN_PROBE, 1, n, 0.0, m->probe_counter, NULL, NULL, dy->data);
        if (st != KH_OK) return st;
        m->have_grad = 1;
        return dx && dxn >= 0 ? read_node(m, KH_GFN_PROBE, dxn, n, dx->data) : KH_OK;
    }
    memcpy(m->feed_dy, dy->data, (size_t)(n * m->mg.out_numel) * 4);
    /* accumulators of a probe start from zero at every backward (no Apply consumes them) */
    for (int32_t k = 0; k < u->plan.n_persistent; k++) memset(u->persistent[k], 0, (size_t)u->plan.persistent_bytes[k]);
    kh_status st = run(m, KH_GFN_PROBE, 1, NULL, NULL, n, 0.0, m->probe_counter, "backward");
    if (st != KH_OK) return st;
    m->have_grad = 1;
    if (dx && dxn >= 0) return read_node(m, KH_GFN_PROBE, dxn, n, dx->data);
    return KH_OK;
}

kh_status th_api_get_grad(kh_bmodel *b, int32_t layer, int32_t slot, kh_tensor *g) {
    if (!b) return KH_ERR_INVALID;
    th_model *m = M(b);
    int32_t v = -1;
    kh_status st = check_slot(m, layer, slot, g, "get_grad", &v);
    if (st != KH_OK) return st;
    if (!m->have_grad) return th_fail(m->s, KH_ERR_INVALID, "get_grad", "no backward() since the last forward()");
    int32_t lowered = m->mg.probe_grads[v];
    int32_t node = lowered >= 0 ? m->fn[KH_GFN_PROBE].map[lowered] : -1;
    if (node < 0) {
        /* the graph's variable table, not m->vars: only the CPU path allocates that */
        memset(g->data, 0, (size_t)m->mg.vars[v].numel * sizeof(float));
        return KH_OK;
    }
    return read_node(m, KH_GFN_PROBE, node, m->last_n, g->data);
}
