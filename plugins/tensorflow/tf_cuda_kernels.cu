/* tf_cuda_kernels.cu — see tf_cuda_kernels.h. Plain CUDA C: grid-stride loops, int64 indices, element-wise
 * math from khost/kit/formulas.h (__host__ __device__ under nvcc), dropout masks from khost/kit/counter_rng.h. */
#include "tf_cuda_kernels.h"

#include "khost/kit/counter_rng.h"
#include "khost/kit/formulas.h"

#define TPB 256

static unsigned grid_for(int64_t n) {
    int64_t b = (n + TPB - 1) / TPB;
    if (b < 1) b = 1;
    if (b > 65535 * 8) b = 65535 * 8; /* grid-stride loops cover the rest */
    return (unsigned)b;
}

#define GRID_STRIDE(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)blockDim.x * gridDim.x)

static cudaError_t launched(void) { return cudaGetLastError(); }

// --- fills and element-wise ------------------------------------------------------------------------------
__global__ void k_fill(float *y, float v, int64_t n) {
    GRID_STRIDE(i, n) y[i] = v;
}

extern "C" cudaError_t tfk_zero(cudaStream_t s, float *y, int64_t n) {
    if (n <= 0) return cudaSuccess;
    return cudaMemsetAsync(y, 0, (size_t)n * sizeof(float), s);
}

extern "C" cudaError_t tfk_fill_batch(cudaStream_t s, float *y, int64_t n) {
    if (n <= 0) return cudaSuccess;
    k_fill<<<grid_for(n), TPB, 0, s>>>(y, 1.0f / (float)n, n);
    return launched();
}

/* y may alias a or b: each element is read before it is written by the same thread */
__global__ void k_ew(int op, const float *a, const float *b, float *y, int64_t n) {
    GRID_STRIDE(i, n) {
        float v;
        switch (op) {
        case TFK_ADD: v = a[i] + b[i]; break;
        case TFK_SUB: v = a[i] - b[i]; break;
        case TFK_MUL: v = a[i] * b[i]; break;
        case TFK_NEG: v = -a[i]; break;
        case TFK_RELU: v = kh_relu(a[i]); break;
        case TFK_SIGMOID: v = kh_sigmoid(a[i]); break;
        case TFK_TANH: v = kh_act_forward(3 /* KH_ACT_TANH */, a[i]); break;
        case TFK_RELU_GRAD: v = b[i] * kh_relu_grad_y(a[i]); break;
        case TFK_SIGMOID_GRAD: v = b[i] * kh_sigmoid_grad_y(a[i]); break;
        default: v = b[i] * kh_tanh_grad_y(a[i]); break; /* TFK_TANH_GRAD: the host checked the op */
        }
        y[i] = v;
    }
}

extern "C" cudaError_t tfk_ew(cudaStream_t s, int op, const float *a, const float *b, float *y, int64_t n) {
    if (n <= 0) return cudaSuccess;
    k_ew<<<grid_for(n), TPB, 0, s>>>(op, a, b, y, n);
    return launched();
}

typedef struct addn_args {
    const float *in[TFK_ADDN_MAX];
    int k;
} addn_args;

__global__ void k_addn(addn_args a, float *y, int64_t n) {
    GRID_STRIDE(i, n) {
        float v = a.in[0][i];
        for (int j = 1; j < a.k; j++) v += a.in[j][i];
        y[i] = v;
    }
}

extern "C" cudaError_t tfk_addn(cudaStream_t s, const float *const *in, int k, float *y, int64_t n) {
    if (n <= 0) return cudaSuccess;
    if (k < 1 || k > TFK_ADDN_MAX) return cudaErrorInvalidValue;
    addn_args a;
    a.k = k;
    for (int j = 0; j < TFK_ADDN_MAX; j++) a.in[j] = j < k ? in[j] : in[0];
    k_addn<<<grid_for(n), TPB, 0, s>>>(a, y, n);
    return launched();
}

