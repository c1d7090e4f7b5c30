/* cpu/eltwise_onednn.h — an activation through oneDNN's eltwise primitives (built with CNTK_HAVE_DNNL): the
 * forward y = act(x) and the backward dx = dy * act'(y) from the output, as one flat tensor of max_batch
 * samples (element-wise: indifferent to the layout the data is in, blocked or plain). */
#ifndef KHOST_CNTK_ELTWISE_ONEDNN_H
#define KHOST_CNTK_ELTWISE_ONEDNN_H

#include "cpu/onednn.h"

typedef struct cntk_eltwise_dnnl {
    cntk_dprim fwd, bwd;             /* fwd.p NULL when only the backward was asked for */
    dnnl_memory_t src, dst, ddst, dsrc; /* handles set at each step; src NULL without the forward */
} cntk_eltwise_dnnl;

/* Whether oneDNN computes act (relu, tanh, sigmoid) the way the kit's formulas do. */
int cntk_eltwise_dnnl_supports(int act);
/* Primitives for numel floats (max_batch samples); with_forward 0: the backward only (a fused post-op does
 * the forward). */
kh_status cntk_eltwise_dnnl_setup(cntk_cpu_model *m, const cntk_cpu_layer *L, int act, int64_t numel,
                                  int with_forward, cntk_eltwise_dnnl *e);
void cntk_eltwise_dnnl_free(cntk_eltwise_dnnl *e);
kh_status cntk_eltwise_dnnl_forward(cntk_cpu_model *m, const cntk_cpu_layer *L, const cntk_eltwise_dnnl *e,
                                    const float *x, float *y);
/* dx may be dy (in place). */
kh_status cntk_eltwise_dnnl_backward(cntk_cpu_model *m, const cntk_cpu_layer *L, const cntk_eltwise_dnnl *e,
                                     const float *y, const float *dy, float *dx);

#endif
