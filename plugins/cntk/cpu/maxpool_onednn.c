/* cpu/maxpool_onednn.c — MaxPooling2D through oneDNN's pooling primitives, for a pooling whose input comes
 * from a oneDNN convolution (through element-wise layers only) that can pass it on in its blocked layout
 * (its published dnnl_out, cpu/cpu.h): the input and the input gradient stay in that layout, so the convolution's output
 * is not reordered to NCHW and back. The pooling's own output, four times smaller, is reordered to the NCHW
 * the layers after it read, and its gradient back — to NHWC instead where Dropout and Flatten lead to a oneDNN
 * Dense (cntk_pool_dnnl_out_nhwc, cpu/dense_onednn.c), and not at all where Dropout leads to a oneDNN
 * convolution that takes the layout (cntk_pool_dnnl_pass_on, cpu/conv_onednn.c).
 * The forward is forward_training with a workspace (where each maximum came from); the backward scatters
 * through it. Ties: the reference kit and the plain path (cpu/maxpool.c) give a window's gradient to its
 * first maximum in row-major order; which one oneDNN picks is not checked here, and does not change a result
 * where the tied values are a relu's zeros (every benchmark model that pools: the relu stops their gradient).
 * Batch: made for max_batch like the convolutions; rows past n compute on finite values nobody reads, and the
 * convolution before zeroes its output gradient's rows past n.
 */
#include <string.h>

#include "cpu/conv.h"
#include "cpu/maxpool.h"
#include "cpu/onednn.h"

struct cntk_pool_dnnl {
    cntk_dprim fwd, bwd;
    cntk_darg src, dsrc;   /* the chained convolution's layout: over its output and its output gradient */
    cntk_darg dst, ddst;   /* oneDNN's layout, reordered to / from the NCHW y and dy when it is not NCHW */
    dnnl_memory_t ws;      /* where each maximum came from, over ws_buf */
    void *ws_buf;
};

/* The layout the input arrives in: the one a chained convolution published, through element-wise layers only. */
static const dnnl_memory_desc_t *input_md(const cntk_cpu_model *m, const cntk_cpu_layer *L) {
    int32_t i = cntk_cpu_source_layer(m, L->p->index);
    return i >= 0 && m->L[i].ops == &cntk_cpu_conv_ops ? m->L[i].dnnl_out : NULL;
}

/* The layout the pooling writes its output and reads its output gradient in, when the two are one (onednn_chain
 * on); NULL otherwise. Published as L->dnnl_out. */
static const dnnl_memory_desc_t *out_md(const cntk_cpu_model *m, const cntk_pool_dnnl *d) {
    if (!m->s->onednn_chain) return NULL;
    return dnnl_memory_desc_equal(&d->dst.md, &d->ddst.md) ? &d->dst.md : NULL;
}

kh_status cntk_pool_dnnl_setup(cntk_cpu_model *m, cntk_cpu_layer *L, cntk_pool_state *p) {
    const dnnl_memory_desc_t *src = input_md(m, L);
    if (!src) return KH_OK; /* the plain path */
    cntk_pool_dnnl *d = cntk_alloc(m->s, sizeof *d);
    if (!d) return KH_ERR_NOMEM;
    p->dnnl = d;
    int64_t N = m->plan->max_batch;
    dnnl_dims_t dd = {N, p->C, p->OH, p->OW}, strides = {p->SH, p->SW}, kernel = {p->KH, p->KW};
    dnnl_dims_t pl = {p->PT, p->PL};
    /* a negative right padding (the window leaves input rows unread) is the same output size as 0 */
    int64_t prh = (p->OH - 1) * p->SH + p->KH - p->H - p->PT, prw = (p->OW - 1) * p->SW + p->KW - p->W - p->PL;
    dnnl_dims_t pr = {prh > 0 ? prh : 0, prw > 0 ? prw : 0};
    dnnl_memory_desc_t u_dst, a_dst;
    CNTK_DNNL_TRY(m, L, "compile", "memory descriptor", dnnl_memory_desc_init_by_tag(&u_dst, 4, dd, dnnl_f32, dnnl_nchw));
    CNTK_DNNL_TRY(m, L, "compile", "memory descriptor",
                  dnnl_memory_desc_init_by_tag(&a_dst, 4, dd, dnnl_f32, dnnl_format_tag_any));
    dnnl_pooling_desc_t fd, bd;
    CNTK_DNNL_TRY(m, L, "compile", "pooling forward descriptor",
                  dnnl_pooling_forward_desc_init(&fd, dnnl_forward_training, dnnl_pooling_max, src, &a_dst, strides,
                                                 kernel, pl, pr));
    CNTK_DNNL_TRY(m, L, "compile", "pooling backward descriptor",
                  dnnl_pooling_backward_desc_init(&bd, dnnl_pooling_max, src, &a_dst, strides, kernel, pl, pr));
    dnnl_primitive_desc_t fpd = NULL, bpd = NULL;
    kh_status st = cntk_dnnl_pd(m, L, "pooling forward", &fd, NULL, 0, &fpd);
    if (st == KH_OK) st = cntk_dnnl_pd(m, L, "pooling backward", &bd, fpd, 0, &bpd);
    if (st == KH_OK) st = cntk_dnnl_prim(m, L, "pooling forward", fpd, &d->fwd);
    if (st == KH_OK) st = cntk_dnnl_prim(m, L, "pooling backward", bpd, &d->bwd);
    if (st == KH_OK && !dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(bpd, dnnl_query_diff_src_md, 0), src))
        st = cntk_layer_fail(m->s, KH_ERR_INTERNAL, L->p->spec.kind, L->p->index, "compile",
                             "oneDNN pooling backward chose another layout for the input gradient");
    const dnnl_memory_desc_t *ws = st == KH_OK ? dnnl_primitive_desc_query_md(fpd, dnnl_query_workspace_md, 0) : NULL;
    if (st == KH_OK && !ws)
        st = cntk_layer_fail(m->s, KH_ERR_INTERNAL, L->p->spec.kind, L->p->index, "compile",
                             "oneDNN max pooling forward has no workspace for its backward");
    if (st == KH_OK) st = cntk_darg_setup(m, L, "input", 0, src, src, NULL, &d->src);
    if (st == KH_OK) st = cntk_darg_setup(m, L, "input gradient", 1, src, src, NULL, &d->dsrc);
    if (st == KH_OK) st = cntk_dnnl_buffer(m, L, ws, &d->ws_buf, &d->ws);
    if (st == KH_OK)
        st = cntk_darg_setup(m, L, "reorder of the pooling output", 1, &u_dst,
                             dnnl_primitive_desc_query_md(fpd, dnnl_query_dst_md, 0), NULL, &d->dst);
    if (st == KH_OK)
        st = cntk_darg_setup(m, L, "reorder of the pooling output gradient", 0, &u_dst,
                             dnnl_primitive_desc_query_md(bpd, dnnl_query_diff_dst_md, 0), NULL, &d->ddst);
    if (fpd) dnnl_primitive_desc_destroy(fpd);
    if (bpd) dnnl_primitive_desc_destroy(bpd);
    if (st == KH_OK) {
        L->dnnl_takes_in = 1;
        L->dnnl_out = out_md(m, d);
    }
    return st;
}

