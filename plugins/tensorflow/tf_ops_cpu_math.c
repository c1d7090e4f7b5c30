/* tf_ops_cpu_math.c — CPU kernels of the arithmetic ops: MatMul (BLAS), BiasAdd and its gradient, the
 * element-wise ops and their gradients (khost/kit/formulas.h, so the loops vectorise with fastmath's exp/tanh),
 * Softmax, the cross-entropy losses and their gradients, the metrics. Element-wise kernels over more than
 * TF_EW_GRAIN elements split themselves over the pool. */
#include <math.h>
#include <string.h>

#include "khost/kit/formulas.h"
#include "tf.h"
#include "tf_ops_cpu.h"

// --- MatMul --------------------------------------------------------------------------------------------------
static kh_status k_matmul(tf_run *r, int32_t i) {
    const kh_gnode *nd = tf_node(r, i), *A = tf_in_node(r, i, 0), *B = tf_in_node(r, i, 1);
    int ta = nd->attr.transpose_a, tb = nd->attr.transpose_b;
    int64_t rows_a = tf_numel(r, kh_graph_inputs(r->f->g, i)[0]) / A->dims[1], cols_a = A->dims[1];
    int64_t rows_b = tf_numel(r, kh_graph_inputs(r->f->g, i)[1]) / B->dims[1], cols_b = B->dims[1];
    int64_t M = ta ? cols_a : rows_a, K = ta ? rows_a : cols_a, N = tb ? rows_b : cols_b;
    tf_sgemm_par(r, ta, tb, M, N, K, 1.0f, tf_in(r, i, 0), cols_a, tf_in(r, i, 1), cols_b, 0.0f, tf_out(r, i), N);
    return KH_OK;
}

// --- element-wise ----------------------------------------------------------------------------------------------
typedef struct ew {
    tf_run *r;
    int32_t i;
    const float *a, *b;
    float *y;
    int64_t c; /* channels (BiasAdd) */
} ew;

