/* cpu/flatten.c — Flatten. Images are stored NCHW here, but Keras flattens channels_last tensors, so the
 * flat vector must be in (H, W, C) order for the next Dense's canonical [in, units] kernel to mean the same
 * thing on every backend: forward permutes NCHW -> NHWC, backward permutes back. After a oneDNN max pooling
 * that writes NHWC for the oneDNN Dense after it (cpu/dense_onednn.c), the tensor is already in Keras's order:
 * Flatten copies it as it is (cntk_flatten_pass_nhwc). */
#include <string.h>

#include "cpu/cpu.h"

/* the mark of a Flatten that passes an NHWC tensor on (it has no other state) */
static char pass_nhwc;

void cntk_flatten_pass_nhwc(cntk_cpu_layer *L) { L->st = &pass_nhwc; }

static kh_status flatten_forward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, int train) {
    (void)m, (void)train;
    const kh_layer_shapes *sh = &L->p->sh;
    if (L->p->image_in && L->st != &pass_nhwc)
        cntk_nchw_to_nhwc(L->x, L->y, n, sh->in_shape[2], sh->in_shape[0], sh->in_shape[1]);
    else
        memcpy(L->y, L->x, (size_t)(n * L->p->out_numel) * sizeof(float));
    return KH_OK;
}

static kh_status flatten_backward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, float *dy, float *dx, int fused) {
    (void)m, (void)fused;
    const kh_layer_shapes *sh = &L->p->sh;
    if (!dx) return KH_OK;
    if (L->p->image_in && L->st != &pass_nhwc)
        cntk_nhwc_to_nchw(dy, dx, n, sh->in_shape[2], sh->in_shape[0], sh->in_shape[1]);
    else
        memcpy(dx, dy, (size_t)(n * L->p->out_numel) * sizeof(float));
    return KH_OK;
}

const cntk_cpu_ops cntk_cpu_flatten_ops = {
    .forward = flatten_forward,
    .backward = flatten_backward,
};