void cntk_pool_dnnl_teardown(cntk_cpu_model *m, cntk_pool_state *p) {
    cntk_pool_dnnl *d = p->dnnl;
    if (!d) return;
    cntk_dnnl_prim_free(&d->fwd);
    cntk_dnnl_prim_free(&d->bwd);
    cntk_darg *args[] = {&d->src, &d->dsrc, &d->dst, &d->ddst};
    for (size_t k = 0; k < sizeof args / sizeof args[0]; k++) cntk_darg_free(m, args[k]);
    if (d->ws) dnnl_memory_destroy(d->ws);
    cntk_free(m->s, d->ws_buf);
    cntk_free(m->s, d);
    p->dnnl = NULL;
}

kh_status cntk_pool_dnnl_forward(cntk_cpu_model *m, cntk_cpu_layer *L, int n) {
    (void)n;
    const cntk_pool_dnnl *d = ((const cntk_pool_state *)L->st)->dnnl;
    kh_status st;
    if ((st = cntk_darg_in(m, L, &d->src, L->x)) != KH_OK) return st;
    if ((st = cntk_darg_bind(m, L, &d->dst, L->y, 0)) != KH_OK) return st;
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, d->src.mem}, {DNNL_ARG_DST, d->dst.mem}, {DNNL_ARG_WORKSPACE, d->ws}};
    if ((st = cntk_dnnl_run(m, L, &d->fwd, 3, args)) != KH_OK) return st;
    return cntk_darg_out(m, L, &d->dst, L->y);
}

kh_status cntk_pool_dnnl_backward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, float *dy, float *dx) {
    (void)n;
    const cntk_pool_dnnl *d = ((const cntk_pool_state *)L->st)->dnnl;
    kh_status st;
    if ((st = cntk_darg_in(m, L, &d->ddst, dy)) != KH_OK) return st;
    if ((st = cntk_darg_bind(m, L, &d->dsrc, dx, 0)) != KH_OK) return st;
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_DIFF_DST, d->ddst.mem}, {DNNL_ARG_DIFF_SRC, d->dsrc.mem},
                               {DNNL_ARG_WORKSPACE, d->ws}};
    return cntk_dnnl_run(m, L, &d->bwd, 3, args);
}

kh_status cntk_pool_dnnl_pass_on(cntk_cpu_model *m, cntk_cpu_layer *L) {
    cntk_pool_dnnl *d = ((cntk_pool_state *)L->st)->dnnl;
    kh_status st = cntk_darg_native(m, L, &d->dst);
    return st == KH_OK ? cntk_darg_native(m, L, &d->ddst) : st;
}

kh_status cntk_pool_dnnl_out_nhwc(cntk_cpu_model *m, cntk_cpu_layer *L) {
    cntk_pool_state *p = L->st;
    cntk_pool_dnnl *d = p->dnnl;
    dnnl_dims_t dd = {m->plan->max_batch, p->C, p->OH, p->OW};
    dnnl_memory_desc_t u_dst, dst = d->dst.md, ddst = d->ddst.md;
    CNTK_DNNL_TRY(m, L, "compile", "memory descriptor", dnnl_memory_desc_init_by_tag(&u_dst, 4, dd, dnnl_f32, dnnl_nhwc));
    cntk_darg_free(m, &d->dst);
    cntk_darg_free(m, &d->ddst);
    kh_status st = cntk_darg_setup(m, L, "reorder of the pooling output", 1, &u_dst, &dst, NULL, &d->dst);
    return st == KH_OK ? cntk_darg_setup(m, L, "reorder of the pooling output gradient", 0, &u_dst, &ddst, NULL, &d->ddst)
                       : st;
}
