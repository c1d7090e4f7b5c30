/* tests/theano_passes/tptest.c — see tptest.h. */
#include "tptest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "khost/kit/rng.h"

// --- building ---------------------------------------------------------------------------------------------------
static int32_t added(kh_graph *g, int32_t id, uint32_t op) {
    CHECK(id >= 0, "adding %s: %s", kh_gop_name(op), g->err);
    return id;
}

int32_t tp_add(kh_graph *g, uint32_t op, const int32_t *in, int32_t n_in, const kh_gattr *a) {
    return added(g, kh_graph_add(g, op, in, n_in, a, 0, 0, NULL, 0), op);
}

int32_t tp_input(kh_graph *g, int32_t id, uint32_t dtype, const int64_t *dims, int32_t rank) {
    kh_gattr a = kh_gattr_none();
    a.input_id = id;
    return added(g, kh_graph_add(g, KH_GOP_INPUT, NULL, 0, &a, dtype, rank, dims, KH_GVAL_BATCHED), KH_GOP_INPUT);
}

int32_t tp_var(kh_graph *g, int32_t layer, int32_t slot, const int64_t *dims, int32_t rank) {
    kh_gattr a = kh_gattr_none();
    a.layer = layer;
    a.slot = slot;
    return added(g, kh_graph_add(g, KH_GOP_VARIABLE, NULL, 0, &a, KH_F32, rank, dims, 0), KH_GOP_VARIABLE);
}

int32_t tp_zeros(kh_graph *g, const int64_t *dims, int32_t rank, int batched) {
    return added(g, kh_graph_add(g, KH_GOP_ZEROS, NULL, 0, NULL, KH_F32, rank, dims, batched ? KH_GVAL_BATCHED : 0),
                 KH_GOP_ZEROS);
}

int32_t tp_reshape(kh_graph *g, int32_t x, const int64_t *dims, int32_t rank) {
    uint32_t fl = x >= 0 && x < g->n_nodes ? g->nodes[x].flags & KH_GVAL_BATCHED : 0;
    return added(g, kh_graph_add(g, KH_GOP_RESHAPE, &x, 1, NULL, 0, rank, dims, fl), KH_GOP_RESHAPE);
}

void tp_output(kh_graph *g, int k, int32_t node) {
    if (node < 0) return;
    g->outputs[k] = node;
    g->nodes[node].flags |= KH_GVAL_OUTPUT;
    if (g->n_outputs < k + 1) g->n_outputs = k + 1;
}

int32_t tp_elemwise(kh_graph *g, const kh_gexpr *e, const int32_t *in, int32_t n_in) {
    kh_gattr a = kh_gattr_none();
    a.expr = kh_graph_add_expr(g, e);
    CHECK(a.expr >= 0, "program: %s", g->err);
    if (a.expr < 0) return -1;
    return tp_add(g, KH_GOP_ELEMWISE, in, n_in, &a);
}

// --- reading ----------------------------------------------------------------------------------------------------
int32_t tp_count(const kh_graph *g, uint32_t op) {
    int32_t c = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) c += g->nodes[i].op == op;
    return c;
}

const char *tp_ops(const kh_graph *g) {
    static char buf[1024];
    int32_t counts[KH_GOP_END];
    kh_graph_op_counts(g, counts);
    size_t k = 0;
    buf[0] = 0;
    for (uint32_t op = 1; op < KH_GOP_END && k < sizeof buf - 40; op++)
        if (counts[op]) k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s %d", k ? ", " : "", kh_gop_name(op), counts[op]);
    return buf;
}

int tp_fused_form(const kh_graph *g) {
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const kh_gnode *n = &g->nodes[i];
        if (n->op == KH_GOP_ELEMWISE) {
            const kh_gexpr *e = &g->exprs[n->attr.expr];
            if (e->n_in > KH_GEXPR_MAX_IN || e->n_ops > KH_GEXPR_MAX_OPS || e->n_in != n->n_in) return 0;
        } else if (kh_gop_elementwise(n->op) && n->dtype == KH_F32 &&
                   !(n->op == KH_GOP_ADDN && (n->n_in > KH_GEXPR_MAX_IN || n->n_in - 1 > KH_GEXPR_MAX_OPS))) {
            return 0;
        }
    }
    return 1;
}

