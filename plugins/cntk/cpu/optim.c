/* cpu/optim.c — Keras 2 optimizers (SGD, RMSprop, Adam, Adadelta), one fused pass per parameter tensor:
 * read w, g and the slots once, write w and the slots once (khost/kit/formulas.h update functions), split over
 * the pool. lr_t = lr / (1 + decay * iterations) with iterations counted before the update.
 * Embedding gradients are row-sparse but Keras's Adam/RMSprop/Adadelta update every row every step (the
 * TF1-era gradient is dense): untouched rows are updated with g = 0 — moments decay and Adam still moves
 * the weights — in the same single pass, without materialising a vocab-sized zero gradient. */

#include "cpu/cpu.h"
#include "khost/kit/formulas.h"
#include "khost/kit/optimizer.h"

#define OPT_GRAIN 16384 /* elements per pool part at least */

typedef struct opt_job {
    uint32_t kind;
    float lr, rho, b1, b2, eps;
    cntk_param *p;
} opt_job;

/* One contiguous run of n elements; g == NULL means a zero gradient. */
static void update_run(const opt_job *j, float *restrict w, const float *restrict g, float *restrict s1,
                       float *restrict s2, int64_t n) {
    switch (j->kind) {
    case KH_OPT_SGD:
        if (g)
            for (int64_t i = 0; i < n; i++) w[i] -= j->lr * g[i];
        break;
    case KH_OPT_RMSPROP:
        if (g)
            for (int64_t i = 0; i < n; i++) kh_rmsprop_update(&w[i], &s1[i], g[i], j->lr, j->rho, j->eps);
        else
            for (int64_t i = 0; i < n; i++) kh_rmsprop_update(&w[i], &s1[i], 0.0f, j->lr, j->rho, j->eps);
        break;
    case KH_OPT_ADAM:
        if (g)
            for (int64_t i = 0; i < n; i++) kh_adam_update(&w[i], &s1[i], &s2[i], g[i], j->lr, j->b1, j->b2, j->eps);
        else
            for (int64_t i = 0; i < n; i++) kh_adam_update(&w[i], &s1[i], &s2[i], 0.0f, j->lr, j->b1, j->b2, j->eps);
        break;
    case KH_OPT_ADADELTA:
        if (g)
            for (int64_t i = 0; i < n; i++) kh_adadelta_update(&w[i], &s1[i], &s2[i], g[i], j->lr, j->rho, j->eps);
        else
            for (int64_t i = 0; i < n; i++) kh_adadelta_update(&w[i], &s1[i], &s2[i], 0.0f, j->lr, j->rho, j->eps);
        break;
    default: break;
    }
}

static void dense_part(void *ctx, int64_t b, int64_t e) {
    const opt_job *j = ctx;
    cntk_param *p = j->p;
    update_run(j, p->w + b, p->g + b, p->s1 ? p->s1 + b : NULL, p->s2 ? p->s2 + b : NULL, e - b);
}

/* rows [b, e) of a row-sparse parameter */
static void sparse_part(void *ctx, int64_t b, int64_t e) {
    const opt_job *j = ctx;
    cntk_param *p = j->p;
    int64_t C = p->cols;
    for (int64_t r = b; r < e; r++) {
        int32_t slot = p->row_slot[r];
        const float *g = slot >= 0 ? p->grow + (int64_t)slot * C : NULL;
        update_run(j, p->w + r * C, g, p->s1 ? p->s1 + r * C : NULL, p->s2 ? p->s2 + r * C : NULL, C);
    }
}

kh_status cntk_optim_alloc(cntk_cpu_model *m, cntk_param *p) {
    uint32_t k = m->plan->opt.kind;
    size_t bytes = (size_t)p->numel * sizeof(float);
    if (k == KH_OPT_RMSPROP || k == KH_OPT_ADAM || k == KH_OPT_ADADELTA) {
        p->s1 = cntk_alloc(m->s, bytes);
        if (!p->s1) return KH_ERR_NOMEM;
    }
    if (k == KH_OPT_ADAM || k == KH_OPT_ADADELTA) {
        p->s2 = cntk_alloc(m->s, bytes);
        if (!p->s2) return KH_ERR_NOMEM;
    }
    return KH_OK;
}

void cntk_optim_step(cntk_cpu_model *m) {
    const kh_optimizer_spec *o = &m->plan->opt; /* defaults resolved by the plan */
    opt_job j = {.kind = o->kind,
                 .lr = (float)kh_optimizer_step_lr(o, m->iterations),
                 .rho = o->rho,
                 .b1 = o->beta_1,
                 .b2 = o->beta_2,
                 .eps = o->epsilon};
    for (int32_t l = 0; l < m->n_layers; l++) {
        cntk_cpu_layer *L = &m->L[l];
        for (int32_t s = 0; s < L->n_params; s++) {
            j.p = &L->prm[s];
            if (j.p->row_slot)
                cntk_parallel_for(m->s->pool, j.p->rows, (OPT_GRAIN + j.p->cols - 1) / j.p->cols, sparse_part, &j);
            else
                cntk_parallel_for(m->s->pool, j.p->numel, OPT_GRAIN, dense_part, &j);
        }
    }
    m->iterations++;
}
