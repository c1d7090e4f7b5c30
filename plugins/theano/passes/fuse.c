/* passes/fuse.c — element-wise fusion (Theano's elemwise fusion into Composite ops): a chain of element-wise
 * nodes over one index space becomes one Elemwise node whose program computes the whole chain per element,
 * so intermediate values never reach memory. A producer joins its consumer's group when it is element-wise,
 * has no other reader, is not an output (flagged or in outputs[]) nor another node's shape_of, and has the
 * group's shape (a bias-like vector stays an input); a group is bounded by KH_GEXPR_MAX_IN inputs and
 * KH_GEXPR_MAX_OPS instructions. Every element-wise node ends up in exactly one Elemwise node, so the code
 * generators have one element-wise form to emit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "th_passes.h"

static int instrs(const kh_graph *g, int32_t i) {
    const kh_gnode *n = &g->nodes[i];
    if (n->op == KH_GOP_ELEMWISE) return g->exprs[n->attr.expr].n_ops;
    if (n->op == KH_GOP_ADDN) return n->n_in - 1;
    return 1;
}

static int candidate(const kh_graph *g, int32_t i) {
    const kh_gnode *n = &g->nodes[i];
    if (!kh_gop_elementwise(n->op) || n->dtype != KH_F32) return 0;
    if (n->op == KH_GOP_ADDN && (n->n_in < 2 || n->n_in - 1 > KH_GEXPR_MAX_OPS || n->n_in > KH_GEXPR_MAX_IN)) return 0;
    return 1;
}

/* Whether input j of node i is read as a vector over the last axis. */
static int vec_input(const kh_graph *g, int32_t i, int j) {
    const kh_gnode *n = &g->nodes[i];
    if (n->op == KH_GOP_BIAS_ADD) return j == 1;
    if (n->op == KH_GOP_ELEMWISE) return g->exprs[n->attr.expr].vec[j];
    return 0;
}

typedef struct group {
    int32_t n_ext;
    int32_t ext[KH_GEXPR_MAX_IN * 4];
    uint8_t vec[KH_GEXPR_MAX_IN * 4];
    int32_t ops;
} group;

static int find_ext(const group *gr, int32_t node) {
    for (int k = 0; k < gr->n_ext; k++)
        if (gr->ext[k] == node) return k;
    return -1;
}

/* External inputs of the group if `add` joins it (its slot `at` replaced by its own inputs). */
static int try_join(const kh_graph *g, group *gr, int at, int32_t add) {
    group t = *gr;
    t.ext[at] = t.ext[--t.n_ext];
    t.vec[at] = t.vec[t.n_ext];
    const int32_t *in = kh_graph_inputs(g, add);
    for (int j = 0; j < g->nodes[add].n_in; j++) {
        if (find_ext(&t, in[j]) >= 0) continue;
        if (t.n_ext >= KH_GEXPR_MAX_IN) return 0;
        t.ext[t.n_ext] = in[j];
        t.vec[t.n_ext++] = (uint8_t)vec_input(g, add, j);
    }
    t.ops += instrs(g, add);
    if (t.ops > KH_GEXPR_MAX_OPS) return 0;
    *gr = t;
    return 1;
}

typedef struct build {
    const kh_graph *g;
    const char *in_group; /* 1: member of the group being built */
    const group *gr;
    kh_gexpr *e;
} build;

static int32_t operand(build *b, int32_t node);

static int32_t push(kh_gexpr *e, uint32_t op, int32_t a, int32_t bb, float rate, int32_t salt) {
    e->ops[e->n_ops] = (kh_gexpr_op){op, a, bb, rate, salt};
    return e->n_ops++;
}

static int32_t member(build *b, int32_t i) {
    const kh_gnode *n = &b->g->nodes[i];
    const int32_t *in = kh_graph_inputs(b->g, i);
    int32_t a[KH_GEXPR_MAX_IN * 4];
    for (int j = 0; j < n->n_in; j++) a[j] = operand(b, in[j]);
    switch (n->op) {
    case KH_GOP_ELEMWISE: {
        const kh_gexpr *src = &b->g->exprs[n->attr.expr];
        int32_t base = b->e->n_ops;
        for (int k = 0; k < src->n_ops; k++) {
            kh_gexpr_op o = src->ops[k];
            o.a = o.a >= 0 ? o.a + base : a[-1 - o.a];
            o.b = o.b >= 0 ? o.b + base : (o.b < 0 && -1 - o.b < src->n_in ? a[-1 - o.b] : 0);
            b->e->ops[b->e->n_ops++] = o;
        }
        return b->e->n_ops - 1;
    }
    case KH_GOP_ADDN: {
        int32_t acc = push(b->e, KH_GOP_ADD, a[0], a[1], 0, 0);
        for (int j = 2; j < n->n_in; j++) acc = push(b->e, KH_GOP_ADD, acc, a[j], 0, 0);
        return acc;
    }
    case KH_GOP_BIAS_ADD: return push(b->e, KH_GOP_ADD, a[0], a[1], 0, 0);
    case KH_GOP_NEG: case KH_GOP_RELU: case KH_GOP_SIGMOID: case KH_GOP_TANH:
        return push(b->e, n->op, a[0], 0, 0, 0);
    case KH_GOP_DROPOUT: case KH_GOP_DROPOUT_GRAD:
        return push(b->e, n->op, a[0], 0, n->attr.rate, n->attr.salt);
    default: return push(b->e, n->op, a[0], a[1], 0, 0);
    }
}

