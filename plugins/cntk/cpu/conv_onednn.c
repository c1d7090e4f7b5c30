/* cpu/conv_onednn.c — Conv2D through oneDNN's convolution primitives: forward (bias and, for relu, the
 * activation as a post-op), backward data, backward weights with the bias gradient.
 *
 * Layouts: every primitive is created with format_tag any, so oneDNN picks its blocked layouts (nChw16c
 * and OIhw16i16o on AVX-512). The model's other layers read and write NCHW, so each argument whose chosen
 * layout differs from the plain one gets its own buffer and a reorder at the layer's boundary; an argument
 * two primitives want in the same layout is reordered once and shared (the forward's source and weights
 * for the backward passes, the output gradient for both backward passes). The parameters stay in the
 * plain oihw layout (Wg [F, C*KH*KW], what cpu/conv.c converts Keras's weights to), so the optimizer and
 * the weight exchange are the same on both paths.
 * Chains: a convolution passes its output on in its blocked layout, without the reorders at its edge, to a
 * convolution (mnist_cnn's conv -> conv, cifar10_cnn's conv -> relu -> conv) that chose the same layout for
 * its input and input gradient, or to a max pooling, which then runs on oneDNN in that layout
 * (cpu/maxpool_onednn.c), with only element-wise Activation layers between, which run on the blocked data as
 * it is (unpadded: the same numel). A oneDNN max pooling passes its output on in its layout to a convolution
 * that chose it for its input, through Dropout layers that store their masks in it (cifar10_cnn's pool ->
 * dropout -> conv; cpu/dropout.c still draws them in the kit's order). cntk_conv_dnnl_chain links them after
 * every layer's setup.
 * Batch, arguments and the three passes: cpu/onednn_weighted.c, shared with Dense's inner products.
 */
#include "cpu/conv.h"
#include "cpu/maxpool.h" /* the pooling a convolution's layout is passed on to */
#include "cpu/onednn_weighted.h"
#include "khost/kit/geometry.h"

struct cntk_conv_dnnl {
    cntk_dweighted w;
    int post_relu; /* relu done by the forward primitive */
};

static cntk_conv_dnnl *conv_dnnl_of(const cntk_cpu_layer *L) {
    return L->ops == &cntk_cpu_conv_ops && L->st ? ((const cntk_conv_geom *)L->st)->dnnl : NULL;
}

/* The layout L's output can be passed on in without a reorder (one layout for the output and its gradient,
 * blocked, unpadded, samples outermost), when L is a oneDNN convolution and the session allows chains; else
 * NULL. Published as L->dnnl_out. */
static const dnnl_memory_desc_t *out_md(const cntk_cpu_model *m, const cntk_cpu_layer *L) {
    const cntk_conv_dnnl *c = conv_dnnl_of(L);
    if (!c || !m->s->onednn_chain) return NULL;
    const cntk_dweighted *a = &c->w;
    const dnnl_memory_desc_t *md = &a->dst.md;
    if (!dnnl_memory_desc_equal(&a->bw_ddst.md, md) || !dnnl_memory_desc_equal(&a->bd_ddst.md, md)) return NULL;
    /* unpadded: the element-wise layers between hold out_numel floats a sample; samples outermost: a partial
     * batch zeroes rows [n, N) of it as of a plain tensor */
    int plain_size = dnnl_memory_desc_get_size(md) == (size_t)(a->N * a->out_numel) * sizeof(float);
    return md->format_kind == dnnl_blocked && plain_size && md->format_desc.blocking.strides[0] == a->out_numel
               ? md
               : NULL;
}

