/* tests/backend/parity.h — what the CPU and GPU parity tests of every backend share: the error measure and its
 * CHECK, random batches in the host's layouts, spec builders, and the small models both train (every layer
 * kind, activation, loss, optimizer and input path: f32, NCHW images, embedding indices, one-hot as a row
 * lookup, one-hot expanded). */
#ifndef KHOST_TESTS_BACKEND_PARITY_H
#define KHOST_TESTS_BACKEND_PARITY_H

#include "backend_testlib.h"

/* max |a - b| / max(max |b|, floor); a NaN anywhere in a makes it infinite */
double kb_rel_err(const float *a, const double *b, int64_t n, double floor);
/* CHECK kb_rel_err(a, b, n, 1e-3) <= tol, naming the model, the tensor and (when not 0) the inputs' seed;
 * KHOST_TEST_VERBOSE=1 prints every error. */
void kb_compare(const char *model, const char *what, const float *a, const double *b, int64_t n, double tol,
                uint64_t seed);

/* A random batch for the spec: x_nhwc as tasks deliver it (the reference kit's input), x_backend as the
 * host hands it to the backend (NCHW images when its caps ask for NCHW, as cntk's do). */
typedef struct kb_batch {
    int64_t n, per;
    kh_tensor x_nhwc, x_backend;
    float *xf_nhwc, *xf_nchw;
    int32_t *xi, *labels;
} kb_batch;
void kb_make_batch(kb_batch *bt, const kh_model_spec *sp, int64_t n, kh_rng *r);
void kb_free_batch(kb_batch *bt);

/* Keras-default optimizer fields filled in explicitly (rho, betas, epsilon). */
kh_optimizer_spec kb_opt(uint32_t kind, float lr, float decay);
/* A model spec over `layers` (kept by pointer): input (a[, b[, c]]) of `rank`, one-hot depth or 0. */
kh_model_spec kb_spec(const char *name, uint32_t dtype, int rank, int a, int b, int c, int onehot,
                      const kh_layer_spec *layers, int n, uint32_t loss, kh_optimizer_spec o, int classes);
#define KB_L(...) ((kh_layer_spec){__VA_ARGS__})
#define KB_N(arr) (int)(sizeof arr / sizeof arr[0])

/* The small models both parity tests train; returns their number. */
int kb_small_models(const kh_model_spec **models);

/* What a GPU parity test checks before its CUDA open, on any machine: the reference kit builds every one of
 * the n models (a CHECK per model); 1 when all build. */
int kb_ref_prerequisites(const kh_model_spec *specs, int n);
/* Dropout with masks on (deterministic = 0) in b's open session, by its properties (nothing to compare it
 * with): one Dropout(0.3) layer over 64 inputs of (8, 8, 16) in image_layout (KH_LAYOUT_NHWC or _NCHW): the
 * kept fraction, the inverted scaling, the backward using the forward's mask, a new mask for the next forward. */
void kb_check_dropout(kb_backend *b, uint32_t image_layout, uint64_t seed);

#endif
