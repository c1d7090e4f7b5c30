/* passes/canon.c — canonicalisation: computations written in a roundabout way become their plain form, so
 * merging and fusion see one spelling. Reshape of a Reshape is one Reshape, a Reshape or Slice that changes
 * nothing is its input, Reverse(Reverse(x)) and Neg(Neg(x)) are x, an AddN or Concat of one value is that
 * value, and a Neg feeding Add/Sub flips the operator. */
#include <string.h>

#include "th_passes.h"

kh_status th_pass_canon(th_rw *r, int32_t *changed) {
    const kh_graph *g = r->src;
    kh_graph *d = r->dst;
    for (int32_t i = 0; i < g->n_nodes && r->st == KH_OK; i++) {
        const kh_gnode *n = &g->nodes[i];
        const int32_t *in = kh_graph_inputs(g, i);
        int32_t a = n->n_in > 0 ? r->map[in[0]] : -1, b = n->n_in > 1 ? r->map[in[1]] : -1;
        const kh_gnode *A = a >= 0 ? &d->nodes[a] : NULL, *B = b >= 0 ? &d->nodes[b] : NULL;
        int32_t to = -1;
        switch (n->op) {
        case KH_GOP_RESHAPE:
            if (kh_graph_same_shape(A, n) && (A->flags & KH_GVAL_BATCHED) == (n->flags & KH_GVAL_BATCHED)) to = a;
            else if (A->op == KH_GOP_RESHAPE) {
                /* the input id by value: the add may grow d->ins, which kh_graph_inputs points into */
                int32_t src = kh_graph_inputs(d, a)[0];
                kh_gattr at = kh_gattr_none();
                at.layer = n->attr.layer;
                to = th_rw_add(r, KH_GOP_RESHAPE, &src, 1, &at, n->dtype, n->rank, n->dims, n->flags, n->phase);
            }
            break;
        case KH_GOP_SLICE:
            if (n->attr.begin == 0 && n->attr.size == A->dims[n->attr.axis]) to = a;
            break;
        case KH_GOP_REVERSE:
            if (A->op == KH_GOP_REVERSE && A->attr.axis == n->attr.axis) to = kh_graph_inputs(d, a)[0];
            break;
        case KH_GOP_NEG:
            if (A->op == KH_GOP_NEG) to = kh_graph_inputs(d, a)[0];
            break;
        case KH_GOP_ADDN: case KH_GOP_CONCAT:
            if (n->n_in == 1) to = a;
            break;
        case KH_GOP_ADD: case KH_GOP_SUB:
            if (B->op == KH_GOP_NEG) {
                int32_t ab[2] = {a, kh_graph_inputs(d, b)[0]};
                to = th_rw_add(r, n->op == KH_GOP_ADD ? KH_GOP_SUB : KH_GOP_ADD, ab, 2, &n->attr, n->dtype, 0, NULL,
                               n->flags, n->phase);
            }
            break;
        default: break;
        }
        if (to >= 0) {
            r->map[i] = to;
            ++*changed;
        } else {
            r->map[i] = th_rw_copy(r, i, NULL, 0);
        }
    }
    return r->st;
}
