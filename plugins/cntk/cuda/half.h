/* cuda/half.h — the contract between cntk.so and its GPU half, cntk-cuda/cntk_cuda.so (khost/kit/half.h says
 * why there are two objects and how the half is found and checked). cntk.so carries no CUDA code; cuda/lazy.c
 * loads the half the first time the CUDA device kind is asked for (get_caps or open), and the session keeps the
 * executor the table below holds. The half exports exactly one symbol, CNTK_CUDA_HALF_ENTRY. */
#ifndef KHOST_CNTK_CUDA_HALF_H
#define KHOST_CNTK_CUDA_HALF_H

#include "plan/plan.h"
#include "khost/kit/half.h"

#define CNTK_CUDA_HALF_ENTRY "cntk_cuda_half_entry"
#define CNTK_CUDA_HALF_VERSION 2u

typedef struct cntk_cuda_table {
    kh_half_header head; /* version, sizeof(cntk_session), sizeof(cntk_model), sizeof(cntk_plan) */
    cntk_exec exec;      /* the CUDA executor */
} cntk_cuda_table;

/* cntk.so's side (cuda/lazy.c): the CUDA executor, the half loaded on first use; NULL with *why set (the
 * loader's reason, or "built without CUDA"). */
const cntk_exec *cntk_cuda_exec(const char **why);

/* Defined (and exported) by cntk_cuda.so only; the loader finds it with dlsym. */
const kh_half_header *cntk_cuda_half_entry(void);

#endif
