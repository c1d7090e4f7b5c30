/* cpu/dense_onednn.c — Dense through oneDNN's inner product primitives: forward (bias and, for relu, the
 * activation as a post-op), backward data, backward weights with the bias gradient; a relu's gradient by
 * oneDNN's eltwise backward, other activations (softmax by rows, folded into the loss) on the pool.
 *
 * Layouts: the input and output stay plain (N, in) / (N, units), what the layers around read and write. The
 * weights are Keras's [in, units] (oneDNN's io for dims {units, in}), the parameters' layout on both paths;
 * each primitive takes them in the layout it chose (format_tag any: blocked for its brgemm kernels), reordered
 * once per pass and shared where two passes chose the same one, and the weight gradient is reordered back.
 * Which models: those whose convolutions run on oneDNN (cntk_dnnl_joins, cpu/onednn.h).
 * Batch: as for the convolutions (cpu/conv_onednn.c), the primitives are made once for max_batch, and a
 * smaller batch runs at max_batch with the rows past n zeroed in the input and the output gradient, so those
 * rows add nothing to the gradients; their outputs are never read.
 */
#include <string.h>

#include "cpu/dense.h"
#include "cpu/eltwise_onednn.h"
#include "cpu/onednn.h"

struct cntk_dense_dnnl {
    cntk_dprim fwd, bwd_data, bwd_w;
    cntk_darg src, wei, bias, dst;             /* forward */
    cntk_darg bw_src, bw_ddst, bw_dwei, bw_db; /* backward weights */
    cntk_darg bd_ddst, bd_wei, bd_dsrc;        /* backward data */
    cntk_eltwise_dnnl relu;                    /* the post-op relu's backward */
    int64_t N, in, out;
    int post_relu;
};

static const dnnl_memory_desc_t *pd_md(const_dnnl_primitive_desc_t pd, dnnl_query_t q) {
    return dnnl_primitive_desc_query_md(pd, q, 0);
}

kh_status cntk_dense_dnnl_setup(cntk_cpu_model *m, cntk_cpu_layer *L) {
    if (!cntk_dnnl_joins(m)) return KH_OK;
    cntk_dense_dnnl *c = cntk_alloc(m->s, sizeof *c);
    if (!c) return KH_ERR_NOMEM;
    L->st = c;
    c->N = m->plan->max_batch;
    c->in = L->p->in_numel;
    c->out = L->p->out_numel;
    c->post_relu = L->p->act == KH_ACT_RELU;
    dnnl_dims_t sd = {c->N, c->in}, dd = {c->N, c->out}, wd = {c->out, c->in}, bd = {c->out};
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
    if (st == KH_OK) st = cntk_dnnl_prim(m, L, "inner product forward", fpd, &c->fwd);
    if (st == KH_OK) st = cntk_dnnl_prim(m, L, "inner product backward data", dpd, &c->bwd_data);
    if (st == KH_OK) st = cntk_dnnl_prim(m, L, "inner product backward weights", wpd, &c->bwd_w);
    /* forward */
    if (st == KH_OK) st = cntk_darg_setup(m, L, "input", 0, &u_src, pd_md(fpd, dnnl_query_src_md), NULL, &c->src);
    if (st == KH_OK)
        st = cntk_darg_setup(m, L, "reorder of the weights", 0, &u_wei, pd_md(fpd, dnnl_query_weights_md), NULL,
                             &c->wei);
    if (st == KH_OK) st = cntk_darg_setup(m, L, "bias", 0, &u_bias, &u_bias, NULL, &c->bias);
    if (st == KH_OK) st = cntk_darg_setup(m, L, "output", 1, &u_dst, pd_md(fpd, dnnl_query_dst_md), NULL, &c->dst);
    /* backward weights */
    if (st == KH_OK)
        st = cntk_darg_setup(m, L, "input", 0, &u_src, pd_md(wpd, dnnl_query_src_md), &c->src, &c->bw_src);
    if (st == KH_OK)
        st = cntk_darg_setup(m, L, "output gradient", 0, &u_dst, pd_md(wpd, dnnl_query_diff_dst_md), NULL,
                             &c->bw_ddst);
    if (st == KH_OK)
        st = cntk_darg_setup(m, L, "reorder of the weight gradient", 1, &u_wei,
                             pd_md(wpd, dnnl_query_diff_weights_md), NULL, &c->bw_dwei);
    if (st == KH_OK) st = cntk_darg_setup(m, L, "bias gradient", 1, &u_bias, &u_bias, NULL, &c->bw_db);
    /* backward data: the weights of the forward when in the same layout */
    if (st == KH_OK)
        st = cntk_darg_setup(m, L, "output gradient", 0, &u_dst, pd_md(dpd, dnnl_query_diff_dst_md), &c->bw_ddst,
                             &c->bd_ddst);
    if (st == KH_OK)
        st = cntk_darg_setup(m, L, "reorder of the weights", 0, &u_wei, pd_md(dpd, dnnl_query_weights_md), &c->wei,
                             &c->bd_wei);
    if (st == KH_OK)
        st = cntk_darg_setup(m, L, "input gradient", 1, &u_src, pd_md(dpd, dnnl_query_diff_src_md), NULL,
                             &c->bd_dsrc);
    if (st == KH_OK && c->post_relu) st = cntk_eltwise_dnnl_setup(m, L, KH_ACT_RELU, c->N * c->out, 0, &c->relu);
    if (fpd) dnnl_primitive_desc_destroy(fpd);
    if (dpd) dnnl_primitive_desc_destroy(dpd);
    if (wpd) dnnl_primitive_desc_destroy(wpd);
    return st;
}

