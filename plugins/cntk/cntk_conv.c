/* cntk_conv.c — Conv2D on CPU by im2col + GEMM, NCHW.
 *
 * The weights are converted once, at set_weight, from Keras's [kh, kw, cin, cout] to the GEMM layout
 * Wg [F, K] with K = cin*kh*kw ordered (c, i, j) like the im2col rows; get_weight converts back.
 * Samples are processed in chunks of nb so the column matrix stays around CNTK_COL_BUDGET floats while one
 * GEMM still covers many output pixels: Y [F, nb*P] = Wg [F, K] @ col [K, nb*P], then scattered to NCHW.
 * Backward recomputes the columns (cheaper than keeping N*K*P floats) and reuses the column buffer for dcol.
 */
#include <string.h>

#include "cntk_cpu.h"

#define CNTK_COL_BUDGET (2 * 1024 * 1024) /* floats in one column chunk (8 MB) */
#define CNTK_MAX_KW 64                    /* widest kernel supported (checked at setup) */

typedef struct conv_geom {
    int64_t C, H, W, F, OH, OW, KH, KW, SH, SW, PT, PL;
    int64_t K, P; /* K = C*KH*KW rows of col, P = OH*OW pixels per sample */
    int64_t nb;   /* samples per chunk */
} conv_geom;

