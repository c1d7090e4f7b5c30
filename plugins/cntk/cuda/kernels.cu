/* cuda/kernels.cu — see cuda/kernels.h. Plain CUDA C (no C++ library): grid-stride loops,
 * int64 indices, element-wise math from khost/kit/formulas.h (__host__ __device__ under nvcc). */
#include "cuda/kernels.h"

#include <float.h>

#include "khost/kit/formulas.h"

#define TPB 256

static unsigned grid_for(int64_t n) {
    int64_t b = (n + TPB - 1) / TPB;
    if (b < 1) b = 1;
    if (b > 65535 * 8) b = 65535 * 8; /* grid-stride loops cover the rest */
    return (unsigned)b;
}

#define GRID_STRIDE(i, n) for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)blockDim.x * gridDim.x)

static cudaError_t launched(void) { return cudaGetLastError(); }

// --- fill ------------------------------------------------------------------------------------------------
__global__ void k_fill(float *p, float v, int64_t n) {
    GRID_STRIDE(i, n) p[i] = v;
}

extern "C" cudaError_t ccuk_fill(cudaStream_t s, float *p, float v, int64_t n) {
    if (n <= 0) return cudaSuccess;
    k_fill<<<grid_for(n), TPB, 0, s>>>(p, v, n);
    return launched();
}

// --- bias + activation -----------------------------------------------------------------------------------
__global__ void k_bias_act_rows(int act, float *y, const float *b, int64_t rows, int64_t cols) {
    GRID_STRIDE(i, rows * cols) {
        float v = y[i] + (b ? b[i % cols] : 0.0f);
        y[i] = kh_act_forward(act, v);
    }
}

/* one warp per row: bias, max, exp, sum, normalise (as the CPU's softmax_row) */
__global__ void k_bias_softmax_rows(float *y, const float *b, int64_t rows, int64_t cols) {
    int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (warp >= rows) return;
    float *r = y + warp * cols;
    float mx = -FLT_MAX;
    for (int64_t j = lane; j < cols; j += 32) {
        float v = r[j] + (b ? b[j] : 0.0f);
        r[j] = v;
        mx = fmaxf(mx, v);
    }
    for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float sum = 0.0f;
    for (int64_t j = lane; j < cols; j += 32) {
        float e = expf(r[j] - mx);
        r[j] = e;
        sum += e;
    }
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    float inv = 1.0f / sum;
    for (int64_t j = lane; j < cols; j += 32) r[j] *= inv;
}

extern "C" cudaError_t ccuk_bias_act_rows(cudaStream_t s, int act, float *y, const float *b, int64_t rows,
                                          int64_t cols) {
    if (rows * cols <= 0) return cudaSuccess;
    if (act == 4 /* KH_ACT_SOFTMAX */) {
        int64_t threads = rows * 32;
        k_bias_softmax_rows<<<(unsigned)((threads + TPB - 1) / TPB), TPB, 0, s>>>(y, b, rows, cols);
    } else {
        if (act == 0 && !b) return cudaSuccess;
        k_bias_act_rows<<<grid_for(rows * cols), TPB, 0, s>>>(act, y, b, rows, cols);
    }
    return launched();
}

__global__ void k_bias_act_nchw(int act, float *y, const float *b, int64_t n, int64_t c, int64_t hw) {
    GRID_STRIDE(i, n * c * hw) {
        float v = y[i] + b[(i / hw) % c];
        y[i] = kh_act_forward(act, v);
    }
}

extern "C" cudaError_t ccuk_bias_act_nchw(cudaStream_t s, int act, float *y, const float *b, int64_t n, int64_t c,
                                          int64_t hw) {
    if (n * c * hw <= 0) return cudaSuccess;
    k_bias_act_nchw<<<grid_for(n * c * hw), TPB, 0, s>>>(act, y, b, n, c, hw);
    return launched();
}

// --- activation gradients --------------------------------------------------------------------------------
__global__ void k_act_grad(int act, const float *y, float *dy, int64_t n) {
    GRID_STRIDE(i, n) dy[i] *= kh_act_grad_y(act, y[i]);
}

