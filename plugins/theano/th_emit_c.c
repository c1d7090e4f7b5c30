/* th_emit_c.c — one optimised graph function as a C source: the support code, then `th_main`, a straight-line
 * schedule in node order over the arena the memory plan laid out. Every size is a constant except n, the
 * batch rows of the call; matrix products call BLAS through the context, convolutions are im2col + GEMM over
 * blocks of samples, element-wise work is one generated loop per Elemwise node (or per remaining element-wise
 * op when the fusion pass did not run). The probe function's forward is part 0, its backward part 1. */
#include <stdio.h>
#include <string.h>

#include "khost/kit/geometry.h"
#include "khost/kit/status.h"
#include "th.h"

/* element-wise loops shorter than this run on one thread (a parallel region costs a few microseconds) */
#define TH_PAR_MIN_ELEMENTS 32768

typedef struct ectx {
    const th_emit_env *env;
    const kh_graph *g;
    th_sb *b;
    kh_status st;
    char *err;
    size_t errlen;
} ectx;

static const kh_gnode *N(const ectx *c, int32_t i) { return &c->g->nodes[i]; }

static int64_t per_row(const kh_gnode *x) {
    int64_t e = 1;
    for (int d = 1; d < x->rank; d++) e *= x->dims[d];
    return e;
}

/* Elements of a value as C text: "(n * 784)" or "10". */
static void numel(ectx *c, int32_t i, char *buf, size_t len) {
    const kh_gnode *x = N(c, i);
    if (x->flags & KH_GVAL_BATCHED) snprintf(buf, len, "(n * %lld)", (long long)per_row(x));
    else snprintf(buf, len, "%lld", (long long)(per_row(x) * x->dims[0]));
}

/* Rows of a value viewed as a matrix with its last axis as columns. */
static void rows(ectx *c, int32_t i, char *buf, size_t len) {
    const kh_gnode *x = N(c, i);
    int64_t r = 1;
    for (int d = 1; d < x->rank - 1; d++) r *= x->dims[d];
    if (x->rank == 1) snprintf(buf, len, "1");
    else if (x->flags & KH_GVAL_BATCHED) snprintf(buf, len, "(n * %lld)", (long long)r);
    else snprintf(buf, len, "%lld", (long long)(r * x->dims[0]));
}

/* (outer, len, inner) around an axis, outer as C text */
static void around(ectx *c, int32_t i, int axis, char *outer, size_t olen, int64_t *len, int64_t *inner) {
    const kh_gnode *x = N(c, i);
    int64_t o = 1;
    for (int d = 1; d < axis; d++) o *= x->dims[d];
    if (axis == 0) snprintf(outer, olen, "1");
    else if (x->flags & KH_GVAL_BATCHED) snprintf(outer, olen, "(n * %lld)", (long long)o);
    else snprintf(outer, olen, "%lld", (long long)(o * x->dims[0]));
    *len = x->dims[axis];
    *inner = 1;
    for (int d = axis + 1; d < x->rank; d++) *inner *= x->dims[d];
}

static void declare_values(ectx *c) {
    const kh_graph *g = c->g;
    const kh_gplan *p = c->env->plan;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const kh_gnode *nd = &g->nodes[i];
        const kh_gplan_entry *e = &p->e[i];
        const char *ty = nd->dtype == KH_I32 ? "int32_t" : "float";
        th_sb_printf(c->b, "    %s *const v%d = ", ty, i);
        if (nd->op == KH_GOP_RESHAPE) th_sb_printf(c->b, "(%s *)v%d;\n", ty, kh_graph_inputs(g, i)[0]);
        else if (e->inplace_of >= 0) th_sb_printf(c->b, "(%s *)v%d;\n", ty, e->inplace_of);
        else if (e->store == KH_GSTORE_ARENA) th_sb_printf(c->b, "(%s *)(c->arena + %lld);\n", ty, (long long)e->offset);
        else if (e->store == KH_GSTORE_PERSISTENT) th_sb_printf(c->b, "(%s *)c->persistent[%lld];\n", ty, (long long)e->offset);
        else if (e->store == KH_GSTORE_VARIABLE)
            th_sb_printf(c->b, "c->w[%d];\n", kh_model_graphs_var(c->env->mg, nd->attr.layer, nd->attr.slot));
        else if (e->store == KH_GSTORE_FEED)
            th_sb_printf(c->b, "%s;\n", nd->attr.input_id == KH_GIN_X ? (nd->dtype == KH_I32 ? "(int32_t *)c->feed_x" : "(float *)c->feed_x")
                                         : nd->attr.input_id == KH_GIN_LABELS ? "(int32_t *)c->labels"
                                                                              : "(float *)c->feed_dy");
        else th_sb_printf(c->b, "NULL;\n");
        th_sb_printf(c->b, "    (void)v%d;\n", i);
    }
}

