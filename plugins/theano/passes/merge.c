/* passes/merge.c — common-subexpression merging (Theano's MergeOptimizer): two nodes with the same op,
 * attributes and (already merged) inputs compute the same value, so the second becomes the first. Apply ops
 * and GatherGrad accumulators have effects and are never merged. */
#include <stdlib.h>
#include <string.h>

#include "th_passes.h"

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

static int mergeable(uint32_t op) {
    return op != KH_GOP_APPLY_GRADIENT_DESCENT && op != KH_GOP_APPLY_RMSPROP && op != KH_GOP_APPLY_ADAM &&
           op != KH_GOP_APPLY_ADADELTA && op != KH_GOP_GATHER_GRAD;
}

/* attributes that define the value (the layer tag does not, except for variables); a source node's shape_of
 * (a node id) is taken through `map` into the merged graph's numbering, where its candidates live */
static kh_gattr key_attr(const kh_gnode *n, const int32_t *map) {
    kh_gattr a = n->attr;
    if (n->op != KH_GOP_VARIABLE) a.layer = 0;
    a.expr = 0;
    if (map && a.shape_of >= 0) a.shape_of = map[a.shape_of]; /* as th_rw_copy maps it */
    return a;
}

static int same(const kh_graph *d, int32_t j, const kh_gnode *n, const int32_t *ins, const kh_graph *src,
                const int32_t *map) {
    const kh_gnode *m = &d->nodes[j];
    if (m->op != n->op || m->dtype != n->dtype || m->rank != n->rank || m->n_in != n->n_in ||
        ((m->flags ^ n->flags) & KH_GVAL_BATCHED))
        return 0;
    for (int k = 0; k < n->rank; k++)
        if (m->dims[k] != n->dims[k]) return 0;
    kh_gattr x = key_attr(m, NULL), y = key_attr(n, map);
    if (memcmp(&x, &y, sizeof x) != 0) return 0;
    if (n->op == KH_GOP_ELEMWISE && memcmp(&d->exprs[m->attr.expr], &src->exprs[n->attr.expr], sizeof(kh_gexpr)) != 0)
        return 0;
    const int32_t *mi = kh_graph_inputs(d, j);
    for (int k = 0; k < n->n_in; k++)
        if (mi[k] != ins[k]) return 0;
    return 1;
}

kh_status th_pass_merge(th_rw *r, int32_t *changed) {
    const kh_graph *g = r->src;
    size_t cap = 16;
    while (cap < (size_t)g->n_nodes * 2) cap *= 2;
    int32_t *table = malloc(cap * sizeof *table), *ins = malloc(((size_t)g->n_ins + 1) * sizeof *ins);
    if (!table || !ins) {
        free(table);
        free(ins);
        return KH_ERR_NOMEM;
    }
    for (size_t k = 0; k < cap; k++) table[k] = -1;
    for (int32_t i = 0; i < g->n_nodes && r->st == KH_OK; i++) {
        const kh_gnode *n = &g->nodes[i];
        const int32_t *in = kh_graph_inputs(g, i);
        if (!mergeable(n->op)) {
            r->map[i] = th_rw_copy(r, i, NULL, 0);
            continue;
        }
        uint64_t h = mix(n->op, (uint64_t)n->rank);
        for (int k = 0; k < n->rank; k++) h = mix(h, (uint64_t)n->dims[k]);
        for (int k = 0; k < n->n_in; k++) h = mix(h, (uint64_t)(ins[k] = r->map[in[k]]));
        kh_gattr a = key_attr(n, r->map);
        uint32_t aw[sizeof a / sizeof(uint32_t)];
        memcpy(aw, &a, sizeof aw);
        for (size_t k = 0; k < sizeof aw / sizeof *aw; k++) h = mix(h, aw[k]);
        size_t slot = (size_t)h & (cap - 1);
        int32_t found = -1;
        for (; table[slot] >= 0; slot = (slot + 1) & (cap - 1))
            if (same(r->dst, table[slot], n, ins, g, r->map)) {
                found = table[slot];
                break;
            }
        if (found >= 0) {
            r->map[i] = found;
            ++*changed;
            continue;
        }
        r->map[i] = th_rw_copy(r, i, NULL, 0);
        if (r->map[i] >= 0) table[slot] = r->map[i];
    }
    free(table);
    free(ins);
    return r->st;
}
