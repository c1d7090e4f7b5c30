/* cpu/activation.c — the Activation layer: y = act(x) over the last (Keras) axis; built with oneDNN, in a
 * model whose convolutions run there, relu, tanh and sigmoid run as its eltwise primitives
 * (cpu/eltwise_onednn.c), softmax here. */
#include <string.h>

#include "cpu/cpu.h"
#ifdef CNTK_HAVE_DNNL
#include "cpu/eltwise_onednn.h"

static kh_status activation_setup(cntk_cpu_model *m, cntk_cpu_layer *L) {
    if (!cntk_dnnl_joins(m) || !cntk_eltwise_dnnl_supports(L->p->act)) return KH_OK;
    cntk_eltwise_dnnl *e = cntk_alloc(m->s, sizeof *e);
    if (!e) return KH_ERR_NOMEM;
    L->st = e;
    return cntk_eltwise_dnnl_setup(m, L, L->p->act, m->plan->max_batch * L->p->out_numel, 1, e);
}

static void activation_teardown(cntk_cpu_model *m, cntk_cpu_layer *L) {
    if (!L->st) return;
    cntk_eltwise_dnnl_free(L->st);
    cntk_free(m->s, L->st);
    L->st = NULL;
}
#endif

/* Softmax is refused on images by the plan, so for element-wise functions the storage order is irrelevant
 * and for softmax the last axis is contiguous. */
static int64_t last_axis(const cntk_cpu_layer *L) {
    const kh_layer_shapes *sh = &L->p->sh;
    return sh->out_rank >= 1 ? sh->out_shape[sh->out_rank - 1] : 1;
}

static kh_status activation_forward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, int train) {
    (void)train;
#ifdef CNTK_HAVE_DNNL
    if (L->st) return cntk_eltwise_dnnl_forward(m, L, L->st, L->x, L->y); /* all max_batch rows */
#endif
    int64_t numel = n * L->p->out_numel, cols = last_axis(L);
    cntk_act_forward_from(m, L->p->act, L->x, L->y, numel / cols, cols); /* one pass, no copy first */
    return KH_OK;
}

static kh_status activation_backward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, float *dy, float *dx,
                                     int fused) {
    int64_t numel = n * L->p->out_numel, cols = last_axis(L);
    if (fused) {
        if (dx) memcpy(dx, dy, (size_t)numel * sizeof(float));
#ifdef CNTK_HAVE_DNNL
    } else if (L->st) {
        return cntk_eltwise_dnnl_backward(m, L, L->st, L->y, dy, dx ? dx : dy);
#endif
    } else if (dx) {
        cntk_act_backward_to(m, L->p->act, L->y, dy, dx, numel / cols, cols);
    } else {
        cntk_act_backward(m, L->p->act, L->y, dy, numel / cols, cols);
    }
    return KH_OK;
}

int32_t cntk_cpu_source_layer(const cntk_cpu_model *m, int32_t i) {
    int32_t k = i - 1;
    while (k >= 0 && m->L[k].ops == &cntk_cpu_activation_ops && m->L[k].p->act != KH_ACT_SOFTMAX) k--;
    return k;
}

const cntk_cpu_ops cntk_cpu_activation_ops = {
#ifdef CNTK_HAVE_DNNL
    .setup = activation_setup,
    .teardown = activation_teardown,
#endif
    .forward = activation_forward,
    .backward = activation_backward,
};
