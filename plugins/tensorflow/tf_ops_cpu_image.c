/* tf_ops_cpu_image.c — CPU kernels of the NHWC image ops: Conv2D (a contraction over patches packed from the
 * image, tf_ops_cpu_patches.c, where the filter count fills the register tile; else im2col + GEMM), its two
 * backprops as TensorFlow 1.x's custom CPU kernels did them (im2col / col2im + GEMM), MaxPool and MaxPoolGrad.
 *
 * Strides are supported (the rows of a patch follow the output pixel's stride).
 * NHWC with an HWIO kernel makes im2col simple: a patch row is KH*KW runs of C contiguous floats, and the
 * kernel [KH, KW, C, F] is already the (K, F) matrix of the GEMM, so y (P, F) = patches (P, K) x W (K, F)
 * lands directly in NHWC — for several consecutive samples at once, whose outputs are consecutive rows: one
 * GEMM per block of samples (about TF_CONV_BLOCK_FLOATS of patches) packs the kernel once per block instead of
 * once per sample. Work is split over blocks; each thread builds a block's patches in its own scratch (sized
 * at compile time), so nothing is allocated during a step. The filter gradient sums per-part partials in part
 * order, so the result does not depend on which thread ran which part.
 */
#include <string.h>

#include "khost/kit/gemm_tile.h"
#include "khost/kit/geometry.h"
#include "tf.h"
#include "tf_ops_cpu.h"
#include "tf_ops_cpu_patches.h"

/* Patches per GEMM: ~2 MiB of floats per thread keeps a block in L2/L3 while making the GEMM tall. */
#define TF_CONV_BLOCK_FLOATS ((int64_t)1 << 19)

static int64_t block_samples(int64_t pk) { return pk >= TF_CONV_BLOCK_FLOATS ? 1 : TF_CONV_BLOCK_FLOATS / pk; }

typedef struct conv {
    tf_run *r;
    kh_conv2d_dims d;
    const float *x, *w, *dy;
    float *y;
    int64_t P, K, chunk, S; /* S: samples per block */
    int32_t node;
} conv;

static kh_status geometry(tf_run *r, int32_t i, int32_t xnode, int32_t wnode, conv *c) {
    const kh_gnode *X = &r->f->g->nodes[xnode], *W = &r->f->g->nodes[wnode];
    const kh_gattr *a = &tf_node(r, i)->attr;
    kh_status st = kh_conv2d_geometry(&c->d, r->n, X->dims[1], X->dims[2], X->dims[3], W->dims[0], W->dims[1],
                                          W->dims[3], a->strides[0] > 0 ? a->strides[0] : 1,
                                          a->strides[1] > 0 ? a->strides[1] : 1, a->padding);
    if (st != KH_OK) return tf_run_fail(r, i, st, "bad convolution geometry");
    c->P = c->d.OH * c->d.OW;
    c->K = c->d.KH * c->d.KW * c->d.C;
    c->S = block_samples(c->P * c->K);
    c->r = r;
    return KH_OK;
}

/* patches (P, K) of sample x (H, W, C) */
static void im2col(const kh_conv2d_dims *d, const float *x, float *col) {
    int64_t C = d->C, KWC = d->KW * C;
    for (int64_t oh = 0; oh < d->OH; oh++)
        for (int64_t ow = 0; ow < d->OW; ow++) {
            float *row = col + (oh * d->OW + ow) * d->KH * KWC;
            int64_t iw0 = ow * d->SW - d->pad_left;
            /* with the whole kernel row inside the image, its KW taps are KW*C contiguous floats in NHWC and
             * in the patch row alike: one run per kernel row instead of one per tap */
            int inside_w = iw0 >= 0 && iw0 + d->KW <= d->W;
            for (int64_t kh = 0; kh < d->KH; kh++) {
                int64_t ih = oh * d->SH + kh - d->pad_top;
                float *restrict dst = row + kh * KWC;
                if (ih < 0 || ih >= d->H) {
                    for (int64_t k = 0; k < KWC; k++) dst[k] = 0.0f;
                    continue;
                }
                if (inside_w) {
                    const float *restrict src = x + (ih * d->W + iw0) * C;
                    for (int64_t k = 0; k < KWC; k++) dst[k] = src[k];
                    continue;
                }
                for (int64_t kw = 0; kw < d->KW; kw++) { /* runs of C floats, zeros where padding */
                    int64_t iw = iw0 + kw;
                    float *restrict dk = dst + kw * C;
                    if (iw < 0 || iw >= d->W) {
                        for (int64_t c = 0; c < C; c++) dk[c] = 0.0f;
                    } else {
                        const float *restrict sk = x + (ih * d->W + iw) * C;
                        for (int64_t c = 0; c < C; c++) dk[c] = sk[c];
                    }
                }
            }
        }
}