/* dz_j = y_j (dy_j - sum_k dy_k y_k), one warp per row */
__global__ void k_softmax_grad_rows(const float *y, float *dy, int64_t rows, int64_t cols) {
    int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (warp >= rows) return;
    const float *yr = y + warp * cols;
    float *d = dy + warp * cols;
    float sum = 0.0f;
    for (int64_t j = lane; j < cols; j += 32) sum += d[j] * yr[j];
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    for (int64_t j = lane; j < cols; j += 32) d[j] = yr[j] * (d[j] - sum);
}

extern "C" cudaError_t ccuk_act_grad(cudaStream_t s, int act, const float *y, float *dy, int64_t rows, int64_t cols) {
    if (act == 0 || rows * cols <= 0) return cudaSuccess;
    if (act == 4) {
        int64_t threads = rows * 32;
        k_softmax_grad_rows<<<(unsigned)((threads + TPB - 1) / TPB), TPB, 0, s>>>(y, dy, rows, cols);
    } else {
        k_act_grad<<<grid_for(rows * cols), TPB, 0, s>>>(act, y, dy, rows * cols);
    }
    return launched();
}

// --- column sums (bias gradients) ------------------------------------------------------------------------
/* block (32, 8): 32 columns per block, 8 row-strided partial sums reduced in shared memory */
__global__ void k_colsum(const float *dz, int64_t rows, int64_t cols, float *db) {
    __shared__ float part[8][33];
    int64_t c = (int64_t)blockIdx.x * 32 + threadIdx.x;
    float acc = 0.0f;
    if (c < cols)
        for (int64_t r = threadIdx.y; r < rows; r += 8) acc += dz[r * cols + c];
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        float t = 0.0f;
        for (int k = 0; k < 8; k++) t += part[k][threadIdx.x];
        db[c] = t;
    }
}

extern "C" cudaError_t ccuk_colsum(cudaStream_t s, const float *dz, int64_t rows, int64_t cols, float *db) {
    if (cols <= 0) return cudaSuccess;
    dim3 block(32, 8);
    k_colsum<<<(unsigned)((cols + 31) / 32), block, 0, s>>>(dz, rows, cols, db);
    return launched();
}

// --- layouts ---------------------------------------------------------------------------------------------
__global__ void k_nchw_to_nhwc(const float *src, float *dst, int64_t n, int64_t c, int64_t hw) {
    GRID_STRIDE(i, n * c * hw) { /* i indexes dst (n, hw, c) */
        int64_t s_ = i / (c * hw), r = i % (c * hw), p = r / c, ch = r % c;
        dst[i] = src[(s_ * c + ch) * hw + p];
    }
}

__global__ void k_nhwc_to_nchw(const float *src, float *dst, int64_t n, int64_t c, int64_t hw) {
    GRID_STRIDE(i, n * c * hw) { /* i indexes dst (n, c, hw) */
        int64_t s_ = i / (c * hw), r = i % (c * hw), ch = r / hw, p = r % hw;
        dst[i] = src[(s_ * hw + p) * c + ch];
    }
}

extern "C" cudaError_t ccuk_nchw_to_nhwc(cudaStream_t s, const float *src, float *dst, int64_t n, int64_t c, int64_t h,
                                         int64_t w) {
    if (n * c * h * w <= 0) return cudaSuccess;
    k_nchw_to_nhwc<<<grid_for(n * c * h * w), TPB, 0, s>>>(src, dst, n, c, h * w);
    return launched();
}

extern "C" cudaError_t ccuk_nhwc_to_nchw(cudaStream_t s, const float *src, float *dst, int64_t n, int64_t c, int64_t h,
                                         int64_t w) {
    if (n * c * h * w <= 0) return cudaSuccess;
    k_nhwc_to_nchw<<<grid_for(n * c * h * w), TPB, 0, s>>>(src, dst, n, c, h * w);
    return launched();
}

// --- dropout ---------------------------------------------------------------------------------------------
__device__ __forceinline__ uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

