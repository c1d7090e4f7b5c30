/* cuda/layers.c — the CUDA executor's layer kinds except LSTM (cuda/lstm.c):
 *   Dense       cuBLAS SGEMM (row-major trick, no transposes), fused bias + activation kernel
 *   Conv2D      cuDNN convolution forward / backward filter / backward data / backward bias, NCHW; the
 *               algorithms picked once per layer at compile time by the kit's rule (kh_cudnn_conv_choose, as
 *               tensorflow and theano: cuDNN's heuristics, no trial runs, the session's math, accurate
 *               algorithms only, deterministic first when compiled deterministic) within CCU_WS_CAP; the
 *               shared workspace is sized for the largest need and reused. TensorFlow's 'same' padding is asymmetric when the total is odd; cuDNN
 *               pads symmetrically, so such layers pad explicitly into a buffer and convolve 'valid'.
 *   MaxPool2D   own kernel saving the argmax (first maximum, as the reference kit and TensorFlow route ties;
 *               asymmetric 'same' windows; the backward is a gather without re-reading x and y)
 *   Activation  cuDNN activation / softmax forward and backward
 *   Dropout     own kernel: counter-based hash of (seed, forward count, layer, NHWC index), so the mask does
 *               not depend on the storage layout and the backward recomputes it instead of storing it
 *   Flatten     NCHW -> NHWC permutation (Keras flattens channels_last), Embedding gather / scatter-add,
 *               GlobalAveragePooling1D: own kernels. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/exec.h"
#include "khost/kit/geometry.h"
#include "khost/kit/rng.h"
#include "khost/kit/spec.h"

#define CCU_WS_CAP ((size_t)512 << 20) /* largest workspace an algorithm may ask for */

static const float k_one = 1.0f, k_zero = 0.0f;

#define STREAM(m) ((m)->cs->k.stream)
#define KCHECK(m, L, op, call) CCU_CUDA(m, L, op, call)

// --- Dense -----------------------------------------------------------------------------------------------
static kh_status dense_setup(ccu_model *m, ccu_layer *L) {
    (void)m;
    L->n_t = 2;
    L->t[0].numel = L->p->in_numel * L->p->out_numel;
    L->t[1].numel = L->p->out_numel;
    return KH_OK;
}

/* y (n, out) = act(x (n, in) @ W (in, out) + b) */
static kh_status dense_forward(ccu_model *m, ccu_layer *L, int n, int train) {
    (void)train;
    int64_t in = L->p->in_numel, out = L->p->out_numel;
    kh_status st = ccu_gemm(m, L, "forward", 0, 0, n, out, in, 1.0f, L->x, in, ccu_w(m, L, 0), out, 0.0f, L->y, out);
    if (st != KH_OK) return st;
    KCHECK(m, L, "forward", ccuk_bias_act_rows(STREAM(m), L->p->act, L->y, ccu_w(m, L, 1), n, out));
    return KH_OK;
}

/* dz = act'(dy); dW = x^T dz; db = colsum(dz); dx = dz W^T */
static kh_status dense_backward(ccu_model *m, ccu_layer *L, int n, float *dy, float *dx, float *spare, int fused) {
    (void)spare;
    int64_t in = L->p->in_numel, out = L->p->out_numel;
    if (!fused) KCHECK(m, L, "backward", ccuk_act_grad(STREAM(m), L->p->act, L->y, dy, n, out));
    kh_status st = ccu_gemm(m, L, "backward", 1, 0, in, out, n, 1.0f, L->x, in, dy, out, 0.0f, ccu_g(m, L, 0), out);
    if (st != KH_OK) return st;
    KCHECK(m, L, "backward", ccuk_colsum(STREAM(m), dy, n, out, ccu_g(m, L, 1)));
    if (dx) return ccu_gemm(m, L, "backward", 0, 1, n, in, out, 1.0f, dy, out, ccu_w(m, L, 0), out, 0.0f, dx, in);
    return KH_OK;
}

const struct ccu_ops ccu_dense_ops = {.setup = dense_setup, .forward = dense_forward, .backward = dense_backward};

// --- Conv2D ----------------------------------------------------------------------------------------------
typedef struct ccu_conv {
    int C, H, W, F, OH, OW, KH, KW, SH, SW, PT, PL, PB, PR;
    int asym, Hp, Wp; /* explicit padding: the input is padded into xp (N, C, Hp, Wp) */
    float *xp;
    cudnnTensorDescriptor_t xd, yd, bd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnConvolutionFwdAlgo_t fa, fa0; /* in use for desc_n samples; fa0.. chosen at compile for max_batch */
    cudnnConvolutionBwdFilterAlgo_t bfa, bfa0;
    cudnnConvolutionBwdDataAlgo_t bda, bda0;
    int desc_n;
    int xp_holds_dx; /* the last backward left the padded dx in xp: the padded input must be rebuilt */
} ccu_conv;