// --- bias ------------------------------------------------------------------------------------------------
__global__ void k_bias_add(const float *x, const float *b, float *y, int64_t n, int64_t c) {
    GRID_STRIDE(i, n) y[i] = x[i] + b[i % c];
}

extern "C" cudaError_t tfk_bias_add(cudaStream_t s, const float *x, const float *b, float *y, int64_t rows, int64_t c) {
    if (rows * c <= 0) return cudaSuccess;
    k_bias_add<<<grid_for(rows * c), TPB, 0, s>>>(x, b, y, rows * c, c);
    return launched();
}

/* one block per column: each thread sums a strided set of rows, then a fixed-shape tree: deterministic */
__global__ void k_colsum(const float *dy, float *db, int64_t rows, int64_t c) {
    __shared__ float part[TPB];
    int64_t col = blockIdx.x;
    float v = 0.0f;
    for (int64_t r = threadIdx.x; r < rows; r += TPB) v += dy[r * c + col];
    part[threadIdx.x] = v;
    __syncthreads();
    for (int w = TPB / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) db[col] = part[0];
}

extern "C" cudaError_t tfk_bias_add_grad(cudaStream_t s, const float *dy, float *db, int64_t rows, int64_t c) {
    if (c <= 0) return cudaSuccess;
    k_colsum<<<(unsigned)c, TPB, 0, s>>>(dy, db, rows, c);
    return launched();
}

// --- softmax ---------------------------------------------------------------------------------------------
/* one warp per row (as the CPU: max, exp, sum, scale) */
__global__ void k_softmax(const float *x, float *y, int64_t rows, int64_t c) {
    int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (row >= rows) return;
    const float *a = x + row * c;
    float *o = y + row * c;
    float mx = -3.402823466e38f;
    for (int64_t j = lane; j < c; j += 32) mx = fmaxf(mx, a[j]);
    for (int d = 16; d > 0; d /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, d));
    float sum = 0.0f;
    for (int64_t j = lane; j < c; j += 32) {
        float e = expf(a[j] - mx);
        o[j] = e;
        sum += e;
    }
    for (int d = 16; d > 0; d /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, d);
    float inv = 1.0f / sum;
    for (int64_t j = lane; j < c; j += 32) o[j] *= inv;
}

__global__ void k_softmax_grad(const float *y, const float *dy, float *dx, int64_t rows, int64_t c) {
    int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (row >= rows) return;
    const float *yr = y + row * c, *dr = dy + row * c;
    float dot = 0.0f;
    for (int64_t j = lane; j < c; j += 32) dot += yr[j] * dr[j];
    for (int d = 16; d > 0; d /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, d);
    for (int64_t j = lane; j < c; j += 32) dx[row * c + j] = yr[j] * (dr[j] - dot);
}

static unsigned warp_blocks(int64_t rows) { return (unsigned)((rows * 32 + TPB - 1) / TPB); }

extern "C" cudaError_t tfk_softmax(cudaStream_t s, const float *x, float *y, int64_t rows, int64_t c) {
    if (rows <= 0) return cudaSuccess;
    k_softmax<<<warp_blocks(rows), TPB, 0, s>>>(x, y, rows, c);
    return launched();
}

extern "C" cudaError_t tfk_softmax_grad(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t rows,
                                        int64_t c) {
    if (rows <= 0) return cudaSuccess;
    k_softmax_grad<<<warp_blocks(rows), TPB, 0, s>>>(y, dy, dx, rows, c);
    return launched();
}

// --- losses and metrics ----------------------------------------------------------------------------------
__global__ void k_xent(const float *p, const int32_t *lab, float *loss, int64_t n, int64_t c) {
    GRID_STRIDE(k, n) loss[k] = c == 1 ? kh_bce_loss(p[k], (float)lab[k]) : kh_cce_loss(p[k * c + lab[k]]);
}