__global__ void k_dropout(const float *x, float *y, int64_t total, int64_t c, int64_t hw, float rate, float scale,
                          uint64_t key) {
    GRID_STRIDE(i, total) {
        int64_t logical = i;
        if (c > 0) { /* stored (n, c, hw): decide by the (n, hw, c) index */
            int64_t s_ = i / (c * hw), r = i % (c * hw), ch = r / hw, p = r % hw;
            logical = (s_ * hw + p) * c + ch;
        }
        float u = (float)(mix64(key ^ mix64((uint64_t)logical)) >> 40) * (1.0f / 16777216.0f);
        y[i] = u >= rate ? x[i] * scale : 0.0f;
    }
}

extern "C" cudaError_t ccuk_dropout(cudaStream_t s, const float *x, float *y, int64_t n, int64_t per, int64_t c,
                                    int64_t hw, float rate, uint64_t key) {
    if (n * per <= 0) return cudaSuccess;
    float scale = (float)(1.0 / (1.0 - (double)rate));
    k_dropout<<<grid_for(n * per), TPB, 0, s>>>(x, y, n * per, c, hw, rate, scale, key);
    return launched();
}

// --- embedding -------------------------------------------------------------------------------------------
__global__ void k_embed_fwd(const int32_t *idx, const float *table, float *y, int64_t rows, int64_t D) {
    GRID_STRIDE(i, rows * D) {
        int64_t r = i / D, d = i % D;
        y[i] = table[(int64_t)idx[r] * D + d];
    }
}

__global__ void k_embed_bwd(const int32_t *idx, const float *dy, float *dtable, int64_t rows, int64_t D) {
    GRID_STRIDE(i, rows * D) {
        int64_t r = i / D, d = i % D;
        atomicAdd(&dtable[(int64_t)idx[r] * D + d], dy[i]);
    }
}

extern "C" cudaError_t ccuk_embed_fwd(cudaStream_t s, const int32_t *idx, const float *table, float *y, int64_t rows,
                                      int64_t D) {
    if (rows * D <= 0) return cudaSuccess;
    k_embed_fwd<<<grid_for(rows * D), TPB, 0, s>>>(idx, table, y, rows, D);
    return launched();
}

/* Deterministic variant: one thread per embedding column adds the rows in index order, so every sum has
 * the same order run to run (the atomic one adds in whatever order the threads arrive). Slower (D threads,
 * rows sequential adds each): only for deterministic runs. */
__global__ void k_embed_bwd_ordered(const int32_t *idx, const float *dy, float *dtable, int64_t rows, int64_t D) {
    int64_t d = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (d >= D) return;
    for (int64_t r = 0; r < rows; r++) dtable[(int64_t)idx[r] * D + d] += dy[r * D + d];
}

extern "C" cudaError_t ccuk_embed_bwd(cudaStream_t s, const int32_t *idx, const float *dy, float *dtable, int64_t rows,
                                      int64_t D, int deterministic) {
    if (rows * D <= 0) return cudaSuccess;
    if (deterministic)
        k_embed_bwd_ordered<<<(unsigned)((D + 63) / 64), 64, 0, s>>>(idx, dy, dtable, rows, D);
    else
        k_embed_bwd<<<grid_for(rows * D), TPB, 0, s>>>(idx, dy, dtable, rows, D);
    return launched();
}

// --- GlobalAveragePooling1D ------------------------------------------------------------------------------
__global__ void k_gap1d_fwd(const float *x, float *y, int64_t n, int64_t T, int64_t C) {
    GRID_STRIDE(i, n * C) {
        int64_t s_ = i / C, c = i % C;
        const float *p = x + s_ * T * C + c;
        float acc = 0.0f;
        for (int64_t t = 0; t < T; t++) acc += p[t * C];
        y[i] = acc * (1.0f / (float)T);
    }
}

__global__ void k_gap1d_bwd(const float *dy, float *dx, int64_t n, int64_t T, int64_t C) {
    GRID_STRIDE(i, n * T * C) {
        int64_t s_ = i / (T * C), c = i % C;
        dx[i] = dy[s_ * C + c] * (1.0f / (float)T);
    }
}

