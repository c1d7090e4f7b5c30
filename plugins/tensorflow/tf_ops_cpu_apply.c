/* tf_ops_cpu_apply.c — the training ops: one fused update loop per variable (ApplyGradientDescent,
 * ApplyRMSProp, ApplyAdam, ApplyAdadelta; khost/kit/formulas.h's Keras 2 updates), split over the pool for big
 * variables. The step's learning rate (decay, Adam's bias correction) comes from the run. An Embedding's
 * gradient arrives dense from GatherGrad's accumulator (TensorFlow turned Keras's IndexedSlices into a dense
 * tensor before Adam, which then updates every row); after the update the rows the batch touched are cleared,
 * which leaves the accumulator zero for the next step without a pass over the whole table. */
#include <string.h>

#include "khost/kit/formulas.h"
#include "tf.h"
#include "tf_ops_cpu.h"

typedef struct upd {
    uint32_t op;
    float *w, *s1, *s2;
    const float *g;
    float lr, rho, b1, b2, eps;
} upd;

static void upd_range(void *v, int64_t b, int64_t e, int slot) {
    (void)slot;
    const upd *u = v;
    float *w = u->w, *s1 = u->s1, *s2 = u->s2;
    const float *g = u->g;
    switch (u->op) {
    case KH_GOP_APPLY_RMSPROP:
        for (int64_t k = b; k < e; k++) kh_rmsprop_update(&w[k], &s1[k], g[k], u->lr, u->rho, u->eps);
        break;
    case KH_GOP_APPLY_ADAM:
        for (int64_t k = b; k < e; k++) kh_adam_update(&w[k], &s1[k], &s2[k], g[k], u->lr, u->b1, u->b2, u->eps);
        break;
    case KH_GOP_APPLY_ADADELTA:
        for (int64_t k = b; k < e; k++) kh_adadelta_update(&w[k], &s1[k], &s2[k], g[k], u->lr, u->rho, u->eps);
        break;
    default:
        for (int64_t k = b; k < e; k++) w[k] -= u->lr * g[k];
        break;
    }
}

static kh_status k_apply(tf_run *r, int32_t i) {
    const kh_gnode *nd = tf_node(r, i);
    tf_model *m = r->m;
    int32_t v = kh_model_graphs_var(&m->rt.mg, nd->attr.layer, nd->attr.slot);
    if (v < 0) return tf_run_fail(r, i, KH_ERR_INTERNAL, "no variable (%d, %d)", nd->attr.layer, nd->attr.slot);
    const kh_optimizer_spec *o = &m->rt.mg.opt;
    upd u = {nd->op, m->rt.w[v], m->rt.s1[v], m->rt.s2[v], tf_in(r, i, 1), (float)r->lr, o->rho, o->beta_1,
             o->beta_2, o->epsilon};
    int64_t n = m->rt.mg.vars[v].numel;
    tf_ew_for(r, n, upd_range, &u);
    int32_t gnode = kh_graph_inputs(r->f->g, i)[1];
    const kh_gnode *gn = &r->f->g->nodes[gnode];
    if (gn->op == KH_GOP_GATHER_GRAD) {
        int32_t idx_node = kh_graph_inputs(r->f->g, gnode)[0];
        const int32_t *idx = (const int32_t *)r->f->out[idx_node];
        int64_t ni = tf_numel(r, idx_node), D = gn->dims[1];
        float *g = (float *)r->f->out[gnode];
        for (int64_t k = 0; k < ni; k++) memset(g + (int64_t)idx[k] * D, 0, (size_t)D * sizeof *g);
    }
    return KH_OK;
}

tf_kernel tf_cpu_kernel_apply(uint32_t op) {
    switch (op) {
    case KH_GOP_APPLY_GRADIENT_DESCENT: case KH_GOP_APPLY_RMSPROP: case KH_GOP_APPLY_ADAM:
    case KH_GOP_APPLY_ADADELTA: return k_apply;
    default: return NULL;
    }
}

// --- the kernel table and costs --------------------------------------------------------------------------------
tf_kernel tf_cpu_kernel(uint32_t op) {
    tf_kernel k = tf_cpu_kernel_math(op);
    if (!k) k = tf_cpu_kernel_image(op);
    if (!k) k = tf_cpu_kernel_shape(op);
    if (!k) k = tf_cpu_kernel_apply(op);
    return k;
}

int64_t tf_op_flops(const kh_graph *g, int32_t i) {
    const kh_gnode *nd = &g->nodes[i];
    const int32_t *in = kh_graph_inputs(g, i);
    int64_t out = kh_graph_numel(g, i, g->max_batch);
    switch (nd->op) {
    case KH_GOP_INPUT: case KH_GOP_VARIABLE: case KH_GOP_RESHAPE: return 0;
    case KH_GOP_MATMUL: {
        const kh_gnode *A = &g->nodes[in[0]];
        int64_t k = nd->attr.transpose_a ? kh_graph_numel(g, in[0], g->max_batch) / A->dims[1] : A->dims[1];
        return 2 * out * k;
    }
    case KH_GOP_CONV2D: case KH_GOP_CONV2D_BACKPROP_INPUT: case KH_GOP_CONV2D_BACKPROP_FILTER: {
        int32_t w = nd->op == KH_GOP_CONV2D ? in[1] : nd->op == KH_GOP_CONV2D_BACKPROP_INPUT ? in[0] : nd->attr.shape_of;
        int32_t dy = nd->op == KH_GOP_CONV2D ? i : in[1];
        const kh_gnode *W = &g->nodes[w];
        return 2 * kh_graph_numel(g, dy, g->max_batch) * W->dims[0] * W->dims[1] * W->dims[2];
    }
    case KH_GOP_MAXPOOL: case KH_GOP_MAXPOOL_GRAD:
        return kh_graph_numel(g, in[0], g->max_batch) * nd->attr.window[0] * nd->attr.window[1];
    case KH_GOP_APPLY_GRADIENT_DESCENT: case KH_GOP_APPLY_RMSPROP: case KH_GOP_APPLY_ADAM:
    case KH_GOP_APPLY_ADADELTA: return 8 * out;
    case KH_GOP_SIGMOID: case KH_GOP_TANH: case KH_GOP_SOFTMAX: return 20 * out;
    default: {
        int64_t s = out;
        for (int k = 0; k < nd->n_in; k++) s += kh_graph_numel(g, in[k], g->max_batch);
        return s;
    }
    }
}