/* dx (H, W, C) += the patch gradients (P, K) scattered back */
static void col2im(const kh_conv2d_dims *d, const float *col, float *dx) {
    int64_t C = d->C;
    for (int64_t oh = 0; oh < d->OH; oh++)
        for (int64_t ow = 0; ow < d->OW; ow++) {
            const float *row = col + (oh * d->OW + ow) * d->KH * d->KW * C;
            for (int64_t kh = 0; kh < d->KH; kh++) {
                int64_t ih = oh * d->SH + kh - d->pad_top;
                if (ih < 0 || ih >= d->H) continue;
                for (int64_t kw = 0; kw < d->KW; kw++) {
                    int64_t iw = ow * d->SW + kw - d->pad_left;
                    if (iw < 0 || iw >= d->W) continue;
                    const float *src = row + (kh * d->KW + kw) * C;
                    float *dst = dx + (ih * d->W + iw) * C;
                    for (int64_t c = 0; c < C; c++) dst[c] += src[c];
                }
            }
        }
}

static float *scratch(tf_run *r, int slot) { return r->m->im2col + (int64_t)slot * r->m->im2col_floats; }

/* over blocks [b0, b1) of c->S samples */
static void conv_fwd_range(void *v, int64_t b0, int64_t b1, int slot) {
    conv *c = v;
    const kh_conv2d_dims *d = &c->d;
    float *col = scratch(c->r, slot);
    int direct = d->KH == 1 && d->KW == 1 && d->SH == 1 && d->SW == 1 && d->pad_top == 0 && d->pad_left == 0;
    for (int64_t b = b0; b < b1; b++) {
        int64_t s0 = b * c->S, ns = s0 + c->S < c->r->n ? c->S : c->r->n - s0;
        const float *xs = c->x + s0 * d->H * d->W * d->C;
        if (!direct) {
            for (int64_t j = 0; j < ns; j++) im2col(d, xs + j * d->H * d->W * d->C, col + j * c->P * c->K);
            xs = col;
        }
        tf_sgemm(0, 0, ns * c->P, d->OC, c->K, 1.0f, xs, c->K, c->w, d->OC, 0.0f, c->y + s0 * c->P * d->OC, d->OC);
    }
}

static int64_t n_blocks(const conv *c) { return (c->r->n + c->S - 1) / c->S; }

/* over blocks [b0, b1) of output rows, their patches packed from the image (tf_ops_cpu_patches.c) */
static void conv_patches_range(void *v, int64_t b0, int64_t b1, int slot) {
    conv *c = v;
    tf_patches_conv(&c->d, c->x, c->w, c->y, c->r->n, b0, b1, scratch(c->r, slot));
}

