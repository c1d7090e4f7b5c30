/* cpu/lstm.c — LSTM and Bidirectional(LSTM) on CPU, the fused-RNN way a vendor library does it:
 *   - the input projection of ALL time steps is one GEMM, Z (N*T, 4u) = X (N*T, in) @ W (in, 4u)
 *     (for one-hot input a row lookup Z[n, t] = W[x[n, t]], the same product without the one-hot matrix);
 *   - each step only adds the recurrent product Z_t += h_{t-1} @ U (a strided GEMM straight into Z) and runs
 *     the cell (khost/kit/formulas.h kh_lstm_cell, vectorised across units) over (N, u);
 *   - backward runs the recurrence collecting dZ for every step, then the weight gradients are three big
 *     GEMMs over all N*T rows (dW = X^T dZ, dU = Hprev^T dZ, dX = dZ W^T) and a column sum (db).
 * Threads: directions and batch rows are independent through all T steps, so the recurrences run as
 * (direction x row block) jobs, one per pool thread, each with single-threaded BLAS and no synchronisation
 * until the sequence ends; the big GEMMs before and after are split over the whole pool (cpu/gemm_mt.c).
 * Keras's go_backwards: the backward direction consumes t = T-1 .. 0, its final output
 * is the state after x[0], and its sequence output is re-aligned with time — here simply by storing every
 * state at its real time index.
 * Weights stay in Keras's layouts (kernel [in, 4u], recurrent [u, 4u], bias [4u], gates i, f, c, o).
 */
#include <string.h>

#include "cpu/cpu.h"
#include "khost/kit/formulas.h"

typedef struct lstm_dir {
    float *z;     /* (N, T, 4u) x W (+ h U during the step), then the activated gates i, f, g, o */
    float *c;     /* (N, T, u) cell state after step t */
    float *hs;    /* (N, T, u) h after step t */
    float *hprev; /* (N, T, u) h entering step t: 0 at the first processed step (rows for dU = Hprev^T dZ) */
    float *dz;    /* (N, T, 4u) gradient w.r.t. the pre-activations */
    float *dh;    /* (N, u) running dL/dh of the step being processed */
    float *dc;    /* (N, u) running dL/dc */
} lstm_dir;

typedef struct lstm_state {
    int dirs;
    int64_t T, in, u;
    lstm_dir d[2];
} lstm_state;

static kh_status lstm_setup(cntk_cpu_model *m, cntk_cpu_layer *L) {
    lstm_state *st = cntk_alloc(m->s, sizeof *st);
    if (!st) return KH_ERR_NOMEM;
    L->st = st;
    st->dirs = L->p->spec.kind == KH_LAYER_BILSTM ? 2 : 1;
    st->T = L->p->sh.in_shape[0];
    st->in = L->p->sh.in_shape[1];
    st->u = L->p->spec.units;
    size_t N = (size_t)m->plan->max_batch, T = (size_t)st->T, u = (size_t)st->u, f = sizeof(float);
    for (int d = 0; d < st->dirs; d++) {
        lstm_dir *D = &st->d[d];
        D->z = cntk_alloc(m->s, N * T * 4 * u * f);
        D->dz = cntk_alloc(m->s, N * T * 4 * u * f);
        D->c = cntk_alloc(m->s, N * T * u * f);
        D->hs = cntk_alloc(m->s, N * T * u * f);
        D->hprev = cntk_alloc(m->s, N * T * u * f);
        D->dh = cntk_alloc(m->s, N * u * f);
        D->dc = cntk_alloc(m->s, N * u * f);
        if (!D->z || !D->dz || !D->c || !D->hs || !D->hprev || !D->dh || !D->dc) return KH_ERR_NOMEM;
    }
    return KH_OK;
}

static void lstm_teardown(cntk_cpu_model *m, cntk_cpu_layer *L) {
    lstm_state *st = L->st;
    if (!st) return;
    for (int d = 0; d < 2; d++) {
        lstm_dir *D = &st->d[d];
        cntk_free(m->s, D->z);
        cntk_free(m->s, D->dz);
        cntk_free(m->s, D->c);
        cntk_free(m->s, D->hs);
        cntk_free(m->s, D->hprev);
        cntk_free(m->s, D->dh);
        cntk_free(m->s, D->dc);
    }
    cntk_free(m->s, st);
}

