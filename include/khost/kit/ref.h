/* khost/kit/ref.h — the CPU reference kit: the oracle every backend on every device is checked against.
 *
 * Plain, readable float64 C in the style of llm.c's CPU reference: one file per layer kind
 * (kit/ref/<layer>.c), each a pair kh_ref_<layer>_forward / kh_ref_<layer>_backward. Double precision
 * because it is the oracle and the gradient checks are finite differences in float64; every element-wise
 * formula comes from khost/kit/formulas.h (the _d variants), the same text the backends' kernels run.
 *
 * Conventions (as llm.c):
 *   - argument order: outputs, saved values, inputs, parameters, sizes;
 *   - a shape comment on every buffer, batch first, channels last (NHWC images, (B, T, C) sequences);
 *   - backward: parameter gradients ACCUMULATE (+=), activation gradients OVERWRITE. A NULL input-gradient
 *     pointer means "not needed" (the layer sits on the model input);
 *   - functions that cannot fail return void; those that allocate scratch or validate indices return
 *     kh_status and never exit or abort.
 * Weights are in Keras's canonical layouts (khost/model.h).
 */
#ifndef KHOST_REF_H
#define KHOST_REF_H

#include <stddef.h>
#include <stdint.h>

#include "khost/abi.h"
#include "khost/kit/deprecated.h"
#include "khost/kit/geometry.h"
#include "khost/kit/rng.h"
#include "khost/kit/spec.h"
#include "khost/model.h"
#include "khost/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- activations (kh_activation; softmax over the last axis) -------------------------------------------- */
/* out (rows, C) = act(inp (rows, C)); out may alias inp. */
void kh_ref_activation_forward(double *out, const double *inp, int64_t rows, int64_t C, int act);
/* dinp (rows, C) from dout (rows, C) and the forward's out (rows, C); dinp may alias dout. */
void kh_ref_activation_backward(double *dinp, const double *dout, const double *out, int64_t rows, int64_t C,
                                int act);
/* The pre-activation gradient of one element: y its output, dy its output gradient; for softmax s must be
 * kh_ref_softmax_dot(row of y, row of dy, C) of its row (ignored otherwise). Used by fused activations. */
double kh_ref_act_dpre(int act, double y, double dy, double s);
double kh_ref_softmax_dot(const double *y, const double *dy, int64_t C);
/* The same for a row of C: dz (C) overwritten; with db, db (C) += dz (a fused layer's bias gradient). dz may
 * alias dy. */
void kh_ref_act_dpre_row(int act, const double *y, const double *dy, int64_t C, double *dz, double *db);

/* --- Dense: out = act(inp @ w + b) ---------------------------------------------------------------------- */
/* out (B, OC); inp (B, C); w (C, OC); b (OC) or NULL */
void kh_ref_dense_forward(double *out, const double *inp, const double *w, const double *b, int64_t B, int64_t C,
                          int64_t OC, int act);
/* dinp (B, C) or NULL; dw (C, OC) +=; db (OC) += or NULL; dout (B, OC); out (B, OC) the forward's output.
 * Allocates one row of scratch: KH_ERR_NOMEM on failure. */
kh_status kh_ref_dense_backward(double *dinp, double *dw, double *db, const double *dout, const double *out,
                                const double *inp, const double *w, int64_t B, int64_t C, int64_t OC, int act);

/* --- Dropout (inverted): out = inp * keep / (1 - rate) --------------------------------------------------- */
/* mask (N) 1 = keep, 0 = drop; a NULL mask or rate 0 is the identity (inference, deterministic runs). */
void kh_ref_dropout_forward(double *out, const uint8_t *mask, const double *inp, int64_t N, double rate);
void kh_ref_dropout_backward(double *dinp, const double *dout, const uint8_t *mask, int64_t N, double rate);
/* Draw a mask: keep with probability 1 - rate (uniform < rate drops), one draw per element in order. */
void kh_ref_dropout_mask(uint8_t *mask, int64_t N, double rate, kh_rng *r);

/* --- Flatten: a copy (row-major NHWC flattens exactly as Keras's channels_last Flatten) ------------------ */
void kh_ref_flatten_forward(double *out, const double *inp, int64_t N);
void kh_ref_flatten_backward(double *dinp, const double *dout, int64_t N);

