/* cpu/activation.c — the Activation layer: y = act(x) over the last (Keras) axis. */
#include <string.h>

#include "cpu/cpu.h"

/* Softmax is refused on images by the plan, so for element-wise functions the storage order is irrelevant
 * and for softmax the last axis is contiguous. */
static int64_t last_axis(const cntk_cpu_layer *L) {
    const kh_layer_shapes *sh = &L->p->sh;
    return sh->out_rank >= 1 ? sh->out_shape[sh->out_rank - 1] : 1;
}

static kh_status activation_forward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, int train) {
    (void)train;
    int64_t numel = n * L->p->out_numel, cols = last_axis(L);
    cntk_act_forward_from(m, L->p->act, L->x, L->y, numel / cols, cols); /* one pass, no copy first */
    return KH_OK;
}

static kh_status activation_backward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, float *dy, float *dx,
                                     int fused) {
    int64_t numel = n * L->p->out_numel, cols = last_axis(L);
    if (fused) {
        if (dx) memcpy(dx, dy, (size_t)numel * sizeof(float));
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
    .forward = activation_forward,
    .backward = activation_backward,
};
