/* cpu/dense_onednn.c — Dense through oneDNN's inner product primitives: forward (bias and, for relu, the
 * activation as a post-op), backward data, backward weights with the bias gradient; a relu's gradient by
 * oneDNN's eltwise backward, other activations (softmax by rows, folded into the loss) on the pool.
 *
 * Layouts: the input and output stay plain (N, in) / (N, units), what the layers around read and write, except
 * after Flatten of a oneDNN max pooling's output (through Dropout layers only): there the input is the 4-D
 * image in the pooling's channel-blocked layout, which the pooling, the Dropouts and Flatten keep
 * (blocked_source), and the input gradient goes back in it, so nothing is reordered between the convolutions
 * and the first Dense. The weights are Keras's [in, units] (oneDNN's io for dims {units, in}; with a 4-D input
 * hwio for dims {units, C, H, W}: Keras flattens (H, W, C)), the parameters' layout on both paths;
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

/* The max pooling whose output L reads through Flatten and Dropout layers only, when oneDNN runs it and its
 * output layout is one Dropout can store its masks in (cntk_dnnl_channel_block); -1 otherwise. */
static int32_t blocked_source(const cntk_cpu_model *m, const cntk_cpu_layer *L, const dnnl_memory_desc_t **md) {
    int32_t k = L->p->index - 1;
    if (k < 1 || m->L[k].ops != &cntk_cpu_flatten_ops || !m->L[k].p->image_in) return -1;
    for (k--; k >= 0 && m->L[k].ops == &cntk_cpu_dropout_ops; k--) {}
    *md = k >= 0 ? cntk_pool_dnnl_out_md(m, &m->L[k]) : NULL;
    return *md && cntk_dnnl_channel_block(*md) > 0 ? k : -1;
}

/* The pooling, the Dropouts and Flatten between it and L keep the pooling's layout from now on. */
static kh_status pass_blocked(cntk_cpu_model *m, const cntk_cpu_layer *L, int32_t pool, const dnnl_memory_desc_t *md) {
    int64_t cb = cntk_dnnl_channel_block(md);
    for (int32_t k = pool + 1; k < L->p->index - 1; k++) cntk_dropout_store_blocked(&m->L[k], cb);
    cntk_flatten_pass_blocked(&m->L[L->p->index - 1]);
    return cntk_pool_dnnl_pass_on(m, &m->L[pool]);
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
    const dnnl_memory_desc_t *pooled = NULL;
    int32_t pool = blocked_source(m, L, &pooled);
    if (pool >= 0) { /* the pooling's (N, C, H, W) as it stores them; the weights as hwio over {units, C, H, W} */
        dnnl_dims_t wd4 = {w->out_numel, pooled->dims[1], pooled->dims[2], pooled->dims[3]};
        u_src = *pooled;
        CNTK_DNNL_TRY(m, L, "compile", "memory descriptor", dnnl_memory_desc_init_by_tag(&u_wei, 4, wd4, dnnl_f32, dnnl_hwio));
        CNTK_DNNL_TRY(m, L, "compile", "memory descriptor",
                      dnnl_memory_desc_init_by_tag(&a_wei, 4, wd4, dnnl_f32, dnnl_format_tag_any));
    } else {
        CNTK_DNNL_TRY(m, L, "compile", "memory descriptor", dnnl_memory_desc_init_by_tag(&u_src, 2, sd, dnnl_f32, dnnl_nc));
        CNTK_DNNL_TRY(m, L, "compile", "memory descriptor", dnnl_memory_desc_init_by_tag(&u_wei, 2, wd, dnnl_f32, dnnl_io));
        CNTK_DNNL_TRY(m, L, "compile", "memory descriptor",
                      dnnl_memory_desc_init_by_tag(&a_wei, 2, wd, dnnl_f32, dnnl_format_tag_any));
    }
    CNTK_DNNL_TRY(m, L, "compile", "memory descriptor", dnnl_memory_desc_init_by_tag(&u_dst, 2, dd, dnnl_f32, dnnl_nc));
    CNTK_DNNL_TRY(m, L, "compile", "memory descriptor", dnnl_memory_desc_init_by_tag(&u_bias, 1, bd, dnnl_f32, dnnl_x));

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
    if (st == KH_OK && pool >= 0) { /* the input and its gradient stay in the pooling's layout, as asked */
        int same = dnnl_memory_desc_equal(&w->src.md, pooled) && dnnl_memory_desc_equal(&w->bw_src.md, pooled) &&
                   dnnl_memory_desc_equal(&w->bd_dsrc.md, pooled);
        st = same ? pass_blocked(m, L, pool, pooled)
                  : cntk_layer_fail(m->s, KH_ERR_INTERNAL, L->p->spec.kind, L->p->index, "compile",
                                    "oneDNN inner product chose another layout for the pooled input");
    }
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
