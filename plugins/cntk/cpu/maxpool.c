/* cpu/maxpool.c — MaxPooling2D on NCHW (on oneDNN instead where its input is a chained convolution's blocked
 * output: cpu/maxpool_onednn.c). The forward remembers where each maximum came from (the FIRST
 * maximum in row-major window order, as TensorFlow's and the reference kit's gradient route it — ties are
 * common after relu), so the backward is a scatter without re-reading the input. */
#include <float.h>
#include <string.h>

#include "cpu/maxpool.h"
#include "khost/kit/geometry.h"

typedef cntk_pool_state pool_state;

static kh_status maxpool_setup(cntk_cpu_model *m, cntk_cpu_layer *L) {
    pool_state *p = cntk_alloc(m->s, sizeof *p);
    if (!p) return KH_ERR_NOMEM;
    L->st = p;
    const kh_layer_shapes *sh = &L->p->sh;
    const kh_layer_spec *sp = &L->p->spec;
    p->H = sh->in_shape[0], p->W = sh->in_shape[1], p->C = sh->in_shape[2];
    p->OH = sh->out_shape[0], p->OW = sh->out_shape[1];
    p->KH = sp->kernel[0] > 0 ? sp->kernel[0] : 2, p->KW = sp->kernel[1] > 0 ? sp->kernel[1] : 2;
    p->SH = sp->strides[0] > 0 ? sp->strides[0] : p->KH, p->SW = sp->strides[1] > 0 ? sp->strides[1] : p->KW;
    kh_conv2d_dims d; /* valid: kh_spec_infer computed the shapes by the same rules */
    kh_conv2d_geometry(&d, 0, p->H, p->W, p->C, p->KH, p->KW, p->C, p->SH, p->SW, (int)sp->padding);
    p->PT = d.pad_top, p->PL = d.pad_left;
#ifdef CNTK_HAVE_DNNL
    kh_status st = cntk_pool_dnnl_setup(m, L, p);
    if (st != KH_OK || p->dnnl) return st;
#endif
    p->arg = cntk_alloc(m->s, (size_t)(m->plan->max_batch * L->p->out_numel) * sizeof(int32_t));
    return p->arg ? KH_OK : KH_ERR_NOMEM;
}

static void maxpool_teardown(cntk_cpu_model *m, cntk_cpu_layer *L) {
    pool_state *p = L->st;
    if (!p) return;
#ifdef CNTK_HAVE_DNNL
    cntk_pool_dnnl_teardown(m, p);
#endif
    cntk_free(m->s, p->arg);
    cntk_free(m->s, p);
}

typedef struct pool_job {
    const pool_state *p;
    const float *x;
    float *y;
} pool_job;

/* One output row of a 2x2, stride-2 window without padding (every benchmark task's pooling): branch-free
 * selects in row-major window order, so ties still go to the first maximum, and the loop vectorises
 * (the generic loop below was ~6% of mnist_cnn's samples). A NaN in the first position propagates. */
static __attribute__((noinline)) void pool_row_2x2(const float *restrict r0, const float *restrict r1,
                                                   float *restrict y, int32_t *restrict arg, int64_t ow_n,
                                                   int32_t at0, int32_t W) {
    for (int64_t ow = 0; ow < ow_n; ow++) {
        float a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
        int32_t ia = at0 + 2 * (int32_t)ow, at = ia;
        float mx = a;
        at = b > mx ? ia + 1 : at;
        mx = b > mx ? b : mx;
        at = c > mx ? ia + W : at;
        mx = c > mx ? c : mx;
        at = d > mx ? ia + W + 1 : at;
        mx = d > mx ? d : mx;
        y[ow] = mx;
        arg[ow] = at;
    }
}

/* planes [b, e) of the (N*C) input planes */
static void pool_planes(void *ctx, int64_t b, int64_t e) {
    const pool_job *j = ctx;
    const pool_state *p = j->p;
    if (p->KH == 2 && p->KW == 2 && p->SH == 2 && p->SW == 2 && p->PT == 0 && p->PL == 0 && 2 * p->OH <= p->H &&
        2 * p->OW <= p->W) {
        for (int64_t pl = b; pl < e; pl++) {
            const float *x = j->x + pl * p->H * p->W;
            for (int64_t oh = 0; oh < p->OH; oh++)
                pool_row_2x2(x + 2 * oh * p->W, x + (2 * oh + 1) * p->W, j->y + (pl * p->OH + oh) * p->OW,
                             p->arg + (pl * p->OH + oh) * p->OW, p->OW, (int32_t)(2 * oh * p->W), (int32_t)p->W);
        }
        return;
    }
    for (int64_t pl = b; pl < e; pl++) {
        const float *x = j->x + pl * p->H * p->W;
        float *y = j->y + pl * p->OH * p->OW;
        int32_t *arg = p->arg + pl * p->OH * p->OW;
        for (int64_t oh = 0; oh < p->OH; oh++) {
            int64_t h0 = oh * p->SH - p->PT, h1 = h0 + p->KH;
            if (h0 < 0) h0 = 0;
            if (h1 > p->H) h1 = p->H;
            for (int64_t ow = 0; ow < p->OW; ow++) {
                int64_t w0 = ow * p->SW - p->PL, w1 = w0 + p->KW;
                if (w0 < 0) w0 = 0;
                if (w1 > p->W) w1 = p->W;
                float best = -FLT_MAX;
                int32_t at = (int32_t)(h0 * p->W + w0);
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++)
                        if (x[ih * p->W + iw] > best) {
                            best = x[ih * p->W + iw];
                            at = (int32_t)(ih * p->W + iw);
                        }
                y[oh * p->OW + ow] = best;
                arg[oh * p->OW + ow] = at;
            }
        }
    }
}

static kh_status maxpool_forward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, int train) {
    (void)train;
    pool_state *p = L->st;
#ifdef CNTK_HAVE_DNNL
    if (p->dnnl) return cntk_pool_dnnl_forward(m, L, n);
#endif
    pool_job j = {p, L->x, L->y};
    cntk_parallel_for(m->s->pool, n * p->C, 16, pool_planes, &j);
    return KH_OK;
}

static kh_status maxpool_backward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, float *dy, float *dx, int fused) {
    (void)m, (void)fused;
    pool_state *p = L->st;
    if (!dx) return KH_OK;
#ifdef CNTK_HAVE_DNNL
    if (p->dnnl) return cntk_pool_dnnl_backward(m, L, n, dy, dx);
#endif
    memset(dx, 0, (size_t)(n * L->p->in_numel) * sizeof(float));
    int64_t planes = n * p->C, po = p->OH * p->OW;
    for (int64_t pl = 0; pl < planes; pl++) {
        float *d = dx + pl * p->H * p->W;
        const float *g = dy + pl * po;
        const int32_t *arg = p->arg + pl * po;
        for (int64_t o = 0; o < po; o++) d[arg[o]] += g[o];
    }
    return KH_OK;
}

const cntk_cpu_ops cntk_cpu_maxpool_ops = {
    .setup = maxpool_setup,
    .teardown = maxpool_teardown,
    .forward = maxpool_forward,
    .backward = maxpool_backward,
};
