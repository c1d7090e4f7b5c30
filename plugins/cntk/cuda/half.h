/* cuda/half.h — the contract between cntk.so and its GPU half, cntk-cuda/cntk_cuda.so (khost/kit/half.h says
 * why there are two objects and how the half is found and checked). cntk.so carries no CUDA code; cuda/lazy.c
 * loads the half the first time the CUDA device kind is asked for (get_caps or open) and routes every
 * cntk_cuda_* call through the table below. The half exports exactly one symbol, CNTK_CUDA_HALF_ENTRY. */
#ifndef KHOST_CNTK_CUDA_HALF_H
#define KHOST_CNTK_CUDA_HALF_H

#include "cntk.h"
#include "khost/kit/half.h"

#define CNTK_CUDA_HALF_ENTRY "cntk_cuda_half_entry"
#define CNTK_CUDA_HALF_VERSION 1u

typedef struct cntk_cuda_table {
    kh_half_header head; /* version, sizeof(cntk_session), sizeof(cntk_model), sizeof(cntk_plan) */
    void (*caps)(kh_caps *c);
    kh_status (*open)(cntk_session *s, char *err, size_t errlen);
    void (*close)(cntk_session *s);
    kh_status (*environment)(cntk_session *s, char *buf, size_t n);
    kh_status (*compile)(cntk_model *m);
    void (*free_model)(cntk_model *m);
    kh_status (*set_weight)(cntk_model *m, int32_t layer, int32_t slot, const kh_tensor *w);
    kh_status (*get_weight)(cntk_model *m, int32_t layer, int32_t slot, kh_tensor *w);
    kh_status (*get_grad)(cntk_model *m, int32_t layer, int32_t slot, kh_tensor *g);
    kh_status (*train)(cntk_model *m, const kh_tensor *x, const kh_tensor *y);
    kh_status (*eval)(cntk_model *m, const kh_tensor *x, const kh_tensor *y);
    kh_status (*predict)(cntk_model *m, const kh_tensor *x, kh_tensor *out);
    kh_status (*forward_probe)(cntk_model *m, const kh_tensor *x, kh_tensor *out);
    kh_status (*backward_probe)(cntk_model *m, const kh_tensor *dy, kh_tensor *dx);
    kh_status (*read_metrics)(cntk_model *m, uint32_t phase, kh_metrics *out, int32_t reset);
    kh_status (*sync)(cntk_model *m);
} cntk_cuda_table;

/* Defined (and exported) by cntk_cuda.so only; the loader finds it with dlsym. */
const kh_half_header *cntk_cuda_half_entry(void);

#endif
