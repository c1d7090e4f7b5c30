/* tf_exec.c — the CPU executor: TensorFlow's executor logic over one compiled graph function.
 *
 * Every node has a count of pending predecessors (data edges plus the memory plan's control edges). A run
 * starts from the nodes with none; when a node finishes, each successor whose count reaches zero is ready.
 * Cheap ready nodes run inline on the thread that readied them (a small local stack, no hand-off); expensive
 * ones (MatMul, convolutions, big element-wise ops: estimated flops above `inline_cost`) go to the pool so
 * that independent branches — the two directions of a bidirectional LSTM, a weight gradient beside an input
 * gradient — run at once; the last expensive one readied stays on the current thread, as TensorFlow keeps
 * one ready op inline to avoid a hand-off on a serial chain. Big kernels split themselves over the same pool
 * (intra-op), so inter-op and intra-op parallelism share the device's threads and never oversubscribe it.
 * With one thread the nodes simply run in graph order (TensorFlow's single-threaded executor).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf.h"
#include "khost/kit/clock.h"

void tf_pool_notify(tf_pool *p);

// --- preparation ---------------------------------------------------------------------------------------------
static kh_status build_part(tf_fn *f, tf_part *pt, int phase_lo, int phase_hi) {
    int32_t n = f->n;
    pt->member = calloc((size_t)n + 1, 1);
    pt->init_pending = calloc((size_t)n + 1, sizeof *pt->init_pending);
    pt->roots = malloc(((size_t)n + 1) * sizeof *pt->roots);
    if (!pt->member || !pt->init_pending || !pt->roots) return KH_ERR_NOMEM;
    for (int32_t i = 0; i < n; i++) {
        int ph = f->g->nodes[i].phase;
        pt->member[i] = ph >= phase_lo && ph <= phase_hi;
        pt->n_nodes += pt->member[i];
    }
    for (int32_t i = 0; i < n; i++) {
        if (!pt->member[i]) continue;
        for (int32_t k = f->succ_off[i]; k < f->succ_off[i + 1]; k++)
            if (pt->member[f->succ[k]]) pt->init_pending[f->succ[k]]++;
    }
    for (int32_t i = 0; i < n; i++)
        if (pt->member[i] && pt->init_pending[i] == 0) pt->roots[pt->n_roots++] = i;
    return KH_OK;
}

kh_status tf_exec_prepare(tf_model *m, tf_fn *f) {
    const kh_graph *g = f->g;
    int32_t n = g->n_nodes, *coff = NULL, *cons = NULL;
    f->n = n;
    if (kh_graph_consumers(g, &coff, &cons) != KH_OK) return KH_ERR_NOMEM;
    /* successors = consumers + the plan's control edges */
    f->succ_off = calloc((size_t)n + 1, sizeof *f->succ_off);
    f->succ = malloc(((size_t)coff[n] + (size_t)f->plan.n_ctrl + 1) * sizeof *f->succ);
    int32_t *fill = calloc((size_t)n + 1, sizeof *fill);
    f->expensive = calloc((size_t)n + 1, 1);
    f->kernel = calloc((size_t)n + 1, sizeof *f->kernel);
    f->flops = calloc((size_t)n + 1, sizeof *f->flops);
    f->pending = calloc((size_t)n + 1, sizeof *f->pending);
    kh_status st = f->succ_off && f->succ && fill && f->expensive && f->kernel && f->flops && f->pending ? KH_OK
                                                                                                        : KH_ERR_NOMEM;
    if (st == KH_OK) {
        for (int32_t i = 0; i < n; i++) f->succ_off[i + 1] = coff[i + 1] - coff[i];
        for (int32_t e = 0; e < f->plan.n_ctrl; e++) f->succ_off[f->plan.ctrl_from[e] + 1]++;
        for (int32_t i = 0; i < n; i++) f->succ_off[i + 1] += f->succ_off[i];
        for (int32_t i = 0; i < n; i++)
            for (int32_t k = coff[i]; k < coff[i + 1]; k++) f->succ[f->succ_off[i] + fill[i]++] = cons[k];
        for (int32_t e = 0; e < f->plan.n_ctrl; e++) {
            int32_t a = f->plan.ctrl_from[e];
            f->succ[f->succ_off[a] + fill[a]++] = f->plan.ctrl_to[e];
        }
        for (int32_t i = 0; i < n; i++) {
            f->flops[i] = tf_op_flops(g, i);
            f->expensive[i] = f->flops[i] > m->s->set.inline_cost;
            f->kernel[i] = tf_cpu_kernel(g->nodes[i].op);
        }
        int probe = f == &m->fn[KH_GFN_PROBE];
        f->n_parts = probe ? 2 : 1;
        st = build_part(f, &f->parts[0], 0, probe ? 0 : 99);
        if (st == KH_OK && probe) st = build_part(f, &f->parts[1], 1, 99);
    }
    free(fill);
    free(coff);
    free(cons);
    return st;
}

