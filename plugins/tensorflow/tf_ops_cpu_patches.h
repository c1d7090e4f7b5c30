/* tf_ops_cpu_patches.h — Conv2D and its two backprops as contractions over patches packed straight from the image
 * (tf_ops_cpu_patches.c), for the geometries whose channel counts fill the register tile's columns. */
#ifndef KHOST_TF_OPS_CPU_PATCHES_H
#define KHOST_TF_OPS_CPU_PATCHES_H

#include <stdint.h>

#include "khost/kit/geometry.h"

/* floats of scratch one thread needs: the packed kernel and one block's packed patches */
int64_t tf_patches_floats(const kh_conv2d_dims *d);
/* whether the contraction takes this convolution: OC a multiple of the tile's columns, the scratch enough */
int tf_patches_fit(const kh_conv2d_dims *d, int64_t scratch_floats);
/* blocks of output rows a batch of n splits into (the units of tf_patches_conv's range) */
int64_t tf_patches_blocks(const kh_conv2d_dims *d, int64_t n);
/* y (n, OH, OW, OC) rows of blocks [b0, b1) = patches of x (n, H, W, C) x w (KH, KW, C, OC); scratch holds
 * tf_patches_floats(d) floats of the calling thread */
void tf_patches_conv(const kh_conv2d_dims *d, const float *x, const float *w, float *y, int64_t n, int64_t b0,
                     int64_t b1, float *scratch);

/* The input gradient of d as a forward convolution (t: the output gradient's geometry as the input); 0 when the
 * contraction does not take it (a stride other than 1). */
int tf_patches_input_grad_dims(const kh_conv2d_dims *d, kh_conv2d_dims *t);
/* whether the input-gradient contraction takes d: stride 1, C a multiple of the tile's columns, the scratch enough
 * (tf_patches_floats of the turned geometry) */
int tf_patches_input_grad_fit(const kh_conv2d_dims *d, int64_t scratch_floats);
/* dx (n, H, W, C) rows of blocks [b0, b1) (tf_patches_blocks of the turned geometry) = the input gradient of dy
 * (n, OH, OW, OC) through w (KH, KW, C, OC); scratch as for tf_patches_conv of the turned geometry */
void tf_patches_input_grad(const kh_conv2d_dims *d, const float *dy, const float *w, float *dx, int64_t n,
                           int64_t b0, int64_t b1, float *scratch);
/* whether the kernel-gradient contraction takes d: stride 1, C a multiple of the tile's columns */
int tf_patches_filter_grad_fit(const kh_conv2d_dims *d);
/* floats of scratch one thread needs for it: a block's packed output gradient and patches */
int64_t tf_patches_filter_grad_floats(const kh_conv2d_dims *d);
/* dwt (OC, K = KH*KW*C), the transpose of the kernel gradient, += the contribution of samples [s0, s1) of x
 * (n, H, W, C) and dy (n, OH, OW, OC); scratch holds tf_patches_filter_grad_floats(d) floats */
void tf_patches_filter_grad(const kh_conv2d_dims *d, const float *x, const float *dy, float *dwt, int64_t s0,
                            int64_t s1, float *scratch);

#endif