/* out (B, OH, OW, OC) = act(conv(inp (B, H, W, C), w (KH, KW, C, OC)) + b (OC)); zero padding; b may be NULL */
void kh_ref_conv2d_forward(double *out, const double *inp, const double *w, const double *b,
                           const kh_conv2d_dims *d, int act);
/* dinp (B, H, W, C) or NULL; dw (KH, KW, C, OC) +=; db (OC) += or NULL; dout, out (B, OH, OW, OC).
 * Allocates one pixel of scratch: KH_ERR_NOMEM on failure. */
kh_status kh_ref_conv2d_backward(double *dinp, double *dw, double *db, const double *dout, const double *out,
                                 const double *inp, const double *w, const kh_conv2d_dims *d, int act);

/* out (B, OH, OW, C) = max over each window of inp (B, H, W, C); 'same' windows skip the padding. */
void kh_ref_maxpool2d_forward(double *out, const double *inp, const kh_conv2d_dims *d);
/* dinp (B, H, W, C): each dout goes to the FIRST maximum of its window in row-major window order. */
void kh_ref_maxpool2d_backward(double *dinp, const double *dout, const double *inp, const kh_conv2d_dims *d);

/* --- Embedding: a gather; backward a scatter-add --------------------------------------------------------- */
/* out (N, D) = table[idx[n]]; idx (N) in [0, V) else KH_ERR_INVALID (out untouched past the bad row). */
kh_status kh_ref_embedding_forward(double *out, const int32_t *idx, const double *table, int64_t N, int64_t V,
                                   int64_t D);
/* dtable (V, D) += dout (N, D) scattered by idx (N); indices were validated by the forward. */
void kh_ref_embedding_backward(double *dtable, const double *dout, const int32_t *idx, int64_t N, int64_t D);

/* --- LSTM (Keras 2): z = x W + h U + b, gates i, f, c, o; c = f c' + i tanh(zc); h = o tanh(c) ----------- */
/* Saved values are indexed by real time t, whichever direction runs (reverse = Keras go_backwards, used by
 * the backward half of Bidirectional: steps run t = T-1 .. 0 and h[t] is the state after consuming x[t]).
 * Initial h = c = 0.
 *   out    (B, T, U) when return_sequences (h at every t), else (B, U): the LAST processed step
 *          (t = T-1, or t = 0 when reverse); may be NULL (only the saved values are written)
 *   h, c   (B, T, U) saved;  gates (B, T, 4U) saved activated gates [i, f, g, o]
 *   inp    (B, T, C);  W (C, 4U);  U (U, 4U);  b (4U) */
void kh_ref_lstm_forward(double *out, double *h, double *c, double *gates, const double *inp, const double *W,
                         const double *Uw, const double *b, int64_t B, int64_t T, int64_t C, int64_t U,
                         int return_sequences, int reverse);
/* dinp (B, T, C) or NULL; dW (C, 4U) +=; dU (U, 4U) +=; db (4U) +=; dout shaped like out. Scratch is
 * allocated: KH_ERR_NOMEM on failure (gradients are then unspecified). */
kh_status kh_ref_lstm_backward(double *dinp, double *dW, double *dU, double *db, const double *dout,
                               const double *h, const double *c, const double *gates, const double *inp,
                               const double *W, const double *Uw, int64_t B, int64_t T, int64_t C, int64_t U,
                               int return_sequences, int reverse);

/* --- Bidirectional(LSTM), merge 'concat': forward LSTM, backward LSTM on the reversed sequence ---------- */
/* out (B, T, 2U) or (B, 2U), forward half first; with return_sequences the backward half is aligned with
 * time (Keras re-reverses it). Saved per direction: h, c (B, T, U), gates (B, T, 4U); 0 = forward,
 * 1 = backward. Parameters per direction: W[d] (C, 4U), U[d] (U, 4U), b[d] (4U). */
void kh_ref_bilstm_forward(double *out, double *h[2], double *c[2], double *gates[2], const double *inp,
                           const double *W[2], const double *Uw[2], const double *b[2], int64_t B, int64_t T,
                           int64_t C, int64_t U, int return_sequences);
