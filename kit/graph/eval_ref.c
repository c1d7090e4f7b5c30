/* kit/graph/eval_ref.c — the float64 reference interpreter of the graph IR: the definition of every
 * op's semantics, written plainly. Tests use it as the oracle for backend kernels and, with central finite
 * differences, to check every gradient function of grad.c. Convolution, pooling, element-wise maths and the
 * optimizer updates come from the reference kit (khost/kit/ref.h, khost/kit/formulas.h), the same definitions the
 * layer-level oracle uses. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/counter_rng.h"
#include "khost/kit/formulas.h"
#include "khost/kit/graph.h"
#include "khost/kit/ref.h"
#include "khost/kit/status.h"

/* (outer, len, inner) view of a shape around `axis`; the leading axis holds n0 rows only when batched */
static void around(const kh_gnode *x, int axis, int64_t n0, int64_t *outer, int64_t *len, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int d = 0; d < axis; d++) *outer *= d == 0 && (x->flags & KH_GVAL_BATCHED) ? n0 : x->dims[d];
    *len = x->dims[axis];
    for (int d = axis + 1; d < x->rank; d++) *inner *= x->dims[d];
}

static int64_t rows_of(const kh_graph *g, int32_t node, int64_t n) {
    const kh_gnode *x = &g->nodes[node];
    return kh_graph_numel(g, node, n) / x->dims[x->rank - 1];
}

static kh_status conv_dims(const kh_graph *g, int32_t x, int32_t w, const kh_gattr *t, int64_t n,
                           kh_conv2d_dims *d) {
    const kh_gnode *X = &g->nodes[x], *W = &g->nodes[w];
    return kh_conv2d_geometry(d, n, X->dims[1], X->dims[2], X->dims[3], W->dims[0], W->dims[1], W->dims[3],
                                  t->strides[0] > 0 ? t->strides[0] : 1, t->strides[1] > 0 ? t->strides[1] : 1,
                                  t->padding);
}

/* One element of an Elemwise program in float64. */
static double eval_expr(const kh_gexpr *e, const double *const *ins, int64_t idx, int64_t C, const double *dkeys,
                        double *tmp) {
    for (int k = 0; k < e->n_ops; k++) {
        const kh_gexpr_op *o = &e->ops[k];
        double a = o->a >= 0 ? tmp[o->a] : ins[-1 - o->a][e->vec[-1 - o->a] ? idx % C : idx];
        double b = 0.0;
        if (o->op == KH_GOP_ADD || o->op == KH_GOP_SUB || o->op == KH_GOP_MUL || o->op == KH_GOP_RELU_GRAD ||
            o->op == KH_GOP_SIGMOID_GRAD || o->op == KH_GOP_TANH_GRAD)
            b = o->b >= 0 ? tmp[o->b] : ins[-1 - o->b][e->vec[-1 - o->b] ? idx % C : idx];
        double r = 0.0;
        switch (o->op) {
        case KH_GOP_ADD: r = a + b; break;
        case KH_GOP_SUB: r = a - b; break;
        case KH_GOP_MUL: r = a * b; break;
        case KH_GOP_NEG: r = -a; break;
        case KH_GOP_RELU: r = kh_relu_d(a); break;
        case KH_GOP_SIGMOID: r = kh_sigmoid_d(a); break;
        case KH_GOP_TANH: r = tanh(a); break;
        case KH_GOP_RELU_GRAD: r = b * kh_relu_grad_y_d(a); break;
        case KH_GOP_SIGMOID_GRAD: r = b * kh_sigmoid_grad_y_d(a); break;
        case KH_GOP_TANH_GRAD: r = b * kh_tanh_grad_y_d(a); break;
        case KH_GOP_DROPOUT: case KH_GOP_DROPOUT_GRAD: {
            uint64_t key;
            memcpy(&key, &dkeys[k], sizeof key);
            r = kh_dropout_keep(key, (uint64_t)idx, o->rate) ? a * (1.0 / (1.0 - (double)o->rate)) : 0.0;
            break;
        }
        default: r = NAN; break;
        }
        tmp[k] = r;
    }
    return tmp[e->n_ops - 1];
}

/* --- LSTM scans: S (R, T, 6, U) holds h, c, i, f, g, o per step; the cell is khost/kit/formulas.h's, the one the
 * unrolled graph's Sigmoid/Tanh/Mul/Add compute op by op (kh_sigmoid_d, tanh) ------------------------------ */
