/* passes/dce.c — dead-code elimination: a node survives when an output, an Apply (a side effect on its
 * variable) or a surviving node needs it (as an input, or as the node whose shape it takes). */
#include <stdlib.h>

#include "th_passes.h"

static int is_sink(const kh_gnode *n) {
    return (n->flags & KH_GVAL_OUTPUT) || n->op == KH_GOP_APPLY_GRADIENT_DESCENT || n->op == KH_GOP_APPLY_RMSPROP ||
           n->op == KH_GOP_APPLY_ADAM || n->op == KH_GOP_APPLY_ADADELTA;
}

kh_status th_pass_dce(th_rw *r, int32_t *changed) {
    const kh_graph *g = r->src;
    char *live = calloc((size_t)g->n_nodes + 1, 1);
    if (!live) return KH_ERR_NOMEM;
    for (int k = 0; k < 8; k++)
        if (g->outputs[k] >= 0) live[g->outputs[k]] = 1;
    for (int32_t i = g->n_nodes - 1; i >= 0; i--) {
        const kh_gnode *n = &g->nodes[i];
        if (is_sink(n)) live[i] = 1;
        if (!live[i]) continue;
        const int32_t *in = kh_graph_inputs(g, i);
        for (int j = 0; j < n->n_in; j++) live[in[j]] = 1;
        if (n->attr.shape_of >= 0 && n->op != KH_GOP_INPUT && n->op != KH_GOP_VARIABLE) live[n->attr.shape_of] = 1;
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        if (live[i]) r->map[i] = th_rw_copy(r, i, NULL, 0);
        else ++*changed;
    }
    free(live);
    return r->st;
}