static kh_status k_conv2d(tf_run *r, int32_t i) {
    const int32_t *in = kh_graph_inputs(r->f->g, i);
    conv c;
    kh_status st = geometry(r, i, in[0], in[1], &c);
    if (st != KH_OK) return st;
    c.x = tf_in(r, i, 0);
    c.w = tf_in(r, i, 1);
    c.y = tf_out(r, i);
    const kh_conv2d_dims *d = &c.d;
    int direct = d->KH == 1 && d->KW == 1 && d->SH == 1 && d->SW == 1 && d->pad_top == 0 && d->pad_left == 0;
    if (!direct && tf_patches_fit(d, r->m->im2col_floats)) {
        tf_parallel_for(r->m->s->pool, tf_patches_blocks(d, r->n), 1, r->m->s->set.intra_op, conv_patches_range, &c);
        return KH_OK;
    }
    tf_parallel_for(r->m->s->pool, n_blocks(&c), 1, r->m->s->set.intra_op, conv_fwd_range, &c);
    return KH_OK;
}

static void conv_bwd_input_range(void *v, int64_t b0, int64_t b1, int slot) {
    conv *c = v;
    const kh_conv2d_dims *d = &c->d;
    float *col = scratch(c->r, slot);
    int64_t hwc = d->H * d->W * d->C;
    for (int64_t b = b0; b < b1; b++) {
        int64_t s0 = b * c->S, ns = s0 + c->S < c->r->n ? c->S : c->r->n - s0;
        tf_sgemm(0, 1, ns * c->P, c->K, d->OC, 1.0f, c->dy + s0 * c->P * d->OC, d->OC, c->w, d->OC, 0.0f, col, c->K);
        memset(c->y + s0 * hwc, 0, (size_t)(ns * hwc) * sizeof *c->y);
        for (int64_t j = 0; j < ns; j++) col2im(d, col + j * c->P * c->K, c->y + (s0 + j) * hwc);
    }
}

static kh_status k_conv2d_backprop_input(tf_run *r, int32_t i) {
    const kh_gnode *nd = tf_node(r, i);
    const int32_t *in = kh_graph_inputs(r->f->g, i);
    conv c;
    kh_status st = geometry(r, i, nd->attr.shape_of, in[0], &c);
    if (st != KH_OK) return st;
    c.w = tf_in(r, i, 0);
    c.dy = tf_in(r, i, 1);
    c.y = tf_out(r, i);
    tf_parallel_for(r->m->s->pool, n_blocks(&c), 1, r->m->s->set.intra_op, conv_bwd_input_range, &c);
    return KH_OK;
}

/* over parts [p0, p1): part p sums samples [p chunk, (p + 1) chunk) into its own partial */
static void conv_bwd_filter_range(void *v, int64_t p0, int64_t p1, int slot) {
    conv *c = v;
    const kh_conv2d_dims *d = &c->d;
    float *col = scratch(c->r, slot);
    for (int64_t p = p0; p < p1; p++) {
    float *part = c->r->f->partials[c->node] + p * c->K * c->d.OC;
    memset(part, 0, (size_t)(c->K * d->OC) * sizeof *part);
    int64_t s1 = (p + 1) * c->chunk < c->r->n ? (p + 1) * c->chunk : c->r->n;
    for (int64_t s = p * c->chunk; s < s1; s += c->S) {
        int64_t ns = s + c->S < s1 ? c->S : s1 - s;
        for (int64_t j = 0; j < ns; j++) im2col(d, c->x + (s + j) * d->H * d->W * d->C, col + j * c->P * c->K);
        tf_sgemm(1, 0, c->K, d->OC, ns * c->P, 1.0f, col, c->K, c->dy + s * c->P * d->OC, d->OC, 1.0f, part, d->OC);
    }
    }
}

