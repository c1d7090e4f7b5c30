/* cpu/dense_onednn.c — Dense through oneDNN's inner product primitives: forward (bias and, for relu, the
 * activation as a post-op), backward data, backward weights with the bias gradient; a relu's gradient by
 * oneDNN's eltwise backward, other activations (softmax by rows, folded into the loss) on the pool.
 *
 * Layouts: the input and output stay plain (N, in) / (N, units), what the layers around read and write. After
 * Flatten of a oneDNN max pooling's output (through Dropout layers only), the pooling reorders its output
 * straight into NHWC, Keras's flatten order, and its gradient back from it; the Dropouts store NHWC and
 * Flatten passes the tensor on as it is (nhwc_source): one reorder each way instead of a reorder to NCHW and
 * Flatten's permutation. (The 4-D blocked input itself, no reorder at all, made the inner products slower
 * than the reorders they saved: bench/profile/2026-12-05-cntk-*-dense-4d-blocked-*.txt.) The weights are
 * Keras's [in, units] (oneDNN's io for dims {units, in}), the parameters' layout on both paths;
 * each primitive takes them in the layout it chose (format_tag any: blocked for its brgemm kernels), reordered
 * once per pass and shared where two passes chose the same one, and the weight gradient is reordered back.
 * Which models: those whose convolutions run on oneDNN (cntk_dnnl_joins, cpu/onednn.h). The arguments, the
 * partial batch and the three passes are the convolutions' (cpu/onednn_weighted.c).
 */
#include "cpu/dense.h"
#include "cpu/eltwise_onednn.h"
#include "cpu/maxpool.h"
#include "cpu/onednn_weighted.h"

struct cntk_dense_dnnl {
    cntk_dweighted w;
    cntk_eltwise_dnnl relu; /* the post-op relu's backward */
    int post_relu;
};

/* The max pooling whose output L reads through Flatten and Dropout layers only, when oneDNN runs it; -1
 * otherwise. */
static int32_t nhwc_source(const cntk_cpu_model *m, const cntk_cpu_layer *L) {
    int32_t k = L->p->index - 1;
    if (k < 1 || m->L[k].ops != &cntk_cpu_flatten_ops || !m->L[k].p->image_in) return -1;
    for (k--; k >= 0 && m->L[k].ops == &cntk_cpu_dropout_ops; k--) {}
    return k >= 0 && m->L[k].ops == &cntk_cpu_maxpool_ops && m->L[k].dnnl_out ? k : -1;
}

/* The pooling writes NHWC from now on; the Dropouts store it (an NHWC image is one block of all its channels)
 * and Flatten passes it on. */
static kh_status pass_nhwc(cntk_cpu_model *m, const cntk_cpu_layer *L, int32_t pool) {
    for (int32_t k = pool + 1; k < L->p->index - 1; k++)
        cntk_dropout_store_blocked(&m->L[k], m->L[pool].p->sh.out_shape[2]);
    cntk_flatten_pass_nhwc(&m->L[L->p->index - 1]);
    return cntk_pool_dnnl_out_nhwc(m, &m->L[pool]);
}

