/* cpu/conv.c — Conv2D on CPU by im2col + GEMM, NCHW, parallel over the samples of the batch; built with
 * oneDNN, setup hands the layer to cpu/conv_onednn.c instead and only the weight conversions below serve it.
 *
 * The weights are converted once, at set_weight, from Keras's [kh, kw, cin, cout] to the GEMM layout
 * Wg [F, K] with K = cin*kh*kw ordered (c, i, j) like the im2col rows; get_weight converts back.
 * Each pool thread takes a contiguous run of samples and, per sample, builds the column matrix
 * col [K, P] (P = output pixels) in its own slot of the scratch area, then:
 *   forward   y_s [F, P] = b + Wg @ col   (the output rows start as the bias, the GEMM accumulates into
 *             NCHW directly, the activation runs while the rows are in cache);
 *   backward  dWg += dy_s [F, P] @ col^T into the thread's partial sums, then the same buffer becomes
 *             dcol = Wg^T @ dy_s and is scattered back into dx_s (col2im).
 * Per-sample matrices (at most ~1 MB for these tasks) stay in the core's cache between the im2col, the GEMM
 * and the scatter, where batch-wide chunks went through memory and needed transposes to and from NCHW
 * (perf on cifar10_cnn: memmove, col2im and OpenBLAS's beta pass over the big chunk ~21% of samples).
 * The partial weight gradients are summed in thread order after the batch, so results do not depend on
 * timing. Backward recomputes the columns (cheaper than keeping N*K*P floats).
 */
#include <string.h>

#include "cpu/conv.h"
#include "khost/kit/geometry.h"

#define CNTK_MAX_KW 64 /* widest kernel supported (checked at setup) */

typedef cntk_conv_geom conv_geom;

static void geom_of(const cntk_cpu_layer *L, conv_geom *g) {
    const kh_layer_shapes *sh = &L->p->sh;
    const kh_layer_spec *sp = &L->p->spec;
    g->H = sh->in_shape[0], g->W = sh->in_shape[1], g->C = sh->in_shape[2];
    g->OH = sh->out_shape[0], g->OW = sh->out_shape[1], g->F = sh->out_shape[2];
    g->KH = sp->kernel[0], g->KW = sp->kernel[1];
    g->SH = sp->strides[0] > 0 ? sp->strides[0] : 1, g->SW = sp->strides[1] > 0 ? sp->strides[1] : 1;
    kh_conv2d_dims d; /* valid: kh_spec_infer computed the shapes by the same rules */
    kh_conv2d_geometry(&d, 0, g->H, g->W, g->C, g->KH, g->KW, g->F, g->SH, g->SW, (int)sp->padding);
    g->PT = d.pad_top, g->PL = d.pad_left;
    g->K = g->C * g->KH * g->KW;
    g->P = g->OH * g->OW;
    g->slot = (g->K * g->P + g->F * g->K + g->F + 15) / 16 * 16; /* 64-byte aligned slots */
}

/* For kernel column j, the output columns whose input column iw = ow*SW - PL + j lies inside [0, W). */
static void ow_range(const conv_geom *g, int64_t *lo, int64_t *hi) {
    for (int64_t j = 0; j < g->KW && j < CNTK_MAX_KW; j++) {
        int64_t a = 0, b = g->OW;
        while (a < b && a * g->SW - g->PL + j < 0) a++;
        while (b > a && (b - 1) * g->SW - g->PL + j >= g->W) b--;
        lo[j] = a;
        hi[j] = b;
    }
}

/* col2im's row add for stride 1, restrict-qualified and not inlined so it vectorises (the strided form was
 * scalar: col2im ~7% of cifar10_cnn's samples in perf). */
static __attribute__((noinline)) void add_row(float *restrict d, const float *restrict s, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] += s[i];
}

/* col (K, P) from one sample x (C, H, W) */
static void im2col(const conv_geom *g, const float *x, float *col) {
    int64_t ow_lo[CNTK_MAX_KW], ow_hi[CNTK_MAX_KW];
    ow_range(g, ow_lo, ow_hi);
    for (int64_t c = 0; c < g->C; c++)
        for (int64_t i = 0; i < g->KH; i++)
            for (int64_t j = 0; j < g->KW; j++) {
                const float *plane = x + c * g->H * g->W;
                float *dst = col + ((c * g->KH + i) * g->KW + j) * g->P;
                for (int64_t oh = 0; oh < g->OH; oh++) {
                    int64_t ih = oh * g->SH - g->PT + i;
                    float *d = dst + oh * g->OW;
                    if (ih < 0 || ih >= g->H) {
                        memset(d, 0, (size_t)g->OW * sizeof(float));
                        continue;
                    }
                    const float *srow = plane + ih * g->W;
                    int64_t o0 = ow_lo[j], o1 = ow_hi[j];
                    for (int64_t ow = 0; ow < o0; ow++) d[ow] = 0.0f;
                    if (g->SW == 1) {
                        if (o1 > o0) memcpy(d + o0, srow + o0 - g->PL + j, (size_t)(o1 - o0) * sizeof(float));
                    } else {
                        for (int64_t ow = o0; ow < o1; ow++) d[ow] = srow[ow * g->SW - g->PL + j];
                    }
                    for (int64_t ow = o1 < o0 ? o0 : o1; ow < g->OW; ow++) d[ow] = 0.0f;
                }
            }
}

