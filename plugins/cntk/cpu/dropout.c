/* cpu/dropout.c — inverted Dropout. Masks are drawn from kh_rng seeded by
 * kh_seed_mix(compile seed, forward count, layer, 0), one uniform per element in Keras (NHWC) order
 * even though images are stored NCHW (or channel-blocked, nChw<cb>c, after a oneDNN pooling that passes its
 * output on: cntk_dropout_store_blocked), keeping an element when u >= rate — the same stream the reference kit
 * draws, so a seeded run matches it mask for mask. The pool's threads draw it in parts, whole samples each,
 * each from the stream advanced to its first sample (kh_rng_advance). Identity at inference and when
 * deterministic. */
#include <math.h>
#include <string.h>

#include "cpu/cpu.h"
#include "khost/kit/rng.h"

#define DROP_GRAIN_ELEMS 32768 /* below this many elements a thread hand-off costs more than it saves */
#define DROP_DRAW_CHUNK 256    /* draws generated at a time into a stack buffer */

typedef struct dropout_state {
    uint8_t *mask; /* (max_batch, numel) stored order; 1 = keep */
    int64_t cb;    /* channel block of an image's stored layout: 1 = NCHW */
    int active;    /* the last forward applied a mask */
} dropout_state;

typedef struct drop_job {
    const float *x;
    float *y;
    uint8_t *mask;
    uint64_t seed;      /* of this forward's stream */
    uint64_t keep_from; /* keep when a draw's top 53 bits are >= this: u >= rate, exactly, in integers */
    float scale;
    int64_t per;     /* elements a sample */
    int64_t H, W, C; /* image input (C = 0: flat) */
    int64_t cb;      /* its channel block: element (c, p) of a sample at (c / cb) * H * W * cb + p * cb + c % cb */
} drop_job;

static kh_status dropout_setup(cntk_cpu_model *m, cntk_cpu_layer *L) {
    dropout_state *d = cntk_alloc(m->s, sizeof *d);
    if (!d) return KH_ERR_NOMEM;
    L->st = d;
    d->cb = 1;
    d->mask = cntk_alloc(m->s, (size_t)(m->plan->max_batch * L->p->in_numel));
    return d->mask ? KH_OK : KH_ERR_NOMEM;
}

static void dropout_teardown(cntk_cpu_model *m, cntk_cpu_layer *L) {
    dropout_state *d = L->st;
    if (!d) return;
    cntk_free(m->s, d->mask);
    cntk_free(m->s, d);
}

/* Samples [s0, s1): their part of the stream, masks stored at their positions in the image's layout, then the scaled output.
 * The job's fields are copied to restrict locals: through the struct, every store (a uint8_t one aliases
 * anything) would reload them and the loops would not vectorise. */
static void forward_samples(void *ctx, int64_t s0, int64_t s1) {
    const drop_job *j = ctx;
    const int64_t per = j->per, C = j->C, HW = j->H * j->W, cb = j->cb, HWcb = HW * cb;
    const uint64_t keep_from = j->keep_from;
    const float scale = j->scale;
    uint64_t draw[DROP_DRAW_CHUNK];
    kh_rng r;
    kh_rng_seed(&r, j->seed);
    kh_rng_advance(&r, (uint64_t)(s0 * per));
    for (int64_t s = s0; s < s1; s++) {
        uint8_t *restrict mk = j->mask + s * per;
        if (!C) {
            for (int64_t i0 = 0; i0 < per; i0 += DROP_DRAW_CHUNK) {
                int64_t len = per - i0 < DROP_DRAW_CHUNK ? per - i0 : DROP_DRAW_CHUNK;
                kh_rng_fill_u64(&r, draw, len);
                for (int64_t i = 0; i < len; i++) mk[i0 + i] = (draw[i] >> 11) >= keep_from;
            }
        } else {
            for (int64_t p = 0; p < HW; p++) /* drawn in (H, W, C) order */
                for (int64_t c0 = 0; c0 < C; c0 += DROP_DRAW_CHUNK) {
                    int64_t len = C - c0 < DROP_DRAW_CHUNK ? C - c0 : DROP_DRAW_CHUNK;
                    kh_rng_fill_u64(&r, draw, len);
                    /* channel c0 + c sits in block blk at lane `lane`: walked, not divided, per element */
                    int64_t blk = c0 / cb, lane = c0 % cb;
                    uint8_t *restrict at = mk + p * cb;
                    for (int64_t c = 0; c < len; c++) {
                        at[blk * HWcb + lane] = (draw[c] >> 11) >= keep_from;
                        if (++lane == cb) lane = 0, blk++;
                    }
                }
        }
        const float *restrict x = j->x + s * per;
        float *restrict y = j->y + s * per;
        for (int64_t i = 0; i < per; i++) y[i] = mk[i] ? x[i] * scale : 0.0f;
    }
}

static void backward_elems(void *ctx, int64_t b, int64_t e) {
    const drop_job *j = ctx;
    const float *restrict dy = j->x;
    float *restrict dx = j->y;
    const uint8_t *restrict mk = j->mask;
    const float scale = j->scale;
    for (int64_t i = b; i < e; i++) dx[i] = mk[i] ? dy[i] * scale : 0.0f;
}

static float inverted_scale(const cntk_cpu_layer *L) { return (float)(1.0 / (1.0 - (double)L->p->spec.rate)); }

static kh_status dropout_forward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, int train) {
    dropout_state *d = L->st;
    int64_t per = L->p->in_numel;
    d->active = train && !m->plan->deterministic && L->p->spec.rate > 0.0f;
    if (!d->active) {
        memcpy(L->y, L->x, (size_t)(n * per) * sizeof(float));
        return KH_OK;
    }
    /* kh_rng_uniform is (u64 >> 11) * 2^-53, exactly; rate * 2^53 is exact too, so its ceiling is the bound */
    drop_job j = {.x = L->x,
                  .y = L->y,
                  .mask = d->mask,
                  .seed = kh_seed_mix(m->plan->seed, m->n_forward, (uint64_t)L->p->index, 0),
                  .keep_from = (uint64_t)ceil((double)L->p->spec.rate * 0x1.0p53),
                  .scale = inverted_scale(L),
                  .per = per};
    if (L->p->image_in) {
        j.H = L->p->sh.in_shape[0];
        j.W = L->p->sh.in_shape[1];
        j.C = L->p->sh.in_shape[2];
        j.cb = d->cb;
    }
    int64_t grain = DROP_GRAIN_ELEMS / per;
    cntk_parallel_for(m->s->pool, n, grain < 1 ? 1 : grain, forward_samples, &j);
    return KH_OK;
}

static kh_status dropout_backward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, float *dy, float *dx, int fused) {
    (void)fused;
    dropout_state *d = L->st;
    if (!dx) return KH_OK;
    int64_t numel = n * L->p->in_numel;
    if (!d->active) {
        memcpy(dx, dy, (size_t)numel * sizeof(float));
        return KH_OK;
    }
    drop_job j = {.x = dy, .y = dx, .mask = d->mask, .scale = inverted_scale(L)};
    cntk_parallel_for(m->s->pool, numel, DROP_GRAIN_ELEMS, backward_elems, &j);
    return KH_OK;
}

void cntk_dropout_store_blocked(cntk_cpu_layer *L, int64_t cb) { ((dropout_state *)L->st)->cb = cb; }

const cntk_cpu_ops cntk_cpu_dropout_ops = {
    .setup = dropout_setup,
    .teardown = dropout_teardown,
    .forward = dropout_forward,
    .backward = dropout_backward,
};
