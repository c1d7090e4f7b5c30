/* th_rt_cuda.h — the support code of theano's generated CUDA C (th_dialect_cuda.c), compiled by NVRTC with every
 * generated source: fixed-width integer types (NVRTC has no system headers; the plugin embeds this file and
 * the khost headers it includes, dropping their system includes), the grid-stride loop, and the device helpers
 * the generated kernels share (block reductions, the max-pooling window scan). Element-wise maths is
 * khost/kit/formulas.h's (__host__ __device__ under NVRTC, which defines __CUDACC__), dropout masks are
 * khost/kit/counter_rng.h's: the same text the CPU path and the reference kit run.
 *
 * Every kernel of a generated source is `extern "C" __global__`, its sizes constants except n, the batch rows of
 * the call, which it takes as an argument. The host launches them from the launch plan (th_cuda_plan.h); it,
 * not the kernels, calls cuBLAS and cuDNN. */
#ifndef TH_RT_CUDA_H
#define TH_RT_CUDA_H

#if defined(__CUDACC_RTC__)
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif

#include "khost/kit/counter_rng.h"
#include "khost/kit/formulas.h"

#define TH_TANH tanhf /* device tanh (formulas.h's device choice); th_expr_text writes TH_TANH */
#define TH_CU_BLOCK 256
#define TH_DEV __device__ __forceinline__ /* not static: unused helpers draw no warning */

/* for (int64_t i = first thread; i < n; i += all threads) */
#define TH_CU_LOOP(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)blockDim.x * gridDim.x)

/* The sum of v over the block (TH_CU_BLOCK threads), in a fixed tree: deterministic. Every thread gets it. */
TH_DEV double th_block_sum(double v) {
    __shared__ double part[TH_CU_BLOCK];
    part[threadIdx.x] = v;
    __syncthreads();
    for (int w = TH_CU_BLOCK / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    double s = part[0];
    __syncthreads();
    return s;
}

TH_DEV float th_warp_max(float v) {
    for (int d = 16; d > 0; d /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, d));
    return v;
}

TH_DEV float th_warp_sum(float v) {
    for (int d = 16; d > 0; d /= 2) v += __shfl_xor_sync(0xffffffffu, v, d);
    return v;
}

/* NHWC pooling window geometry (the generated kernels pass constants) */
typedef struct th_cu_pool {
    int64_t H, W, C, KH, KW, OH, OW, SH, SW, PT, PL;
} th_cu_pool;

/* Index of the first maximum of window (s, oh, ow) in channel c, in row-major window order (the CPU path's and
 * the reference kit's tie rule); -1 for a window that lies wholly in the padding. */
TH_DEV int64_t th_pool_argmax(const float *x, const th_cu_pool &g, int64_t s, int64_t oh, int64_t ow, int64_t c) {
    int64_t best = -1;
    float bv = 0.0f;
    for (int64_t kh = 0; kh < g.KH; kh++) {
        const int64_t ih = oh * g.SH + kh - g.PT;
        if (ih < 0 || ih >= g.H) continue;
        for (int64_t kw = 0; kw < g.KW; kw++) {
            const int64_t iw = ow * g.SW + kw - g.PL;
            if (iw < 0 || iw >= g.W) continue;
            const int64_t at = ((s * g.H + ih) * g.W + iw) * g.C + c;
            if (best < 0 || x[at] > bv) {
                best = at;
                bv = x[at];
            }
        }
    }
    return best;
}

#endif