/* An element-wise loop over node i computing program e over its inputs. */
static void emit_loop(ectx *c, int32_t i, const kh_gexpr *e, const int32_t *in) {
    const kh_gnode *nd = N(c, i);
    char r[64];
    rows(c, i, r, sizeof r);
    int64_t C = nd->dims[nd->rank - 1];
    if (nd->rank == 1) C = nd->dims[0];
    th_sb_printf(c->b, "    {\n");
    for (int j = 0; j < e->n_in; j++) th_sb_printf(c->b, "        const float *i%d = v%d;\n", j, in[j]);
    for (int k = 0; k < e->n_ops; k++)
        if (e->ops[k].op == KH_GOP_DROPOUT || e->ops[k].op == KH_GOP_DROPOUT_GRAD)
            th_sb_printf(c->b, "        const uint64_t key%d = kh_crng_key(c->seed, c->counter, %dull);\n", k,
                         e->ops[k].salt);
    th_sb_printf(c->b, "        float *o = v%d;\n        const int64_t R = %s;\n", i, r);
    th_sb_printf(c->b, "TH_PARALLEL_FOR(num_threads(c->threads) schedule(static) if (R * %lld >= %d))\n",
                 (long long)C, TH_PAR_MIN_ELEMENTS);
    th_sb_printf(c->b, "        for (int64_t r = 0; r < R; r++)\n        for (int64_t j = 0; j < %lld; j++) {\n"
                       "            const int64_t k = r * %lld + j;\n", (long long)C, (long long)C);
    th_expr_text(c->b, e, "k", "j", "key", "float");
    th_sb_printf(c->b, "            o[k] = t%d;\n        }\n    }\n", e->n_ops - 1);
}

static void scratch(ectx *c, int64_t floats) {
    if (floats > *c->env->scratch_floats) *c->env->scratch_floats = floats;
}

static void conv_geometry(ectx *c, int32_t x, int32_t w_or_y, int pool, const kh_gattr *t, int64_t F, th_sb *b,
                          int32_t id) {
    const kh_gnode *X = N(c, x);
    kh_conv2d_dims d;
    int64_t KH = pool ? t->window[0] : N(c, w_or_y)->dims[0], KW = pool ? t->window[1] : N(c, w_or_y)->dims[1];
    int64_t SH = t->strides[0] > 0 ? t->strides[0] : 1, SW = t->strides[1] > 0 ? t->strides[1] : 1;
    if (kh_conv2d_geometry(&d, 1, X->dims[1], X->dims[2], X->dims[3], KH, KW, F, SH, SW, t->padding) != KH_OK) {
        c->st = kh_errf(c->err, c->errlen, KH_ERR_INVALID, "node %d: convolution geometry", id);
        return;
    }
    if (!pool) scratch(c, d.OH * d.OW * KH * KW * X->dims[3] + KH * KW * X->dims[3] * F); /* patches + partial dW */
    th_sb_printf(b, "    static const th_conv g%d = {%lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld};\n",
                 id, (long long)d.H, (long long)d.W, (long long)d.C, (long long)KH, (long long)KW, (long long)F,
                 (long long)d.OH, (long long)d.OW, (long long)SH, (long long)SW, (long long)d.pad_top,
                 (long long)d.pad_left);
}

static void emit_apply(ectx *c, int32_t i, const int32_t *in) {
    const kh_gnode *nd = N(c, i);
    const kh_optimizer_spec *o = &c->env->mg->opt;
    int32_t v = kh_model_graphs_var(c->env->mg, nd->attr.layer, nd->attr.slot);
    int clear = N(c, in[1])->op == KH_GOP_GATHER_GRAD; /* the accumulator starts from zero next step */
    char call[256];
    th_update_text(nd->op, o, call, sizeof call);
    th_sb_printf(c->b, "    { /* %s of variable %d */\n        float *w = c->w[%d], *s1 = c->s1[%d], *s2 = c->s2[%d], *g = v%d;\n"
                       "        const float lr = c->lr;\n        (void)s1, (void)s2;\n"
                       "TH_PARALLEL_FOR(num_threads(c->threads) schedule(static) if (%lld >= %d))\n"
                       "        for (int64_t k = 0; k < %lld; k++) {\n            const float gk = g[k];\n"
                       "            %s;%s\n        }\n    }\n",
                 kh_gop_name(nd->op), v, v, v, v, in[1], (long long)c->env->mg->vars[v].numel, TH_PAR_MIN_ELEMENTS,
                 (long long)c->env->mg->vars[v].numel, call,
                 clear ? "\n            g[k] = 0.0f;" : "");
}

