/* cntk_lstm.c — LSTM and Bidirectional(LSTM) on CPU, the fused-RNN way a vendor library does it:
 *   - the input projection of ALL time steps is one GEMM, Z (N*T, 4u) = X (N*T, in) @ W (in, 4u)
 *     (for one-hot input a row lookup Z[n, t] = W[x[n, t]], the same product without the one-hot matrix);
 *   - each step only adds the recurrent product Z_t += h_{t-1} @ U (a strided GEMM straight into Z) and runs
 *     the cell (khost/formulas.h kh_lstm_cell) over (N, u);
 *   - backward runs the recurrence collecting dZ for every step, then the weight gradients are three big
 *     GEMMs over all N*T rows (dW = X^T dZ, dU = Hprev^T dZ, dX = dZ W^T) and a column sum (db).
 * Bidirectional: the two directions' recurrences are independent, so they run on two pool threads with BLAS
 * single-threaded meanwhile (the per-step GEMMs are too small to split well); the big GEMMs before and after
 * use every BLAS thread. Keras's go_backwards: the backward direction consumes t = T-1 .. 0, its final output
 * is the state after x[0], and its sequence output is re-aligned with time — here simply by storing every
 * state at its real time index.
 * Weights stay in Keras's layouts (kernel [in, 4u], recurrent [u, 4u], bias [4u], gates i, f, c, o).
 */
#include <string.h>

#include "cntk_cpu.h"
#include "khost/formulas.h"

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

static void cell_forward_rows(void *ctx, int64_t n0, int64_t n1) {
    const step_job *j = ctx;
    const lstm_state *st = j->st;
    int64_t T = st->T, u = st->u;
    lstm_dir *D = j->D;
    for (int64_t n = n0; n < n1; n++) {
        float *z = D->z + (n * T + j->t) * 4 * u;
        float *c = D->c + (n * T + j->t) * u, *h = D->hs + (n * T + j->t) * u;
        const float *cp = j->tprev >= 0 ? D->c + (n * T + j->tprev) * u : NULL;
        float *hn = j->tnext >= 0 ? D->hprev + (n * T + j->tnext) * u : NULL;
        for (int64_t k = 0; k < u; k++) {
            float i, f, g, o;
            kh_lstm_cell(z[k] + j->b[k], z[u + k] + j->b[u + k], z[2 * u + k] + j->b[2 * u + k],
                         z[3 * u + k] + j->b[3 * u + k], cp ? cp[k] : 0.0f, &i, &f, &g, &o, &c[k], &h[k]);
            z[k] = i, z[u + k] = f, z[2 * u + k] = g, z[3 * u + k] = o;
            if (hn) hn[k] = h[k];
        }
    }
}

static void cell_backward_rows(void *ctx, int64_t n0, int64_t n1) {
    const step_job *j = ctx;
    const lstm_state *st = j->st;
    int64_t T = st->T, u = st->u;
    lstm_dir *D = j->D;
    for (int64_t n = n0; n < n1; n++) {
        const float *z = D->z + (n * T + j->t) * 4 * u;
        const float *c = D->c + (n * T + j->t) * u;
        const float *cp = j->tprev >= 0 ? D->c + (n * T + j->tprev) * u : NULL;
        float *dz = D->dz + (n * T + j->t) * 4 * u;
        float *dh = D->dh + n * u, *dc = D->dc + n * u;
        const float *dy = NULL;
        if (j->seq)
            dy = j->dy + (n * T + j->t) * j->ycols + j->dy_col;
        else if (j->last)
            dy = j->dy + n * j->ycols + j->dy_col;
        for (int64_t k = 0; k < u; k++) {
            float dhk = dh[k] + (dy ? dy[k] : 0.0f), dcp;
            kh_lstm_cell_backward(z[k], z[u + k], z[2 * u + k], z[3 * u + k], c[k], cp ? cp[k] : 0.0f, dhk, dc[k],
                                  &dz[k], &dz[u + k], &dz[2 * u + k], &dz[3 * u + k], &dcp);
            dc[k] = dcp;
        }
    }
}

/* Run a cell job over the batch: split over the pool when this direction has the machine to itself. */
static void run_rows(cntk_cpu_model *m, int n, int nested, cntk_range_fn fn, step_job *j) {
    if (nested)
        fn(j, 0, n);
    else
        cntk_parallel_for(m->s->pool, n, 8, fn, j);
}

typedef struct dir_job {
    cntk_cpu_model *m;
    cntk_cpu_layer *L;
    const float *dy;
    int n;
    int nested; /* running on a pool thread beside the other direction */
} dir_job;