// --- one step of the cell over rows [n0, n1) -------------------------------------------------------------
typedef struct step_job {
    const lstm_state *st;
    lstm_dir *D;
    const float *b;     /* (4u) bias, added here rather than in a separate pass over Z */
    const float *dy;    /* backward: the layer's output gradient */
    int64_t t, tprev, tnext; /* tprev/tnext -1 when none */
    int64_t dy_col;     /* this direction's column offset in the output */
    int64_t ycols;      /* output row width (dirs * u) */
    int seq;            /* return_sequences */
    int last;           /* backward: the step that produced the non-sequence output */
} step_job;

/* The cell over one row of u units. restrict-qualified so the compiler vectorises across units without
 * runtime alias checks; cp == NULL (the first processed step) is a separate loop for the same reason.
 * noinline: inlined into the row loop, GCC 12 loses the restrict facts and leaves the loop scalar
 * (-fopt-info-vec shows it). */
static __attribute__((noinline)) void cell_forward_row(const float *restrict b, float *restrict z, const float *restrict cp,
                             float *restrict c, float *restrict h, int64_t u) {
    float *zi = z, *zf = z + u, *zg = z + 2 * u, *zo = z + 3 * u;
    const float *bi = b, *bf = b + u, *bg = b + 2 * u, *bo = b + 3 * u;
    if (cp) {
        for (int64_t k = 0; k < u; k++)
            kh_lstm_cell(zi[k] + bi[k], zf[k] + bf[k], zg[k] + bg[k], zo[k] + bo[k], cp[k], &zi[k], &zf[k], &zg[k],
                         &zo[k], &c[k], &h[k]);
    } else {
        for (int64_t k = 0; k < u; k++)
            kh_lstm_cell(zi[k] + bi[k], zf[k] + bf[k], zg[k] + bg[k], zo[k] + bo[k], 0.0f, &zi[k], &zf[k], &zg[k],
                         &zo[k], &c[k], &h[k]);
    }
}

static void cell_forward_rows(void *ctx, int64_t n0, int64_t n1) {
    const step_job *j = ctx;
    const lstm_state *st = j->st;
    int64_t T = st->T, u = st->u;
    lstm_dir *D = j->D;
    for (int64_t n = n0; n < n1; n++) {
        float *h = D->hs + (n * T + j->t) * u;
        cell_forward_row(j->b, D->z + (n * T + j->t) * 4 * u, j->tprev >= 0 ? D->c + (n * T + j->tprev) * u : NULL,
                         D->c + (n * T + j->t) * u, h, u);
        if (j->tnext >= 0) memcpy(D->hprev + (n * T + j->tnext) * u, h, (size_t)u * sizeof(float));
    }
}

/* Backward of the cell over one row: dh_in is the running dL/dh (+ dy where the output was used, added by
 * the caller into dh), dc the running dL/dc, overwritten with the gradient into c_prev. */
static __attribute__((noinline)) void cell_backward_row(const float *restrict z, const float *restrict c, const float *restrict cp,
                              const float *restrict dy, float *restrict dh, float *restrict dc,
                              float *restrict dz, int64_t u) {
    const float *zi = z, *zf = z + u, *zg = z + 2 * u, *zo = z + 3 * u;
    float *dzi = dz, *dzf = dz + u, *dzg = dz + 2 * u, *dzo = dz + 3 * u;
    if (dy)
        for (int64_t k = 0; k < u; k++) dh[k] += dy[k];
    if (cp) {
        for (int64_t k = 0; k < u; k++)
            kh_lstm_cell_backward(zi[k], zf[k], zg[k], zo[k], c[k], cp[k], dh[k], dc[k], &dzi[k], &dzf[k], &dzg[k],
                                  &dzo[k], &dc[k]);
    } else {
        for (int64_t k = 0; k < u; k++)
            kh_lstm_cell_backward(zi[k], zf[k], zg[k], zo[k], c[k], 0.0f, dh[k], dc[k], &dzi[k], &dzf[k], &dzg[k],
                                  &dzo[k], &dc[k]);
    }
}

static void cell_backward_rows(void *ctx, int64_t n0, int64_t n1) {
    const step_job *j = ctx;
    const lstm_state *st = j->st;
    int64_t T = st->T, u = st->u;
    lstm_dir *D = j->D;
    for (int64_t n = n0; n < n1; n++) {
        const float *dy = NULL;
        if (j->seq)
            dy = j->dy + (n * T + j->t) * j->ycols + j->dy_col;
        else if (j->last)
            dy = j->dy + n * j->ycols + j->dy_col;
        cell_backward_row(D->z + (n * T + j->t) * 4 * u, D->c + (n * T + j->t) * u,
                          j->tprev >= 0 ? D->c + (n * T + j->tprev) * u : NULL, dy, D->dh + n * u, D->dc + n * u,
                          D->dz + (n * T + j->t) * 4 * u, u);
    }
}