#define SCAN_AT(S, r, t, k, T, U) ((S) + ((((r) * (T) + (t)) * 6 + (k)) * (U)))

static kh_status lstm_scan(double *S, const double *xw, const double *Uw, int64_t R, int64_t T, int64_t U) {
    const int64_t G = 4 * U;
    double *z = malloc((size_t)G * sizeof *z + 1);
    if (!z) return KH_ERR_NOMEM;
    for (int64_t r = 0; r < R; r++)
        for (int64_t t = 0; t < T; t++) {
            const double *x = xw + (r * T + t) * G;
            for (int64_t j = 0; j < G; j++) z[j] = x[j];
            if (t > 0) { /* h_{-1} = 0: step 0 adds no h U, as the unrolled graph */
                const double *hp = SCAN_AT(S, r, t - 1, 0, T, U);
                for (int64_t k = 0; k < U; k++)
                    for (int64_t j = 0; j < G; j++) z[j] += hp[k] * Uw[k * G + j];
            }
            const double *cp = t > 0 ? SCAN_AT(S, r, t - 1, 1, T, U) : NULL;
            double *h = SCAN_AT(S, r, t, 0, T, U), *c = SCAN_AT(S, r, t, 1, T, U);
            double *gi = SCAN_AT(S, r, t, 2, T, U), *gf = SCAN_AT(S, r, t, 3, T, U);
            double *gg = SCAN_AT(S, r, t, 4, T, U), *go = SCAN_AT(S, r, t, 5, T, U);
            for (int64_t u = 0; u < U; u++)
                kh_lstm_cell_d(z[u], z[U + u], z[2 * U + u], z[3 * U + u], cp ? cp[u] : 0.0, &gi[u], &gf[u], &gg[u],
                               &go[u], &c[u], &h[u]);
        }
    free(z);
    return KH_OK;
}

/* dXW (R, T, 4U) from dS: components 0 (dh) and 1 (dc) only */
static kh_status lstm_scan_grad(double *dxw, const double *S, const double *Uw, const double *dS, int64_t R,
                                int64_t T, int64_t U) {
    const int64_t G = 4 * U;
    double *dh_next = malloc((size_t)(2 * U) * sizeof *dh_next + 1);
    if (!dh_next) return KH_ERR_NOMEM;
    double *dc_next = dh_next + U;
    for (int64_t r = 0; r < R; r++) {
        for (int64_t u = 0; u < U; u++) dh_next[u] = dc_next[u] = 0.0;
        for (int64_t t = T - 1; t >= 0; t--) {
            const double *c = SCAN_AT(S, r, t, 1, T, U), *cp = t > 0 ? SCAN_AT(S, r, t - 1, 1, T, U) : NULL;
            const double *gi = SCAN_AT(S, r, t, 2, T, U), *gf = SCAN_AT(S, r, t, 3, T, U);
            const double *gg = SCAN_AT(S, r, t, 4, T, U), *go = SCAN_AT(S, r, t, 5, T, U);
            const double *dh = SCAN_AT(dS, r, t, 0, T, U), *dc = SCAN_AT(dS, r, t, 1, T, U);
            double *dz = dxw + (r * T + t) * G;
            for (int64_t u = 0; u < U; u++) {
                double dcp;
                kh_lstm_cell_backward_d(gi[u], gf[u], gg[u], go[u], c[u], cp ? cp[u] : 0.0, dh[u] + dh_next[u],
                                        dc[u] + dc_next[u], &dz[u], &dz[U + u], &dz[2 * U + u], &dz[3 * U + u], &dcp);
                dc_next[u] = dcp;
            }
            for (int64_t k = 0; k < U; k++) { /* dh_{t-1} = dz U^T */
                double acc = 0.0;
                for (int64_t j = 0; j < G; j++) acc += Uw[k * G + j] * dz[j];
                dh_next[k] = acc;
            }
        }
    }
    free(dh_next);
    return KH_OK;
}

/* dU (U, 4U) = sum over r and t >= 1 of h_{t-1}^T dXW[r, t] */
static void lstm_scan_grad_u(double *du, const double *S, const double *dxw, int64_t R, int64_t T, int64_t U) {
    const int64_t G = 4 * U;
    for (int64_t r = 0; r < R; r++)
        for (int64_t t = 1; t < T; t++) {
            const double *hp = SCAN_AT(S, r, t - 1, 0, T, U), *dz = dxw + (r * T + t) * G;
            for (int64_t k = 0; k < U; k++)
                for (int64_t j = 0; j < G; j++) du[k * G + j] += hp[k] * dz[j];
        }
}