static void emit_node(ectx *c, int32_t i) {
    const kh_gnode *nd = N(c, i);
    const int32_t *in = kh_graph_inputs(c->g, i);
    const kh_gattr *t = &nd->attr;
    th_sb *b = c->b;
    char ne[64], r[64], outer[64];
    numel(c, i, ne, sizeof ne);
    rows(c, i, r, sizeof r);
    int64_t len, inner;
    switch (nd->op) {
    case KH_GOP_INPUT: case KH_GOP_VARIABLE: case KH_GOP_RESHAPE: return;
    case KH_GOP_ZEROS: th_sb_printf(b, "    memset(v%d, 0, (size_t)%s * 4);\n", i, ne); return;
    case KH_GOP_FILL_BATCH:
        th_sb_printf(b, "    for (int64_t k = 0; k < n; k++) v%d[k] = 1.0f / (float)n;\n", i);
        return;
    case KH_GOP_ELEMWISE: emit_loop(c, i, &c->g->exprs[t->expr], in); return;
    case KH_GOP_MATMUL: {
        char ra[64], rb[64];
        rows(c, in[0], ra, sizeof ra);
        rows(c, in[1], rb, sizeof rb);
        const kh_gnode *A = N(c, in[0]), *B = N(c, in[1]);
        long long ca = (long long)A->dims[A->rank - 1], cb = (long long)B->dims[B->rank - 1];
        /* M, N, K as text: op(A) is (M, K), op(B) is (K, N) */
        char M[64], Nn[64], K[64];
        if (t->transpose_a) snprintf(M, sizeof M, "%lld", ca), snprintf(K, sizeof K, "%s", ra);
        else snprintf(M, sizeof M, "%s", ra), snprintf(K, sizeof K, "%lld", ca);
        if (t->transpose_b) snprintf(Nn, sizeof Nn, "%s", rb);
        else snprintf(Nn, sizeof Nn, "%lld", cb);
        th_sb_printf(b, "    th_gemm(c, %d, %d, %s, %s, %s, v%d, v%d, v%d, 0.0f);\n", t->transpose_a ? 1 : 0,
                     t->transpose_b ? 1 : 0, M, Nn, K, in[0], in[1], i);
        return;
    }
    case KH_GOP_BIAS_ADD_GRAD: {
        char ra[64];
        rows(c, in[0], ra, sizeof ra);
        scratch(c, nd->dims[0]);
        th_sb_printf(b, "    th_bias_grad(c, v%d, v%d, %s, %lld);\n", in[0], i, ra, (long long)nd->dims[0]);
        return;
    }
    case KH_GOP_SOFTMAX:
        th_sb_printf(b, "    th_softmax(v%d, v%d, %s, %lld);\n", in[0], i, r, (long long)nd->dims[nd->rank - 1]);
        return;
    case KH_GOP_SOFTMAX_GRAD:
        th_sb_printf(b, "    th_softmax_grad(v%d, v%d, v%d, %s, %lld);\n", in[0], in[1], i, r,
                     (long long)nd->dims[nd->rank - 1]);
        return;
    case KH_GOP_CONV2D:
        conv_geometry(c, in[0], in[1], 0, t, nd->dims[3], b, i);
        th_sb_printf(b, "    th_conv2d(c, &g%d, v%d, v%d, v%d, n);\n", i, in[0], in[1], i);
        return;
    case KH_GOP_CONV2D_BACKPROP_INPUT: /* (w, dy) -> dx of shape_of's shape */
        conv_geometry(c, t->shape_of, in[0], 0, t, N(c, in[0])->dims[3], b, i);
        th_sb_printf(b, "    th_conv2d_bwd_input(c, &g%d, v%d, v%d, v%d, n);\n", i, in[0], in[1], i);
        return;
    case KH_GOP_CONV2D_BACKPROP_FILTER: /* (x, dy) -> dw of shape_of (the filter) */
        conv_geometry(c, in[0], t->shape_of, 0, t, nd->dims[3], b, i);
        th_sb_printf(b, "    th_conv2d_bwd_filter(c, &g%d, v%d, v%d, v%d, n);\n", i, in[0], in[1], i);
        return;
    case KH_GOP_MAXPOOL:
        conv_geometry(c, in[0], -1, 1, t, N(c, in[0])->dims[3], b, i);
        th_sb_printf(b, "    th_maxpool(c, &g%d, v%d, v%d, n, 0, NULL, NULL);\n", i, in[0], i);
        return;
    case KH_GOP_MAXPOOL_GRAD: /* (x, dy) */
        conv_geometry(c, in[0], -1, 1, t, N(c, in[0])->dims[3], b, i);
        th_sb_printf(b, "    th_maxpool(c, &g%d, v%d, NULL, n, 1, v%d, v%d);\n", i, in[0], in[1], i);
        return;
    case KH_GOP_SLICE:
        around(c, in[0], t->axis, outer, sizeof outer, &len, &inner);
        th_sb_printf(b, "    th_slice(v%d, v%d, %s, %lld, %d, %d, %lld);\n", in[0], i, outer, (long long)len, t->begin,
                     t->size, (long long)inner);
        return;
    case KH_GOP_CONCAT: {
        around(c, i, t->axis, outer, sizeof outer, &len, &inner);
        int64_t pos = 0;
        for (int j = 0; j < nd->n_in; j++) {
            int64_t lj = N(c, in[j])->dims[t->axis];
            th_sb_printf(b, "    th_concat_part(v%d, v%d, %s, %lld, %lld, %lld, %lld);\n", in[j], i, outer,
                         (long long)len, (long long)pos, (long long)lj, (long long)inner);
            pos += lj;
        }
        return;
    }
    case KH_GOP_REVERSE:
        around(c, in[0], t->axis, outer, sizeof outer, &len, &inner);
        th_sb_printf(b, "    th_reverse(v%d, v%d, %s, %lld, %lld);\n", in[0], i, outer, (long long)len, (long long)inner);
        return;
    case KH_GOP_MEAN:
        around(c, in[0], t->axis, outer, sizeof outer, &len, &inner);
        th_sb_printf(b, "    th_mean(v%d, v%d, %s, %lld, %lld);\n", in[0], i, outer, (long long)len, (long long)inner);
        return;
    case KH_GOP_MEAN_GRAD:
        around(c, i, t->axis, outer, sizeof outer, &len, &inner);
        th_sb_printf(b, "    th_mean_grad(v%d, v%d, %s, %lld, %lld);\n", in[0], i, outer, (long long)len, (long long)inner);
        return;
    case KH_GOP_GATHER: {
        char ni[64];
        numel(c, in[1], ni, sizeof ni);
        const kh_gnode *T = N(c, in[0]);
        th_sb_printf(b, "    if (th_gather(c, v%d, v%d, v%d, %s, %lld, %lld)) return 1;\n", in[0], in[1], i, ni,
                     (long long)T->dims[0], (long long)T->dims[1]);
        return;
    }
    case KH_GOP_GATHER_GRAD: {
        char ni[64];
        numel(c, in[0], ni, sizeof ni);
        th_sb_printf(b, "    th_gather_grad(v%d, v%d, v%d, %s, %lld);\n", in[0], in[1], i, ni, (long long)nd->dims[1]);
        return;
    }
    case KH_GOP_SOFTMAX_XENT:
        th_sb_printf(b, "    th_softmax_xent(v%d, v%d, v%d, n, %lld);\n", in[2], in[1], i, (long long)N(c, in[0])->dims[1]);
        return;
    case KH_GOP_SIGMOID_XENT:
        th_sb_printf(b, "    th_sigmoid_xent(v%d, v%d, v%d, n);\n", in[2], in[1], i);
        return;
    case KH_GOP_SOFTMAX_XENT_GRAD:
        th_sb_printf(b, "    th_softmax_xent_grad(v%d, v%d, v%d, v%d, n, %lld);\n", in[0], in[1], in[2], i,
                     (long long)nd->dims[1]);
        return;
    case KH_GOP_SIGMOID_XENT_GRAD:
        th_sb_printf(b, "    th_sigmoid_xent_grad(v%d, v%d, v%d, v%d, n);\n", in[0], in[1], in[2], i);
        return;
    case KH_GOP_LOSS_SUM: {
        char na[64];
        numel(c, in[0], na, sizeof na);
        th_sb_printf(b, "    v%d[0] = c->loss_sum = th_sum(v%d, %s);\n", i, in[0], na);
        return;
    }
    case KH_GOP_CORRECT_COUNT: {
        const kh_gnode *P = N(c, in[0]);
        th_sb_printf(b, "    v%d[0] = c->correct = th_correct(v%d, v%d, n, %lld);\n", i, in[0], in[1],
                     (long long)P->dims[P->rank - 1]);
        return;
    }
    case KH_GOP_APPLY_GRADIENT_DESCENT: case KH_GOP_APPLY_RMSPROP: case KH_GOP_APPLY_ADAM: case KH_GOP_APPLY_ADADELTA:
        emit_apply(c, i, in);
        return;
    case KH_GOP_LSTM_SCAN: { /* (xw (N,T,4U), U) -> S (N,T,6,U) */
        int64_t T = nd->dims[1], U = nd->dims[3];
        scratch(c, c->g->max_batch * 4 * U);
        th_sb_printf(b, "    th_lstm_scan(c, v%d, v%d, v%d, c->scratch, n, %lld, %lld);\n", in[0], in[1], i, (long long)T,
                     (long long)U);
        return;
    }
    case KH_GOP_LSTM_SCAN_GRAD: { /* (S, U, dS) -> dXW */
        const kh_gnode *S = N(c, in[0]);
        scratch(c, (c->g->max_batch * 2 + 1) * S->dims[3]);
        th_sb_printf(b, "    th_lstm_scan_grad(c, v%d, v%d, v%d, v%d, c->scratch, n, %lld, %lld);\n", in[0], in[1],
                     in[2], i, (long long)S->dims[1], (long long)S->dims[3]);
        return;
    }
    case KH_GOP_LSTM_SCAN_GRAD_U: { /* (S, dXW) -> dU */
        const kh_gnode *S = N(c, in[0]);
        th_sb_printf(b, "    th_lstm_scan_grad_u(c, v%d, v%d, v%d, n, %lld, %lld);\n", in[0], in[1], i,
                     (long long)S->dims[1], (long long)S->dims[3]);
        return;
    }
    default: {
        kh_gexpr e;
        if (kh_gop_elementwise(nd->op) && th_expr_single(nd, &e)) {
            emit_loop(c, i, &e, in);
            return;
        }
        c->st = kh_errf(c->err, c->errlen, KH_ERR_UNSUPPORTED, "node %d: no C code for %s", i, kh_gop_name(nd->op));
        return;
    }
    }
}