/* dx (C, H, W) += col2im(dcol (K, P)) for one sample; dx zeroed by the caller */
static void col2im(const conv_geom *g, const float *dcol, float *dx) {
    int64_t ow_lo[CNTK_MAX_KW], ow_hi[CNTK_MAX_KW];
    ow_range(g, ow_lo, ow_hi);
    for (int64_t c = 0; c < g->C; c++)
        for (int64_t i = 0; i < g->KH; i++)
            for (int64_t j = 0; j < g->KW; j++) {
                const float *src = dcol + ((c * g->KH + i) * g->KW + j) * g->P;
                float *plane = dx + c * g->H * g->W;
                for (int64_t oh = 0; oh < g->OH; oh++) {
                    int64_t ih = oh * g->SH - g->PT + i;
                    if (ih < 0 || ih >= g->H) continue;
                    float *drow = plane + ih * g->W;
                    const float *sr = src + oh * g->OW;
                    if (g->SW == 1) {
                        if (ow_hi[j] > ow_lo[j]) add_row(drow + ow_lo[j] - g->PL + j, sr + ow_lo[j], ow_hi[j] - ow_lo[j]);
                    } else {
                        for (int64_t ow = ow_lo[j]; ow < ow_hi[j]; ow++) drow[ow * g->SW - g->PL + j] += sr[ow];
                    }
                }
            }
}

static kh_status conv_setup(cntk_cpu_model *m, cntk_cpu_layer *L) {
    conv_geom *g = cntk_alloc(m->s, sizeof *g);
    if (!g) return KH_ERR_NOMEM;
    L->st = g;
    geom_of(L, g);
#ifdef CNTK_HAVE_DNNL
    return cntk_conv_dnnl_setup(m, L, g);
#else
    g->parts = cntk_pool_threads(m->s->pool);
    if (g->KW > CNTK_MAX_KW)
        return cntk_layer_fail(m->s, KH_ERR_UNSUPPORTED, L->p->spec.kind, L->p->index, "compile",
                               "kernel width %lld above %d", (long long)g->KW, CNTK_MAX_KW);
    cntk_cpu_need_scratch(m, g->parts * g->slot);
    return KH_OK;
#endif
}

static void conv_teardown(cntk_cpu_model *m, cntk_cpu_layer *L) {
#ifdef CNTK_HAVE_DNNL
    if (L->st) cntk_conv_dnnl_teardown(m, L->st);
#endif
    cntk_free(m->s, L->st);
}

typedef struct conv_job {
    cntk_cpu_model *m;
    cntk_cpu_layer *L;
    int64_t n;
    float *dy, *dx; /* backward */
    int fused;
} conv_job;

/* samples of part p */
static void part_range(const conv_geom *g, int64_t n, int64_t p, int64_t *s0, int64_t *s1) {
    *s0 = n * p / g->parts;
    *s1 = n * (p + 1) / g->parts;
}

/* y (N, F, OH, OW) = act(conv(x (N, C, H, W)) + b) */
static void forward_parts(void *ctx, int64_t pb, int64_t pe) {
    const conv_job *J = ctx;
    const cntk_cpu_layer *L = J->L;
    const conv_geom *g = L->st;
    const float *b = L->prm[1].w;
    for (int64_t p = pb; p < pe; p++) {
        float *col = J->m->scratch + p * g->slot;
        int64_t s0, s1;
        part_range(g, J->n, p, &s0, &s1);
        for (int64_t s = s0; s < s1; s++) {
            float *y = L->y + s * g->F * g->P;
            im2col(g, L->x + s * g->C * g->H * g->W, col);
            for (int64_t f = 0; f < g->F; f++)
                for (int64_t q = 0; q < g->P; q++) y[f * g->P + q] = b[f];
            cntk_sgemm(0, 0, g->F, g->P, g->K, 1.0f, L->prm[0].w, g->K, col, g->P, 1.0f, y, g->P);
            cntk_act_span(L->p->act, y, g->F * g->P);
        }
    }
}

static kh_status conv_forward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, int train) {
    (void)train;
    const conv_geom *g = L->st;
#ifdef CNTK_HAVE_DNNL
    if (g->dnnl) return cntk_conv_dnnl_forward(m, L, n);
#endif
    conv_job J = {.m = m, .L = L, .n = n};
    cntk_parallel_for(m->s->pool, g->parts, 1, forward_parts, &J);
    return KH_OK;
}

