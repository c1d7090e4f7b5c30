/* cpu/eltwise_onednn.c — activations on oneDNN's eltwise primitives. The backward uses the *_use_dst_for_bwd
 * algorithms: the gradient from the saved output, as the kit's formulas (khost/kit/formulas.h) and the
 * OpenBLAS path do, so no layer has to keep its input. */
#include <string.h>

#include "cpu/eltwise_onednn.h"

/* The algorithm for act, forward and backward alike. */
static int alg_of(int act, dnnl_alg_kind_t *alg) {
    switch (act) {
    case KH_ACT_RELU: *alg = dnnl_eltwise_relu_use_dst_for_bwd; return 1;
    case KH_ACT_TANH: *alg = dnnl_eltwise_tanh_use_dst_for_bwd; return 1;
    case KH_ACT_SIGMOID: *alg = dnnl_eltwise_logistic_use_dst_for_bwd; return 1;
    default: return 0;
    }
}

int cntk_eltwise_dnnl_supports(int act) {
    dnnl_alg_kind_t alg;
    return alg_of(act, &alg);
}

kh_status cntk_eltwise_dnnl_setup(cntk_cpu_model *m, const cntk_cpu_layer *L, int act, int64_t numel,
                                  int with_forward, cntk_eltwise_dnnl *e) {
    memset(e, 0, sizeof *e);
    dnnl_alg_kind_t alg;
    if (!alg_of(act, &alg))
        return cntk_layer_fail(m->s, KH_ERR_INTERNAL, L->p->spec.kind, L->p->index, "compile",
                               "no oneDNN eltwise algorithm for activation %d", act);
    dnnl_dims_t d = {numel};
    dnnl_memory_desc_t md;
    CNTK_DNNL_TRY(m, L, "compile", "memory descriptor", dnnl_memory_desc_init_by_tag(&md, 1, d, dnnl_f32, dnnl_x));
    dnnl_eltwise_desc_t fd, bd;
    CNTK_DNNL_TRY(m, L, "compile", "eltwise forward descriptor",
                  dnnl_eltwise_forward_desc_init(&fd, dnnl_forward_training, alg, &md, 0.0f, 0.0f));
    CNTK_DNNL_TRY(m, L, "compile", "eltwise backward descriptor",
                  dnnl_eltwise_backward_desc_init(&bd, alg, &md, &md, 0.0f, 0.0f));
    dnnl_primitive_desc_t fpd = NULL, bpd = NULL;
    kh_status st = cntk_dnnl_pd(m, L, "eltwise forward", &fd, NULL, 0, &fpd);
    if (st == KH_OK) st = cntk_dnnl_pd(m, L, "eltwise backward", &bd, fpd, 0, &bpd);
    if (st == KH_OK && with_forward) st = cntk_dnnl_prim(m, L, "eltwise forward", fpd, &e->fwd);
    if (st == KH_OK) st = cntk_dnnl_prim(m, L, "eltwise backward", bpd, &e->bwd);
    dnnl_memory_t *mems[] = {&e->dst, &e->ddst, &e->dsrc, &e->src}; /* src: the forward's only */
    for (size_t k = 0; k < (with_forward ? 4u : 3u) && st == KH_OK; k++)
        st = cntk_dnnl_mem(m, L, &md, DNNL_MEMORY_NONE, mems[k]);
    if (fpd) dnnl_primitive_desc_destroy(fpd);
    if (bpd) dnnl_primitive_desc_destroy(bpd);
    return st;
}

void cntk_eltwise_dnnl_free(cntk_eltwise_dnnl *e) {
    cntk_dnnl_prim_free(&e->fwd);
    cntk_dnnl_prim_free(&e->bwd);
    dnnl_memory_t mems[] = {e->src, e->dst, e->ddst, e->dsrc};
    for (size_t k = 0; k < 4; k++)
        if (mems[k]) dnnl_memory_destroy(mems[k]);
    memset(e, 0, sizeof *e);
}

kh_status cntk_eltwise_dnnl_forward(cntk_cpu_model *m, const cntk_cpu_layer *L, const cntk_eltwise_dnnl *e,
                                    const float *x, float *y) {
    CNTK_DNNL_TRY(m, L, "step", "memory handle", dnnl_memory_set_data_handle(e->src, (void *)x));
    CNTK_DNNL_TRY(m, L, "step", "memory handle", dnnl_memory_set_data_handle(e->dst, y));
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, e->src}, {DNNL_ARG_DST, e->dst}};
    return cntk_dnnl_run(m, L, &e->fwd, 2, args);
}

kh_status cntk_eltwise_dnnl_backward(cntk_cpu_model *m, const cntk_cpu_layer *L, const cntk_eltwise_dnnl *e,
                                     const float *y, const float *dy, float *dx) {
    CNTK_DNNL_TRY(m, L, "step", "memory handle", dnnl_memory_set_data_handle(e->dst, (void *)y));
    CNTK_DNNL_TRY(m, L, "step", "memory handle", dnnl_memory_set_data_handle(e->ddst, (void *)dy));
    CNTK_DNNL_TRY(m, L, "step", "memory handle", dnnl_memory_set_data_handle(e->dsrc, dx));
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_DST, e->dst}, {DNNL_ARG_DIFF_DST, e->ddst}, {DNNL_ARG_DIFF_SRC, e->dsrc}};
    return cntk_dnnl_run(m, L, &e->bwd, 3, args);
}