static kh_status k_conv2d_backprop_filter(tf_run *r, int32_t i) {
    const kh_gnode *nd = tf_node(r, i);
    const int32_t *in = kh_graph_inputs(r->f->g, i);
    conv c;
    kh_status st = geometry(r, i, in[0], nd->attr.shape_of, &c);
    if (st != KH_OK) return st;
    c.x = tf_in(r, i, 0);
    c.dy = tf_in(r, i, 1);
    c.node = i;
    int parts = r->m->s->set.intra_op;
    if (parts > r->n) parts = (int)r->n;
    if (parts < 1) parts = 1;
    c.chunk = (r->n + parts - 1) / parts;
    parts = (int)((r->n + c.chunk - 1) / c.chunk);
    tf_parallel_for(r->m->s->pool, parts, 1, parts, conv_bwd_filter_range, &c);
    float *dw = tf_out(r, i);
    int64_t kf = c.K * c.d.OC;
    const float *base = r->f->partials[i];
    memcpy(dw, base, (size_t)kf * sizeof *dw);
    for (int p = 1; p < parts; p++) {
        const float *q = base + (int64_t)p * kf;
        for (int64_t k = 0; k < kf; k++) dw[k] += q[k];
    }
    return KH_OK;
}

// --- max pooling ------------------------------------------------------------------------------------------------
typedef struct pool {
    kh_conv2d_dims d;
    const float *x, *dy;
    float *y;
} pool;

static kh_status pool_geometry(tf_run *r, int32_t i, int32_t xnode, pool *p) {
    const kh_gnode *X = &r->f->g->nodes[xnode];
    const kh_gattr *a = &tf_node(r, i)->attr;
    kh_status st = kh_conv2d_geometry(&p->d, r->n, X->dims[1], X->dims[2], X->dims[3], a->window[0], a->window[1],
                                          X->dims[3], a->strides[0], a->strides[1], a->padding);
    return st == KH_OK ? KH_OK : tf_run_fail(r, i, st, "bad pooling geometry");
}

static void pool_fwd_range(void *v, int64_t s0, int64_t s1, int slot) {
    (void)slot;
    const pool *p = v;
    const kh_conv2d_dims *d = &p->d;
    int64_t C = d->C;
    for (int64_t s = s0; s < s1; s++)
        for (int64_t oh = 0; oh < d->OH; oh++)
            for (int64_t ow = 0; ow < d->OW; ow++) {
                float *y = p->y + ((s * d->OH + oh) * d->OW + ow) * C;
                int first = 1;
                for (int64_t kh = 0; kh < d->KH; kh++) {
                    int64_t ih = oh * d->SH + kh - d->pad_top;
                    if (ih < 0 || ih >= d->H) continue;
                    for (int64_t kw = 0; kw < d->KW; kw++) {
                        int64_t iw = ow * d->SW + kw - d->pad_left;
                        if (iw < 0 || iw >= d->W) continue;
                        const float *x = p->x + ((s * d->H + ih) * d->W + iw) * C;
                        if (first) memcpy(y, x, (size_t)C * sizeof *y);
                        else
                            for (int64_t c = 0; c < C; c++) y[c] = x[c] > y[c] ? x[c] : y[c];
                        first = 0;
                    }
                }
            }
}

static kh_status k_maxpool(tf_run *r, int32_t i) {
    pool p;
    kh_status st = pool_geometry(r, i, kh_graph_inputs(r->f->g, i)[0], &p);
    if (st != KH_OK) return st;
    p.x = tf_in(r, i, 0);
    p.y = tf_out(r, i);
    tf_parallel_for(r->m->s->pool, r->n, 1, r->m->s->set.intra_op, pool_fwd_range, &p);
    return KH_OK;
}

/* Each output gradient goes to the first maximum of its window in row-major window order (TensorFlow's and
 * the reference kit's tie rule); the window maximum is recomputed from x. */
/* Per output pixel, the window's taps are scanned once for all C channels (contiguous in NHWC), keeping each
 * channel's running maximum and its tap in small arrays — a loop the compiler vectorises — then each channel's
 * gradient goes to its tap. A later tap wins only when strictly greater: the first maximum in row-major
 * window order, as before. */
