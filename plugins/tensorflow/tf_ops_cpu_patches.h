/* tf_ops_cpu_patches.h — Conv2D's forward as a contraction over image patches packed straight from the image
 * (tf_ops_cpu_patches.c), for the geometries whose filter count fills the register tile's columns. */
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

#endif