static void backward_parts(void *ctx, int64_t pb, int64_t pe) {
    const conv_job *J = ctx;
    const cntk_cpu_layer *L = J->L;
    const conv_geom *g = L->st;
    for (int64_t p = pb; p < pe; p++) {
        float *col = J->m->scratch + p * g->slot, *dw = col + g->K * g->P, *db = dw + g->F * g->K;
        memset(dw, 0, (size_t)(g->F * g->K + g->F) * sizeof(float));
        int64_t s0, s1;
        part_range(g, J->n, p, &s0, &s1);
        for (int64_t s = s0; s < s1; s++) {
            float *dy = J->dy + s * g->F * g->P;
            if (!J->fused) cntk_act_grad_span(L->p->act, L->y + s * g->F * g->P, dy, g->F * g->P);
            for (int64_t f = 0; f < g->F; f++) {
                float acc = 0;
                for (int64_t q = 0; q < g->P; q++) acc += dy[f * g->P + q];
                db[f] += acc;
            }
            im2col(g, L->x + s * g->C * g->H * g->W, col);
            cntk_sgemm(0, 1, g->F, g->K, g->P, 1.0f, dy, g->P, col, g->P, 1.0f, dw, g->K); /* dWg += dy col^T */
            if (J->dx) {
                float *dx = J->dx + s * g->C * g->H * g->W;
                cntk_sgemm(1, 0, g->K, g->P, g->F, 1.0f, L->prm[0].w, g->K, dy, g->P, 0.0f, col, g->P);
                memset(dx, 0, (size_t)(g->C * g->H * g->W) * sizeof(float));
                col2im(g, col, dx);
            }
        }
    }
}

static kh_status conv_backward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, float *dy, float *dx, int fused) {
    const conv_geom *g = L->st;
#ifdef CNTK_HAVE_DNNL
    if (g->dnnl) return cntk_conv_dnnl_backward(m, L, n, dy, dx, fused);
#endif
    conv_job J = {.m = m, .L = L, .n = n, .dy = dy, .dx = dx, .fused = fused};
    int64_t parts = n < g->parts ? n : g->parts; /* parts beyond n have no samples and no partial sums */
    cntk_parallel_for(m->s->pool, parts, 1, backward_parts, &J);
    float *dW = L->prm[0].g, *db = L->prm[1].g;
    int64_t nw = g->F * g->K;
    for (int64_t p = 0; p < parts; p++) { /* fixed order: deterministic sums */
        const float *pw = m->scratch + p * g->slot + g->K * g->P, *pb = pw + nw;
        if (p == 0) {
            memcpy(dW, pw, (size_t)nw * sizeof(float));
            memcpy(db, pb, (size_t)g->F * sizeof(float));
        } else {
            for (int64_t i = 0; i < nw; i++) dW[i] += pw[i];
            for (int64_t f = 0; f < g->F; f++) db[f] += pb[f];
        }
    }
    return KH_OK;
}

/* Keras [KH, KW, C, F] <-> Wg [F, (c, i, j)] */
static void conv_to_backend(const cntk_cpu_layer *L, int slot, const float *canon, float *dst) {
    const conv_geom *g = L->st;
    if (slot != 0) {
        memcpy(dst, canon, (size_t)L->prm[slot].numel * sizeof(float));
        return;
    }
    for (int64_t i = 0; i < g->KH; i++)
        for (int64_t j = 0; j < g->KW; j++)
            for (int64_t c = 0; c < g->C; c++)
                for (int64_t f = 0; f < g->F; f++)
                    dst[f * g->K + (c * g->KH + i) * g->KW + j] = canon[((i * g->KW + j) * g->C + c) * g->F + f];
}

static void conv_to_canonical(const cntk_cpu_layer *L, int slot, const float *src, float *canon) {
    const conv_geom *g = L->st;
    if (slot != 0) {
        memcpy(canon, src, (size_t)L->prm[slot].numel * sizeof(float));
        return;
    }
    for (int64_t i = 0; i < g->KH; i++)
        for (int64_t j = 0; j < g->KW; j++)
            for (int64_t c = 0; c < g->C; c++)
                for (int64_t f = 0; f < g->F; f++)
                    canon[((i * g->KW + j) * g->C + c) * g->F + f] = src[f * g->K + (c * g->KH + i) * g->KW + j];
}

const cntk_cpu_ops cntk_cpu_conv_ops = {
    .setup = conv_setup,
    .teardown = conv_teardown,
    .forward = conv_forward,
    .backward = conv_backward,
    .to_backend = conv_to_backend,
    .to_canonical = conv_to_canonical,
};