kh_status kh_graph_eval_ref(const kh_graph *g, int64_t n, const kh_graph_ref_env *env, double **v, char *err,
                            size_t errlen) {
    for (int32_t i = 0; i < g->n_nodes; i++) v[i] = NULL;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const kh_gnode *nd = &g->nodes[i];
        const int32_t *in = kh_graph_inputs(g, i);
        int64_t N = kh_graph_numel(g, i, n);
        double *y = calloc((size_t)N + 1, sizeof *y);
        if (!y) return kh_errf(err, errlen, KH_ERR_NOMEM, "node %d: out of memory", i);
        v[i] = y;
        const double *a = nd->n_in > 0 ? v[in[0]] : NULL, *b = nd->n_in > 1 ? v[in[1]] : NULL;
        const kh_gnode *A = nd->n_in > 0 ? &g->nodes[in[0]] : NULL;
        const kh_gattr *t = &nd->attr;
        int64_t na = nd->n_in > 0 ? kh_graph_numel(g, in[0], n) : 0;
        switch (nd->op) {
        case KH_GOP_INPUT:
            if (!env->feeds[t->input_id]) return kh_errf(err, errlen, KH_ERR_INVALID, "node %d: input %d not fed", i, t->input_id);
            memcpy(y, env->feeds[t->input_id], (size_t)N * sizeof *y);
            break;
        case KH_GOP_VARIABLE: {
            const double *w = env->var(env->ctx, t->layer, t->slot);
            if (!w) return kh_errf(err, errlen, KH_ERR_INVALID, "node %d: no variable (%d, %d)", i, t->layer, t->slot);
            memcpy(y, w, (size_t)N * sizeof *y);
            break;
        }
        case KH_GOP_ZEROS: break;
        case KH_GOP_FILL_BATCH:
            for (int64_t k = 0; k < N; k++) y[k] = 1.0 / (double)n;
            break;
        case KH_GOP_MATMUL: {
            /* a rank-3 operand is the matrix of its leading axes as rows: (n*T, C) */
            const kh_gnode *B = &g->nodes[in[1]];
            int64_t cols_a = A->dims[A->rank - 1], rows_a = kh_graph_numel(g, in[0], n) / cols_a;
            int64_t M = t->transpose_a ? cols_a : rows_a, K = t->transpose_a ? rows_a : cols_a;
            int64_t cols_b = B->dims[B->rank - 1], rows_b = kh_graph_numel(g, in[1], n) / cols_b;
            int64_t Nn = t->transpose_b ? rows_b : cols_b;
            for (int64_t r = 0; r < M; r++)
                for (int64_t col = 0; col < Nn; col++) {
                    double s = 0.0;
                    for (int64_t k = 0; k < K; k++) {
                        double av = t->transpose_a ? a[k * cols_a + r] : a[r * cols_a + k];
                        double bv = t->transpose_b ? b[col * cols_b + k] : b[k * cols_b + col];
                        s += av * bv;
                    }
                    y[r * Nn + col] = s;
                }
            break;
        }
        case KH_GOP_BIAS_ADD: {
            int64_t C = A->dims[A->rank - 1];
            for (int64_t k = 0; k < N; k++) y[k] = a[k] + b[k % C];
            break;
        }
        case KH_GOP_BIAS_ADD_GRAD: {
            int64_t C = N;
            for (int64_t k = 0; k < na; k++) y[k % C] += a[k];
            break;
        }
        case KH_GOP_ADD: for (int64_t k = 0; k < N; k++) y[k] = a[k] + b[k]; break;
        case KH_GOP_SUB: for (int64_t k = 0; k < N; k++) y[k] = a[k] - b[k]; break;
        case KH_GOP_MUL: for (int64_t k = 0; k < N; k++) y[k] = a[k] * b[k]; break;
        case KH_GOP_NEG: for (int64_t k = 0; k < N; k++) y[k] = -a[k]; break;
        case KH_GOP_ADDN:
            for (int j = 0; j < nd->n_in; j++)
                for (int64_t k = 0; k < N; k++) y[k] += v[in[j]][k];
            break;
        case KH_GOP_RELU: for (int64_t k = 0; k < N; k++) y[k] = kh_relu_d(a[k]); break;
        case KH_GOP_SIGMOID: for (int64_t k = 0; k < N; k++) y[k] = kh_sigmoid_d(a[k]); break;
        case KH_GOP_TANH: for (int64_t k = 0; k < N; k++) y[k] = tanh(a[k]); break;
        case KH_GOP_RELU_GRAD: for (int64_t k = 0; k < N; k++) y[k] = b[k] * kh_relu_grad_y_d(a[k]); break;
        case KH_GOP_SIGMOID_GRAD: for (int64_t k = 0; k < N; k++) y[k] = b[k] * kh_sigmoid_grad_y_d(a[k]); break;
        case KH_GOP_TANH_GRAD: for (int64_t k = 0; k < N; k++) y[k] = b[k] * kh_tanh_grad_y_d(a[k]); break;
        case KH_GOP_SOFTMAX:
            kh_ref_activation_forward(y, a, rows_of(g, i, n), nd->dims[nd->rank - 1], KH_ACT_SOFTMAX);
            break;
        case KH_GOP_SOFTMAX_GRAD:
            kh_ref_activation_backward(y, b, a, rows_of(g, i, n), nd->dims[nd->rank - 1], KH_ACT_SOFTMAX);
            break;
        case KH_GOP_CONV2D: {
            kh_conv2d_dims d;
            if (conv_dims(g, in[0], in[1], t, n, &d) != KH_OK)
                return kh_errf(err, errlen, KH_ERR_INVALID, "node %d: conv geometry", i);
            kh_ref_conv2d_forward(y, a, b, NULL, &d, KH_ACT_LINEAR);
            break;
        }
        case KH_GOP_CONV2D_BACKPROP_INPUT: case KH_GOP_CONV2D_BACKPROP_FILTER: {
            int filt = nd->op == KH_GOP_CONV2D_BACKPROP_FILTER;
            int32_t xs = filt ? in[0] : t->shape_of, ws = filt ? t->shape_of : in[0];
            kh_conv2d_dims d;
            if (conv_dims(g, xs, ws, t, n, &d) != KH_OK)
                return kh_errf(err, errlen, KH_ERR_INVALID, "node %d: conv geometry", i);
            int64_t nx = kh_graph_numel(g, xs, n), nw = kh_graph_numel(g, ws, n);
            /* the kit's backward computes both gradients; the unused one goes to scratch */
            double *zx = calloc((size_t)nx + 1, sizeof *zx), *zw = calloc((size_t)nw + 1, sizeof *zw);
            double *dummy_out = calloc((size_t)kh_graph_numel(g, in[1], n) + 1, sizeof *dummy_out);
            kh_status st = zx && zw && dummy_out ? KH_OK : KH_ERR_NOMEM;
            if (st == KH_OK)
                st = filt ? kh_ref_conv2d_backward(NULL, y, NULL, b, dummy_out, a, zw, &d, KH_ACT_LINEAR)
                          : kh_ref_conv2d_backward(y, zw, NULL, b, dummy_out, zx, a, &d, KH_ACT_LINEAR);
            free(zx);
            free(zw);
            free(dummy_out);
            if (st != KH_OK) return kh_errf(err, errlen, st, "node %d: conv backprop", i);
            break;
        }
        case KH_GOP_MAXPOOL: case KH_GOP_MAXPOOL_GRAD: {
            const kh_gnode *X = A;
            kh_conv2d_dims d;
            if (kh_conv2d_geometry(&d, n, X->dims[1], X->dims[2], X->dims[3], t->window[0], t->window[1], X->dims[3],
                                       t->strides[0], t->strides[1], t->padding) != KH_OK)
                return kh_errf(err, errlen, KH_ERR_INVALID, "node %d: pool geometry", i);
            if (nd->op == KH_GOP_MAXPOOL) kh_ref_maxpool2d_forward(y, a, &d);
            else kh_ref_maxpool2d_backward(y, b, a, &d);
            break;
        }
        case KH_GOP_RESHAPE: memcpy(y, a, (size_t)N * sizeof *y); break;
        case KH_GOP_SLICE: {
            int64_t outer, len, inner;
            around(A, t->axis, n, &outer, &len, &inner);
            for (int64_t o = 0; o < outer; o++)
                memcpy(y + o * t->size * inner, a + (o * len + t->begin) * inner, (size_t)(t->size * inner) * sizeof *y);
            break;
        }
        case KH_GOP_CONCAT: {
            int64_t outer, len, inner, pos = 0;
            around(nd, t->axis, n, &outer, &len, &inner);
            for (int j = 0; j < nd->n_in; j++) {
                int64_t lj = g->nodes[in[j]].dims[t->axis];
                for (int64_t o = 0; o < outer; o++)
                    memcpy(y + (o * len + pos) * inner, v[in[j]] + o * lj * inner, (size_t)(lj * inner) * sizeof *y);
                pos += lj;
            }
            break;
        }
        case KH_GOP_REVERSE: {
            int64_t outer, len, inner;
            around(A, t->axis, n, &outer, &len, &inner);
            for (int64_t o = 0; o < outer; o++)
                for (int64_t l = 0; l < len; l++)
                    memcpy(y + (o * len + l) * inner, a + (o * len + len - 1 - l) * inner, (size_t)inner * sizeof *y);
            break;
        }
        case KH_GOP_MEAN: {
            int64_t outer, len, inner;
            around(A, t->axis, n, &outer, &len, &inner);
            for (int64_t o = 0; o < outer; o++)
                for (int64_t l = 0; l < len; l++)
                    for (int64_t k = 0; k < inner; k++) y[o * inner + k] += a[(o * len + l) * inner + k] / (double)len;
            break;
        }
        case KH_GOP_MEAN_GRAD: {
            int64_t outer, len, inner;
            around(nd, t->axis, n, &outer, &len, &inner);
            for (int64_t o = 0; o < outer; o++)
                for (int64_t l = 0; l < len; l++)
                    for (int64_t k = 0; k < inner; k++) y[(o * len + l) * inner + k] = a[o * inner + k] / (double)len;
            break;
        }
        case KH_GOP_GATHER: {
            int64_t V = A->dims[0], D = A->dims[1], ni = kh_graph_numel(g, in[1], n);
            for (int64_t k = 0; k < ni; k++) {
                int64_t r = (int64_t)b[k];
                if (r < 0 || r >= V) return kh_errf(err, errlen, KH_ERR_INVALID, "node %d: index %lld outside [0, %lld)", i, (long long)r, (long long)V);
                memcpy(y + k * D, a + r * D, (size_t)D * sizeof *y);
            }
            break;
        }
        case KH_GOP_GATHER_GRAD: {
            int64_t D = nd->dims[1], ni = na;
            for (int64_t k = 0; k < ni; k++) {
                int64_t r = (int64_t)a[k];
                for (int64_t j = 0; j < D; j++) y[r * D + j] += b[k * D + j];
            }
            break;
        }
        case KH_GOP_DROPOUT: case KH_GOP_DROPOUT_GRAD: {
            uint64_t key = kh_crng_key(env->seed, env->counter, (uint64_t)t->salt);
            double scale = 1.0 / (1.0 - (double)t->rate);
            for (int64_t k = 0; k < N; k++) y[k] = kh_dropout_keep(key, (uint64_t)k, t->rate) ? a[k] * scale : 0.0;
            break;
        }
        case KH_GOP_SOFTMAX_XENT: case KH_GOP_SIGMOID_XENT: {
            const double *p = v[in[2]];
            int64_t C = A->dims[1];
            for (int64_t r = 0; r < N; r++) {
                int32_t lab = (int32_t)b[r];
                y[r] = nd->op == KH_GOP_SOFTMAX_XENT ? kh_cce_loss_d(p[r * C + lab]) : kh_bce_loss_d(p[r], (double)lab);
            }
            break;
        }
        case KH_GOP_SOFTMAX_XENT_GRAD: case KH_GOP_SIGMOID_XENT_GRAD: {
            const double *p = a, *dl = v[in[2]];
            int64_t C = nd->dims[1], R = N / C;
            for (int64_t r = 0; r < R; r++) {
                int32_t lab = (int32_t)b[r];
                for (int64_t j = 0; j < C; j++)
                    y[r * C + j] = dl[r] * (nd->op == KH_GOP_SOFTMAX_XENT_GRAD
                                                ? kh_softmax_cce_grad_d(p[r * C + j], j == lab, p[r * C + lab], 1.0)
                                                : kh_sigmoid_bce_grad_d(p[r], (double)lab, 1.0));
            }
            break;
        }
        case KH_GOP_LOSS_SUM:
            for (int64_t k = 0; k < na; k++) y[0] += a[k];
            break;
        case KH_GOP_CORRECT_COUNT: {
            int64_t C = A->dims[A->rank - 1], R = na / C;
            int32_t *lab = malloc((size_t)R * sizeof *lab + 1);
            if (!lab) return kh_errf(err, errlen, KH_ERR_NOMEM, "node %d: out of memory", i);
            for (int64_t r = 0; r < R; r++) lab[r] = (int32_t)b[r];
            y[0] = (double)(C == 1 ? kh_ref_accuracy_binary(a, lab, R) : kh_ref_accuracy_categorical(a, lab, R, C));
            free(lab);
            break;
        }
        case KH_GOP_APPLY_GRADIENT_DESCENT: case KH_GOP_APPLY_RMSPROP: case KH_GOP_APPLY_ADAM:
        case KH_GOP_APPLY_ADADELTA: {
            double *w = env->var(env->ctx, t->layer, t->slot);
            double *s1 = env->slot ? env->slot(env->ctx, t->layer, t->slot, 0) : NULL;
            double *s2 = env->slot ? env->slot(env->ctx, t->layer, t->slot, 1) : NULL;
            const kh_optimizer_spec *o = &env->opt;
            if (!w || (nd->op != KH_GOP_APPLY_GRADIENT_DESCENT && !s1) ||
                ((nd->op == KH_GOP_APPLY_ADAM || nd->op == KH_GOP_APPLY_ADADELTA) && !s2))
                return kh_errf(err, errlen, KH_ERR_INVALID, "node %d: no variable or slots", i);
            if (nd->op == KH_GOP_APPLY_GRADIENT_DESCENT) kh_ref_sgd_update(w, b, N, env->lr);
            else if (nd->op == KH_GOP_APPLY_RMSPROP) kh_ref_rmsprop_update(w, s1, b, N, env->lr, o->rho, o->epsilon);
            else if (nd->op == KH_GOP_APPLY_ADAM) kh_ref_adam_update(w, s1, s2, b, N, env->lr, o->beta_1, o->beta_2, o->epsilon);
            else kh_ref_adadelta_update(w, s1, s2, b, N, env->lr, o->rho, o->epsilon);
            memcpy(y, w, (size_t)N * sizeof *y);
            break;
        }
        case KH_GOP_ELEMWISE: {
            const kh_gexpr *e = &g->exprs[t->expr];
            const double *ins[KH_GEXPR_MAX_IN];
            double dkeys[KH_GEXPR_MAX_OPS], tmp[KH_GEXPR_MAX_OPS];
            for (int j = 0; j < nd->n_in; j++) ins[j] = v[in[j]];
            for (int k = 0; k < e->n_ops; k++) {
                uint64_t key = kh_crng_key(env->seed, env->counter, (uint64_t)e->ops[k].salt);
                memcpy(&dkeys[k], &key, sizeof key);
            }
            int64_t C = nd->dims[nd->rank - 1];
            for (int64_t k = 0; k < N; k++) y[k] = eval_expr(e, ins, k, C, dkeys, tmp);
            break;
        }
        case KH_GOP_LSTM_SCAN: case KH_GOP_LSTM_SCAN_GRAD: {
            int64_t T = A->dims[1], U = nd->op == KH_GOP_LSTM_SCAN ? nd->dims[3] : A->dims[3];
            int64_t R = na / (T * (nd->op == KH_GOP_LSTM_SCAN ? 4 : 6) * U); /* n or the fixed first axis */
            kh_status st = nd->op == KH_GOP_LSTM_SCAN ? lstm_scan(y, a, b, R, T, U)
                                                      : lstm_scan_grad(y, a, b, v[in[2]], R, T, U);
            if (st != KH_OK) return kh_errf(err, errlen, st, "node %d: out of memory", i);
            break;
        }
        case KH_GOP_LSTM_SCAN_GRAD_U:
            lstm_scan_grad_u(y, a, b, na / (A->dims[1] * 6 * A->dims[3]), A->dims[1], A->dims[3]);
            break;
        default:
            return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "node %d: %s has no reference", i, kh_gop_name(nd->op));
        }
    }
    return KH_OK;
}