typedef struct dir_job {
    cntk_cpu_layer *L;
    const float *dy;
    int64_t n;    /* batch rows */
    int64_t nblk; /* row blocks per direction */
} dir_job;

/* One direction's whole forward recurrence over batch rows [r0, r1). Samples never interact inside an
 * LSTM, so a row block runs all T steps without waiting for the rest of the batch: the recurrent GEMM of
 * each step and the cell over its output stay on one thread, in its cache. */
static void recur_forward(const dir_job *J, int d, int64_t r0, int64_t r1) {
    cntk_cpu_layer *L = J->L;
    lstm_state *st = L->st;
    lstm_dir *D = &st->d[d];
    int64_t T = st->T, u = st->u;
    const float *U = L->prm[3 * d + 1].w, *b = L->prm[3 * d + 2].w;
    for (int64_t s = 0; s < T; s++) {
        int64_t t = d ? T - 1 - s : s;
        step_job j = {.st = st, .D = D, .b = b, .t = t};
        j.tprev = s == 0 ? -1 : (d ? t + 1 : t - 1);
        j.tnext = s == T - 1 ? -1 : (d ? t - 1 : t + 1);
        if (s == 0) {
            for (int64_t r = r0; r < r1; r++) memset(D->hprev + (r * T + t) * u, 0, (size_t)u * sizeof(float));
        } else {
            /* Z_t (rows, 4u; row stride T*4u) += hprev_t (rows, u; row stride T*u) @ U (u, 4u) */
            cntk_sgemm(0, 0, r1 - r0, 4 * u, u, 1.0f, D->hprev + (r0 * T + t) * u, T * u, U, 4 * u, 1.0f,
                       D->z + (r0 * T + t) * 4 * u, T * 4 * u);
        }
        cell_forward_rows(&j, r0, r1);
    }
}

static void recur_backward(const dir_job *J, int d, int64_t r0, int64_t r1) {
    cntk_cpu_layer *L = J->L;
    lstm_state *st = L->st;
    lstm_dir *D = &st->d[d];
    int64_t T = st->T, u = st->u;
    const float *U = L->prm[3 * d + 1].w;
    memset(D->dh + r0 * u, 0, (size_t)((r1 - r0) * u) * sizeof(float));
    memset(D->dc + r0 * u, 0, (size_t)((r1 - r0) * u) * sizeof(float));
    for (int64_t s = T - 1; s >= 0; s--) {
        int64_t t = d ? T - 1 - s : s;
        step_job j = {.st = st, .D = D, .dy = J->dy, .t = t, .dy_col = d * u, .ycols = st->dirs * u,
                      .seq = L->p->spec.return_sequences, .last = s == T - 1};
        j.tprev = s == 0 ? -1 : (d ? t + 1 : t - 1);
        cell_backward_rows(&j, r0, r1);
        /* dh for the previous step: dZ_t (rows, 4u) @ U^T */
        if (s > 0)
            cntk_sgemm(0, 1, r1 - r0, u, 4 * u, 1.0f, D->dz + (r0 * T + t) * 4 * u, T * 4 * u, U, 4 * u, 0.0f,
                       D->dh + r0 * u, u);
    }
}

/* job k is direction k / nblk, row block k % nblk */
static int job_rows(const dir_job *J, int64_t k, int64_t *r0, int64_t *r1) {
    int64_t blk = k % J->nblk;
    *r0 = J->n * blk / J->nblk;
    *r1 = J->n * (blk + 1) / J->nblk;
    return (int)(k / J->nblk);
}
static void jobs_forward(void *ctx, int64_t b, int64_t e) {
    for (int64_t k = b; k < e; k++) {
        int64_t r0, r1;
        int d = job_rows(ctx, k, &r0, &r1);
        if (r1 > r0) recur_forward(ctx, d, r0, r1);
    }
}
static void jobs_backward(void *ctx, int64_t b, int64_t e) {
    for (int64_t k = b; k < e; k++) {
        int64_t r0, r1;
        int d = job_rows(ctx, k, &r0, &r1);
        if (r1 > r0) recur_backward(ctx, d, r0, r1);
    }
}

/* The recurrences as dirs x row-block independent jobs, one per pool thread, each calling single-threaded
 * BLAS: no synchronisation inside the T steps (a fork-join per step costs more than a GEMM this small).
 * The big GEMMs before and after are split over the whole pool. */
static void run_recurrences(cntk_cpu_model *m, lstm_state *st, dir_job *J, cntk_range_fn fn) {
    int threads = cntk_pool_threads(m->s->pool);
    J->nblk = threads / st->dirs > 1 ? threads / st->dirs : 1;
    if (J->nblk > J->n) J->nblk = J->n > 0 ? J->n : 1;
    cntk_parallel_for(m->s->pool, st->dirs * J->nblk, 1, fn, J);
}