void tf_exec_release(tf_model *m, tf_fn *f) {
    (void)m;
    free(f->succ_off);
    free(f->succ);
    free(f->expensive);
    free(f->kernel);
    free(f->flops);
    free(f->pending);
    for (int p = 0; p < 2; p++) {
        free(f->parts[p].member);
        free(f->parts[p].init_pending);
        free(f->parts[p].roots);
    }
}

// --- running -------------------------------------------------------------------------------------------------
typedef struct run_ctx {
    tf_run *r;
    const tf_part *pt;
} run_ctx;

static void run_node(tf_run *r, int32_t i) {
    tf_kernel k = r->f->kernel[i];
    if (k && atomic_load(&r->failed) == 0) {
        double *prof = r->f->prof_s; /* one predictable branch when not profiling */
        double t0 = prof ? kh_now() : 0;
        kh_status st = k(r, i);
        if (st != KH_OK) tf_run_fail(r, i, st, "failed");
        if (prof) prof[i] += kh_now() - t0; /* a node runs on one thread per run: no race on prof[i] */
    }
}

static void run_from(run_ctx *c, int32_t first);

static void node_task(void *arg, int32_t i) { run_from(arg, i); }

/* Run `first` and every cheap node it readies on this thread; expensive ones go to the pool except the last. */
static void run_from(run_ctx *c, int32_t first) {
    tf_run *r = c->r;
    tf_fn *f = r->f;
    tf_pool *pool = r->m->s->pool;
    int32_t stack[64];
    int32_t top = 0;
    stack[top++] = first;
    while (top > 0) {
        int32_t i = stack[--top];
        run_node(r, i);
        int32_t keep = -1;
        for (int32_t k = f->succ_off[i]; k < f->succ_off[i + 1]; k++) {
            int32_t s = f->succ[k];
            if (!c->pt->member[s] || atomic_fetch_sub(&f->pending[s], 1) != 1) continue;
            if (f->expensive[s]) {
                if (keep >= 0) tf_pool_submit(pool, node_task, c, keep);
                keep = s;
            } else if (top < (int32_t)(sizeof stack / sizeof stack[0])) {
                stack[top++] = s;
            } else {
                tf_pool_submit(pool, node_task, c, s);
            }
        }
        if (keep >= 0) {
            if (top < (int32_t)(sizeof stack / sizeof stack[0])) stack[top++] = keep;
            else tf_pool_submit(pool, node_task, c, keep);
        }
        if (atomic_fetch_sub(&r->remaining, 1) == 1) tf_pool_notify(pool);
    }
}

kh_status tf_exec_run(tf_model *m, tf_fn *f, int part, int64_t n, double lr, uint64_t counter) {
    const tf_part *pt = &f->parts[part];
    tf_run r;
    memset(&r, 0, sizeof r);
    r.m = m;
    r.f = f;
    r.n = n;
    r.lr = lr;
    r.drop_key_counter = counter;
    atomic_init(&r.failed, 0);
    atomic_init(&r.remaining, pt->n_nodes);
    tf_pool *pool = m->s->pool;
    if (!pool || tf_pool_workers(pool) == 0 || m->s->set.inter_op <= 1) {
        for (int32_t i = 0; i < f->n; i++)
            if (pt->member[i]) run_node(&r, i);
    } else {
        for (int32_t i = 0; i < f->n; i++) atomic_store_explicit(&f->pending[i], pt->init_pending[i], memory_order_relaxed);
        run_ctx c = {&r, pt};
        /* roots: the expensive ones to the pool, the cheap ones here */
        for (int32_t k = 0; k < pt->n_roots; k++)
            if (f->expensive[pt->roots[k]]) tf_pool_submit(pool, node_task, &c, pt->roots[k]);
        for (int32_t k = 0; k < pt->n_roots; k++)
            if (!f->expensive[pt->roots[k]]) run_from(&c, pt->roots[k]);
        tf_pool_work_until_zero(pool, &r.remaining);
    }
    int32_t failed = atomic_load(&r.failed);
    if (failed != 0)
        return tf_fail(m->s, (kh_status)failed, "run", "%s", r.err);
    return KH_OK;
}
