/* cpu/onednn_weighted.h — what a oneDNN layer with weights and a bias does the same whatever its primitive
 * (convolution, inner product): the arguments of its forward, backward-weights and backward-data passes in the
 * layouts the primitives chose, shared between the passes where two chose the same, and the three passes of a
 * step (cpu/onednn_weighted.c). The layer makes the primitives; the parameters stay in the user's layout, so the
 * optimizer and the weight exchange are those of the OpenBLAS path.
 * Batch: the primitives are made for max_batch N. A smaller batch runs them at N with the rows past n zeroed in
 * the input and in the output gradient, so those rows add nothing to the gradients; their outputs are never
 * read. */
#ifndef KHOST_CNTK_ONEDNN_WEIGHTED_H
#define KHOST_CNTK_ONEDNN_WEIGHTED_H

#include "cpu/onednn.h"

typedef struct cntk_dweighted {
    cntk_dprim fwd, bwd_data, bwd_w;
    cntk_darg src, wei, bias, dst;             /* forward */
    cntk_darg bw_src, bw_ddst, bw_dwei, bw_db; /* backward weights: the forward's source when in its layout */
    cntk_darg bd_ddst, bd_wei, bd_dsrc;        /* backward data: the output gradient and weights of the passes
                                                  before it when in their layouts */
    int64_t N, in_numel, out_numel;            /* max_batch, floats of a sample's input and output */
} cntk_dweighted;

/* The arguments for the forward (fpd), backward-data (dpd) and backward-weights (wpd) descriptors, from the
 * plain user descriptors. */
kh_status cntk_dweighted_args(cntk_cpu_model *m, const cntk_cpu_layer *L, cntk_dweighted *w,
                              const_dnnl_primitive_desc_t fpd, const_dnnl_primitive_desc_t dpd,
                              const_dnnl_primitive_desc_t wpd, const dnnl_memory_desc_t *u_src,
                              const dnnl_memory_desc_t *u_wei, const dnnl_memory_desc_t *u_bias,
                              const dnnl_memory_desc_t *u_dst);
void cntk_dweighted_free(cntk_cpu_model *m, cntk_dweighted *w);
/* y = f(x; W, b) for n samples (x's rows past n zeroed). */
kh_status cntk_dweighted_forward(cntk_cpu_model *m, const cntk_cpu_layer *L, const cntk_dweighted *w, int n,
                                 const float *x, const float *W, const float *b, float *y);
/* dW, db from x and dy (dy's rows past n zeroed), then dx from dy and W unless dx is NULL. */
kh_status cntk_dweighted_backward(cntk_cpu_model *m, const cntk_cpu_layer *L, const cntk_dweighted *w, int n,
                                  const float *x, float *dy, const float *W, float *dW, float *db, float *dx);

#endif