static void dump_line(void *ctx, const char *text) {
    (void)ctx;
    fprintf(stderr, "    %s\n", text);
}

void tp_dump(const kh_graph *g, const char *title) {
    fprintf(stderr, "  %s (%d nodes):\n", title, g->n_nodes);
    kh_graph_dump(g, dump_line, NULL);
}

// --- rewriting --------------------------------------------------------------------------------------------------
kh_status tp_pass(th_pass_fn fn, const kh_graph *src, kh_graph *dst, int32_t *map, int32_t *changed) {
    th_rw r;
    *changed = 0;
    for (int32_t i = 0; i < src->n_nodes; i++) map[i] = i;
    kh_status st = th_rw_begin(&r, src, dst);
    if (st == KH_OK) st = fn(&r, changed);
    if (st == KH_OK) st = th_rw_end(&r, map, src->n_nodes);
    CHECK(st == KH_OK, "pass failed (status %d): %s", (int)st, r.err[0] ? r.err : "(no message)");
    if (st != KH_OK) {
        th_rw_abort(&r);
        for (int32_t i = 0; i < src->n_nodes; i++) map[i] = -1;
    }
    return st;
}

// --- equivalence ------------------------------------------------------------------------------------------------
tp_opts tp_default_opts(void) {
    tp_opts o;
    memset(&o, 0, sizeof o);
    o.n = 2;
    o.seed = 20240601;
    o.index_below = 5;
    o.label_below = 2;
    o.opt = (kh_optimizer_spec){.kind = KH_OPT_RMSPROP, .lr = 0.01f, .rho = 0.9f, .beta_1 = 0.9f, .beta_2 = 0.999f,
                                .epsilon = 1e-7f};
    o.tol = 1e-12;
    return o;
}

double tp_rel_err(const double *x, const double *y, int64_t n) {
    double d = 0.0, s = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if ((isnan(x[i]) && isnan(y[i])) || (isinf(y[i]) && x[i] == y[i])) continue;
        double e = fabs(x[i] - y[i]);
        if (isnan(e)) e = INFINITY;
        if (e > d) d = e;
        if (isfinite(y[i]) && fabs(y[i]) > s) s = fabs(y[i]);
    }
    return d / (s > 1e-12 ? s : 1e-12);
}

/* Variables (weights and two optimizer slots each), generated on first use from (seed, layer, slot, k): two
 * stores of the same seed start identical, whatever order the graphs ask in. */
typedef struct tp_svar {
    int32_t layer, slot;
    int64_t numel;
    double *p[3]; /* weights, slot 0, slot 1 */
} tp_svar;

typedef struct tp_store {
    uint64_t seed;
    int32_t n, cap;
    tp_svar *v;
} tp_store;

static void store_register(tp_store *s, const kh_graph *g) {
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const kh_gnode *nd = &g->nodes[i];
        if (nd->op != KH_GOP_VARIABLE) continue;
        int found = 0;
        for (int32_t k = 0; k < s->n && !found; k++) found = s->v[k].layer == nd->attr.layer && s->v[k].slot == nd->attr.slot;
        if (found) continue;
        if (s->n == s->cap) {
            int32_t nc = s->cap ? 2 * s->cap : 16;
            tp_svar *q = realloc(s->v, (size_t)nc * sizeof *q);
            if (!q) continue;
            s->v = q;
            s->cap = nc;
        }
        tp_svar *v = &s->v[s->n++];
        memset(v, 0, sizeof *v);
        v->layer = nd->attr.layer;
        v->slot = nd->attr.slot;
        v->numel = kh_graph_numel(g, i, 1);
    }
}

