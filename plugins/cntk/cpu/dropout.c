/* cpu/dropout.c — inverted Dropout. Masks are drawn from kh_rng seeded by
 * kh_seed_mix(compile seed, forward count, layer, 0), one uniform per element in Keras (NHWC) order
 * even though images are stored NCHW, keeping an element when u >= rate — the same stream the reference kit
 * draws, so a seeded run matches it mask for mask. Identity at inference and when deterministic. */
#include <string.h>

#include "cpu/cpu.h"
#include "khost/kit/rng.h"

typedef struct dropout_state {
    uint8_t *mask; /* (max_batch, numel) stored order; 1 = keep */
    int active;    /* the last forward applied a mask */
} dropout_state;

static kh_status dropout_setup(cntk_cpu_model *m, cntk_cpu_layer *L) {
    dropout_state *d = cntk_alloc(m->s, sizeof *d);
    if (!d) return KH_ERR_NOMEM;
    L->st = d;
    d->mask = cntk_alloc(m->s, (size_t)(m->plan->max_batch * L->p->in_numel));
    return d->mask ? KH_OK : KH_ERR_NOMEM;
}

static void dropout_teardown(cntk_cpu_model *m, cntk_cpu_layer *L) {
    dropout_state *d = L->st;
    if (!d) return;
    cntk_free(m->s, d->mask);
    cntk_free(m->s, d);
}

static void draw_mask(cntk_cpu_model *m, cntk_cpu_layer *L, int n, uint8_t *mask) {
    kh_rng r;
    kh_rng_seed(&r, kh_seed_mix(m->plan->seed, m->n_forward, (uint64_t)L->p->index, 0));
    double rate = L->p->spec.rate;
    int64_t numel = n * L->p->in_numel;
    if (!L->p->image_in) {
        for (int64_t i = 0; i < numel; i++) mask[i] = kh_rng_uniform(&r) >= rate;
        return;
    }
    /* draw in (N, H, W, C) order, store at the NCHW position */
    int64_t H = L->p->sh.in_shape[0], W = L->p->sh.in_shape[1], C = L->p->sh.in_shape[2];
    for (int64_t s = 0; s < n; s++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t w = 0; w < W; w++)
                for (int64_t c = 0; c < C; c++) mask[((s * C + c) * H + h) * W + w] = kh_rng_uniform(&r) >= rate;
}

static kh_status dropout_forward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, int train) {
    dropout_state *d = L->st;
    int64_t numel = n * L->p->in_numel;
    d->active = train && !m->plan->deterministic && L->p->spec.rate > 0.0f;
    if (!d->active) {
        memcpy(L->y, L->x, (size_t)numel * sizeof(float));
        return KH_OK;
    }
    draw_mask(m, L, n, d->mask);
    float scale = (float)(1.0 / (1.0 - (double)L->p->spec.rate));
    for (int64_t i = 0; i < numel; i++) L->y[i] = d->mask[i] ? L->x[i] * scale : 0.0f;
    return KH_OK;
}

static kh_status dropout_backward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, float *dy, float *dx, int fused) {
    (void)m, (void)fused;
    dropout_state *d = L->st;
    if (!dx) return KH_OK;
    int64_t numel = n * L->p->in_numel;
    if (!d->active) {
        memcpy(dx, dy, (size_t)numel * sizeof(float));
        return KH_OK;
    }
    float scale = (float)(1.0 / (1.0 - (double)L->p->spec.rate));
    for (int64_t i = 0; i < numel; i++) dx[i] = d->mask[i] ? dy[i] * scale : 0.0f;
    return KH_OK;
}

const cntk_cpu_ops cntk_cpu_dropout_ops = {
    .setup = dropout_setup,
    .teardown = dropout_teardown,
    .forward = dropout_forward,
    .backward = dropout_backward,
};
