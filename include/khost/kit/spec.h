/* khost/kit/spec.h — validation and shape inference of a model spec: every layer's shapes and parameters (kit/base/spec.c). */
#ifndef KHOST_KIT_SPEC_H
#define KHOST_KIT_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "khost/abi.h"
#include "khost/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KH_MAX_SLOTS 6

typedef struct kh_param_shape {
    int32_t rank;
    int64_t dims[4];
    int64_t numel;
    uint32_t init;   /* resolved kh_init (never KH_INIT_DEFAULT) */
    int64_t fan_in, fan_out; /* as Keras computes them for glorot */
    const char *name; /* "kernel", "recurrent_kernel", "bias", "embeddings", "forward_kernel", ... */
} kh_param_shape;

typedef struct kh_layer_shapes {
    int32_t in_rank, out_rank;     /* per sample */
    int32_t in_shape[3], out_shape[3];
    int64_t in_numel, out_numel;   /* per sample */
    int32_t n_params;
    kh_param_shape params[KH_MAX_SLOTS];
} kh_layer_shapes;

typedef struct kh_model_shapes {
    int32_t n_layers;
    kh_layer_shapes *layers; /* n_layers entries, malloc'ed */
    int32_t in_rank;         /* the model's real input (one-hot expanded) */
    int32_t in_shape[3];
    int64_t total_params;
} kh_model_shapes;

/* Validate a spec and compute every layer's shapes. On error writes "layer N (kind): why" into err and
 * returns KH_ERR_INVALID (unknown kind, bad sizes, rank mismatch) or KH_ERR_NOMEM. */
kh_status kh_spec_infer(const kh_model_spec *spec, kh_model_shapes *out, char *err, size_t errlen);
void kh_model_shapes_free(kh_model_shapes *s);

#ifdef __cplusplus
}
#endif
#endif
