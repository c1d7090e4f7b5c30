/* cuda/half.h — the contract between cntk.so and its GPU half, cntk_cuda.so.
 *
 * Why two objects: the CUDA executor links cuBLAS and cuDNN, whose pages (~150 MiB) a dynamic loader maps
 * as soon as the module that needs them is loaded — in every cpu cell too, where they would only inflate the
 * peak RSS a benchmark records. cntk.so therefore carries no CUDA code; cuda/lazy.c dlopens
 * <folder of cntk.so>/cntk-cuda/cntk_cuda.so the first time the CUDA device kind is asked for (get_caps or
 * open) and routes every cntk_cuda_* call through the table below. The half exports exactly one symbol,
 * CNTK_CUDA_HALF_ENTRY; its folder keeps it out of the host's plugin discovery (it is not a khost module).
 * Both objects are built from the same tree: the table carries the sizes of the structures they share, and
 * a half from another build is refused. */
#ifndef KHOST_CNTK_CUDA_HALF_H
#define KHOST_CNTK_CUDA_HALF_H

#include "cntk.h"

#define CNTK_CUDA_HALF_ENTRY "cntk_cuda_half_entry"
#define CNTK_CUDA_HALF_DIR "cntk-cuda"
#define CNTK_CUDA_HALF_FILE "cntk_cuda.so"
#define CNTK_CUDA_HALF_VERSION 1u

typedef struct cntk_cuda_table {
    uint32_t version;
    uint32_t session_size, model_size, plan_size; /* sizeof the shared structures, as the half sees them */
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

typedef const cntk_cuda_table *(*cntk_cuda_half_fn)(void);
/* Defined (and exported) by cntk_cuda.so only; cntk.so finds it with dlsym. */
const cntk_cuda_table *cntk_cuda_half_entry(void);

#endif
