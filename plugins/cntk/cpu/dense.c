/* cpu/dense.c — Dense on CPU: one GEMM forward, two GEMMs backward (weights kept in Keras's [in, units]
 * layout, which is already what a row-major x @ W wants); built with oneDNN, in a model whose convolutions run
 * there, its inner product primitives instead (cpu/dense_onednn.c). */
#include "cpu/dense.h"

/* y (N, units) = act(x (N, in) @ W (in, units) + b (units)) */
static kh_status dense_forward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, int train) {
    (void)train;
#ifdef CNTK_HAVE_DNNL
    if (L->st) return cntk_dense_dnnl_forward(m, L, n);
#endif
    int64_t in = L->p->in_numel, out = L->p->out_numel;
    cntk_sgemm_mt(m->s->pool, 0, 0, n, out, in, 1.0f, L->x, in, L->prm[0].w, out, 0.0f, L->y, out);
    cntk_bias_act_forward(m, L->p->act, L->prm[1].w, L->y, n, out);
    return KH_OK;
}

/* dy (N, units) -> dz in place; dW (in, units) = x^T dz; db = sum_n dz; dx (N, in) = dz W^T */
static kh_status dense_backward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, float *dy, float *dx, int fused) {
#ifdef CNTK_HAVE_DNNL
    if (L->st) return cntk_dense_dnnl_backward(m, L, n, dy, dx, fused);
#endif
    int64_t in = L->p->in_numel, out = L->p->out_numel;
    if (!fused) cntk_act_backward(m, L->p->act, L->y, dy, n, out);
    double t0 = cntk_prof_clock(m);
    cntk_sgemm_mt(m->s->pool, 1, 0, in, out, n, 1.0f, L->x, in, dy, out, 0.0f, L->prm[0].g, out);
    cntk_colsum(dy, n, out, L->prm[1].g);
    cntk_prof_weight_grad(m, L, t0);
    if (dx) cntk_sgemm_mt(m->s->pool, 0, 1, n, in, out, 1.0f, dy, out, L->prm[0].w, out, 0.0f, dx, in);
    return KH_OK;
}

const cntk_cpu_ops cntk_cpu_dense_ops = {
#ifdef CNTK_HAVE_DNNL
    .setup = cntk_dense_dnnl_setup,
    .teardown = cntk_dense_dnnl_teardown,
#endif
    .forward = dense_forward,
    .backward = dense_backward,
};