/* The three directions' algorithms and the workspace they need together (the largest). */
typedef struct conv_pick {
    cudnnConvolutionFwdAlgo_t fa;
    cudnnConvolutionBwdFilterAlgo_t bfa;
    cudnnConvolutionBwdDataAlgo_t bda;
    size_t need;
} conv_pick;

/* Each direction's algorithm by the kit's rule, the one tensorflow's and theano's GPU halves use too
 * (khost/kit/cuda.h): cuDNN's heuristics ranked fastest first, the session's math, accurate algorithms only (no
 * FFT, no non-fused Winograd), a workspace within cap, deterministic ones first when the model was compiled
 * deterministic (a fallback is warned); none usable names the candidates. For the descriptors as they are now. */
static kh_status conv_choose(ccu_model *m, ccu_layer *L, size_t cap, conv_pick *pk) {
    ccu_conv *c = L->st;
    cudnnHandle_t h = m->cs->k.dnn;
    char where[48], why[600];
    snprintf(where, sizeof where, "conv2d[%d]", L->p->index);
    kh_conv_choice_opts o = {.deterministic = m->plan->deterministic != 0, .tf32 = m->cs->k.tf32, .ws_cap = cap,
                             .host = m->s->base.host, .plugin = "cntk", .where = where};
    int algo[3], det;
    for (int d = KH_CONV_FWD; d <= KH_CONV_BWD_FILTER; d++) {
        kh_status st = kh_cudnn_conv_choose(h, (kh_conv_dir)d, c->xd, c->wd, c->cd, c->yd, &o, &algo[d], &det, why,
                                            sizeof why);
        if (st != KH_OK) return cntk_layer_fail(m->s, st, L->p->spec.kind, L->p->index, "compile", "%s", why);
    }
    pk->fa = (cudnnConvolutionFwdAlgo_t)algo[KH_CONV_FWD];
    pk->bda = (cudnnConvolutionBwdDataAlgo_t)algo[KH_CONV_BWD_DATA];
    pk->bfa = (cudnnConvolutionBwdFilterAlgo_t)algo[KH_CONV_BWD_FILTER];
    size_t ws[3];
    CCU_DNN(m, L, "compile", cudnnGetConvolutionForwardWorkspaceSize(h, c->xd, c->wd, c->cd, c->yd, pk->fa, &ws[0]));
    CCU_DNN(m, L, "compile",
            cudnnGetConvolutionBackwardFilterWorkspaceSize(h, c->xd, c->yd, c->cd, c->wd, pk->bfa, &ws[1]));
    CCU_DNN(m, L, "compile", cudnnGetConvolutionBackwardDataWorkspaceSize(h, c->wd, c->yd, c->cd, c->xd, pk->bda, &ws[2]));
    pk->need = ws[0] > ws[1] ? ws[0] : ws[1];
    if (ws[2] > pk->need) pk->need = ws[2];
    return KH_OK;
}

/* The workspace the current algorithms need at the descriptors' batch size; SIZE_MAX when one of them does
 * not support it. */
static size_t conv_ws_now(ccu_model *m, ccu_layer *L) {
    ccu_conv *c = L->st;
    cudnnHandle_t h = m->cs->k.dnn;
    size_t a = 0, b = 0, d = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(h, c->xd, c->wd, c->cd, c->yd, c->fa, &a) != CUDNN_STATUS_SUCCESS ||
        cudnnGetConvolutionBackwardFilterWorkspaceSize(h, c->xd, c->yd, c->cd, c->wd, c->bfa, &b) !=
            CUDNN_STATUS_SUCCESS ||
        cudnnGetConvolutionBackwardDataWorkspaceSize(h, c->wd, c->yd, c->cd, c->xd, c->bda, &d) != CUDNN_STATUS_SUCCESS)
        return SIZE_MAX;
    size_t w = a > b ? a : b;
    return w > d ? w : d;
}

/* Descriptors for n samples. The algorithms were chosen for max_batch; cuDNN's workspace sizes (and an
 * algorithm's support) depend on the batch, so for another n (the last, partial batch) they are checked
 * against the allocated workspace once per batch size and chosen again within it when they no longer fit. */
