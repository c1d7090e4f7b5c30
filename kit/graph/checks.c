/* kit/graph/checks.c — what a graph backend checks of the tensors a model call brings: the batch, the
 * labels, an output buffer, a weight's slot and shape, and the bounds a device path checks a batch against. One definition for every graph backend; each prefixes
 * the reason with its own name and device. */
#include <stdio.h>

#include "khost/kit/graph.h"
#include "khost/kit/status.h"

void kh_graph_feed_bounds(const kh_graph *g, int32_t *idx_bound, int32_t *label_bound) {
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const kh_gnode *nd = &g->nodes[i];
        const int32_t *in = kh_graph_inputs(g, i);
        if (nd->op == KH_GOP_GATHER) {
            int32_t v = (int32_t)g->nodes[in[0]].dims[0];
            if (*idx_bound == 0 || v < *idx_bound) *idx_bound = v;
        } else if (nd->op == KH_GOP_SOFTMAX_XENT || nd->op == KH_GOP_SIGMOID_XENT) {
            int64_t c = g->nodes[in[0]].dims[1];
            int32_t b = (int32_t)(c == 1 ? 2 : c);
            if (*label_bound == 0 || b < *label_bound) *label_bound = b;
        }
    }
}

kh_status kh_model_graphs_check_x(const kh_model_graphs *m, int64_t max_batch, const kh_tensor *x, int64_t *n,
                                  char *why, size_t len) {
    if (!x || !x->data || x->rank < 1) return kh_errf(why, len, KH_ERR_INVALID, "x has no data or rank 0");
    if (x->dtype != m->input_dtype)
        return kh_errf(why, len, KH_ERR_INVALID, "x dtype %u, the model takes %s", x->dtype,
                       m->input_dtype == KH_I32 ? "i32 indices" : "f32");
    int64_t nb = x->dims[0];
    if (nb < 1 || nb > max_batch)
        return kh_errf(why, len, KH_ERR_INVALID, "batch of %lld samples, compiled for 1..%lld", (long long)nb,
                       (long long)max_batch);
    if (kh_tensor_numel(x) != nb * m->input_numel)
        return kh_errf(why, len, KH_ERR_INVALID, "x holds %lld values per sample, the model takes %lld",
                       (long long)(kh_tensor_numel(x) / nb), (long long)m->input_numel);
    if (x->rank == 4 && x->layout == KH_LAYOUT_NCHW) return kh_errf(why, len, KH_ERR_INVALID, "images must be NHWC");
    *n = nb;
    return KH_OK;
}

kh_status kh_model_graphs_check_labels(const kh_model_graphs *m, const kh_tensor *y, int64_t n, char *why,
                                       size_t len) {
    if (!y || !y->data || y->dtype != KH_I32 || kh_tensor_numel(y) != n)
        return kh_errf(why, len, KH_ERR_INVALID, "y must be %lld i32 labels", (long long)n);
    int64_t classes = m->out_numel == 1 ? 2 : m->out_numel;
    const int32_t *lab = y->data;
    for (int64_t r = 0; r < n; r++)
        if (lab[r] < 0 || lab[r] >= classes)
            return kh_errf(why, len, KH_ERR_INVALID, "label %d of sample %lld outside [0, %lld)", lab[r], (long long)r,
                           (long long)classes);
    return KH_OK;
}

kh_status kh_model_graphs_check_out(const kh_tensor *out, int64_t n, int64_t per, char *why, size_t len) {
    if (!out || !out->data || out->dtype != KH_F32 || kh_tensor_numel(out) != n * per)
        return kh_errf(why, len, KH_ERR_INVALID, "out must be f32 with %lld values (%lld per sample)",
                       (long long)(n * per), (long long)per);
    return KH_OK;
}

kh_status kh_model_graphs_check_weight(const kh_model_graphs *m, int32_t layer, int32_t slot, const kh_tensor *t,
                                       int32_t *v_out, char *why, size_t len) {
    int32_t v = kh_model_graphs_var(m, layer, slot);
    if (v < 0) return kh_errf(why, len, KH_ERR_INVALID, "no weight (layer %d, slot %d)", layer, slot);
    const kh_gvar *gv = &m->vars[v];
    int same = t && t->data && t->dtype == KH_F32 && t->rank == gv->rank;
    for (int i = 0; same && i < gv->rank; i++) same = t->dims[i] == gv->dims[i];
    if (!same)
        return kh_errf(why, len, KH_ERR_INVALID, "layer %d slot %d (%s) must be f32 of %d dims [%lld, %lld, %lld, %lld]",
                       layer, slot, gv->name, gv->rank, (long long)gv->dims[0], (long long)(gv->rank > 1 ? gv->dims[1] : 0),
                       (long long)(gv->rank > 2 ? gv->dims[2] : 0), (long long)(gv->rank > 3 ? gv->dims[3] : 0));
    *v_out = v;
    return KH_OK;
}