extern "C" cudaError_t ccuk_gap1d_fwd(cudaStream_t s, const float *x, float *y, int64_t n, int64_t T, int64_t C) {
    if (n * C <= 0) return cudaSuccess;
    k_gap1d_fwd<<<grid_for(n * C), TPB, 0, s>>>(x, y, n, T, C);
    return launched();
}

extern "C" cudaError_t ccuk_gap1d_bwd(cudaStream_t s, const float *dy, float *dx, int64_t n, int64_t T, int64_t C) {
    if (n * T * C <= 0) return cudaSuccess;
    k_gap1d_bwd<<<grid_for(n * T * C), TPB, 0, s>>>(dy, dx, n, T, C);
    return launched();
}

// --- one-hot ---------------------------------------------------------------------------------------------
__global__ void k_onehot(const int32_t *idx, float *out, int64_t n, int64_t pixels, int64_t depth, int nchw) {
    GRID_STRIDE(i, n * pixels * depth) {
        int64_t s_, pix, d;
        if (nchw) {
            s_ = i / (depth * pixels);
            d = (i / pixels) % depth;
            pix = i % pixels;
        } else {
            s_ = i / (pixels * depth);
            pix = (i / depth) % pixels;
            d = i % depth;
        }
        out[i] = idx[s_ * pixels + pix] == d ? 1.0f : 0.0f;
    }
}

extern "C" cudaError_t ccuk_onehot(cudaStream_t s, const int32_t *idx, float *out, int64_t n, int64_t pixels,
                                   int64_t depth, int nchw) {
    if (n * pixels * depth <= 0) return cudaSuccess;
    k_onehot<<<grid_for(n * pixels * depth), TPB, 0, s>>>(idx, out, n, pixels, depth, nchw);
    return launched();
}

// --- max pooling -----------------------------------------------------------------------------------------
__global__ void k_maxpool_fwd(const float *x, float *y, int32_t *arg, int64_t planes, ccuk_pool_geom g) {
    int64_t po = (int64_t)g.OH * g.OW;
    GRID_STRIDE(i, planes * po) {
        int64_t pl = i / po, o = i % po;
        int oh = (int)(o / g.OW), ow = (int)(o % g.OW);
        int h0 = oh * g.SH - g.PT, h1 = h0 + g.KH, w0 = ow * g.SW - g.PL, w1 = w0 + g.KW;
        if (h0 < 0) h0 = 0;
        if (h1 > g.H) h1 = g.H;
        if (w0 < 0) w0 = 0;
        if (w1 > g.W) w1 = g.W;
        const float *p = x + pl * g.H * g.W;
        float best = -FLT_MAX;
        int at = h0 * g.W + w0;
        for (int ih = h0; ih < h1; ih++)
            for (int iw = w0; iw < w1; iw++)
                if (p[ih * g.W + iw] > best) {
                    best = p[ih * g.W + iw];
                    at = ih * g.W + iw;
                }
        y[i] = best;
        arg[i] = at;
    }
}

__global__ void k_maxpool_bwd(const float *dy, const int32_t *arg, float *dx, int64_t planes, ccuk_pool_geom g) {
    int64_t hw = (int64_t)g.H * g.W, po = (int64_t)g.OH * g.OW;
    GRID_STRIDE(i, planes * hw) {
        int64_t pl = i / hw;
        int e = (int)(i % hw), ih = e / g.W, iw = e % g.W;
        /* output rows whose window [oh*SH - PT, +KH) contains ih */
        int oh0 = ih + g.PT - g.KH + 1, oh1 = (ih + g.PT) / g.SH;
        oh0 = oh0 <= 0 ? 0 : (oh0 + g.SH - 1) / g.SH;
        int ow0 = iw + g.PL - g.KW + 1, ow1 = (iw + g.PL) / g.SW;
        ow0 = ow0 <= 0 ? 0 : (ow0 + g.SW - 1) / g.SW;
        if (oh1 >= g.OH) oh1 = g.OH - 1;
        if (ow1 >= g.OW) ow1 = g.OW - 1;
        float acc = 0.0f;
        for (int oh = oh0; oh <= oh1; oh++)
            for (int ow = ow0; ow <= ow1; ow++) {
                int64_t o = pl * po + (int64_t)oh * g.OW + ow;
                if (arg[o] == e) acc += dy[o];
            }
        dx[i] = acc;
    }
}

