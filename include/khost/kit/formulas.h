/* khost/kit/formulas.h — element-wise math written once, for C and CUDA alike.
 *
 * Every backend's element-wise kernels and the CPU reference kit call these, so a CPU test of the reference
 * exercises exactly the formulas a GPU kernel runs. Header-only; KH_HD marks them __host__ __device__ under
 * nvcc. Keras 2 semantics throughout (see docs/ARCHITECTURE.md, "Numerics").
 */
#ifndef KHOST_FORMULAS_H
#define KHOST_FORMULAS_H

#include <math.h>

#if defined(__CUDACC__)
#define KH_HD __host__ __device__ __forceinline__
#else
#define KH_HD static inline __attribute__((unused))
#endif

#define KH_EPSILON 1e-7 /* Keras backend epsilon: optimizers and cross-entropy clipping */

/* float: kh_sigmoid(), ... as the backends use them. On the host exp and tanh are khost/kit/fastmath.h's
 * branch-free versions (< 4 ulp), so element-wise loops over these formulas vectorise; device code keeps
 * CUDA's expf/tanhf. */
#define KH_T float
#define KH_FN(name) name
#if defined(__CUDACC__)
#define KH_EXP expf
#define KH_TANH tanhf
#else
#include "khost/kit/fastmath.h"
#define KH_EXP kh_expf_fast
#define KH_TANH kh_tanhf_fast
#endif
#define KH_SQRT sqrtf
#define KH_LOG logf
#include "khost/kit/formulas_impl.h"

/* double: kh_sigmoid_d(), ... the same text, for the float64 reference kit and gradient checks */
#define KH_T double
#define KH_FN(name) name##_d
#define KH_EXP exp
#define KH_TANH tanh
#define KH_SQRT sqrt
#define KH_LOG log
#include "khost/kit/formulas_impl.h"

#endif