void cntk_dense_dnnl_teardown(cntk_cpu_model *m, cntk_cpu_layer *L) {
    cntk_dense_dnnl *c = L->st;
    if (!c) return;
    cntk_dnnl_prim_free(&c->fwd);
    cntk_dnnl_prim_free(&c->bwd_data);
    cntk_dnnl_prim_free(&c->bwd_w);
    cntk_darg *args[] = {&c->src, &c->wei, &c->bias, &c->dst, &c->bw_src, &c->bw_ddst, &c->bw_dwei, &c->bw_db,
                         &c->bd_ddst, &c->bd_wei, &c->bd_dsrc};
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) cntk_darg_free(m, args[i]);
    cntk_eltwise_dnnl_free(&c->relu);
    cntk_free(m->s, c);
    L->st = NULL;
}

/* Rows [n, N) of a (N, numel) buffer to zero: a partial batch adds nothing to the gradients. */
static void zero_tail(const cntk_dense_dnnl *c, float *buf, int n, int64_t numel) {
    if (n < c->N) memset(buf + n * numel, 0, (size_t)((c->N - n) * numel) * sizeof(float));
}

kh_status cntk_dense_dnnl_forward(cntk_cpu_model *m, cntk_cpu_layer *L, int n) {
    const cntk_dense_dnnl *c = L->st;
    zero_tail(c, (float *)L->x, n, c->in); /* the previous layer's output: no one reads its rows past n */
    kh_status st;
    if ((st = cntk_darg_in(m, L, &c->src, L->x)) != KH_OK) return st;
    if ((st = cntk_darg_in(m, L, &c->wei, L->prm[0].w)) != KH_OK) return st;
    if ((st = cntk_darg_in(m, L, &c->bias, L->prm[1].w)) != KH_OK) return st;
    if ((st = cntk_darg_bind(m, L, &c->dst, L->y, 0)) != KH_OK) return st;
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, c->src.mem}, {DNNL_ARG_WEIGHTS, c->wei.mem},
                               {DNNL_ARG_BIAS, c->bias.mem}, {DNNL_ARG_DST, c->dst.mem}};
    if ((st = cntk_dnnl_run(m, L, &c->fwd, 4, args)) != KH_OK) return st;
    if ((st = cntk_darg_out(m, L, &c->dst, L->y)) != KH_OK) return st;
    if (!c->post_relu) cntk_act_forward(m, L->p->act, L->y, n, c->out); /* softmax by rows, on the pool */
    return KH_OK;
}

kh_status cntk_dense_dnnl_backward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, float *dy, float *dx, int fused) {
    const cntk_dense_dnnl *c = L->st;
    kh_status st;
    if (!fused && c->post_relu) {
        if ((st = cntk_eltwise_dnnl_backward(m, L, &c->relu, L->y, dy, dy)) != KH_OK) return st;
    } else if (!fused) {
        cntk_act_backward(m, L->p->act, L->y, dy, n, c->out);
    }
    zero_tail(c, dy, n, c->out);
    if ((st = cntk_darg_in(m, L, &c->bw_src, L->x)) != KH_OK) return st;
    if ((st = cntk_darg_in(m, L, &c->bw_ddst, dy)) != KH_OK) return st;
    if ((st = cntk_darg_bind(m, L, &c->bw_dwei, L->prm[0].g, 0)) != KH_OK) return st;
    if ((st = cntk_darg_bind(m, L, &c->bw_db, L->prm[1].g, 0)) != KH_OK) return st;
    dnnl_exec_arg_t wargs[5] = {{DNNL_ARG_SRC, c->bw_src.mem}, {DNNL_ARG_DIFF_DST, c->bw_ddst.mem},
                                {DNNL_ARG_DIFF_WEIGHTS, c->bw_dwei.mem}, {DNNL_ARG_DIFF_BIAS, c->bw_db.mem}};
    if ((st = cntk_dnnl_run(m, L, &c->bwd_w, 4, wargs)) != KH_OK) return st;
    if ((st = cntk_darg_out(m, L, &c->bw_dwei, L->prm[0].g)) != KH_OK) return st;
    if (!dx) return KH_OK;
    if ((st = cntk_darg_in(m, L, &c->bd_ddst, dy)) != KH_OK) return st;
    if ((st = cntk_darg_in(m, L, &c->bd_wei, L->prm[0].w)) != KH_OK) return st;
    if ((st = cntk_darg_bind(m, L, &c->bd_dsrc, dx, 0)) != KH_OK) return st;
    dnnl_exec_arg_t dargs[4] = {{DNNL_ARG_DIFF_DST, c->bd_ddst.mem}, {DNNL_ARG_WEIGHTS, c->bd_wei.mem},
                                {DNNL_ARG_DIFF_SRC, c->bd_dsrc.mem}};
    if ((st = cntk_dnnl_run(m, L, &c->bwd_data, 3, dargs)) != KH_OK) return st;
    return cntk_darg_out(m, L, &c->bd_dsrc, dx);
}