#define TF_POOL_CHUNK 64
#define TF_POOL_MAX_TAPS 64 /* larger windows take pool_bwd_range_wide */
static void pool_bwd_range(void *v, int64_t s0, int64_t s1, int slot) {
    (void)slot;
    const pool *p = v;
    const kh_conv2d_dims *d = &p->d;
    int64_t C = d->C;
    /* Windows that tile the image (stride = window, no padding, every pixel in one window: all of this
     * benchmark's pooling) write every tap below, so the gradient needs no zeroing pass first. */
    int tiles = d->SH == d->KH && d->SW == d->KW && d->pad_top == 0 && d->pad_left == 0 && d->OH * d->SH == d->H &&
                d->OW * d->SW == d->W;
    if (!tiles) memset(p->y + s0 * d->H * d->W * C, 0, (size_t)((s1 - s0) * d->H * d->W * C) * sizeof *p->y);
    float bv[TF_POOL_CHUNK];
    int32_t bt[TF_POOL_CHUNK];
    int64_t taps[TF_POOL_MAX_TAPS];
    for (int64_t s = s0; s < s1; s++)
        for (int64_t oh = 0; oh < d->OH; oh++)
            for (int64_t ow = 0; ow < d->OW; ow++) {
                int nt = 0; /* offsets (in floats) of the window's valid taps, row-major */
                for (int64_t kh = 0; kh < d->KH; kh++) {
                    int64_t ih = oh * d->SH + kh - d->pad_top;
                    if (ih < 0 || ih >= d->H) continue;
                    for (int64_t kw = 0; kw < d->KW; kw++) {
                        int64_t iw = ow * d->SW + kw - d->pad_left;
                        if (iw < 0 || iw >= d->W) continue;
                        taps[nt++] = ((s * d->H + ih) * d->W + iw) * C;
                    }
                }
                if (nt == 0) continue;
                const float *dy = p->dy + ((s * d->OH + oh) * d->OW + ow) * C;
                for (int64_t c0 = 0; c0 < C; c0 += TF_POOL_CHUNK) {
                    int64_t cn = C - c0 < TF_POOL_CHUNK ? C - c0 : TF_POOL_CHUNK;
                    const float *x0 = p->x + taps[0] + c0;
                    for (int64_t c = 0; c < cn; c++) {
                        bv[c] = x0[c];
                        bt[c] = 0;
                    }
                    for (int t = 1; t < nt; t++) {
                        const float *xt = p->x + taps[t] + c0;
                        for (int64_t c = 0; c < cn; c++) {
                            int gt = xt[c] > bv[c];
                            bv[c] = gt ? xt[c] : bv[c];
                            bt[c] = gt ? t : bt[c];
                        }
                    }
                    if (tiles) { /* each tap of this window is written once: dy at the maximum, 0 elsewhere */
                        for (int t = 0; t < nt; t++) {
                            float *yt = p->y + taps[t] + c0;
                            for (int64_t c = 0; c < cn; c++) yt[c] = bt[c] == t ? dy[c0 + c] : 0.0f;
                        }
                    } else {
                        for (int64_t c = 0; c < cn; c++) p->y[taps[bt[c]] + c0 + c] += dy[c0 + c];
                    }
                }
            }
}

/* Windows of more than TF_POOL_MAX_TAPS taps: channel by channel. */
static void pool_bwd_range_wide(void *v, int64_t s0, int64_t s1, int slot) {
    (void)slot;
    const pool *p = v;
    const kh_conv2d_dims *d = &p->d;
    int64_t C = d->C;
    memset(p->y + s0 * d->H * d->W * C, 0, (size_t)((s1 - s0) * d->H * d->W * C) * sizeof *p->y);
    for (int64_t s = s0; s < s1; s++)
        for (int64_t oh = 0; oh < d->OH; oh++)
            for (int64_t ow = 0; ow < d->OW; ow++)
                for (int64_t c = 0; c < C; c++) {
                    int64_t best = -1;
                    float b = 0.0f;
                    for (int64_t kh = 0; kh < d->KH; kh++) {
                        int64_t ih = oh * d->SH + kh - d->pad_top;
                        if (ih < 0 || ih >= d->H) continue;
                        for (int64_t kw = 0; kw < d->KW; kw++) {
                            int64_t iw = ow * d->SW + kw - d->pad_left;
                            if (iw < 0 || iw >= d->W) continue;
                            int64_t at = ((s * d->H + ih) * d->W + iw) * C + c;
                            if (best < 0 || p->x[at] > b) best = at, b = p->x[at];
                        }
                    }
                    if (best >= 0) p->y[best] += p->dy[((s * d->OH + oh) * d->OW + ow) * C + c];
                }
}

