/* cpu/act.c — element-wise activation passes over (rows, cols) tensors, bias addition fused with the
 * activation and column sums for bias gradients. Every formula comes from khost/kit/formulas.h; large tensors
 * are split over the pool by rows. */
#include <string.h>

#include "cpu/cpu.h"
#include "khost/kit/formulas.h"

#define ROW_GRAIN_ELEMS 32768 /* below this many elements a thread hand-off costs more than it saves */

typedef struct act_job {
    int act;
    const float *b;   /* bias (cols) or NULL */
    const float *yin; /* backward: the forward output */
    float *y;         /* forward: in/out; backward: dy in/out */
    const float *x;   /* element-wise forward: source when not in place (else NULL) */
    float *dx;        /* element-wise backward: destination when not in place (else NULL) */
    int64_t cols;
} act_job;

static void softmax_row(float *y, int64_t cols) {
    float mx = y[0];
    for (int64_t j = 1; j < cols; j++) mx = y[j] > mx ? y[j] : mx;
    for (int64_t j = 0; j < cols; j++) y[j] = kh_expf_fast(y[j] - mx); /* vectorises; the sum (ordered) not */
    float sum = 0;
    for (int64_t j = 0; j < cols; j++) sum += y[j];
    float inv = 1.0f / sum;
    for (int64_t j = 0; j < cols; j++) y[j] *= inv;
}

void cntk_act_map(int act, const float *x, float *y, int64_t n) {
    switch (act) {
    case KH_ACT_RELU:
        for (int64_t i = 0; i < n; i++) y[i] = kh_relu(x[i]);
        break;
    case KH_ACT_SIGMOID:
        for (int64_t i = 0; i < n; i++) y[i] = kh_sigmoid(x[i]);
        break;
    case KH_ACT_TANH:
        for (int64_t i = 0; i < n; i++) y[i] = kh_tanhf_fast(x[i]);
        break;
    default: /* linear; softmax needs rows and never reaches a span */
        if (y != x) memcpy(y, x, (size_t)n * sizeof(float));
        break;
    }
}

void cntk_act_span(int act, float *y, int64_t n) {
    if (act != KH_ACT_LINEAR) cntk_act_map(act, y, y, n);
}

void cntk_act_grad_map(int act, const float *y, const float *dy, float *dx, int64_t n) {
    switch (act) {
    case KH_ACT_RELU:
        for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * kh_relu_grad_y(y[i]);
        break;
    case KH_ACT_SIGMOID:
        for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * kh_sigmoid_grad_y(y[i]);
        break;
    case KH_ACT_TANH:
        for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * kh_tanh_grad_y(y[i]);
        break;
    default:
        if (dx != dy) memcpy(dx, dy, (size_t)n * sizeof(float));
        break;
    }
}

void cntk_act_grad_span(int act, const float *y, float *dy, int64_t n) {
    if (act != KH_ACT_LINEAR) cntk_act_grad_map(act, y, dy, dy, n);
}

static void fwd_flat(void *ctx, int64_t b, int64_t e) {
    const act_job *j = ctx;
    cntk_act_map(j->act, (j->x ? j->x : j->y) + b, j->y + b, e - b);
}

static void bwd_flat(void *ctx, int64_t b, int64_t e) {
    const act_job *j = ctx;
    cntk_act_grad_map(j->act, j->yin + b, j->y + b, (j->dx ? j->dx : j->y) + b, e - b);
}

static void fwd_rows(void *ctx, int64_t r0, int64_t r1) {
    const act_job *j = ctx;
    for (int64_t r = r0; r < r1; r++) {
        float *y = j->y + r * j->cols;
        if (j->b)
            for (int64_t c = 0; c < j->cols; c++) y[c] += j->b[c];
        if (j->act == KH_ACT_SOFTMAX)
            softmax_row(y, j->cols);
        else
            cntk_act_span(j->act, y, j->cols);
    }
}

static int64_t row_grain(int64_t cols) {
    int64_t g = ROW_GRAIN_ELEMS / (cols > 0 ? cols : 1);
    return g < 1 ? 1 : g;
}

void cntk_bias_act_forward(cntk_cpu_model *m, int act, const float *b, float *y, int64_t rows, int64_t cols) {
    if (act == KH_ACT_LINEAR && !b) return;
    act_job j = {.act = act, .b = b, .y = y, .cols = cols};
    if (!b && act != KH_ACT_SOFTMAX) /* element-wise: ignore the row structure */
        cntk_parallel_for(m->s->pool, rows * cols, ROW_GRAIN_ELEMS, fwd_flat, &j);
    else
        cntk_parallel_for(m->s->pool, rows, row_grain(cols), fwd_rows, &j);
}

void cntk_act_forward(cntk_cpu_model *m, int act, float *y, int64_t rows, int64_t cols) {
    cntk_bias_act_forward(m, act, NULL, y, rows, cols);
}

static void bwd_rows(void *ctx, int64_t r0, int64_t r1) {
    const act_job *j = ctx;
    for (int64_t r = r0; r < r1; r++) {
        const float *y = j->yin + r * j->cols;
        float *dy = j->y + r * j->cols;
        if (j->act == KH_ACT_SOFTMAX) {
            /* dz_j = y_j (dy_j - sum_k dy_k y_k) */
            float s = 0;
            for (int64_t c = 0; c < j->cols; c++) s += dy[c] * y[c];
            for (int64_t c = 0; c < j->cols; c++) dy[c] = y[c] * (dy[c] - s);
        } else {
            cntk_act_grad_span(j->act, y, dy, j->cols);
        }
    }
}

void cntk_act_backward(cntk_cpu_model *m, int act, const float *y, float *dy, int64_t rows, int64_t cols) {
    if (act == KH_ACT_LINEAR) return;
    act_job j = {.act = act, .yin = y, .y = dy, .cols = cols};
    if (act != KH_ACT_SOFTMAX)
        cntk_parallel_for(m->s->pool, rows * cols, ROW_GRAIN_ELEMS, bwd_flat, &j);
    else
        cntk_parallel_for(m->s->pool, rows, row_grain(cols), bwd_rows, &j);
}

void cntk_act_forward_from(cntk_cpu_model *m, int act, const float *x, float *y, int64_t rows, int64_t cols) {
    if (act == KH_ACT_SOFTMAX || act == KH_ACT_LINEAR) {
        memcpy(y, x, (size_t)(rows * cols) * sizeof(float));
        cntk_act_forward(m, act, y, rows, cols);
        return;
    }
    act_job j = {.act = act, .x = x, .y = y, .cols = cols};
    cntk_parallel_for(m->s->pool, rows * cols, ROW_GRAIN_ELEMS, fwd_flat, &j);
}

void cntk_act_backward_to(cntk_cpu_model *m, int act, const float *y, float *dy, float *dx, int64_t rows,
                          int64_t cols) {
    if (act == KH_ACT_SOFTMAX || act == KH_ACT_LINEAR) {
        cntk_act_backward(m, act, y, dy, rows, cols);
        memcpy(dx, dy, (size_t)(rows * cols) * sizeof(float));
        return;
    }
    act_job j = {.act = act, .yin = y, .y = dy, .dx = dx, .cols = cols};
    cntk_parallel_for(m->s->pool, rows * cols, ROW_GRAIN_ELEMS, bwd_flat, &j);
}

void cntk_colsum(const float *dz, int64_t rows, int64_t cols, float *db) {
    memset(db, 0, (size_t)cols * sizeof *db);
    for (int64_t r = 0; r < rows; r++) {
        const float *d = dz + r * cols;
        for (int64_t c = 0; c < cols; c++) db[c] += d[c];
    }
}
