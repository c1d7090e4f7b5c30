/* khost/kit.h — the helper library (libkhost_kit.a) for modules and the host: shape inference for model
 * specs, a seeded RNG, Keras's weight initialisers and error-text helpers. Plain C, no global state.
 * Link it statically into a module (pkg-config khost); it never calls back into the khost binary.
 */
#ifndef KHOST_KIT_H
#define KHOST_KIT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "khost/abi.h"
#include "khost/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- error text ---------------------------------------------------------------------------------------- */
/* snprintf into buf (always terminated, truncated if needed); returns `status` so callers can
 * `return kh_errf(err, n, KH_ERR_DATA, "%s: bad magic 0x%08x", path, magic);` */
/* "openblas-0.3.21 (SkylakeX kernels)" from openblas_get_config() and openblas_get_corename() (the kernels in
 * use: see core/blas_tune.c), into buf; returns buf. */
const char *kh_openblas_describe(const char *config, const char *corename, char *buf, size_t n);

/* Seconds on the monotonic clock (for durations). */
double kh_now(void);

/* A backend's long-lived buffer: zeroed, from the host's allocator when it has one, else 64-byte aligned;
 * released with kh_host_free through the same host. */
void *kh_host_alloc(const kh_host_api *h, size_t bytes);
void kh_host_free(const kh_host_api *h, void *p);

kh_status kh_errf(char *buf, size_t n, kh_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
const char *kh_status_name(kh_status s);
const char *kh_layer_kind_name(uint32_t kind);   /* "dense", "conv2d", ... ("?" when unknown) */
const char *kh_activation_name(uint32_t act);    /* "relu", ... */
const char *kh_optimizer_name(uint32_t opt);
const char *kh_loss_name(uint32_t loss);

/* --- random numbers: xoshiro256** seeded through splitmix64; same seed, same stream everywhere -------- */
typedef struct kh_rng { uint64_t s[4]; } kh_rng;
void kh_rng_seed(kh_rng *r, uint64_t seed);
uint64_t kh_rng_u64(kh_rng *r);
double kh_rng_uniform(kh_rng *r);          /* [0, 1) with 53 random bits */
double kh_rng_normal(kh_rng *r);           /* standard normal (Box-Muller) */
uint64_t kh_rng_below(kh_rng *r, uint64_t n); /* uniform in [0, n), unbiased */
void kh_rng_shuffle_i64(kh_rng *r, int64_t *v, int64_t n); /* Fisher-Yates */
/* Derive an independent seed from a base seed and up to three indices (epoch, batch, ...). */
uint64_t kh_seed_mix(uint64_t seed, uint64_t a, uint64_t b, uint64_t c);

/* --- shape inference ------------------------------------------------------------------------------------ */
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

/* --- FLOPs and bytes (docs/PERFORMANCE.md, "How the numbers are counted") ---------------------------- */
typedef struct kh_layer_flops {
    double forward;  /* per sample */
    double backward; /* per training sample: weight gradients + the input gradients somebody needs */
} kh_layer_flops;

typedef struct kh_model_flops {
    double forward;           /* per sample (inference forward = training forward) */
    double backward;          /* per training sample */
    double optimizer;         /* per training step: params x FLOPs per update (2 SGD, 9 RMSprop, 12 Adam, 16 Adadelta) */
    double params;
    double param_bytes_train; /* per training step: parameter traffic (forward, input gradient, optimizer) */
    double param_bytes_eval;  /* per evaluation step */
    double act_bytes_train;   /* per training sample: activation traffic (coarse, +-50 %) */
    double act_bytes_eval;    /* per evaluation sample */
} kh_model_flops;

/* Count a spec whose shapes kh_spec_infer computed. per_layer (optional) receives n_layers entries.
 * KH_ERR_INVALID with err when the shapes do not match the spec or the optimizer is unknown. */
kh_status kh_spec_flops(const kh_model_spec *spec, const kh_model_shapes *sh, kh_model_flops *out,
                        kh_layer_flops *per_layer, char *err, size_t errlen);
/* One epoch: train_samples trained in steps of batch_size (the last partial), val_samples evaluated.
 * flops and bytes may be NULL. */
void kh_flops_epoch(const kh_model_flops *f, int64_t train_samples, int64_t batch_size, int64_t val_samples,
                    double *flops, double *bytes);

/* --- optimizers (Keras 2) ------------------------------------------------------------------------------ */
/* A spec with its zero fields replaced by Keras 2's defaults (lr, rho, betas, epsilon). */
kh_optimizer_spec kh_optimizer_resolve(const kh_optimizer_spec *o);
/* The learning rate of step `iterations` (0 first): lr / (1 + decay * iterations), and for Adam with the bias
 * correction sqrt(1 - b2^t) / (1 - b1^t) folded in — what every backend's update multiplies by. */
double kh_optimizer_step_lr(const kh_optimizer_spec *o, int64_t iterations);
/* Per-element state an optimizer keeps: SGD 0, RMSprop 1, Adam 2, Adadelta 2. */
int kh_optimizer_slots(uint32_t kind);

/* --- Keras 2 initialisers ------------------------------------------------------------------------------ */
/* Fill w (p->numel floats) for parameter p using init p->init, drawing from r. LSTM bias: zeros with the
 * forget quarter [u, 2u) set to 1. Orthogonal: QR of a normal matrix (rows = prod(dims[:-1])), as Keras. */
kh_status kh_init_param(kh_rng *r, const kh_param_shape *p, float *w);

#ifdef __cplusplus
}
#endif
#endif