static kh_status k_maxpool_grad(tf_run *r, int32_t i) {
    pool p;
    kh_status st = pool_geometry(r, i, kh_graph_inputs(r->f->g, i)[0], &p);
    if (st != KH_OK) return st;
    p.x = tf_in(r, i, 0);
    p.dy = tf_in(r, i, 1);
    p.y = tf_out(r, i);
    tf_parallel_for(r->m->s->pool, r->n, 1, r->m->s->set.intra_op,
                    p.d.KH * p.d.KW > TF_POOL_MAX_TAPS ? pool_bwd_range_wide : pool_bwd_range, &p);
    return KH_OK;
}

tf_kernel tf_cpu_kernel_image(uint32_t op) {
    switch (op) {
    case KH_GOP_CONV2D: return k_conv2d;
    case KH_GOP_CONV2D_BACKPROP_INPUT: return k_conv2d_backprop_input;
    case KH_GOP_CONV2D_BACKPROP_FILTER: return k_conv2d_backprop_filter;
    case KH_GOP_MAXPOOL: return k_maxpool;
    case KH_GOP_MAXPOOL_GRAD: return k_maxpool_grad;
    default: return NULL;
    }
}

static int conv_geom(const kh_graph *g, int32_t i, kh_conv2d_dims *d) {
    const kh_gnode *nd = &g->nodes[i];
    const int32_t *in = kh_graph_inputs(g, i);
    int32_t xn = nd->op == KH_GOP_CONV2D || nd->op == KH_GOP_CONV2D_BACKPROP_FILTER ? in[0] : nd->attr.shape_of;
    int32_t wn = nd->op == KH_GOP_CONV2D ? in[1] : nd->op == KH_GOP_CONV2D_BACKPROP_INPUT ? in[0] : nd->attr.shape_of;
    const kh_gnode *X = &g->nodes[xn], *W = &g->nodes[wn];
    return kh_conv2d_geometry(d, 1, X->dims[1], X->dims[2], X->dims[3], W->dims[0], W->dims[1], W->dims[3],
                                  nd->attr.strides[0] > 0 ? nd->attr.strides[0] : 1,
                                  nd->attr.strides[1] > 0 ? nd->attr.strides[1] : 1, nd->attr.padding) == KH_OK;
}

void tf_cpu_scratch_needs(const kh_graph *g, int64_t *im2col_floats) {
    for (int32_t i = 0; i < g->n_nodes; i++) {
        uint32_t op = g->nodes[i].op;
        kh_conv2d_dims d;
        if ((op != KH_GOP_CONV2D && op != KH_GOP_CONV2D_BACKPROP_INPUT && op != KH_GOP_CONV2D_BACKPROP_FILTER) ||
            !conv_geom(g, i, &d))
            continue;
        int64_t pk = d.OH * d.OW * d.KH * d.KW * d.C, need = pk * block_samples(pk);
        if (op == KH_GOP_CONV2D && d.OC % KH_TILE_NR == 0 && tf_patches_floats(&d) > need) need = tf_patches_floats(&d);
        if (need > *im2col_floats) *im2col_floats = need;
    }
}

int64_t tf_cpu_filter_partial_floats(const kh_graph *g, int32_t i) {
    kh_conv2d_dims d;
    if (g->nodes[i].op != KH_GOP_CONV2D_BACKPROP_FILTER || !conv_geom(g, i, &d)) return 0;
    return d.KH * d.KW * d.C * d.OC;
}
