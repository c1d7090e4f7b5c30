/* khost/kit/flops.h — FLOPs and bytes of a model spec per sample, step and epoch (kit/base/flops.c; docs/PERFORMANCE.md). */
#ifndef KHOST_KIT_FLOPS_H
#define KHOST_KIT_FLOPS_H

#include <stddef.h>
#include <stdint.h>

#include "khost/abi.h"
#include "khost/model.h"
#include "khost/kit/spec.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kh_layer_flops {
    double forward;     /* per sample */
    double backward;    /* per training sample: weight gradients + the input gradients somebody needs */
    double input_grad;  /* the part of backward on the path to the layer's input (an LSTM's recurrence included) */
    double weight_grad; /* the part of backward that forms the weights' gradients (as many FLOPs as the forward) */
} kh_layer_flops;

typedef struct kh_model_flops {
    double forward;           /* per sample (inference forward = training forward) */
    double backward;          /* per training sample */
    double optimizer;         /* per training step: params x FLOPs per update (2 SGD, 9 RMSprop, 12 Adam, 16 Adadelta) */
    double params;
    /* Compulsory traffic (docs/PERFORMANCE.md, "Bytes"): every distinct byte a step must touch, read once if it
     * is read and written once if it is written, whatever the backend fuses or caches; a lower bound on what a
     * step moves, so the roofline drawn with it is an upper bound on what a step can reach. */
    double param_bytes_train; /* per training step: w and the optimizer's slots read and written */
    double param_bytes_eval;  /* per evaluation step: w read */
    double act_bytes_train;   /* per training sample: computed outputs and their gradients, gathered rows */
    double act_bytes_eval;    /* per evaluation sample */
    /* The distinct bytes behind that traffic, which decide the memory level a step runs from */
    double ws_param_train;    /* per training step: w and the slots */
    double ws_param_eval;     /* per evaluation step: w outside Embedding tables */
    double ws_act_train;      /* per training sample */
    double ws_act_eval;       /* per evaluation sample */
} kh_model_flops;

/* Count a spec whose shapes kh_spec_infer computed. per_layer (optional) receives n_layers entries.
 * KH_ERR_INVALID with err when the shapes do not match the spec or the optimizer is unknown. */
kh_status kh_spec_flops(const kh_model_spec *spec, const kh_model_shapes *sh, kh_model_flops *out,
                        kh_layer_flops *per_layer, char *err, size_t errlen);
/* One epoch: train_samples trained in steps of batch_size (the last partial), val_samples evaluated.
 * flops and bytes may be NULL. */
void kh_flops_epoch(const kh_model_flops *f, int64_t train_samples, int64_t batch_size, int64_t val_samples,
                    double *flops, double *bytes);

/* One phase of an epoch (its training steps, or its evaluation steps): FLOPs and compulsory bytes in all,
 * and one full step's working set. */
typedef struct kh_flops_phase {
    double flops, bytes, working_set;
} kh_flops_phase;

/* The epoch of kh_flops_epoch split into its training phase and its evaluation phase (the sums are
 * kh_flops_epoch's figures). */
void kh_flops_phases(const kh_model_flops *f, int64_t train_samples, int64_t batch_size, int64_t val_samples,
                     kh_flops_phase *train, kh_flops_phase *eval);

#ifdef __cplusplus
}
#endif
#endif
