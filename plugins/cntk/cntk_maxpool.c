/* cntk_maxpool.c — MaxPooling2D on NCHW. The forward remembers where each maximum came from (the FIRST
 * maximum in row-major window order, as TensorFlow's and the reference kit's gradient route it — ties are
 * common after relu), so the backward is a scatter without re-reading the input. */
#include <float.h>
#include <string.h>

#include "cntk_cpu.h"

typedef struct pool_state {
    int64_t C, H, W, OH, OW, KH, KW, SH, SW, PT, PL;
    int32_t *arg; /* (max_batch, C, OH, OW) offset ih*W + iw of the maximum within its plane */
} pool_state;

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
    if (sp->padding == KH_PAD_SAME) {
        int64_t th = (p->OH - 1) * p->SH + p->KH - p->H, tw = (p->OW - 1) * p->SW + p->KW - p->W;
        p->PT = th > 0 ? th / 2 : 0;
        p->PL = tw > 0 ? tw / 2 : 0;
    }
    p->arg = cntk_alloc(m->s, (size_t)(m->plan->max_batch * L->p->out_numel) * sizeof(int32_t));
    return p->arg ? KH_OK : KH_ERR_NOMEM;
}

static void maxpool_teardown(cntk_cpu_model *m, cntk_cpu_layer *L) {
    pool_state *p = L->st;
    if (!p) return;
    cntk_free(m->s, p->arg);
    cntk_free(m->s, p);
}

typedef struct pool_job {
    const pool_state *p;
    const float *x;
    float *y;
} pool_job;

/* planes [b, e) of the (N*C) input planes */
static void pool_planes(void *ctx, int64_t b, int64_t e) {
    const pool_job *j = ctx;
    const pool_state *p = j->p;
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
    pool_job j = {p, L->x, L->y};
    cntk_parallel_for(m->s->pool, n * p->C, 16, pool_planes, &j);
    return KH_OK;
}

static kh_status maxpool_backward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, float *dy, float *dx, int fused) {
    (void)m, (void)fused;
    pool_state *p = L->st;
    if (!dx) return KH_OK;
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
