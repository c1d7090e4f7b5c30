/* cpu/dense.h — Dense's oneDNN path (cpu/dense_onednn.c, built with CNTK_HAVE_DNNL): inner product
 * primitives over the same parameters as the OpenBLAS path (cpu/dense.c), so the optimizer and the weight
 * exchange are the same on both. */
#ifndef KHOST_CNTK_DENSE_H
#define KHOST_CNTK_DENSE_H

#include "cpu/cpu.h"

typedef struct cntk_dense_dnnl cntk_dense_dnnl;

#ifdef CNTK_HAVE_DNNL
/* Primitives for L's shape at max_batch, kept in L->st, when the model runs convolutions on oneDNN
 * (cntk_dnnl_joins); else L->st stays NULL and the layer runs on OpenBLAS. */
kh_status cntk_dense_dnnl_setup(cntk_cpu_model *m, cntk_cpu_layer *L);
void cntk_dense_dnnl_teardown(cntk_cpu_model *m, cntk_cpu_layer *L);
kh_status cntk_dense_dnnl_forward(cntk_cpu_model *m, cntk_cpu_layer *L, int n);
kh_status cntk_dense_dnnl_backward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, float *dy, float *dx, int fused);
#endif

#endif