static void geom_of(const cntk_cpu_layer *L, int64_t max_batch, conv_geom *g) {
    const kh_layer_shapes *sh = &L->p->sh;
    const kh_layer_spec *sp = &L->p->spec;
    g->H = sh->in_shape[0], g->W = sh->in_shape[1], g->C = sh->in_shape[2];
    g->OH = sh->out_shape[0], g->OW = sh->out_shape[1], g->F = sh->out_shape[2];
    g->KH = sp->kernel[0], g->KW = sp->kernel[1];
    g->SH = sp->strides[0] > 0 ? sp->strides[0] : 1, g->SW = sp->strides[1] > 0 ? sp->strides[1] : 1;
    g->PT = g->PL = 0;
    if (sp->padding == KH_PAD_SAME) { /* TensorFlow: pad_total = max((out-1)*s + k - in, 0), before = total/2 */
        int64_t th = (g->OH - 1) * g->SH + g->KH - g->H, tw = (g->OW - 1) * g->SW + g->KW - g->W;
        g->PT = th > 0 ? th / 2 : 0;
        g->PL = tw > 0 ? tw / 2 : 0;
    }
    g->K = g->C * g->KH * g->KW;
    g->P = g->OH * g->OW;
    g->nb = CNTK_COL_BUDGET / (g->K * g->P);
    if (g->nb < 1) g->nb = 1;
    if (g->nb > max_batch) g->nb = max_batch;
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

/* col (K, nb*P) from x (nb, C, H, W) */
static void im2col(const conv_geom *g, const float *x, int64_t nb, float *col) {
    int64_t ld = nb * g->P, ow_lo[CNTK_MAX_KW], ow_hi[CNTK_MAX_KW];
    ow_range(g, ow_lo, ow_hi);
    for (int64_t c = 0; c < g->C; c++)
        for (int64_t i = 0; i < g->KH; i++)
            for (int64_t j = 0; j < g->KW; j++) {
                float *row = col + ((c * g->KH + i) * g->KW + j) * ld;
                for (int64_t s = 0; s < nb; s++) {
                    const float *plane = x + (s * g->C + c) * g->H * g->W;
                    float *dst = row + s * g->P;
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
}

/* dx (nb, C, H, W) += col2im(dcol (K, nb*P)); dx zeroed by the caller */
static void col2im(const conv_geom *g, const float *dcol, int64_t nb, float *dx) {
    int64_t ld = nb * g->P, ow_lo[CNTK_MAX_KW], ow_hi[CNTK_MAX_KW];
    ow_range(g, ow_lo, ow_hi);
    for (int64_t c = 0; c < g->C; c++)
        for (int64_t i = 0; i < g->KH; i++)
            for (int64_t j = 0; j < g->KW; j++) {
                const float *row = dcol + ((c * g->KH + i) * g->KW + j) * ld;
                for (int64_t s = 0; s < nb; s++) {
                    float *plane = dx + (s * g->C + c) * g->H * g->W;
                    const float *src = row + s * g->P;
                    for (int64_t oh = 0; oh < g->OH; oh++) {
                        int64_t ih = oh * g->SH - g->PT + i;
                        if (ih < 0 || ih >= g->H) continue;
                        float *drow = plane + ih * g->W;
                        const float *sr = src + oh * g->OW;
                        for (int64_t ow = ow_lo[j]; ow < ow_hi[j]; ow++) drow[ow * g->SW - g->PL + j] += sr[ow];
                    }
                }
            }
}

static kh_status conv_setup(cntk_cpu_model *m, cntk_cpu_layer *L) {
    conv_geom *g = cntk_alloc(m->s, sizeof *g);
    if (!g) return KH_ERR_NOMEM;
    L->st = g;
    geom_of(L, m->plan->max_batch, g);
    if (g->KW > CNTK_MAX_KW)
        return cntk_layer_fail(m->s, KH_ERR_UNSUPPORTED, L->p->spec.kind, L->p->index, "compile",
                               "kernel width %lld above %d", (long long)g->KW, CNTK_MAX_KW);
    cntk_cpu_need_scratch(m, g->nb * g->P * (g->K + g->F)); /* col + Y/dY in (F, nb*P) */
    return KH_OK;
}

static void conv_teardown(cntk_cpu_model *m, cntk_cpu_layer *L) { cntk_free(m->s, L->st); }

/* y (N, F, OH, OW) = act(conv(x (N, C, H, W)) + b) */
static kh_status conv_forward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, int train) {
    (void)train;
    const conv_geom *g = L->st;
    float *col = m->scratch, *yt = m->scratch + g->nb * g->P * g->K; /* (K, nb*P), (F, nb*P) */
    const float *b = L->prm[1].w;
    for (int64_t s0 = 0; s0 < n; s0 += g->nb) {
        int64_t nb = n - s0 < g->nb ? n - s0 : g->nb;
        im2col(g, L->x + s0 * g->C * g->H * g->W, nb, col);
        cntk_sgemm_mt(m->s->pool, 0, 0, g->F, nb * g->P, g->K, 1.0f, L->prm[0].w, g->K, col, nb * g->P, 0.0f, yt, nb * g->P);
        for (int64_t s = 0; s < nb; s++)
            for (int64_t f = 0; f < g->F; f++) {
                const float *src = yt + f * nb * g->P + s * g->P;
                float *dst = L->y + ((s0 + s) * g->F + f) * g->P;
                for (int64_t p = 0; p < g->P; p++) dst[p] = src[p] + b[f];
                cntk_act_span(L->p->act, dst, g->P); /* while the row is in cache */
            }
    }
    return KH_OK;
}

static kh_status conv_backward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, float *dy, float *dx, int fused) {
    const conv_geom *g = L->st;
    float *col = m->scratch, *dyt = m->scratch + g->nb * g->P * g->K;
    if (!fused) cntk_act_backward(m, L->p->act, L->y, dy, n * g->F * g->P, 1);
    float *db = L->prm[1].g;
    memset(db, 0, (size_t)g->F * sizeof(float));
    for (int64_t s = 0; s < n; s++)
        for (int64_t f = 0; f < g->F; f++) {
            const float *d = dy + (s * g->F + f) * g->P;
            float acc = 0;
            for (int64_t p = 0; p < g->P; p++) acc += d[p];
            db[f] += acc;
        }
    if (dx) memset(dx, 0, (size_t)(n * g->C * g->H * g->W) * sizeof(float));
    for (int64_t s0 = 0; s0 < n; s0 += g->nb) {
        int64_t nb = n - s0 < g->nb ? n - s0 : g->nb, ld = nb * g->P;
        for (int64_t s = 0; s < nb; s++) /* dY (F, nb*P) from NCHW */
            for (int64_t f = 0; f < g->F; f++)
                memcpy(dyt + f * ld + s * g->P, dy + ((s0 + s) * g->F + f) * g->P, (size_t)g->P * sizeof(float));
        im2col(g, L->x + s0 * g->C * g->H * g->W, nb, col);
        /* dWg (F, K) (+)= dY (F, nb*P) @ col^T */
        cntk_sgemm_mt(m->s->pool, 0, 1, g->F, g->K, ld, 1.0f, dyt, ld, col, ld, s0 == 0 ? 0.0f : 1.0f, L->prm[0].g, g->K);
        if (dx) { /* dcol (K, nb*P) = Wg^T @ dY, into the column buffer */
            cntk_sgemm_mt(m->s->pool, 1, 0, g->K, ld, g->F, 1.0f, L->prm[0].w, g->K, dyt, ld, 0.0f, col, ld);
            col2im(g, col, nb, dx + s0 * g->C * g->H * g->W);
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