extern "C" cudaError_t ccuk_maxpool_fwd(cudaStream_t s, const float *x, float *y, int32_t *arg, int64_t planes,
                                        ccuk_pool_geom g) {
    int64_t n = planes * g.OH * g.OW;
    if (n <= 0) return cudaSuccess;
    k_maxpool_fwd<<<grid_for(n), TPB, 0, s>>>(x, y, arg, planes, g);
    return launched();
}

extern "C" cudaError_t ccuk_maxpool_bwd(cudaStream_t s, const float *dy, const int32_t *arg, float *dx, int64_t planes,
                                        ccuk_pool_geom g) {
    int64_t n = planes * g.H * g.W;
    if (n <= 0) return cudaSuccess;
    k_maxpool_bwd<<<grid_for(n), TPB, 0, s>>>(dy, arg, dx, planes, g);
    return launched();
}

// --- padding for asymmetric 'same' convolutions ----------------------------------------------------------
__global__ void k_pad(const float *x, float *xp, int64_t planes, int H, int W, int Hp, int Wp, int PT, int PL) {
    int64_t php = (int64_t)Hp * Wp;
    GRID_STRIDE(i, planes * php) {
        int64_t pl = i / php;
        int e = (int)(i % php), h = e / Wp - PT, w = e % Wp - PL;
        xp[i] = h >= 0 && h < H && w >= 0 && w < W ? x[(pl * H + h) * W + w] : 0.0f;
    }
}

__global__ void k_crop(const float *xp, float *x, int64_t planes, int H, int W, int Hp, int Wp, int PT, int PL) {
    int64_t hw = (int64_t)H * W;
    GRID_STRIDE(i, planes * hw) {
        int64_t pl = i / hw;
        int e = (int)(i % hw), h = e / W, w = e % W;
        x[i] = xp[(pl * Hp + h + PT) * Wp + w + PL];
    }
}

extern "C" cudaError_t ccuk_pad_nchw(cudaStream_t s, const float *x, float *xp, int64_t planes, int H, int W, int Hp,
                                     int Wp, int PT, int PL) {
    if (planes * Hp * Wp <= 0) return cudaSuccess;
    k_pad<<<grid_for(planes * Hp * Wp), TPB, 0, s>>>(x, xp, planes, H, W, Hp, Wp, PT, PL);
    return launched();
}

extern "C" cudaError_t ccuk_crop_nchw(cudaStream_t s, const float *xp, float *x, int64_t planes, int H, int W, int Hp,
                                      int Wp, int PT, int PL) {
    if (planes * H * W <= 0) return cudaSuccess;
    k_crop<<<grid_for(planes * H * W), TPB, 0, s>>>(xp, x, planes, H, W, Hp, Wp, PT, PL);
    return launched();
}

// --- losses with metrics ---------------------------------------------------------------------------------
#define LOSS_TPB 128

/* one thread per sample; the block reduces loss and correct in double, then one atomicAdd each */
__global__ void k_loss(int kind, const float *y, const int32_t *labels, int n, int C, float *dz, double *met) {
    __shared__ double sl[LOSS_TPB], sc[LOSS_TPB];
    int s_ = blockIdx.x * LOSS_TPB + threadIdx.x;
    double loss = 0.0, correct = 0.0;
    if (s_ < n) {
        int lab = labels[s_];
        float inv_n = 1.0f / (float)n;
        if (kind == 1) {
            const float *row = y + (int64_t)s_ * C;
            int best = 0;
            for (int c = 1; c < C; c++)
                if (row[c] > row[best]) best = c;
            correct = best == lab ? 1.0 : 0.0;
            float pt = row[lab];
            loss = (double)kh_cce_loss(pt);
            if (dz)
                for (int c = 0; c < C; c++) dz[(int64_t)s_ * C + c] = kh_softmax_cce_grad(row[c], c == lab, pt, inv_n);
        } else {
            float pr = y[s_];
            correct = (pr > 0.5f) == (lab == 1) ? 1.0 : 0.0;
            loss = (double)kh_bce_loss(pr, (float)lab);
            if (dz) dz[s_] = kh_sigmoid_bce_grad(pr, (float)lab, inv_n);
        }
    }
    sl[threadIdx.x] = loss;
    sc[threadIdx.x] = correct;
    __syncthreads();
    for (int w = LOSS_TPB / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) {
            sl[threadIdx.x] += sl[threadIdx.x + w];
            sc[threadIdx.x] += sc[threadIdx.x + w];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        atomicAdd(&met[0], sl[0]);
        atomicAdd(&met[1], sc[0]);
    }
}