/* dinp (B, T, C) or NULL; dW[d], dU[d], db[d] += ; dout shaped like out. Scratch: KH_ERR_NOMEM. */
kh_status kh_ref_bilstm_backward(double *dinp, double *dW[2], double *dU[2], double *db[2], const double *dout,
                                 const double *h[2], const double *c[2], const double *gates[2], const double *inp,
                                 const double *W[2], const double *Uw[2], int64_t B, int64_t T, int64_t C, int64_t U,
                                 int return_sequences);

/* --- GlobalAveragePooling1D: out (B, C) = mean over T of inp (B, T, C) ----------------------------------- */
void kh_ref_gap1d_forward(double *out, const double *inp, int64_t B, int64_t T, int64_t C);
void kh_ref_gap1d_backward(double *dinp, const double *dout, int64_t B, int64_t T, int64_t C);

/* --- losses and accuracy (Keras 2: probabilities clipped to [1e-7, 1 - 1e-7], mean over the batch) ------ */
/* probs (B, C) softmax outputs, labels (B) class indices; returns the mean loss. */
double kh_ref_cce_forward(const double *probs, const int32_t *labels, int64_t B, int64_t C);
/* dlogits (B, C): gradient of the mean loss w.r.t. the pre-softmax logits (zero where the clip binds). */
void kh_ref_cce_backward(double *dlogits, const double *probs, const int32_t *labels, int64_t B, int64_t C);
/* probs (B) sigmoid outputs, labels (B) 0/1; returns the mean loss. */
double kh_ref_bce_forward(const double *probs, const int32_t *labels, int64_t B);
/* dlogits (B): gradient of the mean loss w.r.t. the pre-sigmoid logits (zero where the clip binds). */
void kh_ref_bce_backward(double *dlogits, const double *probs, const int32_t *labels, int64_t B);
/* Correct predictions: argmax (first maximum) == label; binary: (p > 0.5) == label (0.5 counts as 0). */
int64_t kh_ref_accuracy_categorical(const double *probs, const int32_t *labels, int64_t B, int64_t C);
int64_t kh_ref_accuracy_binary(const double *probs, const int32_t *labels, int64_t B);

/* --- optimizers (Keras 2), one tensor at a time -------------------------------------------------------- */
/* lr_t = lr / (1 + decay * iterations), iterations counted before this update (0 on the first step). */
double kh_ref_lr_decayed(double lr, double decay, int64_t iterations);
/* Adam's bias-corrected step size from an already decayed lr: lr sqrt(1 - b2^t) / (1 - b1^t), t = it + 1. */
double kh_ref_adam_lr_t(double lr, double beta_1, double beta_2, int64_t iterations);
/* w, state, g: (n). lr is the step's lr (decayed; for Adam already bias-corrected by kh_ref_adam_lr_t). */
void kh_ref_sgd_update(double *w, const double *g, int64_t n, double lr);
void kh_ref_rmsprop_update(double *w, double *a, const double *g, int64_t n, double lr, double rho, double eps);
void kh_ref_adam_update(double *w, double *m, double *v, const double *g, int64_t n, double lr_t, double beta_1,
                        double beta_2, double eps);
void kh_ref_adadelta_update(double *w, double *a, double *d, const double *g, int64_t n, double lr, double rho,
                            double eps);

/* --- the whole-model reference ---------------------------------------------------------------------------- */
/* Built from a kh_model_spec with kh_spec_infer's shapes. Inputs arrive as the task produces them (NHWC
 * images, (N, T) i32 indices, (N, T, C) features); input_onehot models take i32 indices and expand them.
 * Weights are (layer, slot) tensors in the canonical layouts of khost/model.h, zero until set. Dropout is
 * off until kh_ref_model_set_dropout enables it. Not thread-safe; one model per thread. */
typedef struct kh_ref_model kh_ref_model;

kh_status kh_ref_model_create(const kh_model_spec *spec, kh_ref_model **out, char *err, size_t errlen);
void kh_ref_model_free(kh_ref_model *m);
const kh_model_shapes *kh_ref_model_shapes(const kh_ref_model *m);
const char *kh_ref_model_last_error(const kh_ref_model *m);

