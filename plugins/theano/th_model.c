/* th_model.c — theano's part of compiling for the graph runtime (khost/kit/graph_runtime.h): the passes, one
 * memory plan, C source and compiled function per graph function; and its CPU executor's model side: the
 * runtime's host storage plus the scratch of the generated helpers (all allocated at prepare, none during a
 * step), each function's runtime context, the generated functions' runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>

#include "passes/th_passes.h"
#include "th.h"
#include "khost/kit/clock.h"
#include "khost/kit/status.h"

static th_model *TH(kh_grt_model *m) { return (th_model *)m; }
static const char *const g_fn_names[KH_GFN_COUNT] = {"train", "eval", "predict", "probe"};

static kh_status oom(th_model *m, const char *what, int64_t bytes) {
    return th_fail(m->s, KH_ERR_NOMEM, "compile", "out of host memory for %s (%lld bytes)", what, (long long)bytes);
}

// --- the compile step (both devices) ----------------------------------------------------------------------------
/* Optimise, plan, emit and build one function. */
static kh_status build_fn(th_model *m, int f) {
    th_fn_unit *u = &m->fn[f];
    const kh_graph *lg = &m->rt.mg.fn[f];
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
    m->rt.graph[f] = &u->g;
    m->rt.plan[f] = &u->plan;
    m->rt.node_map[f] = u->map;
    if (m->s->cuda) { /* the GPU path emits and compiles every function in th_cuda_compile */
        m->codegen_s += kh_now() - t0;
        th_dump_fn(m->s, g_fn_names[f], lg, &u->g, &rep, NULL, 0);
        return KH_OK;
    }
    th_sb src = {0};
    th_emit_env env = {.g = &u->g, .plan = &u->plan, .mg = &m->rt.mg, .fn = (kh_gfn)f, .scratch_floats = &m->scratch_floats};
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

kh_status th_prepare(kh_grt_model *rtm, const kh_model_spec *spec) {
    th_model *m = TH(rtm);
    m->s = (th_session *)rtm->s;
    m->codegen_s = rtm->lower_s;
    if (!(m->layer_kinds = malloc(((size_t)spec->n_layers + 1) * sizeof *m->layer_kinds)))
        return oom(m, "the layer kinds", (int64_t)spec->n_layers * 4);
    for (int32_t l = 0; l < spec->n_layers; l++) m->layer_kinds[l] = spec->layers[l].kind;
    kh_status st = KH_OK;
    for (int f = 0; f < KH_GFN_COUNT && st == KH_OK; f++)
        if (m->rt.mg.fn[f].n_nodes > 0) st = build_fn(m, f);
    return st;
}

void th_release(kh_grt_model *rtm) {
    th_model *m = TH(rtm);
    if (m->prof_dl) dlclose(m->prof_dl);
    m->prof_dl = NULL;
    m->prof_run = NULL;
    free(m->layer_kinds);
    m->layer_kinds = NULL;
    for (int f = 0; f < KH_GFN_COUNT; f++) {
        th_fn_unit *u = &m->fn[f];
        if (u->dl) dlclose(u->dl);
        kh_gplan_free(&u->plan);
        kh_graph_release(&u->g);
        free(u->map);
    }
}

void th_ready(kh_grt_model *rtm) {
    th_model *m = TH(rtm);
    th_log(m->s, KH_LOG_INFO, "compiled %d functions: codegen %.2f s, cc %.2f s, load %.3f s (%d compiled, %d cached)",
           m->units, m->codegen_s, m->cc_s, m->load_s, m->cache_misses, m->units - m->cache_misses);
}

kh_status th_api_compile_info(kh_bmodel *b, kh_compile_info *out) {
    if (!b || !out) return KH_ERR_INVALID;
    const th_model *m = TH(kh_grt_model_of(b));
    out->cache = m->cache_misses > 0 ? KH_COMPILE_MISS : KH_COMPILE_HIT;
    out->units = m->units;
    out->codegen_s = m->codegen_s;
    out->compile_s = m->cc_s;
    out->load_s = m->load_s;
    return KH_OK;
}

// --- the CPU executor's model side ------------------------------------------------------------------------------
kh_status th_cpu_prepare(kh_grt_model *rtm) {
    th_model *m = TH(rtm);
    th_session *s = m->s;
    kh_status st = kh_grt_host_alloc(rtm);
    if (st != KH_OK) return st;
    /* scratch_floats is what one thread needs; every thread of the parallel loops has its own */
    int64_t stride = (m->scratch_floats + 15) / 16 * 16;
    if (stride > 0 && !(m->scratch = th_alloc(s, (size_t)(stride * s->rt.threads) * sizeof(float))))
        return oom(m, "scratch", stride * s->rt.threads * 4);
    for (int f = 0; f < KH_GFN_COUNT; f++) {
        th_fn_unit *u = &m->fn[f];
        if (!u->run) continue;
        th_rt_ctx *c = &u->ctx;
        c->arena = rtm->arena;
        c->w = rtm->w;
        c->s1 = rtm->s1;
        c->s2 = rtm->s2;
        c->persistent = rtm->persistent[f];
        c->feed_x = rtm->feed_x;
        c->labels = rtm->feed_labels;
        c->feed_dy = rtm->feed_dy;
        c->scratch = m->scratch;
        c->scratch_stride = stride;
        c->threads = s->rt.threads;
        c->sgemm = th_blas_sgemm();
        c->seed = rtm->seed;
        c->bad_index = -1;
    }
    return KH_OK;
}

void th_cpu_release(kh_grt_model *rtm) { th_free(TH(rtm)->s, TH(rtm)->scratch); }

kh_status th_cpu_run(kh_grt_model *rtm, kh_gfn f, int part, int64_t n, double lr, uint64_t counter,
                         const void *x, const int32_t *labels, const float *dy) {
    th_model *m = TH(rtm);
    th_fn_unit *u = &m->fn[f];
    kh_grt_host_stage(rtm, n, x, labels, dy);
    u->ctx.lr = (float)lr;
    u->ctx.counter = counter;
    static const char *const ops[KH_GFN_COUNT] = {"train_batch", "eval_batch", "predict", "forward"};
    /* one branch per call: the profile call's variant only while it times steps (th_profile.c) */
    int rc = m->prof_node_s && f == KH_GFN_TRAIN ? m->prof_run(&u->ctx, n, part, m->prof_node_s, kh_now)
                                                 : u->run(&u->ctx, n, part);
    if (rc != 0)
        return th_fail(m->s, KH_ERR_INVALID, f == KH_GFN_PROBE && part == 1 ? "backward" : ops[f],
                       "embedding index %d outside the table", u->ctx.bad_index);
    kh_grt_host_add_metrics(rtm, f, u->ctx.loss_sum, u->ctx.correct, n);
    return KH_OK;
}
