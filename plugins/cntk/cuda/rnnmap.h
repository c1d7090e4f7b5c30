/* cuda/rnnmap.h — Keras's canonical LSTM weights <-> cuDNN's packed RNN weight space, in plain C.
 *
 * No CUDA here: the CUDA executor asks cuDNN (cudnnGetRNNWeightParams + cudnnGetTensorNdDescriptor) where
 * each matrix and bias lives, records that in a cntk_rnn_layout (offsets in floats from the weight space's
 * base, shapes, row strides), and these functions move numbers between that space and Keras's tensors on the
 * host. The unit tests (tests/backend/cuda_host/test_cntk_rnnmap.c) drive them with synthetic layouts on the CPU.
 *
 * The correspondence, per direction d (pseudo-layer d of a one-layer RNN; Bidirectional: 0 forward,
 * 1 backward = Keras slots 3..5):
 *   cuDNN linLayerID g (0..3) = gates i, f, c(g), o applied to the input: matrix (u rows, in cols), row-major,
 *                                element [k][j] multiplies x[j] into unit k of gate g
 *                                 == Keras kernel[j][g*u + k]            (kernel [in, 4u]: a transpose)
 *   cuDNN linLayerID 4 + g       = the same gate applied to h: matrix (u, u)
 *                                 == Keras recurrent_kernel[j][g*u + k]  (recurrent [u, 4u])
 *   input bias of linLayerID g   == Keras bias[g*u + k]                  (bias [4u])
 *   recurrent bias of 4 + g      == 0 (Keras has one bias; CUDNN_RNN_DOUBLE_BIAS adds both to the same
 *                                  pre-activation, so the executor keeps this one at zero and its gradient
 *                                  cleared). Absent (bias rows 0) with the single-bias modes.
 * The gate order is the same on both sides (i, f, c, o); the mapping still names every gate explicitly.
 */
#ifndef KHOST_CNTK_CUDA_RNNMAP_H
#define KHOST_CNTK_CUDA_RNNMAP_H

#include <stddef.h>
#include <stdint.h>

#include "khost/abi.h"

#define CNTK_RNN_LIN 8 /* linear layers of an LSTM: 4 gates x (input, recurrent) */

/* One matrix (rows x cols, row stride ld >= cols) or bias vector (rows x 1, ld 1) in the weight space.
 * off < 0 (and rows == 0) means absent. */
typedef struct cntk_rnn_region {
    int64_t off, rows, cols, ld;
} cntk_rnn_region;

typedef struct cntk_rnn_layout {
    int32_t dirs;          /* 1 or 2 */
    int64_t in, u;         /* input features, units per direction */
    int64_t space;         /* floats in the weight space */
    cntk_rnn_region mat[2][CNTK_RNN_LIN];
    cntk_rnn_region bias[2][CNTK_RNN_LIN];
} cntk_rnn_layout;

/* Check a layout as reported: shapes ((u, in) for 0..3, (u, u) for 4..7, biases (u)), every region inside
 * the space, no two regions overlapping, input biases present. KH_ERR_UNSUPPORTED with the reason in err. */
kh_status cntk_rnn_layout_check(const cntk_rnn_layout *L, char *err, size_t errlen);

/* Canonical slot (0 kernel, 1 recurrent, 2 bias; + 3 for the backward direction) -> weight space. Writing
 * the bias slot also zeroes the direction's recurrent biases. Other parts of the space are untouched. */
void cntk_rnn_pack_slot(const cntk_rnn_layout *L, int slot, const float *canon, float *space);
/* Weight space -> canonical slot. The bias is input bias + recurrent bias (the effective Keras bias; for
 * gradients the executor keeps the recurrent part zero, so this is dL/db). */
void cntk_rnn_unpack_slot(const cntk_rnn_layout *L, int slot, const float *space, float *canon);
/* Elements of a canonical slot: [in, 4u], [u, 4u], [4u]. */
int64_t cntk_rnn_slot_numel(const cntk_rnn_layout *L, int slot);

/* The recurrent-bias ranges of the space (merged where adjacent), for clearing their gradients after each
 * backward: up to max ranges into off/len (floats); returns the number of ranges (0 when there are none). */
int cntk_rnn_rec_bias_ranges(const cntk_rnn_layout *L, int64_t *off, int64_t *len, int max);

#endif