static kh_status conv_descs(ccu_model *m, ccu_layer *L, int n) {
    ccu_conv *c = L->st;
    if (c->desc_n == n) return KH_OK;
    int hin = c->asym ? c->Hp : c->H, win = c->asym ? c->Wp : c->W;
    CCU_DNN(m, L, "descriptors",
            cudnnSetTensor4dDescriptor(c->xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c->C, hin, win));
    CCU_DNN(m, L, "descriptors",
            cudnnSetTensor4dDescriptor(c->yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c->F, c->OH, c->OW));
    c->desc_n = n;
    c->fa = c->fa0, c->bfa = c->bfa0, c->bda = c->bda0;
    if (n == m->plan->max_batch || !m->ws_final) return KH_OK; /* compile time: conv_setup chooses */
    if (conv_ws_now(m, L) <= m->ws_bytes) return KH_OK;
    conv_pick pk;
    kh_status st = conv_choose(m, L, m->ws_bytes, &pk);
    if (st != KH_OK) return st;
    c->fa = pk.fa, c->bfa = pk.bfa, c->bda = pk.bda;
    size_t need = conv_ws_now(m, L);
    if (need > m->ws_bytes) {
        c->desc_n = 0; /* not usable: ask again next time rather than run with a short workspace */
        return cntk_layer_fail(m->s, KH_ERR_INTERNAL, L->p->spec.kind, L->p->index, "descriptors",
                               "no convolution algorithm for a batch of %d fits the %zu-byte workspace (needs %zu)", n,
                               m->ws_bytes, need);
    }
    if (m->verbose && m->s->base.host && m->s->base.host->log)
        m->s->base.host->log(KH_LOG_INFO, "cntk", "conv2d[%d]: batch %d: algorithms fwd %d, bwd filter %d, bwd data %d",
                        L->p->index, n, (int)c->fa, (int)c->bfa, (int)c->bda);
    return KH_OK;
}

