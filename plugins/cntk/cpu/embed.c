/* cpu/embed.c — Embedding: a row gather forward; backward a scatter-add into the rows the batch touched.
 * The gradient is kept row-sparse (touched rows only) so no vocab-sized gradient is cleared or written per
 * step; the optimizer (cpu/optim.c) still updates every row, as Keras does, reading g = 0 for the rest. */
#include <string.h>

#include "cpu/cpu.h"

static kh_status embed_setup(cntk_cpu_model *m, cntk_cpu_layer *L) {
    cntk_param *p = &L->prm[0];
    int64_t max_rows = m->plan->max_batch * L->p->in_numel; /* at most one new row per token */
    p->rows = L->p->spec.input_dim;
    p->cols = L->p->spec.units;
    if (max_rows > p->rows) max_rows = p->rows;
    p->row_slot = cntk_alloc(m->s, (size_t)p->rows * sizeof(int32_t));
    p->touched = cntk_alloc(m->s, (size_t)max_rows * sizeof(int32_t));
    p->grow = cntk_alloc(m->s, (size_t)(max_rows * p->cols) * sizeof(float));
    if (!p->row_slot || !p->touched || !p->grow) return KH_ERR_NOMEM;
    for (int64_t r = 0; r < p->rows; r++) p->row_slot[r] = -1;
    return KH_OK;
}

static void embed_teardown(cntk_cpu_model *m, cntk_cpu_layer *L) {
    cntk_param *p = &L->prm[0];
    cntk_free(m->s, p->row_slot);
    cntk_free(m->s, p->touched);
    cntk_free(m->s, p->grow);
    p->row_slot = p->touched = NULL;
    p->grow = NULL;
}

/* y (N, T, D) = E[x (N, T)] */
static kh_status embed_forward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, int train) {
    (void)train;
    const cntk_param *p = &L->prm[0];
    int64_t T = L->p->in_numel, D = p->cols;
    for (int64_t i = 0; i < n * T; i++) {
        int32_t r = L->xi[i];
        if (r < 0 || r >= p->rows)
            return cntk_layer_fail(m->s, KH_ERR_INVALID, L->p->spec.kind, L->p->index, "forward",
                                   "index %d at sample %lld step %lld outside [0, %lld)", r, (long long)(i / T),
                                   (long long)(i % T), (long long)p->rows);
        memcpy(L->y + i * D, p->w + (int64_t)r * D, (size_t)D * sizeof(float));
    }
    return KH_OK;
}

/* grad rows: dE[x[n, t]] += dy[n, t] (indices were validated by the forward); all of it is the weight gradient */
static kh_status embed_backward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, float *dy, float *dx, int fused) {
    (void)dx, (void)fused;
    double t0 = cntk_prof_clock(m);
    cntk_param *p = &L->prm[0];
    int64_t T = L->p->in_numel, D = p->cols;
    for (int64_t k = 0; k < p->n_touched; k++) p->row_slot[p->touched[k]] = -1;
    p->n_touched = 0;
    for (int64_t i = 0; i < n * T; i++) {
        int32_t r = L->xi[i];
        int32_t slot = p->row_slot[r];
        float *g;
        if (slot < 0) {
            slot = (int32_t)p->n_touched++;
            p->row_slot[r] = slot;
            p->touched[slot] = r;
            g = p->grow + (int64_t)slot * D;
            memcpy(g, dy + i * D, (size_t)D * sizeof(float));
        } else {
            g = p->grow + (int64_t)slot * D;
            const float *d = dy + i * D;
            for (int64_t c = 0; c < D; c++) g[c] += d[c];
        }
    }
    cntk_prof_weight_grad(m, L, t0);
    return KH_OK;
}

const cntk_cpu_ops cntk_cpu_embed_ops = {
    .setup = embed_setup,
    .teardown = embed_teardown,
    .forward = embed_forward,
    .backward = embed_backward,
};