kh_status cntk_conv_dnnl_setup(cntk_cpu_model *m, cntk_cpu_layer *L, cntk_conv_geom *g) {
    cntk_conv_dnnl *c = cntk_alloc(m->s, sizeof *c);
    if (!c) return KH_ERR_NOMEM;
    g->dnnl = c;
    cntk_dweighted *w = &c->w;
    w->N = m->plan->max_batch;
    w->in_numel = L->p->in_numel;
    w->out_numel = L->p->out_numel;
    c->post_relu = L->p->act == KH_ACT_RELU;
    dnnl_dims_t sd = {w->N, g->C, g->H, g->W}, dd = {w->N, g->F, g->OH, g->OW};
    dnnl_dims_t wd = {g->F, g->C, g->KH, g->KW}, bd = {g->F};
    dnnl_dims_t strides = {g->SH, g->SW}, pl = {g->PT, g->PL};
    dnnl_dims_t pr = {(g->OH - 1) * g->SH + g->KH - g->H - g->PT, (g->OW - 1) * g->SW + g->KW - g->W - g->PL};
    dnnl_memory_desc_t u_src, u_dst, u_wei, u_bias, a_src, a_dst, a_wei;
    CNTK_DNNL_TRY(m, L, "compile", "memory descriptor", dnnl_memory_desc_init_by_tag(&u_src, 4, sd, dnnl_f32, dnnl_nchw));
    CNTK_DNNL_TRY(m, L, "compile", "memory descriptor", dnnl_memory_desc_init_by_tag(&u_dst, 4, dd, dnnl_f32, dnnl_nchw));
    CNTK_DNNL_TRY(m, L, "compile", "memory descriptor", dnnl_memory_desc_init_by_tag(&u_wei, 4, wd, dnnl_f32, dnnl_oihw));
    CNTK_DNNL_TRY(m, L, "compile", "memory descriptor", dnnl_memory_desc_init_by_tag(&u_bias, 1, bd, dnnl_f32, dnnl_x));
    CNTK_DNNL_TRY(m, L, "compile", "memory descriptor", dnnl_memory_desc_init_by_tag(&a_src, 4, sd, dnnl_f32, dnnl_format_tag_any));
    CNTK_DNNL_TRY(m, L, "compile", "memory descriptor", dnnl_memory_desc_init_by_tag(&a_dst, 4, dd, dnnl_f32, dnnl_format_tag_any));
    CNTK_DNNL_TRY(m, L, "compile", "memory descriptor", dnnl_memory_desc_init_by_tag(&a_wei, 4, wd, dnnl_f32, dnnl_format_tag_any));

    dnnl_convolution_desc_t fd, bdd, bwd;
    CNTK_DNNL_TRY(m, L, "compile", "convolution forward descriptor",
                  dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &a_src,
                                                     &a_wei, &u_bias, &a_dst, strides, pl, pr));
    CNTK_DNNL_TRY(m, L, "compile", "convolution backward data descriptor",
                  dnnl_convolution_backward_data_desc_init(&bdd, dnnl_convolution_direct, &a_src, &a_wei, &a_dst,
                                                           strides, pl, pr));
    CNTK_DNNL_TRY(m, L, "compile", "convolution backward weights descriptor",
                  dnnl_convolution_backward_weights_desc_init(&bwd, dnnl_convolution_direct, &a_src, &a_wei,
                                                              &u_bias, &a_dst, strides, pl, pr));
    dnnl_primitive_desc_t fpd = NULL, dpd = NULL, wpd = NULL;
    kh_status st = cntk_dnnl_pd(m, L, "convolution forward", &fd, NULL, c->post_relu, &fpd);
    if (st == KH_OK) st = cntk_dnnl_pd(m, L, "convolution backward data", &bdd, fpd, 0, &dpd);
    if (st == KH_OK) st = cntk_dnnl_pd(m, L, "convolution backward weights", &bwd, fpd, 0, &wpd);
    if (st == KH_OK) st = cntk_dnnl_prim(m, L, "convolution forward", fpd, &w->fwd);
    if (st == KH_OK) st = cntk_dnnl_prim(m, L, "convolution backward data", dpd, &w->bwd_data);
    if (st == KH_OK) st = cntk_dnnl_prim(m, L, "convolution backward weights", wpd, &w->bwd_w);
    if (st == KH_OK) st = cntk_dweighted_args(m, L, w, fpd, dpd, wpd, &u_src, &u_wei, &u_bias, &u_dst);
    if (fpd) dnnl_primitive_desc_destroy(fpd);
    if (dpd) dnnl_primitive_desc_destroy(dpd);
    if (wpd) dnnl_primitive_desc_destroy(wpd);
    if (st == KH_OK) L->dnnl_out = out_md(m, L);
    return st;
}

void cntk_conv_dnnl_teardown(cntk_cpu_model *m, cntk_conv_geom *g) {
    cntk_conv_dnnl *c = g->dnnl;
    if (!c) return;
    cntk_dweighted_free(m, &c->w);
    cntk_free(m->s, c);
    g->dnnl = NULL;
}