static double *store_get(tp_store *s, int32_t layer, int32_t slot, int k) {
    for (int32_t j = 0; j < s->n; j++) {
        tp_svar *v = &s->v[j];
        if (v->layer != layer || v->slot != slot) continue;
        if (!v->p[k]) {
            if (!(v->p[k] = malloc((size_t)v->numel * sizeof(double) + 1))) return NULL;
            kh_rng r;
            kh_rng_seed(&r, s->seed ^ ((uint64_t)(layer + 1) * 0x9E3779B97F4A7C15ull) ^
                                ((uint64_t)(slot + 1) * 0xC2B2AE3D27D4EB4Full) ^ ((uint64_t)(k + 1) * 0x165667B19E3779F9ull));
            for (int64_t e = 0; e < v->numel; e++) /* weights in [-0.4, 0.4); slots positive (running squares) */
                v->p[k][e] = k == 0 ? kh_rng_uniform(&r) * 0.8 - 0.4 : 0.05 + 0.45 * kh_rng_uniform(&r);
        }
        return v->p[k];
    }
    return NULL;
}

static double *store_var(void *ctx, int32_t layer, int32_t slot) { return store_get(ctx, layer, slot, 0); }

static double *store_slot(void *ctx, int32_t layer, int32_t slot, int k) {
    return k < 0 || k > 1 ? NULL : store_get(ctx, layer, slot, k + 1);
}

