/* cpu/onednn_weighted.c — the arguments and the three passes of a oneDNN layer with weights and a bias
 * (cpu/onednn_weighted.h): the convolutions (cpu/conv_onednn.c) and the inner products (cpu/dense_onednn.c). */
#include <string.h>

#include "cpu/onednn_weighted.h"

static const dnnl_memory_desc_t *pd_md(const_dnnl_primitive_desc_t pd, dnnl_query_t q) {
    return dnnl_primitive_desc_query_md(pd, q, 0);
}

kh_status cntk_dweighted_args(cntk_cpu_model *m, const cntk_cpu_layer *L, cntk_dweighted *w,
                              const_dnnl_primitive_desc_t fpd, const_dnnl_primitive_desc_t dpd,
                              const_dnnl_primitive_desc_t wpd, const dnnl_memory_desc_t *u_src,
                              const dnnl_memory_desc_t *u_wei, const dnnl_memory_desc_t *u_bias,
                              const dnnl_memory_desc_t *u_dst) {
    kh_status st = cntk_darg_setup(m, L, "reorder of the input", 0, u_src, pd_md(fpd, dnnl_query_src_md), NULL, &w->src);
    if (st == KH_OK)
        st = cntk_darg_setup(m, L, "reorder of the weights", 0, u_wei, pd_md(fpd, dnnl_query_weights_md), NULL, &w->wei);
    if (st == KH_OK) st = cntk_darg_setup(m, L, "bias", 0, u_bias, u_bias, NULL, &w->bias);
    if (st == KH_OK)
        st = cntk_darg_setup(m, L, "reorder of the output", 1, u_dst, pd_md(fpd, dnnl_query_dst_md), NULL, &w->dst);
    if (st == KH_OK)
        st = cntk_darg_setup(m, L, "reorder of the input", 0, u_src, pd_md(wpd, dnnl_query_src_md), &w->src,
                             &w->bw_src);
    if (st == KH_OK)
        st = cntk_darg_setup(m, L, "reorder of the output gradient", 0, u_dst, pd_md(wpd, dnnl_query_diff_dst_md), NULL,
                             &w->bw_ddst);
    if (st == KH_OK)
        st = cntk_darg_setup(m, L, "reorder of the weight gradient", 1, u_wei, pd_md(wpd, dnnl_query_diff_weights_md),
                             NULL, &w->bw_dwei);
    if (st == KH_OK) st = cntk_darg_setup(m, L, "bias gradient", 1, u_bias, u_bias, NULL, &w->bw_db);
    if (st == KH_OK)
        st = cntk_darg_setup(m, L, "reorder of the output gradient", 0, u_dst, pd_md(dpd, dnnl_query_diff_dst_md),
                             &w->bw_ddst, &w->bd_ddst);
    if (st == KH_OK)
        st = cntk_darg_setup(m, L, "reorder of the weights", 0, u_wei, pd_md(dpd, dnnl_query_weights_md), &w->wei,
                             &w->bd_wei);
    if (st == KH_OK)
        st = cntk_darg_setup(m, L, "reorder of the input gradient", 1, u_src, pd_md(dpd, dnnl_query_diff_src_md), NULL,
                             &w->bd_dsrc);
    return st;
}

void cntk_dweighted_free(cntk_cpu_model *m, cntk_dweighted *w) {
    cntk_dnnl_prim_free(&w->fwd);
    cntk_dnnl_prim_free(&w->bwd_data);
    cntk_dnnl_prim_free(&w->bwd_w);
    cntk_darg *args[] = {&w->src, &w->wei, &w->bias, &w->dst, &w->bw_src, &w->bw_ddst, &w->bw_dwei, &w->bw_db,
                         &w->bd_ddst, &w->bd_wei, &w->bd_dsrc};
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) cntk_darg_free(m, args[i]);
}

/* Rows [n, N) of a (N, numel) buffer to zero: a partial batch adds nothing to the weight gradients. */
static void zero_tail(const cntk_dweighted *w, float *buf, int n, int64_t numel) {
    if (n < w->N) memset(buf + n * numel, 0, (size_t)((w->N - n) * numel) * sizeof(float));
}

kh_status cntk_dweighted_forward(cntk_cpu_model *m, const cntk_cpu_layer *L, const cntk_dweighted *w, int n,
                                 const float *x, const float *W, const float *b, float *y) {
    /* x is the previous layer's output (or the staged input), and no one reads its rows past n */
    zero_tail(w, (float *)x, n, w->in_numel);
    kh_status st;
    if ((st = cntk_darg_in(m, L, &w->src, x)) != KH_OK) return st;
    if ((st = cntk_darg_in(m, L, &w->wei, W)) != KH_OK) return st;
    if ((st = cntk_darg_in(m, L, &w->bias, b)) != KH_OK) return st;
    if ((st = cntk_darg_bind(m, L, &w->dst, y, 0)) != KH_OK) return st;
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, w->src.mem}, {DNNL_ARG_WEIGHTS, w->wei.mem},
                               {DNNL_ARG_BIAS, w->bias.mem}, {DNNL_ARG_DST, w->dst.mem}};
    if ((st = cntk_dnnl_run(m, L, &w->fwd, 4, args)) != KH_OK) return st;
    return cntk_darg_out(m, L, &w->dst, y);
}

kh_status cntk_dweighted_backward(cntk_cpu_model *m, const cntk_cpu_layer *L, const cntk_dweighted *w, int n,
                                  const float *x, float *dy, const float *W, float *dW, float *db, float *dx) {
    zero_tail(w, dy, n, w->out_numel);
    double t0 = cntk_prof_clock(m);
    kh_status st;
    if ((st = cntk_darg_in(m, L, &w->bw_src, x)) != KH_OK) return st;
    if ((st = cntk_darg_in(m, L, &w->bw_ddst, dy)) != KH_OK) return st;
    if ((st = cntk_darg_bind(m, L, &w->bw_dwei, dW, 0)) != KH_OK) return st;
    if ((st = cntk_darg_bind(m, L, &w->bw_db, db, 0)) != KH_OK) return st;
    dnnl_exec_arg_t wargs[5] = {{DNNL_ARG_SRC, w->bw_src.mem}, {DNNL_ARG_DIFF_DST, w->bw_ddst.mem},
                                {DNNL_ARG_DIFF_WEIGHTS, w->bw_dwei.mem}, {DNNL_ARG_DIFF_BIAS, w->bw_db.mem}};
    if ((st = cntk_dnnl_run(m, L, &w->bwd_w, 4, wargs)) != KH_OK) return st;
    if ((st = cntk_darg_out(m, L, &w->bw_dwei, dW)) != KH_OK) return st;
    cntk_prof_weight_grad(m, L, t0);
    if (!dx) return KH_OK;
    if ((st = cntk_darg_in(m, L, &w->bd_ddst, dy)) != KH_OK) return st;
    if ((st = cntk_darg_in(m, L, &w->bd_wei, W)) != KH_OK) return st;
    if ((st = cntk_darg_bind(m, L, &w->bd_dsrc, dx, 0)) != KH_OK) return st;
    dnnl_exec_arg_t dargs[4] = {{DNNL_ARG_DIFF_DST, w->bd_ddst.mem}, {DNNL_ARG_WEIGHTS, w->bd_wei.mem},
                                {DNNL_ARG_DIFF_SRC, w->bd_dsrc.mem}};
    if ((st = cntk_dnnl_run(m, L, &w->bwd_data, 3, dargs)) != KH_OK) return st;
    return cntk_darg_out(m, L, &w->bd_dsrc, dx);
}