/* b's input side takes md as it comes, when b chose md for its input and its input gradient */
static int takes_native(const cntk_dweighted *b, const dnnl_memory_desc_t *md) {
    return dnnl_memory_desc_equal(&b->src.md, md) && dnnl_memory_desc_equal(&b->bw_src.md, md) &&
           dnnl_memory_desc_equal(&b->bd_dsrc.md, md);
}

static kh_status input_native(cntk_cpu_model *m, cntk_cpu_layer *L, cntk_dweighted *b) {
    cntk_darg *in[] = {&b->src, &b->bw_src, &b->bd_dsrc};
    for (size_t k = 0; k < 3; k++) {
        kh_status st = cntk_darg_native(m, L, in[k]);
        if (st != KH_OK) return st;
    }
    return KH_OK;
}

/* max pooling -> Dropout... -> convolution in the pooling's channel-blocked layout */
static kh_status chain_after_pool(cntk_cpu_model *m, int32_t j) {
    cntk_conv_dnnl *cb = conv_dnnl_of(&m->L[j]);
    int32_t k = j - 1;
    while (k >= 0 && m->L[k].ops == &cntk_cpu_dropout_ops) k--;
    const dnnl_memory_desc_t *md = cb && k >= 0 && k < j - 1 && m->L[k].ops == &cntk_cpu_maxpool_ops ? m->L[k].dnnl_out
                                                                                                      : NULL;
    int64_t block = md ? cntk_dnnl_channel_block(md) : 0;
    if (!md || block < 1 || cb->w.in_numel != m->L[k].p->out_numel || !takes_native(&cb->w, md)) return KH_OK;
    for (int32_t d = k + 1; d < j; d++) cntk_dropout_store_blocked(&m->L[d], block);
    kh_status st = input_native(m, &m->L[j], &cb->w);
    return st == KH_OK ? cntk_pool_dnnl_pass_on(m, &m->L[k]) : st;
}

kh_status cntk_conv_dnnl_chain(cntk_cpu_model *m) {
    for (int32_t j = 1; j < m->n_layers; j++) {
        kh_status pst = chain_after_pool(m, j);
        if (pst != KH_OK) return pst;
        int32_t i = cntk_cpu_source_layer(m, j);
        const dnnl_memory_desc_t *md = i >= 0 && conv_dnnl_of(&m->L[i]) ? m->L[i].dnnl_out : NULL;
        if (!md) continue;
        cntk_conv_dnnl *ca = conv_dnnl_of(&m->L[i]), *cb = conv_dnnl_of(&m->L[j]);
        cntk_dweighted *a = &ca->w, *b = cb ? &cb->w : NULL;
        if (b) { /* convolution -> convolution: b's input side too, when it chose the same layout */
            if (b->in_numel != a->out_numel || !takes_native(b, md)) continue;
            kh_status st = input_native(m, &m->L[j], b);
            if (st != KH_OK) return st;
        } else if (!m->L[j].dnnl_takes_in) { /* a pooling was made for md at its setup */
            continue;
        }
        cntk_darg *out[] = {&a->dst, &a->bw_ddst, &a->bd_ddst};
        for (size_t k = 0; k < 3; k++) {
            kh_status st = cntk_darg_native(m, &m->L[i], out[k]);
            if (st != KH_OK) return st;
        }
    }
    return KH_OK;
}

kh_status cntk_conv_dnnl_forward(cntk_cpu_model *m, cntk_cpu_layer *L, int n) {
    const cntk_conv_dnnl *c = ((const cntk_conv_geom *)L->st)->dnnl;
    kh_status st = cntk_dweighted_forward(m, L, &c->w, n, L->x, L->prm[0].w, L->prm[1].w, L->y);
    if (st == KH_OK && !c->post_relu) /* element-wise, on the pool */
        cntk_act_forward(m, L->p->act, L->y, 1, n * c->w.out_numel);
    return st;
}

kh_status cntk_conv_dnnl_backward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, float *dy, float *dx, int fused) {
    const cntk_conv_dnnl *c = ((const cntk_conv_geom *)L->st)->dnnl;
    if (!fused) cntk_act_backward(m, L->p->act, L->y, dy, 1, n * c->w.out_numel); /* element-wise, on the pool */
    return cntk_dweighted_backward(m, L, &c->w, n, L->x, dy, L->prm[0].w, L->prm[0].g, L->prm[1].g, dx);
}