// --- forward / backward ----------------------------------------------------------------------------------
static kh_status lstm_forward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, int train) {
    (void)train;
    lstm_state *st = L->st;
    int64_t T = st->T, u = st->u, in = st->in, depth = L->p->onehot_in;
    for (int d = 0; d < st->dirs; d++) {
        lstm_dir *D = &st->d[d];
        const float *W = L->prm[3 * d].w;
        if (depth > 0) { /* one_hot(x) @ W == W[x] */
            for (int64_t i = 0; i < n * T; i++) {
                int32_t r = L->xi[i];
                if (r < 0 || r >= depth)
                    return cntk_layer_fail(m->s, KH_ERR_INVALID, L->p->spec.kind, L->p->index, "forward",
                                           "one-hot index %d at sample %lld step %lld outside [0, %lld)", r,
                                           (long long)(i / T), (long long)(i % T), (long long)depth);
                memcpy(D->z + i * 4 * u, W + (int64_t)r * 4 * u, (size_t)(4 * u) * sizeof(float));
            }
        } else {
            cntk_sgemm_mt(m->s->pool, 0, 0, n * T, 4 * u, in, 1.0f, L->x, in, W, 4 * u, 0.0f, D->z, 4 * u);
        }
    }
    dir_job J = {.L = L, .n = n};
    run_recurrences(m, st, &J, jobs_forward);
    /* y: (N, T, dirs*u) sequences, or (N, dirs*u) the last processed step of each direction */
    int64_t yc = st->dirs * u;
    for (int d = 0; d < st->dirs; d++) {
        const lstm_dir *D = &st->d[d];
        for (int64_t r = 0; r < n; r++) {
            if (L->p->spec.return_sequences) {
                for (int64_t t = 0; t < T; t++)
                    memcpy(L->y + (r * T + t) * yc + d * u, D->hs + (r * T + t) * u, (size_t)u * sizeof(float));
            } else {
                int64_t tl = d ? 0 : T - 1;
                memcpy(L->y + r * yc + d * u, D->hs + (r * T + tl) * u, (size_t)u * sizeof(float));
            }
        }
    }
    return KH_OK;
}

static kh_status lstm_backward(cntk_cpu_model *m, cntk_cpu_layer *L, int n, float *dy, float *dx, int fused) {
    (void)fused; /* an LSTM output is never fused with a loss (its activation is linear) */
    lstm_state *st = L->st;
    int64_t T = st->T, u = st->u, in = st->in, depth = L->p->onehot_in;
    dir_job J = {.L = L, .n = n, .dy = dy};
    run_recurrences(m, st, &J, jobs_backward);
    for (int d = 0; d < st->dirs; d++) {
        lstm_dir *D = &st->d[d];
        cntk_param *pw = &L->prm[3 * d], *pu = &L->prm[3 * d + 1], *pb = &L->prm[3 * d + 2];
        double t0 = cntk_prof_clock(m);
        if (depth > 0) { /* dW = one_hot(x)^T dZ: scatter-add rows */
            memset(pw->g, 0, (size_t)pw->numel * sizeof(float));
            for (int64_t i = 0; i < n * T; i++) {
                float *g = pw->g + (int64_t)L->xi[i] * 4 * u;
                const float *dz = D->dz + i * 4 * u;
                for (int64_t k = 0; k < 4 * u; k++) g[k] += dz[k];
            }
        } else {
            cntk_sgemm_mt(m->s->pool, 1, 0, in, 4 * u, n * T, 1.0f, L->x, in, D->dz, 4 * u, 0.0f, pw->g, 4 * u);
        }
        cntk_sgemm_mt(m->s->pool, 1, 0, u, 4 * u, n * T, 1.0f, D->hprev, u, D->dz, 4 * u, 0.0f, pu->g, 4 * u);
        cntk_colsum(D->dz, n * T, 4 * u, pb->g);
        cntk_prof_weight_grad(m, L, t0);
        if (dx && depth == 0)
            cntk_sgemm_mt(m->s->pool, 0, 1, n * T, in, 4 * u, 1.0f, D->dz, 4 * u, pw->w, 4 * u, d ? 1.0f : 0.0f, dx, in);
    }
    return KH_OK;
}

const cntk_cpu_ops cntk_cpu_lstm_ops = {
    .setup = lstm_setup,
    .teardown = lstm_teardown,
    .forward = lstm_forward,
    .backward = lstm_backward,
};