#define EW_BODY(name, expr)                                                              \
    static void name##_range(void *v, int64_t b0, int64_t b1, int slot) {                \
        (void)slot;                                                                      \
        const ew *e = v;                                                                 \
        const float *a = e->a, *b = e->b;                                                \
        float *y = e->y;                                                                 \
        (void)b;                                                                         \
        for (int64_t k = b0; k < b1; k++) y[k] = (expr);                                 \
    }                                                                                    \
    static kh_status name(tf_run *r, int32_t i) {                                        \
        ew e = {r, i, tf_in(r, i, 0), tf_node(r, i)->n_in > 1 ? tf_in(r, i, 1) : NULL,    \
                tf_out(r, i), 0};                                                        \
        tf_ew_for(r, tf_numel(r, i), name##_range, &e);                                  \
        return KH_OK;                                                                    \
    }

/* y may be a or b (the plan runs these in place), so no `restrict`: GCC vectorises behind a run-time overlap
 * check. */
EW_BODY(k_add, a[k] + b[k])
EW_BODY(k_sub, a[k] - b[k])
EW_BODY(k_mul, a[k] * b[k])
EW_BODY(k_neg, -a[k])
EW_BODY(k_relu, kh_relu(a[k]))
EW_BODY(k_sigmoid, kh_sigmoid(a[k]))
EW_BODY(k_tanh, kh_tanhf_fast(a[k]))
EW_BODY(k_relu_grad, b[k] * kh_relu_grad_y(a[k]))
EW_BODY(k_sigmoid_grad, b[k] * kh_sigmoid_grad_y(a[k]))
EW_BODY(k_tanh_grad, b[k] * kh_tanh_grad_y(a[k]))

void tf_ew_for(tf_run *r, int64_t n, tf_range_fn fn, void *ctx) {
    if (n <= TF_EW_GRAIN) {
        fn(ctx, 0, n, tf_pool_slot());
        return;
    }
    tf_parallel_for(r->m->s->pool, n, TF_EW_GRAIN, r->m->s->set.intra_op, fn, ctx);
}

static kh_status k_addn(tf_run *r, int32_t i) {
    const kh_gnode *nd = tf_node(r, i);
    int64_t n = tf_numel(r, i);
    float *y = tf_out(r, i);
    const float *a = tf_in(r, i, 0);
    if (y != a) memcpy(y, a, (size_t)n * sizeof *y);
    for (int k = 1; k < nd->n_in; k++) {
        const float *restrict b = tf_in(r, i, k);
        for (int64_t j = 0; j < n; j++) y[j] += b[j];
    }
    return KH_OK;
}

static void bias_range(void *v, int64_t r0, int64_t r1, int slot) {
    (void)slot;
    const ew *e = v;
    const int64_t c = e->c; /* locals: the stores cannot change them, so the inner loop vectorises */
    const float *bias = e->b;
    for (int64_t row = r0; row < r1; row++) {
        const float *a = e->a + row * c;
        float *y = e->y + row * c;
        for (int64_t k = 0; k < c; k++) y[k] = a[k] + bias[k];
    }
}

static kh_status k_bias_add(tf_run *r, int32_t i) {
    const kh_gnode *nd = tf_node(r, i);
    int64_t c = nd->dims[nd->rank - 1], rows = tf_numel(r, i) / c;
    ew e = {r, i, tf_in(r, i, 0), tf_in(r, i, 1), tf_out(r, i), c};
    if (rows * c <= TF_EW_GRAIN) bias_range(&e, 0, rows, 0);
    else tf_parallel_for(r->m->s->pool, rows, (TF_EW_GRAIN + c - 1) / c, r->m->s->set.intra_op, bias_range, &e);
    return KH_OK;
}

static kh_status k_bias_add_grad(tf_run *r, int32_t i) {
    int64_t c = tf_node(r, i)->dims[0];
    int64_t rows = tf_numel(r, kh_graph_inputs(r->f->g, i)[0]) / c;
    const float *dy = tf_in(r, i, 0);
    float *y = tf_out(r, i);
    memset(y, 0, (size_t)c * sizeof *y);
    for (int64_t row = 0; row < rows; row++) {
        const float *restrict d = dy + row * c;
        for (int64_t k = 0; k < c; k++) y[k] += d[k];
    }
    return KH_OK;
}

// --- rows: softmax ---------------------------------------------------------------------------------------------
static kh_status k_softmax(tf_run *r, int32_t i) {
    const kh_gnode *nd = tf_node(r, i);
    int64_t c = nd->dims[nd->rank - 1], rows = tf_numel(r, i) / c;
    const float *x = tf_in(r, i, 0);
    float *y = tf_out(r, i);
    for (int64_t row = 0; row < rows; row++) {
        const float *restrict a = x + row * c;
        float *restrict o = y + row * c;
        float mx = a[0];
        for (int64_t k = 1; k < c; k++) mx = a[k] > mx ? a[k] : mx;
        float s = 0.0f;
        for (int64_t k = 0; k < c; k++) {
            o[k] = kh_expf_fast(a[k] - mx);
            s += o[k];
        }
        float inv = 1.0f / s;
        for (int64_t k = 0; k < c; k++) o[k] *= inv;
    }
    return KH_OK;
}

static kh_status k_softmax_grad(tf_run *r, int32_t i) {
    const kh_gnode *nd = tf_node(r, i);
    int64_t c = nd->dims[nd->rank - 1], rows = tf_numel(r, i) / c;
    const float *yv = tf_in(r, i, 0), *dyv = tf_in(r, i, 1);
    float *dx = tf_out(r, i);
    for (int64_t row = 0; row < rows; row++) {
        const float *y = yv + row * c, *dy = dyv + row * c;
        float *o = dx + row * c;
        float dot = 0.0f;
        for (int64_t k = 0; k < c; k++) dot += y[k] * dy[k];
        for (int64_t k = 0; k < c; k++) o[k] = y[k] * (dy[k] - dot);
    }
    return KH_OK;
}

// --- losses and metrics ----------------------------------------------------------------------------------------
static kh_status check_labels(tf_run *r, int32_t i, const int32_t *lab, int64_t n, int64_t c) {
    for (int64_t k = 0; k < n; k++)
        if (lab[k] < 0 || lab[k] >= (c == 1 ? 2 : c))
            return tf_run_fail(r, i, KH_ERR_INVALID, "label %d of sample %lld outside [0, %lld)", lab[k], (long long)k,
                               (long long)(c == 1 ? 2 : c));
    return KH_OK;
}

static kh_status k_xent(tf_run *r, int32_t i) {
    const kh_gnode *nd = tf_node(r, i);
    int64_t n = r->n, c = tf_in_node(r, i, 0)->dims[1];
    const int32_t *lab = (const int32_t *)tf_in(r, i, 1);
    const float *p = tf_in(r, i, 2);
    float *y = tf_out(r, i);
    kh_status st = check_labels(r, i, lab, n, c);
    if (st != KH_OK) return st;
    for (int64_t k = 0; k < n; k++)
        y[k] = nd->op == KH_GOP_SOFTMAX_XENT ? kh_cce_loss(p[k * c + lab[k]]) : kh_bce_loss(p[k], (float)lab[k]);
    return KH_OK;
}

static kh_status k_xent_grad(tf_run *r, int32_t i) {
    const kh_gnode *nd = tf_node(r, i);
    int64_t n = r->n, c = nd->dims[1];
    const float *p = tf_in(r, i, 0), *dl = tf_in(r, i, 2);
    const int32_t *lab = (const int32_t *)tf_in(r, i, 1);
    float *y = tf_out(r, i);
    for (int64_t k = 0; k < n; k++) {
        if (nd->op == KH_GOP_SIGMOID_XENT_GRAD) {
            y[k] = dl[k] * kh_sigmoid_bce_grad(p[k], (float)lab[k], 1.0f);
            continue;
        }
        float pt = p[k * c + lab[k]];
        for (int64_t j = 0; j < c; j++) y[k * c + j] = dl[k] * kh_softmax_cce_grad(p[k * c + j], j == lab[k], pt, 1.0f);
    }
    return KH_OK;
}

static kh_status k_fill_batch(tf_run *r, int32_t i) {
    float *y = tf_out(r, i), v = 1.0f / (float)r->n;
    for (int64_t k = 0; k < r->n; k++) y[k] = v;
    return KH_OK;
}

static kh_status k_loss_sum(tf_run *r, int32_t i) {
    const float *a = tf_in(r, i, 0);
    double s = 0.0;
    for (int64_t k = 0; k < r->n; k++) s += a[k];
    tf_out(r, i)[0] = (float)s;
    return KH_OK;
}

static kh_status k_correct(tf_run *r, int32_t i) {
    int64_t c = tf_in_node(r, i, 0)->dims[tf_in_node(r, i, 0)->rank - 1];
    const float *p = tf_in(r, i, 0);
    const int32_t *lab = (const int32_t *)tf_in(r, i, 1);
    int64_t ok = 0;
    for (int64_t k = 0; k < r->n; k++) {
        if (c == 1) {
            ok += (p[k] > 0.5f) == (lab[k] != 0);
            continue;
        }
        int64_t best = 0;
        for (int64_t j = 1; j < c; j++)
            if (p[k * c + j] > p[k * c + best]) best = j;
        ok += best == lab[k];
    }
    tf_out(r, i)[0] = (float)ok;
    return KH_OK;
}

// --- the table ----------------------------------------------------------------------------------------------
tf_kernel tf_cpu_kernel_math(uint32_t op) {
    switch (op) {
    case KH_GOP_MATMUL: return k_matmul;
    case KH_GOP_BIAS_ADD: return k_bias_add;
    case KH_GOP_BIAS_ADD_GRAD: return k_bias_add_grad;
    case KH_GOP_ADD: return k_add;
    case KH_GOP_ADDN: return k_addn;
    case KH_GOP_SUB: return k_sub;
    case KH_GOP_MUL: return k_mul;
    case KH_GOP_NEG: return k_neg;
    case KH_GOP_RELU: return k_relu;
    case KH_GOP_SIGMOID: return k_sigmoid;
    case KH_GOP_TANH: return k_tanh;
    case KH_GOP_RELU_GRAD: return k_relu_grad;
    case KH_GOP_SIGMOID_GRAD: return k_sigmoid_grad;
    case KH_GOP_TANH_GRAD: return k_tanh_grad;
    case KH_GOP_SOFTMAX: return k_softmax;
    case KH_GOP_SOFTMAX_GRAD: return k_softmax_grad;
    case KH_GOP_SOFTMAX_XENT: case KH_GOP_SIGMOID_XENT: return k_xent;
    case KH_GOP_SOFTMAX_XENT_GRAD: case KH_GOP_SIGMOID_XENT_GRAD: return k_xent_grad;
    case KH_GOP_FILL_BATCH: return k_fill_batch;
    case KH_GOP_LOSS_SUM: return k_loss_sum;
    case KH_GOP_CORRECT_COUNT: return k_correct;
    default: return NULL;
    }
}
