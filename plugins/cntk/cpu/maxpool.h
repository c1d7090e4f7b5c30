/* cpu/maxpool.h — MaxPooling2D's state, shared by the plain NCHW path (cpu/maxpool.c) and oneDNN's pooling
 * (cpu/maxpool_onednn.c, built with CNTK_HAVE_DNNL), which takes the layer when its input comes from a chained
 * oneDNN convolution in a blocked layout. */
#ifndef KHOST_CNTK_MAXPOOL_H
#define KHOST_CNTK_MAXPOOL_H

#include "cpu/cpu.h"
#ifdef CNTK_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

typedef struct cntk_pool_dnnl cntk_pool_dnnl;

typedef struct cntk_pool_state {
    int64_t C, H, W, OH, OW, KH, KW, SH, SW, PT, PL;
    int32_t *arg;          /* (max_batch, C, OH, OW) offset ih*W + iw of the maximum within its plane */
    cntk_pool_dnnl *dnnl;  /* oneDNN's pooling; NULL on the plain path */
} cntk_pool_state;

#ifdef CNTK_HAVE_DNNL
/* oneDNN's pooling for L when its input is a oneDNN convolution's output that can stay blocked (through
 * element-wise layers only, the convolution's published dnnl_out): KH_OK with p->dnnl set, or KH_OK and p->dnnl NULL when
 * the plain path is to run. Publishes L->dnnl_takes_in and L->dnnl_out (its own output's layout). */
kh_status cntk_pool_dnnl_setup(cntk_cpu_model *m, cntk_cpu_layer *L, cntk_pool_state *p);
void cntk_pool_dnnl_teardown(cntk_cpu_model *m, cntk_pool_state *p);
kh_status cntk_pool_dnnl_forward(cntk_cpu_model *m, cntk_cpu_layer *L, int n);
kh_status cntk_pool_dnnl_backward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, float *dy, float *dx);
/* From now on y and dy hold the pooling's tensors in that layout: its consumer reads them as they are. */
kh_status cntk_pool_dnnl_pass_on(cntk_cpu_model *m, cntk_cpu_layer *L);
/* From now on the output is reordered to NHWC (Keras's order, for a Flatten into a Dense) instead of NCHW, and
 * its gradient from NHWC. */
kh_status cntk_pool_dnnl_out_nhwc(cntk_cpu_model *m, cntk_cpu_layer *L);
#endif

#endif