static void store_free(tp_store *s) {
    for (int32_t j = 0; j < s->n; j++)
        for (int k = 0; k < 3; k++) free(s->v[j].p[k]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* Feeds for every Input of a and b: KH_GIN_X (f32 in [-1, 1) or i32 indices), labels, the output gradient. */
static void make_feeds(const kh_graph *a, const kh_graph *b, const tp_opts *o, double *feeds[3]) {
    int64_t need[3] = {0, 0, 0};
    uint32_t dt[3] = {KH_F32, KH_I32, KH_F32};
    const kh_graph *gs[2] = {a, b};
    for (int k = 0; k < 2; k++)
        for (int32_t i = 0; i < gs[k]->n_nodes; i++) {
            const kh_gnode *nd = &gs[k]->nodes[i];
            if (nd->op != KH_GOP_INPUT || nd->attr.input_id < 0 || nd->attr.input_id > 2) continue;
            int64_t m = kh_graph_numel(gs[k], i, o->n);
            if (m > need[nd->attr.input_id]) need[nd->attr.input_id] = m;
            if (nd->attr.input_id == KH_GIN_X) dt[0] = nd->dtype;
        }
    kh_rng r;
    kh_rng_seed(&r, o->seed * 31 + 7);
    for (int id = 0; id < 3; id++) {
        feeds[id] = need[id] ? malloc((size_t)need[id] * sizeof(double)) : NULL;
        for (int64_t e = 0; feeds[id] && e < need[id]; e++) {
            if (id == KH_GIN_LABELS) feeds[id][e] = (double)kh_rng_below(&r, (uint64_t)o->label_below);
            else if (dt[id] == KH_I32) feeds[id][e] = (double)kh_rng_below(&r, (uint64_t)o->index_below);
            else feeds[id][e] = kh_rng_uniform(&r) * 2.0 - 1.0;
        }
    }
}

static double **eval(const kh_graph *g, const tp_opts *o, tp_store *s, double *const feeds[3], const char *what,
                     const char *which) {
    double **v = calloc((size_t)g->n_nodes + 1, sizeof *v);
    if (!v) return NULL;
    kh_graph_ref_env env;
    memset(&env, 0, sizeof env);
    for (int k = 0; k < 3; k++) env.feeds[k] = feeds[k];
    env.var = store_var;
    env.slot = store_slot;
    env.ctx = s;
    env.seed = o->seed;
    env.counter = 5;
    env.lr = o->lr > 0 ? o->lr : o->opt.lr;
    env.opt = o->opt;
    char err[256] = "";
    kh_status st = kh_graph_eval_ref(g, o->n, &env, v, err, sizeof err);
    CHECK(st == KH_OK, "%s: evaluating the %s graph: %s", what, which, err);
    if (st != KH_OK) {
        for (int32_t i = 0; i < g->n_nodes; i++) free(v[i]);
        free(v);
        return NULL;
    }
    return v;
}

static void values_free(const kh_graph *g, double **v) {
    if (!v) return;
    for (int32_t i = 0; i < g->n_nodes; i++) free(v[i]);
    free(v);
}

tp_equiv_result tp_equiv(const kh_graph *a, const kh_graph *b, const int32_t *map, const tp_opts *o,
                         const char *what) {
    tp_equiv_result res = {0.0, 0, 0, -1, 0};
    tp_store sa = {.seed = o->seed}, sb = {.seed = o->seed};
    store_register(&sa, a);
    store_register(&sa, b);
    store_register(&sb, a);
    store_register(&sb, b);
    double *feeds[3];
    make_feeds(a, b, o, feeds);
    double **va = eval(a, o, &sa, feeds, what, "original");
    double **vb = va ? eval(b, o, &sb, feeds, what, "rewritten") : NULL;
    double tol = o->tol > 0 ? o->tol : 1e-12;
    int fails = 0, ok = va && vb;
    for (int32_t i = 0; ok && i < a->n_nodes; i++) {
        int32_t j = map[i];
        if (j < 0) continue;
        int64_t na = kh_graph_numel(a, i, o->n), nb = kh_graph_numel(b, j, o->n);
        if (na != nb) {
            CHECK(na == nb, "%s: node %d (%s) has %lld elements, its image %d (%s) %lld", what, i,
                  kh_gop_name(a->nodes[i].op), (long long)na, j, kh_gop_name(b->nodes[j].op), (long long)nb);
            fails++;
            continue;
        }
        double e = tp_rel_err(vb[j], va[i], na);
        res.nodes++;
        if (e > res.max_err || (isnan(e) && !isnan(res.max_err))) {
            res.max_err = e;
            res.worst = i;
        }
        if (!(e <= tol) && fails++ < 6)
            CHECK(e <= tol, "%s: node %d (%s, layer %d) differs from its image %d (%s) by %.3e", what, i,
                  kh_gop_name(a->nodes[i].op), a->nodes[i].attr.layer, j, kh_gop_name(b->nodes[j].op), e);
        else if (!(e <= tol))
            kh_test_failed++;
    }
    /* every variable and slot after the Apply ops (generated on demand: never touched means equal) */
    for (int32_t k = 0; ok && k < sa.n; k++)
        for (int p = 0; p < 3; p++) {
            const tp_svar *x = &sa.v[k], *y = &sb.v[k];
            if (!x->p[p] && !y->p[p]) continue;
            const double *px = store_get(&sa, x->layer, x->slot, p), *py = store_get(&sb, y->layer, y->slot, p);
            if (!px || !py) continue;
            double e = tp_rel_err(py, px, x->numel);
            res.vars++;
            if (e > res.max_err) {
                res.max_err = e;
                res.worst = -1;
            }
            if (!(e <= tol) && fails++ < 6)
                CHECK(e <= tol, "%s: variable (layer %d, slot %d) %s after the run differs by %.3e", what, x->layer,
                      x->slot, p == 0 ? "weights" : p == 1 ? "slot 0" : "slot 1", e);
            else if (!(e <= tol))
                kh_test_failed++;
        }
    if (ok && fails == 0) kh_test_passed++;
    res.ok = ok && fails == 0;
    if (!o->quiet || !res.ok)
        printf("  %-58s %4d nodes, %2d vars compared, max rel err %.1e\n", what, res.nodes, res.vars, res.max_err);
    values_free(a, va);
    values_free(b, vb);
    for (int k = 0; k < 3; k++) free(feeds[k]);
    store_free(&sa);
    store_free(&sb);
    return res;
}