static kh_status conv_setup(ccu_model *m, ccu_layer *L) {
    ccu_conv *c = calloc(1, sizeof *c);
    if (!c) return cntk_layer_fail(m->s, KH_ERR_NOMEM, L->p->spec.kind, L->p->index, "compile", "out of host memory");
    L->st = c;
    const kh_layer_shapes *sh = &L->p->sh;
    const kh_layer_spec *sp = &L->p->spec;
    c->H = sh->in_shape[0], c->W = sh->in_shape[1], c->C = sh->in_shape[2];
    c->OH = sh->out_shape[0], c->OW = sh->out_shape[1], c->F = sh->out_shape[2];
    c->KH = sp->kernel[0], c->KW = sp->kernel[1];
    c->SH = sp->strides[0] > 0 ? sp->strides[0] : 1, c->SW = sp->strides[1] > 0 ? sp->strides[1] : 1;
    /* the kit's window geometry (TensorFlow's 'same': total = max((out-1)*s + k - in, 0), before = total/2);
     * after = what the last window reaches beyond the input ('valid': 0) */
    kh_conv2d_dims gd;
    if (kh_conv2d_geometry(&gd, 1, c->H, c->W, c->C, c->KH, c->KW, c->F, c->SH, c->SW, (int)sp->padding) != KH_OK ||
        gd.OH != c->OH || gd.OW != c->OW)
        return cntk_layer_fail(m->s, KH_ERR_INTERNAL, L->p->spec.kind, L->p->index, "compile",
                               "convolution geometry: %dx%d output from the spec, %lldx%lld from the kit", c->OH, c->OW,
                               (long long)gd.OH, (long long)gd.OW);
    int th = (c->OH - 1) * c->SH + c->KH - c->H, tw = (c->OW - 1) * c->SW + c->KW - c->W;
    c->PT = (int)gd.pad_top, c->PL = (int)gd.pad_left;
    c->PB = (th > 0 ? th : 0) - c->PT, c->PR = (tw > 0 ? tw : 0) - c->PL;
    c->asym = c->PT != c->PB || c->PL != c->PR;
    c->Hp = c->H + c->PT + c->PB, c->Wp = c->W + c->PL + c->PR;
    L->n_t = 2;
    L->t[0].numel = (int64_t)c->F * c->C * c->KH * c->KW; /* cuDNN filter [F, C, KH, KW] */
    L->t[1].numel = c->F;
    int N = m->plan->max_batch;
    if (c->asym) {
        kh_status st = ccu_malloc(m, L, (void **)&c->xp, (size_t)N * c->C * c->Hp * c->Wp * sizeof(float),
                                  "the padded input");
        if (st != KH_OK) return st;
    }
    CCU_DNN(m, L, "compile", cudnnCreateTensorDescriptor(&c->xd));
    CCU_DNN(m, L, "compile", cudnnCreateTensorDescriptor(&c->yd));
    CCU_DNN(m, L, "compile", cudnnCreateTensorDescriptor(&c->bd));
    CCU_DNN(m, L, "compile", cudnnCreateFilterDescriptor(&c->wd));
    CCU_DNN(m, L, "compile", cudnnCreateConvolutionDescriptor(&c->cd));
    CCU_DNN(m, L, "compile", cudnnSetTensor4dDescriptor(c->bd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, c->F, 1, 1));
    CCU_DNN(m, L, "compile",
            cudnnSetFilter4dDescriptor(c->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, c->F, c->C, c->KH, c->KW));
    CCU_DNN(m, L, "compile",
            cudnnSetConvolution2dDescriptor(c->cd, c->asym ? 0 : c->PT, c->asym ? 0 : c->PL, c->SH, c->SW, 1, 1,
                                            CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    /* the session's math: strict FP32, no TF32 tensor-core kernels (parity with the reference kit), or cuDNN's
     * default, which allows TF32 for FP32 data (--math tf32) */
    CCU_DNN(m, L, "compile", cudnnSetConvolutionMathType(c->cd, m->cs->k.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    c->desc_n = 0;
    kh_status st = conv_descs(m, L, N);
    if (st != KH_OK) return st;
    int on, oc, oh, ow;
    CCU_DNN(m, L, "compile", cudnnGetConvolution2dForwardOutputDim(c->cd, c->xd, c->wd, &on, &oc, &oh, &ow));
    if (on != N || oc != c->F || oh != c->OH || ow != c->OW)
        return cntk_layer_fail(m->s, KH_ERR_INTERNAL, L->p->spec.kind, L->p->index, "compile",
                               "cuDNN output %dx%dx%dx%d, the plan says %dx%dx%dx%d", on, oc, oh, ow, N, c->F, c->OH,
                               c->OW);

    /* algorithms for max_batch (conv_descs re-checks other batch sizes) */
    conv_pick pk;
    if ((st = conv_choose(m, L, CCU_WS_CAP, &pk)) != KH_OK) return st;
    c->fa = c->fa0 = pk.fa, c->bfa = c->bfa0 = pk.bfa, c->bda = c->bda0 = pk.bda;
    ccu_need_ws(m, pk.need);
    if (m->verbose && m->s->base.host && m->s->base.host->log)
        m->s->base.host->log(KH_LOG_INFO, "cntk", "conv2d[%d]: algorithms fwd %d, bwd filter %d, bwd data %d; workspace %zu B%s%s",
                        L->p->index, (int)c->fa, (int)c->bfa, (int)c->bda, pk.need,
                        c->asym ? " (explicit padding)" : "", m->plan->deterministic ? " (deterministic)" : "");
    return KH_OK;
}

static void conv_teardown(ccu_model *m, ccu_layer *L) {
    (void)m;
    ccu_conv *c = L->st;
    if (!c) return;
    ccu_free_dev(c->xp);
    if (c->xd) cudnnDestroyTensorDescriptor(c->xd);
    if (c->yd) cudnnDestroyTensorDescriptor(c->yd);
    if (c->bd) cudnnDestroyTensorDescriptor(c->bd);
    if (c->wd) cudnnDestroyFilterDescriptor(c->wd);
    if (c->cd) cudnnDestroyConvolutionDescriptor(c->cd);
    free(c);
    L->st = NULL;
}

/* y (n, F, OH, OW) = act(conv(x (n, C, H, W)) + b) */
static kh_status conv_forward(ccu_model *m, ccu_layer *L, int n, int train) {
    (void)train;
    ccu_conv *c = L->st;
    kh_status st = conv_descs(m, L, n);
    if (st != KH_OK) return st;
    const float *xin = L->x;
    if (c->asym) {
        KCHECK(m, L, "forward",
               ccuk_pad_nchw(STREAM(m), L->x, c->xp, (int64_t)n * c->C, c->H, c->W, c->Hp, c->Wp, c->PT, c->PL));
        xin = c->xp;
        c->xp_holds_dx = 0;
    }
    CCU_DNN(m, L, "forward",
            cudnnConvolutionForward(m->cs->k.dnn, &k_one, c->xd, xin, c->wd, ccu_w(m, L, 0), c->cd, c->fa, m->ws,
                                    m->ws_bytes, &k_zero, c->yd, L->y));
    KCHECK(m, L, "forward",
           ccuk_bias_act_nchw(STREAM(m), L->p->act, L->y, ccu_w(m, L, 1), n, c->F, (int64_t)c->OH * c->OW));
    return KH_OK;
}

static kh_status conv_backward(ccu_model *m, ccu_layer *L, int n, float *dy, float *dx, float *spare, int fused) {
    (void)spare;
    ccu_conv *c = L->st;
    kh_status st = conv_descs(m, L, n);
    if (st != KH_OK) return st;
    if (!fused)
        KCHECK(m, L, "backward", ccuk_act_grad(STREAM(m), L->p->act, L->y, dy, (int64_t)n * c->F * c->OH * c->OW, 1));
    /* xp holds the padded input of the last forward, unless a backward since then put the padded dx there
     * (backward may run twice after one forward): then pad the input again, it is still in L->x */
    if (c->asym && c->xp_holds_dx) {
        KCHECK(m, L, "backward",
               ccuk_pad_nchw(STREAM(m), L->x, c->xp, (int64_t)n * c->C, c->H, c->W, c->Hp, c->Wp, c->PT, c->PL));
        c->xp_holds_dx = 0;
    }
    const float *xin = c->asym ? c->xp : L->x;
    cudnnHandle_t h = m->cs->k.dnn;
    CCU_DNN(m, L, "backward", cudnnConvolutionBackwardBias(h, &k_one, c->yd, dy, &k_zero, c->bd, ccu_g(m, L, 1)));
    CCU_DNN(m, L, "backward",
            cudnnConvolutionBackwardFilter(h, &k_one, c->xd, xin, c->yd, dy, c->cd, c->bfa, m->ws, m->ws_bytes,
                                           &k_zero, c->wd, ccu_g(m, L, 0)));
    if (!dx) return KH_OK;
    float *dxin = c->asym ? c->xp : dx; /* the padded input is no longer needed: reuse it for dx padded */
    c->xp_holds_dx = c->asym;
    CCU_DNN(m, L, "backward",
            cudnnConvolutionBackwardData(h, &k_one, c->wd, ccu_w(m, L, 0), c->yd, dy, c->cd, c->bda, m->ws,
                                         m->ws_bytes, &k_zero, c->xd, dxin));
    if (c->asym)
        KCHECK(m, L, "backward",
               ccuk_crop_nchw(STREAM(m), c->xp, dx, (int64_t)n * c->C, c->H, c->W, c->Hp, c->Wp, c->PT, c->PL));
    return KH_OK;
}

/* Keras [KH, KW, C, F] <-> cuDNN [F, C, KH, KW] */
static void conv_to_backend(const ccu_layer *L, int slot, const float *canon, float *dst) {
    const ccu_conv *c = L->st;
    if (slot != 0) {
        memcpy(dst, canon, (size_t)L->t[slot].numel * sizeof(float));
        return;
    }
    for (int i = 0; i < c->KH; i++)
        for (int j = 0; j < c->KW; j++)
            for (int ch = 0; ch < c->C; ch++)
                for (int f = 0; f < c->F; f++)
                    dst[((f * c->C + ch) * c->KH + i) * c->KW + j] = canon[((i * c->KW + j) * c->C + ch) * c->F + f];
}

static void conv_to_canonical(const ccu_layer *L, int slot, const float *src, float *canon) {
    const ccu_conv *c = L->st;
    if (slot != 0) {
        memcpy(canon, src, (size_t)L->t[slot].numel * sizeof(float));
        return;
    }
    for (int i = 0; i < c->KH; i++)
        for (int j = 0; j < c->KW; j++)
            for (int ch = 0; ch < c->C; ch++)
                for (int f = 0; f < c->F; f++)
                    canon[((i * c->KW + j) * c->C + ch) * c->F + f] = src[((f * c->C + ch) * c->KH + i) * c->KW + j];
}

const struct ccu_ops ccu_conv_ops = {.setup = conv_setup,
                                     .teardown = conv_teardown,
                                     .forward = conv_forward,
                                     .backward = conv_backward,
                                     .to_backend = conv_to_backend,
                                     .to_canonical = conv_to_canonical};

// --- MaxPooling2D ----------------------------------------------------------------------------------------
typedef struct ccu_pool {
    ccuk_pool_geom g;
    int C;
    int32_t *arg; /* (N, C, OH, OW) */
} ccu_pool;

static kh_status maxpool_setup(ccu_model *m, ccu_layer *L) {
    ccu_pool *p = calloc(1, sizeof *p);
    if (!p) return cntk_layer_fail(m->s, KH_ERR_NOMEM, L->p->spec.kind, L->p->index, "compile", "out of host memory");
    L->st = p;
    const kh_layer_shapes *sh = &L->p->sh;
    const kh_layer_spec *sp = &L->p->spec;
    ccuk_pool_geom *g = &p->g;
    g->H = sh->in_shape[0], g->W = sh->in_shape[1], p->C = sh->in_shape[2];
    g->OH = sh->out_shape[0], g->OW = sh->out_shape[1];
    g->KH = sp->kernel[0] > 0 ? sp->kernel[0] : 2, g->KW = sp->kernel[1] > 0 ? sp->kernel[1] : 2;
    g->SH = sp->strides[0] > 0 ? sp->strides[0] : g->KH, g->SW = sp->strides[1] > 0 ? sp->strides[1] : g->KW;
    g->PT = g->PL = 0;
    if (sp->padding == KH_PAD_SAME) {
        int th = (g->OH - 1) * g->SH + g->KH - g->H, tw = (g->OW - 1) * g->SW + g->KW - g->W;
        g->PT = th > 0 ? th / 2 : 0;
        g->PL = tw > 0 ? tw / 2 : 0;
    }
    return ccu_malloc(m, L, (void **)&p->arg, (size_t)m->plan->max_batch * L->p->out_numel * sizeof(int32_t),
                      "the argmax");
}

static void maxpool_teardown(ccu_model *m, ccu_layer *L) {
    (void)m;
    ccu_pool *p = L->st;
    if (!p) return;
    ccu_free_dev(p->arg);
    free(p);
    L->st = NULL;
}

static kh_status maxpool_forward(ccu_model *m, ccu_layer *L, int n, int train) {
    (void)train;
    ccu_pool *p = L->st;
    KCHECK(m, L, "forward", ccuk_maxpool_fwd(STREAM(m), L->x, L->y, p->arg, (int64_t)n * p->C, p->g));
    return KH_OK;
}

static kh_status maxpool_backward(ccu_model *m, ccu_layer *L, int n, float *dy, float *dx, float *spare, int fused) {
    (void)spare, (void)fused;
    ccu_pool *p = L->st;
    if (dx) KCHECK(m, L, "backward", ccuk_maxpool_bwd(STREAM(m), dy, p->arg, dx, (int64_t)n * p->C, p->g));
    return KH_OK;
}

const struct ccu_ops ccu_maxpool_ops = {
    .setup = maxpool_setup, .teardown = maxpool_teardown, .forward = maxpool_forward, .backward = maxpool_backward};

// --- Activation (cuDNN) ----------------------------------------------------------------------------------
typedef struct ccu_act {
    cudnnActivationDescriptor_t ad; /* relu, sigmoid, tanh */
    cudnnTensorDescriptor_t td;
    int64_t cols;                   /* softmax: the last (Keras) axis, contiguous */
    int desc_n;
} ccu_act;

static kh_status act_setup(ccu_model *m, ccu_layer *L) {
    ccu_act *a = calloc(1, sizeof *a);
    if (!a) return cntk_layer_fail(m->s, KH_ERR_NOMEM, L->p->spec.kind, L->p->index, "compile", "out of host memory");
    L->st = a;
    const kh_layer_shapes *sh = &L->p->sh;
    a->cols = sh->out_rank >= 1 ? sh->out_shape[sh->out_rank - 1] : 1;
    CCU_DNN(m, L, "compile", cudnnCreateTensorDescriptor(&a->td));
    int act = L->p->act;
    if (act == KH_ACT_RELU || act == KH_ACT_SIGMOID || act == KH_ACT_TANH) {
        cudnnActivationMode_t mode = act == KH_ACT_RELU      ? CUDNN_ACTIVATION_RELU
                                     : act == KH_ACT_SIGMOID ? CUDNN_ACTIVATION_SIGMOID
                                                             : CUDNN_ACTIVATION_TANH;
        CCU_DNN(m, L, "compile", cudnnCreateActivationDescriptor(&a->ad));
        CCU_DNN(m, L, "compile", cudnnSetActivationDescriptor(a->ad, mode, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    }
    return KH_OK;
}

static void act_teardown(ccu_model *m, ccu_layer *L) {
    (void)m;
    ccu_act *a = L->st;
    if (!a) return;
    if (a->ad) cudnnDestroyActivationDescriptor(a->ad);
    if (a->td) cudnnDestroyTensorDescriptor(a->td);
    free(a);
    L->st = NULL;
}

static kh_status act_desc(ccu_model *m, ccu_layer *L, int n) {
    ccu_act *a = L->st;
    if (a->desc_n == n) return KH_OK;
    int64_t numel = (int64_t)n * L->p->out_numel;
    /* softmax: (rows, cols, 1, 1), INSTANCE mode normalises each row; element-wise: any shape */
    int rows = (int)(numel / a->cols), cols = (int)a->cols;
    CCU_DNN(m, L, "descriptors", cudnnSetTensor4dDescriptor(a->td, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, rows, cols, 1, 1));
    a->desc_n = n;
    return KH_OK;
}

static kh_status act_forward(ccu_model *m, ccu_layer *L, int n, int train) {
    (void)train;
    ccu_act *a = L->st;
    size_t bytes = (size_t)n * L->p->out_numel * sizeof(float);
    if (L->p->act == KH_ACT_LINEAR) {
        CCU_CUDA(m, L, "forward", cudaMemcpyAsync(L->y, L->x, bytes, cudaMemcpyDeviceToDevice, STREAM(m)));
        return KH_OK;
    }
    kh_status st = act_desc(m, L, n);
    if (st != KH_OK) return st;
    if (L->p->act == KH_ACT_SOFTMAX)
        CCU_DNN(m, L, "forward",
                cudnnSoftmaxForward(m->cs->k.dnn, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, &k_one, a->td, L->x,
                                    &k_zero, a->td, L->y));
    else
        CCU_DNN(m, L, "forward", cudnnActivationForward(m->cs->k.dnn, a->ad, &k_one, a->td, L->x, &k_zero, a->td, L->y));
    return KH_OK;
}

static kh_status act_backward(ccu_model *m, ccu_layer *L, int n, float *dy, float *dx, float *spare, int fused) {
    (void)spare;
    ccu_act *a = L->st;
    if (!dx) return KH_OK;
    size_t bytes = (size_t)n * L->p->out_numel * sizeof(float);
    if (fused || L->p->act == KH_ACT_LINEAR) { /* fused: dy already is d(loss)/d(pre-activation) */
        CCU_CUDA(m, L, "backward", cudaMemcpyAsync(dx, dy, bytes, cudaMemcpyDeviceToDevice, STREAM(m)));
        return KH_OK;
    }
    kh_status st = act_desc(m, L, n);
    if (st != KH_OK) return st;
    if (L->p->act == KH_ACT_SOFTMAX)
        CCU_DNN(m, L, "backward",
                cudnnSoftmaxBackward(m->cs->k.dnn, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, &k_one, a->td,
                                     L->y, a->td, dy, &k_zero, a->td, dx));
    else
        CCU_DNN(m, L, "backward",
                cudnnActivationBackward(m->cs->k.dnn, a->ad, &k_one, a->td, L->y, a->td, dy, a->td, L->x, &k_zero, a->td,
                                        dx));
    return KH_OK;
}

const struct ccu_ops ccu_activation_ops = {
    .setup = act_setup, .teardown = act_teardown, .forward = act_forward, .backward = act_backward};

// --- Dropout ---------------------------------------------------------------------------------------------
typedef struct ccu_drop {
    int active;   /* the last forward applied a mask */
    uint64_t key; /* its seed */
    int64_t c, hw;
} ccu_drop;

static kh_status dropout_setup(ccu_model *m, ccu_layer *L) {
    ccu_drop *d = calloc(1, sizeof *d);
    if (!d) return cntk_layer_fail(m->s, KH_ERR_NOMEM, L->p->spec.kind, L->p->index, "compile", "out of host memory");
    L->st = d;
    if (L->p->image_in) {
        d->c = L->p->sh.in_shape[2];
        d->hw = (int64_t)L->p->sh.in_shape[0] * L->p->sh.in_shape[1];
    }
    return KH_OK;
}

static void dropout_teardown(ccu_model *m, ccu_layer *L) {
    (void)m;
    free(L->st);
    L->st = NULL;
}

static kh_status dropout_forward(ccu_model *m, ccu_layer *L, int n, int train) {
    ccu_drop *d = L->st;
    int64_t per = L->p->in_numel;
    d->active = train && !m->plan->deterministic && L->p->spec.rate > 0.0f;
    if (!d->active) {
        CCU_CUDA(m, L, "forward",
                 cudaMemcpyAsync(L->y, L->x, (size_t)n * per * sizeof(float), cudaMemcpyDeviceToDevice, STREAM(m)));
        return KH_OK;
    }
    d->key = kh_seed_mix(m->plan->seed, m->n_forward, (uint64_t)L->p->index, 0);
    KCHECK(m, L, "forward", ccuk_dropout(STREAM(m), L->x, L->y, n, per, d->c, d->hw, L->p->spec.rate, d->key));
    return KH_OK;
}

static kh_status dropout_backward(ccu_model *m, ccu_layer *L, int n, float *dy, float *dx, float *spare, int fused) {
    (void)spare, (void)fused;
    ccu_drop *d = L->st;
    int64_t per = L->p->in_numel;
    if (!dx) return KH_OK;
    if (!d->active) {
        CCU_CUDA(m, L, "backward",
                 cudaMemcpyAsync(dx, dy, (size_t)n * per * sizeof(float), cudaMemcpyDeviceToDevice, STREAM(m)));
        return KH_OK;
    }
    KCHECK(m, L, "backward", ccuk_dropout(STREAM(m), dy, dx, n, per, d->c, d->hw, L->p->spec.rate, d->key));
    return KH_OK;
}

const struct ccu_ops ccu_dropout_ops = {
    .setup = dropout_setup, .teardown = dropout_teardown, .forward = dropout_forward, .backward = dropout_backward};

// --- Flatten ---------------------------------------------------------------------------------------------
static kh_status flatten_forward(ccu_model *m, ccu_layer *L, int n, int train) {
    (void)train;
    const kh_layer_shapes *sh = &L->p->sh;
    if (L->p->image_in)
        KCHECK(m, L, "forward",
               ccuk_nchw_to_nhwc(STREAM(m), L->x, L->y, n, sh->in_shape[2], sh->in_shape[0], sh->in_shape[1]));
    else
        CCU_CUDA(m, L, "forward",
                 cudaMemcpyAsync(L->y, L->x, (size_t)n * L->p->out_numel * sizeof(float), cudaMemcpyDeviceToDevice,
                                 STREAM(m)));
    return KH_OK;
}

static kh_status flatten_backward(ccu_model *m, ccu_layer *L, int n, float *dy, float *dx, float *spare, int fused) {
    (void)spare, (void)fused;
    const kh_layer_shapes *sh = &L->p->sh;
    if (!dx) return KH_OK;
    if (L->p->image_in)
        KCHECK(m, L, "backward",
               ccuk_nhwc_to_nchw(STREAM(m), dy, dx, n, sh->in_shape[2], sh->in_shape[0], sh->in_shape[1]));
    else
        CCU_CUDA(m, L, "backward",
                 cudaMemcpyAsync(dx, dy, (size_t)n * L->p->out_numel * sizeof(float), cudaMemcpyDeviceToDevice,
                                 STREAM(m)));
    return KH_OK;
}

const struct ccu_ops ccu_flatten_ops = {.forward = flatten_forward, .backward = flatten_backward};

// --- Embedding -------------------------------------------------------------------------------------------
static kh_status embed_setup(ccu_model *m, ccu_layer *L) {
    (void)m;
    L->n_t = 1;
    L->t[0].numel = (int64_t)L->p->spec.input_dim * L->p->spec.units;
    return KH_OK;
}

/* y (n, T, D) = E[x (n, T)]; indices were validated on the host while staging */
static kh_status embed_forward(ccu_model *m, ccu_layer *L, int n, int train) {
    (void)train;
    KCHECK(m, L, "forward",
           ccuk_embed_fwd(STREAM(m), L->xi, ccu_w(m, L, 0), L->y, (int64_t)n * L->p->in_numel, L->p->spec.units));
    return KH_OK;
}

/* dE[x[n, t]] += dy[n, t] into the (clean) dense gradient; the optimizer then updates every row (Keras's
 * dense Adam) and clears the gradient as it goes */
static kh_status embed_backward(ccu_model *m, ccu_layer *L, int n, float *dy, float *dx, float *spare, int fused) {
    (void)dx, (void)spare, (void)fused;
    KCHECK(m, L, "backward",
           ccuk_embed_bwd(STREAM(m), L->xi, dy, ccu_g(m, L, 0), (int64_t)n * L->p->in_numel, L->p->spec.units,
                          m->plan->deterministic));
    return KH_OK;
}

const struct ccu_ops ccu_embed_ops = {.setup = embed_setup, .forward = embed_forward, .backward = embed_backward};

// --- GlobalAveragePooling1D ------------------------------------------------------------------------------
static kh_status gap1d_forward(ccu_model *m, ccu_layer *L, int n, int train) {
    (void)train;
    KCHECK(m, L, "forward", ccuk_gap1d_fwd(STREAM(m), L->x, L->y, n, L->p->sh.in_shape[0], L->p->sh.in_shape[1]));
    return KH_OK;
}

static kh_status gap1d_backward(ccu_model *m, ccu_layer *L, int n, float *dy, float *dx, float *spare, int fused) {
    (void)spare, (void)fused;
    if (dx) KCHECK(m, L, "backward", ccuk_gap1d_bwd(STREAM(m), dy, dx, n, L->p->sh.in_shape[0], L->p->sh.in_shape[1]));
    return KH_OK;
}

const struct ccu_ops ccu_gap1d_ops = {.forward = gap1d_forward, .backward = gap1d_backward};