static int32_t operand(build *b, int32_t node) {
    if (b->in_group[node]) return member(b, node);
    return -1 - find_ext(b->gr, node);
}

kh_status th_pass_fuse(th_rw *r, int32_t *changed) {
    const kh_graph *g = r->src;
    int32_t *off = NULL, *cons = NULL;
    kh_status st = kh_graph_consumers(g, &off, &cons);
    if (st != KH_OK) return st;
    char *absorbed = calloc((size_t)g->n_nodes + 1, 1), *in_group = calloc((size_t)g->n_nodes + 1, 1);
    char *pinned = calloc((size_t)g->n_nodes + 1, 1);
    int32_t *root_of = malloc(((size_t)g->n_nodes + 1) * sizeof *root_of);
    group *groups = malloc(((size_t)g->n_nodes + 1) * sizeof *groups);
    if (!absorbed || !in_group || !pinned || !root_of || !groups) st = KH_ERR_NOMEM;
    /* values the graph names outside its edges must stay materialised: the outputs, and every node another
     * takes its shape from (attr.shape_of) */
    for (int k = 0; st == KH_OK && k < 8; k++)
        if (g->outputs[k] >= 0) pinned[g->outputs[k]] = 1;
    for (int32_t i = 0; st == KH_OK && i < g->n_nodes; i++)
        if (g->nodes[i].attr.shape_of >= 0) pinned[g->nodes[i].attr.shape_of] = 1;
    /* groups, from the last node back: a root pulls in producers while the bounds allow */
    for (int32_t i = g->n_nodes - 1; st == KH_OK && i >= 0; i--) {
        if (absorbed[i]) continue; /* root_of[i] names its group */
        root_of[i] = -1;
        if (!candidate(g, i)) continue;
        root_of[i] = i;
        group *gr = &groups[i];
        memset(gr, 0, sizeof *gr);
        const int32_t *in = kh_graph_inputs(g, i);
        for (int j = 0; j < g->nodes[i].n_in; j++) {
            if (find_ext(gr, in[j]) >= 0) continue;
            gr->ext[gr->n_ext] = in[j];
            gr->vec[gr->n_ext++] = (uint8_t)vec_input(g, i, j);
        }
        gr->ops = instrs(g, i);
        if (gr->n_ext > KH_GEXPR_MAX_IN) {
            root_of[i] = -1; /* an AddN too wide for one program stays as it is */
            continue;
        }
        for (int grew = 1; grew;) {
            grew = 0;
            for (int k = 0; k < gr->n_ext; k++) {
                int32_t p = gr->ext[k];
                const kh_gnode *pn = &g->nodes[p];
                if (gr->vec[k] || absorbed[p] || !candidate(g, p) || off[p + 1] - off[p] != 1 ||
                    (pn->flags & KH_GVAL_OUTPUT) || pinned[p] || !kh_graph_same_shape(pn, &g->nodes[i]))
                    continue;
                if (!try_join(g, gr, k, p)) continue;
                absorbed[p] = 1;
                root_of[p] = i;
                grew = 1;
                break;
            }
        }
    }
    for (int32_t i = 0; st == KH_OK && i < g->n_nodes; i++) {
        if (absorbed[i]) continue; /* built inside its root's program */
        if (root_of[i] != i) {
            r->map[i] = th_rw_copy(r, i, NULL, 0);
            continue;
        }
        const group *gr = &groups[i];
        kh_gexpr e;
        memset(&e, 0, sizeof e);
        e.n_in = gr->n_ext;
        for (int k = 0; k < gr->n_ext; k++) e.vec[k] = gr->vec[k];
        for (int32_t j = 0; j <= i; j++) in_group[j] = root_of[j] == i;
        build b = {.g = g, .in_group = in_group, .gr = gr, .e = &e};
        member(&b, i);
        int32_t ins[KH_GEXPR_MAX_IN];
        for (int k = 0; k < gr->n_ext; k++) ins[k] = r->map[gr->ext[k]];
        kh_gattr a = kh_gattr_none();
        a.layer = g->nodes[i].attr.layer;
        a.expr = kh_graph_add_expr(r->dst, &e);
        if (a.expr < 0) {
            r->st = KH_ERR_INTERNAL;
            snprintf(r->err, sizeof r->err, "node %d: %s", i, r->dst->err);
            break;
        }
        r->map[i] = th_rw_add(r, KH_GOP_ELEMWISE, ins, gr->n_ext, &a, KH_F32, 0, NULL, g->nodes[i].flags,
                              g->nodes[i].phase);
        if (r->map[i] >= 0) r->dst->nodes[r->map[i]].flags |= g->nodes[i].flags & KH_GVAL_OUTPUT;
        if (g->nodes[i].op != KH_GOP_ELEMWISE || e.n_ops != g->exprs[g->nodes[i].attr.expr].n_ops) ++*changed;
    }
    free(off);
    free(cons);
    free(absorbed);
    free(in_group);
    free(pinned);
    free(root_of);
    free(groups);
    return st != KH_OK ? st : r->st;
}