/* Weights and gradients, (layer, slot) in canonical layout; n must equal the slot's numel. The pointers of
 * kh_ref_model_weight / kh_ref_model_grad stay valid for the model's life (NULL for a bad layer/slot). */
kh_status kh_ref_model_set_weight(kh_ref_model *m, int32_t layer, int32_t slot, const double *w, int64_t n);
kh_status kh_ref_model_set_weight_f32(kh_ref_model *m, int32_t layer, int32_t slot, const float *w, int64_t n);
kh_status kh_ref_model_get_weight(const kh_ref_model *m, int32_t layer, int32_t slot, double *w, int64_t n);
double *kh_ref_model_weight(kh_ref_model *m, int32_t layer, int32_t slot);
const double *kh_ref_model_grad(const kh_ref_model *m, int32_t layer, int32_t slot);

/* enabled != 0: training-mode forwards draw fresh masks, the k-th training forward since this call from
 * kh_seed_mix(seed, k, layer, 0) (k from 0). */
void kh_ref_model_set_dropout(kh_ref_model *m, int enabled, uint64_t seed);

/* Forward of a batch: x (n, input...) f32 or i32 as the task produces it (images NHWC). training != 0 applies
 * dropout when enabled. The output (n, out...) is then at kh_ref_model_output. */
kh_status kh_ref_model_forward(kh_ref_model *m, const kh_tensor *x, int training);
/* The same from a float64 input (n, input...) for f32-input models (finite-difference checks). */
kh_status kh_ref_model_forward_d(kh_ref_model *m, const double *x, int64_t n, int training);
const double *kh_ref_model_output(const kh_ref_model *m, int64_t *numel);

/* Back-propagate dy (n, out...) through the last forward. Parameter gradients are OVERWRITTEN (as the
 * backends' probes); the input gradient (n, input...) is at kh_ref_model_input_grad (NULL for index input). */
kh_status kh_ref_model_backward(kh_ref_model *m, const double *dy);
const double *kh_ref_model_input_grad(const kh_ref_model *m);

/* Loss of the last forward against labels (n) i32: mean loss and number correct. */
kh_status kh_ref_model_loss(kh_ref_model *m, const int32_t *labels, double *loss_mean, int64_t *correct);
/* Gradients of the mean loss of the last forward (through the final softmax/sigmoid, fused): overwrites
 * the parameter gradients and the input gradient like kh_ref_model_backward. */
kh_status kh_ref_model_loss_backward(kh_ref_model *m, const int32_t *labels);
/* One optimizer step with the current gradients (iterations counted before the update, then + 1). */
kh_status kh_ref_model_apply_gradients(kh_ref_model *m);
int64_t kh_ref_model_iterations(const kh_ref_model *m);
/* forward (training) + loss + loss_backward + apply_gradients; loss_mean / correct may be NULL. */
kh_status kh_ref_model_train_step(kh_ref_model *m, const kh_tensor *x, const int32_t *labels, double *loss_mean,
                                  int64_t *correct);

/* Source compatibility (docs/ABI.md): the geometry's names from before it moved to khost/kit/geometry.h. The
 * old type is a macro, so both of its 1.2 spellings (kh_ref_conv2d_dims and struct kh_ref_conv2d_dims) work. */
#ifdef KHOST_WARN_DEPRECATED
#define kh_ref_conv2d_dims _Pragma("GCC warning \"kh_ref_conv2d_dims is deprecated: use kh_conv2d_dims instead\"") kh_conv2d_dims
#else
#define kh_ref_conv2d_dims kh_conv2d_dims
#endif
KH_DEPRECATED("kh_conv2d_geometry") static inline kh_status
kh_ref_conv2d_geometry(kh_conv2d_dims *d, int64_t B, int64_t H, int64_t W, int64_t C, int64_t KH, int64_t KW, int64_t OC,
                       int64_t SH, int64_t SW, int padding) {
    return kh_conv2d_geometry(d, B, H, W, C, KH, KW, OC, SH, SW, padding);
}

#ifdef __cplusplus
}
#endif
#endif
