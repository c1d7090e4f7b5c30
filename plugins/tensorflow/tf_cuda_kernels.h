/* tf_cuda_kernels.h — the tensorflow GPU path's own kernels (tf_cuda_kernels.cu), as C launchers: every op
 * that is not a cuBLAS or cuDNN call. Element-wise math comes from khost/kit/formulas.h (the text the CPU kernels
 * and the reference kit run). Each launcher enqueues on `s` and returns the launch status; none synchronises. */
#ifndef KHOST_TF_CUDA_KERNELS_H
#define KHOST_TF_CUDA_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tfk_pool {
    int32_t N, H, W, C, OH, OW, KH, KW, SH, SW, PT, PL;
} tfk_pool;

/* element-wise ops (the host maps kh_gop onto these: the CUDA side does not include khost/kit/graph.h) */
typedef enum tfk_ew_op {
    TFK_ADD, TFK_SUB, TFK_MUL, TFK_NEG, TFK_RELU, TFK_SIGMOID, TFK_TANH, TFK_RELU_GRAD, TFK_SIGMOID_GRAD,
    TFK_TANH_GRAD
} tfk_ew_op;
typedef enum tfk_opt_kind { TFK_SGD, TFK_RMSPROP, TFK_ADAM, TFK_ADADELTA } tfk_opt_kind;

typedef struct tfk_opt {
    int32_t kind; /* tfk_opt_kind */
    float lr;     /* the step's lr (decay and Adam's bias correction folded in) */
    float rho, b1, b2, eps;
} tfk_opt;

#define TFK_ADDN_MAX 8

/* y[0..n) = 0 */
cudaError_t tfk_zero(cudaStream_t s, float *y, int64_t n);
/* element-wise op (tfk_ew_op; the gradients take (y, dy)) */
cudaError_t tfk_ew(cudaStream_t s, int op, const float *a, const float *b, float *y, int64_t n);
/* y = sum of k inputs (k <= TFK_ADDN_MAX); y may be one of them */
cudaError_t tfk_addn(cudaStream_t s, const float *const *in, int k, float *y, int64_t n);
/* y (rows, c) = x + b[col]; db (c) = column sums of dy (rows, c), in row order per column */
cudaError_t tfk_bias_add(cudaStream_t s, const float *x, const float *b, float *y, int64_t rows, int64_t c);
cudaError_t tfk_bias_add_grad(cudaStream_t s, const float *dy, float *db, int64_t rows, int64_t c);
/* softmax over rows; dx = y (dy - sum(y dy)) per row */
cudaError_t tfk_softmax(cudaStream_t s, const float *x, float *y, int64_t rows, int64_t c);
cudaError_t tfk_softmax_grad(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t rows, int64_t c);
/* per-sample loss of probabilities p (n, c) (c == 1: binary) against labels */
cudaError_t tfk_xent(cudaStream_t s, const float *p, const int32_t *lab, float *loss, int64_t n, int64_t c);
/* dlogits (n, c) = dl[k] * the formulas' fused softmax/sigmoid + cross-entropy gradient (inv_n = 1) */
cudaError_t tfk_xent_grad(cudaStream_t s, const float *p, const int32_t *lab, const float *dl, float *y, int64_t n,
                          int64_t c);
/* y[0..n) = 1 / n */
cudaError_t tfk_fill_batch(cudaStream_t s, float *y, int64_t n);
/* y[0] = sum of a[0..n) (in double, one block: the order is fixed); *met += it when met is not NULL */
cudaError_t tfk_loss_sum(cudaStream_t s, const float *a, int64_t n, float *y, double *met);
/* y[0] = correct predictions of p (n, c) (argmax, first on ties; c == 1: p > 0.5); *met += it */
cudaError_t tfk_correct(cudaStream_t s, const float *p, const int32_t *lab, int64_t n, int64_t c, float *y,
                        double *met);
/* dst[r * dst_stride + k] = src[r * src_stride + k], r < rows, k < cols (Slice, Concat's parts) */
cudaError_t tfk_copy2d(cudaStream_t s, float *dst, int64_t dst_stride, const float *src, int64_t src_stride,
                       int64_t rows, int64_t cols);
/* (outer, len, inner): y[o, l] = x[o, len-1-l]; mean over len; its gradient (broadcast / len) */
cudaError_t tfk_reverse(cudaStream_t s, const float *x, float *y, int64_t outer, int64_t len, int64_t inner);
cudaError_t tfk_mean(cudaStream_t s, const float *x, float *y, int64_t outer, int64_t len, int64_t inner);
cudaError_t tfk_mean_grad(cudaStream_t s, const float *dy, float *dx, int64_t outer, int64_t len, int64_t inner);
/* y (n, D) = table[idx]; g[idx[k]] += dy[k] with atomicAdd (summation order not deterministic); indices were
 * validated on the host while staging */
cudaError_t tfk_gather(cudaStream_t s, const float *table, const int32_t *idx, float *y, int64_t n, int64_t D);
cudaError_t tfk_gather_grad(cudaStream_t s, const int32_t *idx, const float *dy, float *g, int64_t n, int64_t D);
/* g[idx[k]] = 0 for each of the n indices (rows of D) */
cudaError_t tfk_zero_rows(cudaStream_t s, const int32_t *idx, float *g, int64_t n, int64_t D);
/* inverted dropout with kh_dropout_keep(key, flat index, rate): the CPU path's masks */
cudaError_t tfk_dropout(cudaStream_t s, const float *x, float *y, int64_t n, uint64_t key, float rate, float scale);
/* NHWC max pooling; the gradient goes to the first maximum of each window in row-major window order
 * (a gather over the windows that contain each input element: deterministic, no atomics) */
cudaError_t tfk_maxpool(cudaStream_t s, const float *x, float *y, tfk_pool g);
cudaError_t tfk_maxpool_grad(cudaStream_t s, const float *x, const float *dy, float *dx, tfk_pool g);
/* dst (cols, rows) = src (rows, cols)^T: HWIO filters <-> cuDNN's NHWC filter layout (F, KH, KW, C) */
cudaError_t tfk_transpose(cudaStream_t s, const float *src, float *dst, int64_t rows, int64_t cols);
/* NHWC zero padding for TensorFlow's asymmetric 'same': xp (n, Hp, Wp, C) = x (n, H, W, C) placed at (PT, PL),
 * zeros around; crop is the inverse selection */
cudaError_t tfk_pad_nhwc(cudaStream_t s, const float *x, float *xp, int64_t n, int H, int W, int C, int Hp, int Wp,
                         int PT, int PL);
cudaError_t tfk_crop_nhwc(cudaStream_t s, const float *xp, float *x, int64_t n, int H, int W, int C, int Hp, int Wp,
                          int PT, int PL);
/* one fused optimizer step over n elements */
cudaError_t tfk_apply(cudaStream_t s, tfk_opt o, float *w, float *s1, float *s2, const float *g, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