kh_status th_emit_c(const th_emit_env *env, th_sb *out, char *err, size_t errlen) {
    kh_status st = th_prelude(out, err, errlen);
    if (st != KH_OK) return st;
    ectx c = {.env = env, .g = env->g, .b = out, .st = KH_OK, .err = err, .errlen = errlen};
    static const char *const names[KH_GFN_COUNT] = {"train", "eval", "predict", "probe"};
    th_sb_printf(out, "\n/* ==== generated: %s function, %d nodes, arena %lld bytes ==== */\n"
                      "__attribute__((visibility(\"default\"))) int th_main(th_rt_ctx *c, int64_t n, int part) {\n",
                 names[env->fn], env->g->n_nodes, (long long)env->plan->arena_bytes);
    declare_values(&c);
    int probe = env->fn == KH_GFN_PROBE;
    int open_part = -1;
    for (int32_t i = 0; i < env->g->n_nodes && c.st == KH_OK; i++) {
        int part = probe && env->g->nodes[i].phase != 0 ? 1 : 0;
        if (part != open_part) {
            if (open_part >= 0) th_sb_printf(out, "    }\n");
            th_sb_printf(out, "    if (part == %d) {\n", part);
            open_part = part;
        }
        th_sb_printf(out, "    /* %%%d %s */\n", i, kh_gop_name(env->g->nodes[i].op));
        emit_node(&c, i);
    }
    if (open_part >= 0) th_sb_printf(out, "    }\n");
    th_sb_printf(out, "    return 0;\n}\n");
    if (c.st == KH_OK && out->oom) c.st = kh_errf(err, errlen, KH_ERR_NOMEM, "out of memory generating code");
    return c.st;
}