kh_status cntk_dense_dnnl_setup(cntk_cpu_model *m, cntk_cpu_layer *L) {
    if (!cntk_dnnl_joins(m)) return KH_OK;
    cntk_dense_dnnl *c = cntk_alloc(m->s, sizeof *c);
    if (!c) return KH_ERR_NOMEM;
    L->st = c;
    cntk_dweighted *w = &c->w;
    w->N = m->plan->max_batch;
    w->in_numel = L->p->in_numel;
    w->out_numel = L->p->out_numel;
    c->post_relu = L->p->act == KH_ACT_RELU;
    dnnl_dims_t sd = {w->N, w->in_numel}, dd = {w->N, w->out_numel}, wd = {w->out_numel, w->in_numel},
                bd = {w->out_numel};
    dnnl_memory_desc_t u_src, u_dst, u_wei, u_bias, a_wei;
    CNTK_DNNL_TRY(m, L, "compile", "memory descriptor", dnnl_memory_desc_init_by_tag(&u_src, 2, sd, dnnl_f32, dnnl_nc));
    CNTK_DNNL_TRY(m, L, "compile", "memory descriptor", dnnl_memory_desc_init_by_tag(&u_dst, 2, dd, dnnl_f32, dnnl_nc));
    CNTK_DNNL_TRY(m, L, "compile", "memory descriptor", dnnl_memory_desc_init_by_tag(&u_wei, 2, wd, dnnl_f32, dnnl_io));
    CNTK_DNNL_TRY(m, L, "compile", "memory descriptor", dnnl_memory_desc_init_by_tag(&u_bias, 1, bd, dnnl_f32, dnnl_x));
    CNTK_DNNL_TRY(m, L, "compile", "memory descriptor",
                  dnnl_memory_desc_init_by_tag(&a_wei, 2, wd, dnnl_f32, dnnl_format_tag_any));

    dnnl_inner_product_desc_t fd, bdd, bwd;
    CNTK_DNNL_TRY(m, L, "compile", "inner product forward descriptor",
                  dnnl_inner_product_forward_desc_init(&fd, dnnl_forward_training, &u_src, &a_wei, &u_bias, &u_dst));
    CNTK_DNNL_TRY(m, L, "compile", "inner product backward data descriptor",
                  dnnl_inner_product_backward_data_desc_init(&bdd, &u_src, &a_wei, &u_dst));
    CNTK_DNNL_TRY(m, L, "compile", "inner product backward weights descriptor",
                  dnnl_inner_product_backward_weights_desc_init(&bwd, &u_src, &a_wei, &u_bias, &u_dst));
    dnnl_primitive_desc_t fpd = NULL, dpd = NULL, wpd = NULL;
    kh_status st = cntk_dnnl_pd(m, L, "inner product forward", &fd, NULL, c->post_relu, &fpd);
    if (st == KH_OK) st = cntk_dnnl_pd(m, L, "inner product backward data", &bdd, fpd, 0, &dpd);
    if (st == KH_OK) st = cntk_dnnl_pd(m, L, "inner product backward weights", &bwd, fpd, 0, &wpd);
    if (st == KH_OK) st = cntk_dnnl_prim(m, L, "inner product forward", fpd, &w->fwd);
    if (st == KH_OK) st = cntk_dnnl_prim(m, L, "inner product backward data", dpd, &w->bwd_data);
    if (st == KH_OK) st = cntk_dnnl_prim(m, L, "inner product backward weights", wpd, &w->bwd_w);
    if (st == KH_OK) st = cntk_dweighted_args(m, L, w, fpd, dpd, wpd, &u_src, &u_wei, &u_bias, &u_dst);
    if (st == KH_OK && c->post_relu) st = cntk_eltwise_dnnl_setup(m, L, KH_ACT_RELU, w->N * w->out_numel, 0, &c->relu);
    int32_t pool = st == KH_OK ? nhwc_source(m, L) : -1;
    if (pool >= 0) st = pass_nhwc(m, L, pool);
    if (fpd) dnnl_primitive_desc_destroy(fpd);
    if (dpd) dnnl_primitive_desc_destroy(dpd);
    if (wpd) dnnl_primitive_desc_destroy(wpd);
    return st;
}

void cntk_dense_dnnl_teardown(cntk_cpu_model *m, cntk_cpu_layer *L) {
    cntk_dense_dnnl *c = L->st;
    if (!c) return;
    cntk_dweighted_free(m, &c->w);
    cntk_eltwise_dnnl_free(&c->relu);
    cntk_free(m->s, c);
    L->st = NULL;
}

kh_status cntk_dense_dnnl_forward(cntk_cpu_model *m, cntk_cpu_layer *L, int n) {
    const cntk_dense_dnnl *c = L->st;
    kh_status st = cntk_dweighted_forward(m, L, &c->w, n, L->x, L->prm[0].w, L->prm[1].w, L->y);
    if (st == KH_OK && !c->post_relu) /* softmax by rows, sigmoid, tanh: on the pool */
        cntk_act_forward(m, L->p->act, L->y, n, c->w.out_numel);
    return st;
}

kh_status cntk_dense_dnnl_backward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, float *dy, float *dx, int fused) {
    const cntk_dense_dnnl *c = L->st;
    if (!fused && c->post_relu) {
        kh_status st = cntk_eltwise_dnnl_backward(m, L, &c->relu, L->y, dy, dy);
        if (st != KH_OK) return st;
    } else if (!fused) {
        cntk_act_backward(m, L->p->act, L->y, dy, n, c->w.out_numel);
    }
    return cntk_dweighted_backward(m, L, &c->w, n, L->x, dy, L->prm[0].w, L->prm[0].g, L->prm[1].g, dx);
}
