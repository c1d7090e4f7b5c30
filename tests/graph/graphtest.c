/* tests/graph/graphtest.c — helpers for the graph layer's tests: a float64 variable store for the reference
 * interpreter, and evaluation of a lowered function against the reference kit. */
#include "graphtest.h"

#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "khost/kit/rng.h"

static double *store_var(void *ctx, int32_t layer, int32_t slot) {
    gt_store *s = ctx;
    int32_t v = kh_model_graphs_var(s->mg, layer, slot);
    return v < 0 ? NULL : s->w[v];
}

static double *store_slot(void *ctx, int32_t layer, int32_t slot, int k) {
    gt_store *s = ctx;
    int32_t v = kh_model_graphs_var(s->mg, layer, slot);
    return v < 0 || k < 0 || k > 1 ? NULL : s->slot[k][v];
}

int gt_store_init(gt_store *s, const kh_model_graphs *mg, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->mg = mg;
    s->n = mg->n_vars;
    s->w = calloc((size_t)s->n + 1, sizeof *s->w);
    s->slot[0] = calloc((size_t)s->n + 1, sizeof *s->slot[0]);
    s->slot[1] = calloc((size_t)s->n + 1, sizeof *s->slot[1]);
    if (!s->w || !s->slot[0] || !s->slot[1]) return 0;
    kh_rng r;
    kh_rng_seed(&r, seed);
    for (int32_t v = 0; v < s->n; v++) {
        int64_t n = mg->vars[v].numel;
        s->w[v] = calloc((size_t)n, sizeof(double));
        s->slot[0][v] = calloc((size_t)n, sizeof(double));
        s->slot[1][v] = calloc((size_t)n, sizeof(double));
        if (!s->w[v] || !s->slot[0][v] || !s->slot[1][v]) return 0;
        for (int64_t k = 0; k < n; k++) s->w[v][k] = kh_rng_uniform(&r) * 0.8 - 0.4;
    }
    return 1;
}

void gt_store_free(gt_store *s) {
    for (int32_t v = 0; v < s->n; v++) {
        free(s->w[v]);
        free(s->slot[0][v]);
        free(s->slot[1][v]);
    }
    free(s->w);
    free(s->slot[0]);
    free(s->slot[1]);
    memset(s, 0, sizeof *s);
}

kh_graph_ref_env gt_env(gt_store *s) {
    kh_graph_ref_env e;
    memset(&e, 0, sizeof e);
    e.var = store_var;
    e.slot = store_slot;
    e.ctx = s;
    e.opt = s->mg->opt;
    return e;
}

double **gt_eval(const kh_graph *g, int64_t n, const kh_graph_ref_env *env) {
    double **v = calloc((size_t)g->n_nodes + 1, sizeof *v);
    if (!v) return NULL;
    char err[256];
    kh_status st = kh_graph_eval_ref(g, n, env, v, err, sizeof err);
    CHECK(st == KH_OK, "eval_ref: %s", err);
    if (st != KH_OK) {
        gt_values_free(g, v);
        return NULL;
    }
    return v;
}

void gt_values_free(const kh_graph *g, double **v) {
    if (!v) return;
    for (int32_t i = 0; i < g->n_nodes; i++) free(v[i]);
    free(v);
}

double gt_rel_err(const double *a, const double *b, int64_t n) {
    double d = 0.0, s = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double e = a[i] - b[i];
        if (e < 0) e = -e;
        if (!(e <= d)) d = e;
        double m = b[i] < 0 ? -b[i] : b[i];
        if (m > s) s = m;
    }
    return d / (s > 1e-12 ? s : 1e-12);
}
