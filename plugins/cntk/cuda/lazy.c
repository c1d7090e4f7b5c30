/* cuda/lazy.c — cntk.so's side of the GPU half (cuda/half.h): the CUDA executor of cntk_cuda.so, which
 * khost/kit/half.h loads on the first get_caps(cuda) or open on a CUDA device — never in a cpu cell, so cpu cells
 * map no cuBLAS/cuDNN. When the half cannot be loaded (or was not built) the CUDA kind is unavailable and the
 * note / error gives the loader's reason. */
#include "cuda/half.h"

#ifndef CNTK_GPU_HALF
#define CNTK_GPU_HALF 0 /* 1: CMake built cntk-cuda/cntk_cuda.so beside this module */
#endif
static kh_half g_half = KH_HALF_INIT("cntk", "cntk-cuda", "cntk_cuda.so", CNTK_CUDA_HALF_ENTRY, CNTK_GPU_HALF,
                                     CNTK_CUDA_HALF_VERSION, sizeof(cntk_session), sizeof(cntk_model),
                                     sizeof(cntk_plan));

const cntk_exec *cntk_cuda_exec(const char **why) {
    const cntk_cuda_table *t = kh_half_load(&g_half);
    if (!t) *why = kh_half_why(&g_half);
    return t ? &t->exec : NULL;
}