extern "C" cudaError_t tfk_xent(cudaStream_t s, const float *p, const int32_t *lab, float *loss, int64_t n, int64_t c) {
    if (n <= 0) return cudaSuccess;
    k_xent<<<grid_for(n), TPB, 0, s>>>(p, lab, loss, n, c);
    return launched();
}

__global__ void k_xent_grad(const float *p, const int32_t *lab, const float *dl, float *y, int64_t n, int64_t c) {
    GRID_STRIDE(i, n * c) {
        int64_t k = i / c, j = i % c;
        if (c == 1) y[k] = dl[k] * kh_sigmoid_bce_grad(p[k], (float)lab[k], 1.0f);
        else y[i] = dl[k] * kh_softmax_cce_grad(p[i], j == lab[k], p[k * c + lab[k]], 1.0f);
    }
}

extern "C" cudaError_t tfk_xent_grad(cudaStream_t s, const float *p, const int32_t *lab, const float *dl, float *y,
                                     int64_t n, int64_t c) {
    if (n <= 0) return cudaSuccess;
    k_xent_grad<<<grid_for(n * c), TPB, 0, s>>>(p, lab, dl, y, n, c);
    return launched();
}

/* one block; doubles; a fixed tree */
__device__ double block_sum(double v) {
    __shared__ double part[TPB];
    part[threadIdx.x] = v;
    __syncthreads();
    for (int w = TPB / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    return part[0];
}

__global__ void k_loss_sum(const float *a, int64_t n, float *y, double *met) {
    double v = 0.0;
    for (int64_t k = threadIdx.x; k < n; k += TPB) v += a[k];
    double s = block_sum(v);
    if (threadIdx.x == 0) {
        y[0] = (float)s;
        if (met) *met += s;
    }
}

extern "C" cudaError_t tfk_loss_sum(cudaStream_t s, const float *a, int64_t n, float *y, double *met) {
    k_loss_sum<<<1, TPB, 0, s>>>(a, n, y, met);
    return launched();
}

__global__ void k_correct(const float *p, const int32_t *lab, int64_t n, int64_t c, float *y, double *met) {
    double v = 0.0;
    for (int64_t k = threadIdx.x; k < n; k += TPB) {
        if (c == 1) {
            v += (p[k] > 0.5f) == (lab[k] != 0);
            continue;
        }
        int64_t best = 0;
        for (int64_t j = 1; j < c; j++)
            if (p[k * c + j] > p[k * c + best]) best = j;
        v += best == lab[k];
    }
    double s = block_sum(v);
    if (threadIdx.x == 0) {
        y[0] = (float)s;
        if (met) *met += s;
    }
}

extern "C" cudaError_t tfk_correct(cudaStream_t s, const float *p, const int32_t *lab, int64_t n, int64_t c, float *y,
                                   double *met) {
    k_correct<<<1, TPB, 0, s>>>(p, lab, n, c, y, met);
    return launched();
}

// --- moving data -----------------------------------------------------------------------------------------
__global__ void k_copy2d(float *dst, int64_t ds, const float *src, int64_t ss, int64_t rows, int64_t cols) {
    GRID_STRIDE(i, rows * cols) {
        int64_t r = i / cols, k = i % cols;
        dst[r * ds + k] = src[r * ss + k];
    }
}

extern "C" cudaError_t tfk_copy2d(cudaStream_t s, float *dst, int64_t dst_stride, const float *src,
                                  int64_t src_stride, int64_t rows, int64_t cols) {
    if (rows * cols <= 0) return cudaSuccess;
    k_copy2d<<<grid_for(rows * cols), TPB, 0, s>>>(dst, dst_stride, src, src_stride, rows, cols);
    return launched();
}

__global__ void k_reverse(const float *x, float *y, int64_t outer, int64_t len, int64_t inner) {
    GRID_STRIDE(i, outer * len * inner) {
        int64_t k = i % inner, l = (i / inner) % len, o = i / (inner * len);
        y[i] = x[(o * len + (len - 1 - l)) * inner + k];
    }
}

extern "C" cudaError_t tfk_reverse(cudaStream_t s, const float *x, float *y, int64_t outer, int64_t len, int64_t inner) {
    if (outer * len * inner <= 0) return cudaSuccess;
    k_reverse<<<grid_for(outer * len * inner), TPB, 0, s>>>(x, y, outer, len, inner);
    return launched();
}

/* in l order, as the CPU sums */
__global__ void k_mean(const float *x, float *y, int64_t outer, int64_t len, int64_t inner) {
    GRID_STRIDE(i, outer * inner) {
        int64_t o = i / inner, k = i % inner;
        float v = 0.0f;
        for (int64_t l = 0; l < len; l++) v += x[(o * len + l) * inner + k];
        y[i] = v * (1.0f / (float)len);
    }
}

extern "C" cudaError_t tfk_mean(cudaStream_t s, const float *x, float *y, int64_t outer, int64_t len, int64_t inner) {
    if (outer * inner <= 0) return cudaSuccess;
    k_mean<<<grid_for(outer * inner), TPB, 0, s>>>(x, y, outer, len, inner);
    return launched();
}

__global__ void k_mean_grad(const float *dy, float *dx, int64_t outer, int64_t len, int64_t inner) {
    GRID_STRIDE(i, outer * len * inner) {
        int64_t k = i % inner, o = i / (inner * len);
        dx[i] = dy[o * inner + k] * (1.0f / (float)len);
    }
}

extern "C" cudaError_t tfk_mean_grad(cudaStream_t s, const float *dy, float *dx, int64_t outer, int64_t len,
                                     int64_t inner) {
    if (outer * len * inner <= 0) return cudaSuccess;
    k_mean_grad<<<grid_for(outer * len * inner), TPB, 0, s>>>(dy, dx, outer, len, inner);
    return launched();
}

__global__ void k_gather(const float *t, const int32_t *idx, float *y, int64_t n, int64_t D) {
    GRID_STRIDE(i, n * D) y[i] = t[(int64_t)idx[i / D] * D + i % D];
}

extern "C" cudaError_t tfk_gather(cudaStream_t s, const float *table, const int32_t *idx, float *y, int64_t n,
                                  int64_t D) {
    if (n * D <= 0) return cudaSuccess;
    k_gather<<<grid_for(n * D), TPB, 0, s>>>(table, idx, y, n, D);
    return launched();
}

__global__ void k_gather_grad(const int32_t *idx, const float *dy, float *g, int64_t n, int64_t D) {
    GRID_STRIDE(i, n * D) atomicAdd(&g[(int64_t)idx[i / D] * D + i % D], dy[i]);
}

extern "C" cudaError_t tfk_gather_grad(cudaStream_t s, const int32_t *idx, const float *dy, float *g, int64_t n,
                                       int64_t D) {
    if (n * D <= 0) return cudaSuccess;
    k_gather_grad<<<grid_for(n * D), TPB, 0, s>>>(idx, dy, g, n, D);
    return launched();
}

__global__ void k_zero_rows(const int32_t *idx, float *g, int64_t n, int64_t D) {
    GRID_STRIDE(i, n * D) g[(int64_t)idx[i / D] * D + i % D] = 0.0f;
}

extern "C" cudaError_t tfk_zero_rows(cudaStream_t s, const int32_t *idx, float *g, int64_t n, int64_t D) {
    if (n * D <= 0) return cudaSuccess;
    k_zero_rows<<<grid_for(n * D), TPB, 0, s>>>(idx, g, n, D);
    return launched();
}

__global__ void k_dropout(const float *x, float *y, int64_t n, uint64_t key, float rate, float scale) {
    GRID_STRIDE(i, n) y[i] = kh_dropout_keep(key, (uint64_t)i, rate) ? x[i] * scale : 0.0f;
}

extern "C" cudaError_t tfk_dropout(cudaStream_t s, const float *x, float *y, int64_t n, uint64_t key, float rate,
                                   float scale) {
    if (n <= 0) return cudaSuccess;
    k_dropout<<<grid_for(n), TPB, 0, s>>>(x, y, n, key, rate, scale);
    return launched();
}

// --- max pooling -----------------------------------------------------------------------------------------
/* the first maximum of window (s, oh, ow) in channel c, in row-major window order; -1 if empty */
__device__ int64_t pool_argmax(const float *x, const tfk_pool &g, int64_t s, int64_t oh, int64_t ow, int64_t c) {
    int64_t best = -1;
    float bv = 0.0f;
    for (int kh = 0; kh < g.KH; kh++) {
        int64_t ih = oh * g.SH + kh - g.PT;
        if (ih < 0 || ih >= g.H) continue;
        for (int kw = 0; kw < g.KW; kw++) {
            int64_t iw = ow * g.SW + kw - g.PL;
            if (iw < 0 || iw >= g.W) continue;
            int64_t at = ((s * g.H + ih) * g.W + iw) * g.C + c;
            if (best < 0 || x[at] > bv) {
                best = at;
                bv = x[at];
            }
        }
    }
    return best;
}

__global__ void k_maxpool(const float *x, float *y, tfk_pool g) {
    GRID_STRIDE(i, (int64_t)g.N * g.OH * g.OW * g.C) {
        int64_t c = i % g.C, ow = (i / g.C) % g.OW, oh = (i / ((int64_t)g.C * g.OW)) % g.OH;
        int64_t s = i / ((int64_t)g.C * g.OW * g.OH);
        int64_t at = pool_argmax(x, g, s, oh, ow, c);
        y[i] = at >= 0 ? x[at] : 0.0f;
    }
}

/* dx at (s, ih, iw, c) = sum of dy over the windows whose first maximum it is */
__global__ void k_maxpool_grad(const float *x, const float *dy, float *dx, tfk_pool g) {
    GRID_STRIDE(i, (int64_t)g.N * g.H * g.W * g.C) {
        int64_t c = i % g.C, iw = (i / g.C) % g.W, ih = (i / ((int64_t)g.C * g.W)) % g.H;
        int64_t s = i / ((int64_t)g.C * g.W * g.H);
        /* windows oh with oh*SH - PT <= ih <= oh*SH - PT + KH - 1 */
        int64_t oh0 = ih + g.PT - (g.KH - 1), ow0 = iw + g.PL - (g.KW - 1);
        oh0 = oh0 > 0 ? (oh0 + g.SH - 1) / g.SH : 0;
        ow0 = ow0 > 0 ? (ow0 + g.SW - 1) / g.SW : 0;
        float v = 0.0f;
        for (int64_t oh = oh0; oh < g.OH && oh * g.SH - g.PT <= ih; oh++)
            for (int64_t ow = ow0; ow < g.OW && ow * g.SW - g.PL <= iw; ow++)
                if (pool_argmax(x, g, s, oh, ow, c) == i) v += dy[((s * g.OH + oh) * g.OW + ow) * g.C + c];
        dx[i] = v;
    }
}

extern "C" cudaError_t tfk_maxpool(cudaStream_t s, const float *x, float *y, tfk_pool g) {
    int64_t n = (int64_t)g.N * g.OH * g.OW * g.C;
    if (n <= 0) return cudaSuccess;
    k_maxpool<<<grid_for(n), TPB, 0, s>>>(x, y, g);
    return launched();
}

extern "C" cudaError_t tfk_maxpool_grad(cudaStream_t s, const float *x, const float *dy, float *dx, tfk_pool g) {
    int64_t n = (int64_t)g.N * g.H * g.W * g.C;
    if (n <= 0) return cudaSuccess;
    k_maxpool_grad<<<grid_for(n), TPB, 0, s>>>(x, dy, dx, g);
    return launched();
}

// --- filters ---------------------------------------------------------------------------------------------
__global__ void k_transpose(const float *src, float *dst, int64_t rows, int64_t cols) {
    GRID_STRIDE(i, rows * cols) {
        int64_t r = i / cols, c = i % cols;
        dst[c * rows + r] = src[i];
    }
}

extern "C" cudaError_t tfk_transpose(cudaStream_t s, const float *src, float *dst, int64_t rows, int64_t cols) {
    if (rows * cols <= 0) return cudaSuccess;
    k_transpose<<<grid_for(rows * cols), TPB, 0, s>>>(src, dst, rows, cols);
    return launched();
}

__global__ void k_pad_nhwc(const float *x, float *xp, int64_t n, int H, int W, int C, int Hp, int Wp, int PT, int PL) {
    GRID_STRIDE(i, n * Hp * Wp * C) {
        int64_t c = i % C, w = (i / C) % Wp, h = (i / ((int64_t)C * Wp)) % Hp, s = i / ((int64_t)C * Wp * Hp);
        int64_t ih = h - PT, iw = w - PL;
        xp[i] = ih >= 0 && ih < H && iw >= 0 && iw < W ? x[((s * H + ih) * W + iw) * C + c] : 0.0f;
    }
}

__global__ void k_crop_nhwc(const float *xp, float *x, int64_t n, int H, int W, int C, int Hp, int Wp, int PT, int PL) {
    GRID_STRIDE(i, n * H * W * C) {
        int64_t c = i % C, w = (i / C) % W, h = (i / ((int64_t)C * W)) % H, s = i / ((int64_t)C * W * H);
        x[i] = xp[((s * Hp + h + PT) * Wp + w + PL) * C + c];
    }
}

extern "C" cudaError_t tfk_pad_nhwc(cudaStream_t s, const float *x, float *xp, int64_t n, int H, int W, int C, int Hp,
                                    int Wp, int PT, int PL) {
    int64_t t = n * Hp * Wp * C;
    if (t <= 0) return cudaSuccess;
    k_pad_nhwc<<<grid_for(t), TPB, 0, s>>>(x, xp, n, H, W, C, Hp, Wp, PT, PL);
    return launched();
}

extern "C" cudaError_t tfk_crop_nhwc(cudaStream_t s, const float *xp, float *x, int64_t n, int H, int W, int C, int Hp,
                                     int Wp, int PT, int PL) {
    int64_t t = n * H * W * C;
    if (t <= 0) return cudaSuccess;
    k_crop_nhwc<<<grid_for(t), TPB, 0, s>>>(xp, x, n, H, W, C, Hp, Wp, PT, PL);
    return launched();
}

// --- optimizers ------------------------------------------------------------------------------------------
__global__ void k_apply(tfk_opt o, float *w, float *s1, float *s2, const float *g, int64_t n) {
    GRID_STRIDE(k, n) {
        switch (o.kind) {
        case TFK_RMSPROP: kh_rmsprop_update(&w[k], &s1[k], g[k], o.lr, o.rho, o.eps); break;
        case TFK_ADAM: kh_adam_update(&w[k], &s1[k], &s2[k], g[k], o.lr, o.b1, o.b2, o.eps); break;
        case TFK_ADADELTA: kh_adadelta_update(&w[k], &s1[k], &s2[k], g[k], o.lr, o.rho, o.eps); break;
        default: w[k] -= o.lr * g[k]; break;
        }
    }
}

extern "C" cudaError_t tfk_apply(cudaStream_t s, tfk_opt o, float *w, float *s1, float *s2, const float *g, int64_t n) {
    if (n <= 0) return cudaSuccess;
    k_apply<<<grid_for(n), TPB, 0, s>>>(o, w, s1, s2, g, n);
    return launched();
}