extern "C" cudaError_t ccuk_loss(cudaStream_t s, int kind, const float *y, const int32_t *labels, int n, int C,
                                 float *dz, double *met) {
    if (n <= 0) return cudaSuccess;
    k_loss<<<(unsigned)((n + LOSS_TPB - 1) / LOSS_TPB), LOSS_TPB, 0, s>>>(kind, y, labels, n, C, dz, met);
    return launched();
}

// --- optimizers ------------------------------------------------------------------------------------------
__global__ void k_optimizer(ccuk_opt o, int64_t n, float *w, float *g, float *s1, float *s2) {
    GRID_STRIDE(i, n) {
        float gi = g[i];
        if (o.clear_g) g[i] = 0.0f;
        switch (o.kind) {
        case 0: w[i] -= o.lr * gi; break;                                              /* SGD */
        case 1: kh_rmsprop_update(&w[i], &s1[i], gi, o.lr, o.rho, o.eps); break;        /* RMSprop */
        case 2: kh_adam_update(&w[i], &s1[i], &s2[i], gi, o.lr, o.b1, o.b2, o.eps); break; /* Adam */
        case 3: kh_adadelta_update(&w[i], &s1[i], &s2[i], gi, o.lr, o.rho, o.eps); break; /* Adadelta */
        default: break;
        }
    }
}

extern "C" cudaError_t ccuk_optimizer(cudaStream_t s, ccuk_opt o, int64_t n, float *w, float *g, float *s1, float *s2) {
    if (n <= 0) return cudaSuccess;
    k_optimizer<<<grid_for(n), TPB, 0, s>>>(o, n, w, g, s1, s2);
    return launched();
}

// --- LSTM final states -----------------------------------------------------------------------------------
__global__ void k_hy_to_y(const float *hy, float *y, int64_t n, int64_t dirs, int64_t u) {
    GRID_STRIDE(i, n * dirs * u) { /* i indexes y (n, dirs*u) */
        int64_t s_ = i / (dirs * u), d = (i / u) % dirs, k = i % u;
        y[i] = hy[(d * n + s_) * u + k];
    }
}

__global__ void k_dy_to_dhy(const float *dy, float *dhy, int64_t n, int64_t dirs, int64_t u) {
    GRID_STRIDE(i, n * dirs * u) { /* i indexes dhy (dirs, n, u) */
        int64_t d = i / (n * u), s_ = (i / u) % n, k = i % u;
        dhy[i] = dy[(s_ * dirs + d) * u + k];
    }
}

extern "C" cudaError_t ccuk_hy_to_y(cudaStream_t s, const float *hy, float *y, int64_t n, int64_t dirs, int64_t u) {
    if (n * dirs * u <= 0) return cudaSuccess;
    k_hy_to_y<<<grid_for(n * dirs * u), TPB, 0, s>>>(hy, y, n, dirs, u);
    return launched();
}

extern "C" cudaError_t ccuk_dy_to_dhy(cudaStream_t s, const float *dy, float *dhy, int64_t n, int64_t dirs, int64_t u) {
    if (n * dirs * u <= 0) return cudaSuccess;
    k_dy_to_dhy<<<grid_for(n * dirs * u), TPB, 0, s>>>(dy, dhy, n, dirs, u);
    return launched();
}