static void recur_forward(dir_job *J, int d) {
    cntk_cpu_layer *L = J->L;
    lstm_state *st = L->st;
    lstm_dir *D = &st->d[d];
    int64_t T = st->T, u = st->u, n = J->n;
    const float *U = L->prm[3 * d + 1].w, *b = L->prm[3 * d + 2].w;
    for (int64_t s = 0; s < T; s++) {
        int64_t t = d ? T - 1 - s : s;
        step_job j = {.st = st, .D = D, .b = b, .t = t};
        j.tprev = s == 0 ? -1 : (d ? t + 1 : t - 1);
        j.tnext = s == T - 1 ? -1 : (d ? t - 1 : t + 1);
        if (s == 0) {
            for (int64_t r = 0; r < n; r++) memset(D->hprev + (r * T + t) * u, 0, (size_t)u * sizeof(float));
        } else {
            /* Z_t (N, 4u; row stride T*4u) += hprev_t (N, u; row stride T*u) @ U (u, 4u) */
            cntk_sgemm(0, 0, n, 4 * u, u, 1.0f, D->hprev + t * u, T * u, U, 4 * u, 1.0f, D->z + t * 4 * u, T * 4 * u);
        }
        run_rows(J->m, J->n, J->nested, cell_forward_rows, &j);
    }
}

static void recur_backward(dir_job *J, int d) {
    cntk_cpu_layer *L = J->L;
    lstm_state *st = L->st;
    lstm_dir *D = &st->d[d];
    int64_t T = st->T, u = st->u, n = J->n;
    const float *U = L->prm[3 * d + 1].w;
    memset(D->dh, 0, (size_t)(n * u) * sizeof(float));
    memset(D->dc, 0, (size_t)(n * u) * sizeof(float));
    for (int64_t s = T - 1; s >= 0; s--) {
        int64_t t = d ? T - 1 - s : s;
        step_job j = {.st = st, .D = D, .dy = J->dy, .t = t, .dy_col = d * u, .ycols = st->dirs * u,
                      .seq = L->p->spec.return_sequences, .last = s == T - 1};
        j.tprev = s == 0 ? -1 : (d ? t + 1 : t - 1);
        run_rows(J->m, J->n, J->nested, cell_backward_rows, &j);
        /* dh for the previous step: dZ_t (N, 4u) @ U^T */
        if (s > 0) cntk_sgemm(0, 1, n, u, 4 * u, 1.0f, D->dz + t * 4 * u, T * 4 * u, U, 4 * u, 0.0f, D->dh, u);
    }
}

static void dirs_forward(void *ctx, int64_t b, int64_t e) {
    for (int64_t d = b; d < e; d++) recur_forward(ctx, (int)d);
}
static void dirs_backward(void *ctx, int64_t b, int64_t e) {
    for (int64_t d = b; d < e; d++) recur_backward(ctx, (int)d);
}

/* Both directions at once when there are two threads; BLAS single-threaded meanwhile. */
static void run_directions(cntk_cpu_model *m, lstm_state *st, dir_job *J, cntk_range_fn fn) {
    if (st->dirs == 2 && cntk_pool_threads(m->s->pool) >= 2) {
        J->nested = 1;
        cntk_blas_set_threads(1);
        cntk_parallel_for(m->s->pool, 2, 1, fn, J);
        cntk_blas_set_threads(m->s->threads);
    } else {
        J->nested = 0;
        fn(J, 0, st->dirs);
    }
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
            cntk_sgemm(0, 0, n * T, 4 * u, in, 1.0f, L->x, in, W, 4 * u, 0.0f, D->z, 4 * u);
        }
    }
    dir_job J = {.m = m, .L = L, .n = n};
    run_directions(m, st, &J, dirs_forward);
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
    dir_job J = {.m = m, .L = L, .n = n, .dy = dy};
    run_directions(m, st, &J, dirs_backward);
    for (int d = 0; d < st->dirs; d++) {
        lstm_dir *D = &st->d[d];
        cntk_param *pw = &L->prm[3 * d], *pu = &L->prm[3 * d + 1], *pb = &L->prm[3 * d + 2];
        if (depth > 0) { /* dW = one_hot(x)^T dZ: scatter-add rows */
            memset(pw->g, 0, (size_t)pw->numel * sizeof(float));
            for (int64_t i = 0; i < n * T; i++) {
                float *g = pw->g + (int64_t)L->xi[i] * 4 * u;
                const float *dz = D->dz + i * 4 * u;
                for (int64_t k = 0; k < 4 * u; k++) g[k] += dz[k];
            }
        } else {
            cntk_sgemm(1, 0, in, 4 * u, n * T, 1.0f, L->x, in, D->dz, 4 * u, 0.0f, pw->g, 4 * u);
        }
        cntk_sgemm(1, 0, u, 4 * u, n * T, 1.0f, D->hprev, u, D->dz, 4 * u, 0.0f, pu->g, 4 * u);
        cntk_colsum(D->dz, n * T, 4 * u, pb->g);
        if (dx && depth == 0)
            cntk_sgemm(0, 1, n * T, in, 4 * u, 1.0f, D->dz, 4 * u, pw->w, 4 * u, d ? 1.0f : 0.0f, dx, in);
    }
    return KH_OK;
}

const cntk_cpu_ops cntk_cpu_lstm_ops = {
    .setup = lstm_setup,
    .teardown = lstm_teardown,
    .forward = lstm_forward,
    .backward = lstm_backward,
};
