/* cpu/conv.h — Conv2D's geometry, shared by the im2col path (cpu/conv.c) and the oneDNN path
 * (cpu/conv_onednn.c, built with CNTK_HAVE_DNNL), which keep the same weight layout. */
#ifndef KHOST_CNTK_CONV_H
#define KHOST_CNTK_CONV_H

#include "cpu/cpu.h"
#ifdef CNTK_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

typedef struct cntk_conv_dnnl cntk_conv_dnnl;

typedef struct cntk_conv_geom {
    int64_t C, H, W, F, OH, OW, KH, KW, SH, SW, PT, PL;
    int64_t K, P;   /* K = C*KH*KW rows of col, P = OH*OW pixels per sample */
    int64_t parts;  /* pool threads: one scratch slot each */
    int64_t slot;   /* floats per slot: col [K, P], partial dWg [F, K], partial db [F] */
    cntk_conv_dnnl *dnnl; /* the oneDNN primitives; NULL on the im2col path */
} cntk_conv_geom;

#ifdef CNTK_HAVE_DNNL
/* Primitives for the layer's shape at max_batch (the weights stay Wg [F, C*KH*KW], oneDNN's oihw). */
kh_status cntk_conv_dnnl_setup(cntk_cpu_model *m, cntk_cpu_layer *L, cntk_conv_geom *g);
void cntk_conv_dnnl_teardown(cntk_cpu_model *m, cntk_conv_geom *g);
/* After every layer's setup: chain each oneDNN convolution to the next convolution or oneDNN pooling after
 * it (only element-wise layers between) that takes its output in that layout (cpu/conv_onednn.c). */
kh_status cntk_conv_dnnl_chain(cntk_cpu_model *m);
kh_status cntk_conv_dnnl_forward(cntk_cpu_model *m, cntk_cpu_layer *L, int n);
kh_status cntk_conv_dnnl_backward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, float *dy, float *dx, int fused);
#endif

#endif
