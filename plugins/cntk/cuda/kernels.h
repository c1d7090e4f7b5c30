/* cuda/kernels.h — the small CUDA kernels of the cntk GPU path (cuda/kernels.cu), as C launchers.
 *
 * Everything the vendor libraries do not do for us: bias + activation, layout permutations, dropout,
 * embedding gather / scatter-add, GlobalAveragePooling1D, one-hot expansion, max pooling with saved argmax,
 * padding for TensorFlow's asymmetric 'same', the fused losses with on-device metrics, and the three
 * optimizers fused over the whole parameter arena. Element-wise math comes from khost/kit/formulas.h (the same
 * text the CPU path and the reference kit run). Each launcher enqueues on `s` and returns the launch status
 * (cudaGetLastError); none synchronises.
 */
#ifndef KHOST_CNTK_CUDA_KERNELS_H
#define KHOST_CNTK_CUDA_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ccuk_pool_geom {
    int32_t H, W, OH, OW, KH, KW, SH, SW, PT, PL;
} ccuk_pool_geom;

typedef struct ccuk_opt {
    int32_t kind;     /* kh_optimizer */
    float lr;         /* this step's lr (decayed; Adam: bias-corrected lr_t) */
    float rho, b1, b2, eps;
    int32_t clear_g;  /* write 0 back into g after reading it (leaves the gradient arena clean) */
} ccuk_opt;

/* p[0..n) = v */
cudaError_t ccuk_fill(cudaStream_t s, float *p, float v, int64_t n);
/* y (rows, cols) = act(y + b[col]) (b may be NULL); softmax over each row */
cudaError_t ccuk_bias_act_rows(cudaStream_t s, int act, float *y, const float *b, int64_t rows, int64_t cols);
/* y (n, c, hw) = act(y + b[c]); not softmax */
cudaError_t ccuk_bias_act_nchw(cudaStream_t s, int act, float *y, const float *b, int64_t n, int64_t c, int64_t hw);
/* dy (rows, cols) <- dL/dz from dL/dy and y = act(z), in place; softmax over each row */
cudaError_t ccuk_act_grad(cudaStream_t s, int act, const float *y, float *dy, int64_t rows, int64_t cols);
/* db (cols) = sum over rows of dz (rows, cols) (overwrites) */
cudaError_t ccuk_colsum(cudaStream_t s, const float *dz, int64_t rows, int64_t cols, float *db);
/* per-sample (C, H, W) <-> (H, W, C) */
cudaError_t ccuk_nchw_to_nhwc(cudaStream_t s, const float *src, float *dst, int64_t n, int64_t c, int64_t h, int64_t w);
cudaError_t ccuk_nhwc_to_nchw(cudaStream_t s, const float *src, float *dst, int64_t n, int64_t c, int64_t h, int64_t w);
/* Inverted dropout: y = keep ? x / (1 - rate) : 0, keep decided by a counter-based hash of (key, the
 * element's index in Keras's (N, H, W, C) order) — so the same mask applies whatever the storage layout, and
 * the backward is the same call on the gradients with the same key. c, hw > 0: x is stored (n, c, hw);
 * c == 0: flat (n * per). */
cudaError_t ccuk_dropout(cudaStream_t s, const float *x, float *y, int64_t n, int64_t per, int64_t c, int64_t hw,
                         float rate, uint64_t key);
/* y (rows, D) = table[idx[r]] */
cudaError_t ccuk_embed_fwd(cudaStream_t s, const int32_t *idx, const float *table, float *y, int64_t rows, int64_t D);
/* dtable[idx[r]] += dy[r] (dtable zeroed beforehand by the gradient discipline): atomic adds, or with
 * `deterministic` the rows added in index order (same result bit for bit on every run, slower) */
cudaError_t ccuk_embed_bwd(cudaStream_t s, const int32_t *idx, const float *dy, float *dtable, int64_t rows, int64_t D,
                           int deterministic);
/* y (n, C) = mean over T of x (n, T, C); dx (n, T, C) = dy (n, C) / T */
cudaError_t ccuk_gap1d_fwd(cudaStream_t s, const float *x, float *y, int64_t n, int64_t T, int64_t C);
cudaError_t ccuk_gap1d_bwd(cudaStream_t s, const float *dy, float *dx, int64_t n, int64_t T, int64_t C);
/* out = one_hot(idx (n, pixels), depth): (n, pixels, depth), or (n, depth, pixels) when nchw */
cudaError_t ccuk_onehot(cudaStream_t s, const int32_t *idx, float *out, int64_t n, int64_t pixels, int64_t depth,
                        int nchw);
/* Max pooling over planes (n*c) of (H, W): y and arg (offset of the FIRST maximum in row-major window order,
 * as the reference kit and TensorFlow route the gradient); 'same' windows skip the padding. */
cudaError_t ccuk_maxpool_fwd(cudaStream_t s, const float *x, float *y, int32_t *arg, int64_t planes, ccuk_pool_geom g);
/* dx (planes, H, W) = sum of dy over the windows whose saved argmax is that element (a gather: no atomics) */
cudaError_t ccuk_maxpool_bwd(cudaStream_t s, const float *dy, const int32_t *arg, float *dx, int64_t planes,
                             ccuk_pool_geom g);
/* xp (planes, Hp, Wp) = x (planes, H, W) placed at (PT, PL), zeros around; crop is the inverse selection */
cudaError_t ccuk_pad_nchw(cudaStream_t s, const float *x, float *xp, int64_t planes, int H, int W, int Hp, int Wp,
                          int PT, int PL);
cudaError_t ccuk_crop_nchw(cudaStream_t s, const float *xp, float *x, int64_t planes, int H, int W, int Hp, int Wp,
                           int PT, int PL);
/* Loss of probabilities y (n, C) against labels (n): kind 1 categorical CE (softmax output), 2 binary CE
 * (sigmoid output, C == 1). Adds the loss sum to met[0] and the correct count to met[1] (doubles, on the
 * device); when dz is non-NULL writes d(mean loss)/d(logits) with Keras's clipping. */
cudaError_t ccuk_loss(cudaStream_t s, int kind, const float *y, const int32_t *labels, int n, int C, float *dz,
                      double *met);
/* One optimizer step over n elements of w (g, s1, s2 alike) */
cudaError_t ccuk_optimizer(cudaStream_t s, ccuk_opt o, int64_t n, float *w, float *g, float *s1, float *s2);
/* LSTM final states (dirs, n, u) <-> the layer's last-step output (n, dirs*u) */
cudaError_t ccuk_hy_to_y(cudaStream_t s, const float *hy, float *y, int64_t n, int64_t dirs, int64_t u);
cudaError_t ccuk_dy_to_dhy(cudaStream_t s, const float *dy, float *dhy, int64_t n, int64_t dirs, int64_t u);

#ifdef __cplusplus
}
#endif
#endif
