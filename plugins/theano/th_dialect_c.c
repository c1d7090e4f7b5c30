/* th_dialect_c.c — the C dialect of theano's code generator (th_emit.h): `th_main`, a straight-line schedule
 * over the arena the memory plan laid out, compiled by the system C compiler. Every size is a constant except
 * n, the batch rows of the call. A kernel is a block of th_main whose arguments are locals; its element loop an
 * OpenMP-parallel for over rows and columns (TH_PARALLEL_FOR, serial below TH_PAR_MIN_ELEMENTS); a GEMM is
 * th_gemm (BLAS through the context); convolutions are im2col + GEMM over blocks of samples and the other ops
 * calls of the runtime helpers in rt/th_rt.h. *env->scratch_floats grows to the scratch the helpers need. */
#include <stdio.h>

#include "th_emit.h"

/* element-wise loops shorter than this run on one thread (a parallel region costs a few microseconds) */
#define TH_PAR_MIN_ELEMENTS 32768

static void scratch(th_emitter *em, int64_t floats) {
    if (floats > *em->env->scratch_floats) *em->env->scratch_floats = floats;
}

/* a size as text in the dialect, into a local buffer */
#define SZ(x, buf) th_em_size(em, (x), buf, sizeof buf)

// --- the function ---------------------------------------------------------------------------------------------
static void declare_values(th_emitter *em) {
    const kh_graph *g = em->g;
    const kh_gplan *p = em->env->plan;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const kh_gnode *nd = &g->nodes[i];
        const kh_gplan_entry *e = &p->e[i];
        const char *ty = nd->dtype == KH_I32 ? "int32_t" : "float";
        th_em_put(em, "    %s *const v%d = ", ty, i);
        if (nd->op == KH_GOP_RESHAPE) th_em_put(em, "(%s *)v%d;\n", ty, kh_graph_inputs(g, i)[0]);
        else if (e->inplace_of >= 0) th_em_put(em, "(%s *)v%d;\n", ty, e->inplace_of);
        else if (e->store == KH_GSTORE_ARENA) th_em_put(em, "(%s *)(c->arena + %lld);\n", ty, (long long)e->offset);
        else if (e->store == KH_GSTORE_PERSISTENT) th_em_put(em, "(%s *)c->persistent[%lld];\n", ty, (long long)e->offset);
        else if (e->store == KH_GSTORE_VARIABLE)
            th_em_put(em, "c->w[%d];\n", kh_model_graphs_var(em->env->mg, nd->attr.layer, nd->attr.slot));
        else if (e->store == KH_GSTORE_FEED)
            th_em_put(em, "%s;\n", nd->attr.input_id == KH_GIN_X ? (nd->dtype == KH_I32 ? "(int32_t *)c->feed_x" : "(float *)c->feed_x")
                                   : nd->attr.input_id == KH_GIN_LABELS ? "(int32_t *)c->labels"
                                                                        : "(float *)c->feed_dy");
        else th_em_put(em, "NULL;\n");
        th_em_put(em, "    (void)v%d;\n", i);
    }
}

/* The profiling variant (env->profile): th_main_prof, whose clock runs from one node with work to the next;
 * prof_lap closes the running node's interval into th_node_s[node]. Nothing of it is in th_main. */
static void prof_lap(th_emitter *em) {
    if (em->prof_node >= 0) th_em_put(em, "    th_t = th_prof_lap(th_node_s + %d, th_t, th_now);\n", em->prof_node);
    em->prof_node = -1;
}

static void fn_open(th_emitter *em) {
    if (!em->env->profile) {
        th_em_put(em, "__attribute__((visibility(\"default\"))) int th_main(th_rt_ctx *c, int64_t n, int part) {\n");
        declare_values(em);
        return;
    }
    th_em_put(em, "static inline double th_prof_lap(double *acc, double t0, double (*now)(void)) {\n"
                  "    const double t = now();\n    *acc += t - t0;\n    return t;\n}\n\n"
                  "__attribute__((visibility(\"default\"))) int th_main_prof(th_rt_ctx *c, int64_t n, int part, "
                  "double *th_node_s, double (*th_now)(void)) {\n");
    declare_values(em);
    th_em_put(em, "    double th_t = 0.0;\n");
}

/* the probe's parts are blocks `if (part == p)`; each node opens with its number and op (the profiling variant:
 * after the lap that ends the previous node with work, or after the clock's start in a new block) */
static void node_open(th_emitter *em) {
    int prof = em->env->profile;
    if (em->part != em->open_part) {
        if (em->open_part >= 0) {
            if (prof) prof_lap(em);
            th_em_put(em, "    }\n");
        }
        th_em_put(em, "    if (part == %d) {\n", em->part);
        if (prof) th_em_put(em, "    th_t = th_now();\n");
        em->open_part = em->part;
    }
    if (prof && !th_em_storage_op(th_em_node(em, em->node)->op)) {
        prof_lap(em);
        em->prof_node = em->node;
    }
    th_em_put(em, "    /* %%%d %s */\n", em->node, kh_gop_name(th_em_node(em, em->node)->op));
}

static void fn_close(th_emitter *em) {
    if (em->env->profile) prof_lap(em);
    if (em->open_part >= 0) th_em_put(em, "    }\n");
    th_em_put(em, "    return 0;\n}\n");
}

// --- kernels: blocks of th_main ---------------------------------------------------------------------------------
static void kernel_open(th_emitter *em, const char *suffix, th_cu_affine threads) {
    (void)suffix, (void)threads;
    th_em_put(em, "    {\n");
}

static void arg_ptr(th_emitter *em, int32_t node, th_cu_ref var, const char *decl) {
    static const char *const slot[TH_CU_BASE_END] = {[TH_CU_VAR] = "w", [TH_CU_SLOT1] = "s1", [TH_CU_SLOT2] = "s2"};
    if (node >= 0) th_em_put(em, "        %s = v%d;\n", decl, node);
    else th_em_put(em, "        %s = c->%s[%d];\n", decl, slot[var.base], var.index);
}

static void arg_scalar(th_emitter *em, uint32_t kind) {
    if (kind == TH_CUARG_LR) th_em_put(em, "        const float lr = c->lr;\n"); /* the others are read in place */
}

static void kernel_close(th_emitter *em) { th_em_put(em, "    }\n"); }

static void loop_open(th_emitter *em, th_cu_affine count) {
    char t[64];
    SZ(count, t);
    th_em_put(em, "TH_PARALLEL_FOR(num_threads(c->threads) schedule(static) if (%s >= %d))\n"
                  "        for (int64_t k = 0; k < %s; k++) {\n", t, TH_PAR_MIN_ELEMENTS, t);
}

/* rows and columns: no division per element */
static void loop_rows_open(th_emitter *em, th_cu_affine count, th_cu_affine rows, int64_t cols, int need_col) {
    (void)count, (void)need_col;
    char r[64];
    th_em_put(em, "        const int64_t R = %s;\n", SZ(rows, r));
    th_em_put(em, "TH_PARALLEL_FOR(num_threads(c->threads) schedule(static) if (R * %lld >= %d))\n",
              (long long)cols, TH_PAR_MIN_ELEMENTS);
    th_em_put(em, "        for (int64_t r = 0; r < R; r++)\n        for (int64_t j = 0; j < %lld; j++) {\n"
                  "            const int64_t k = r * %lld + j;\n", (long long)cols, (long long)cols);
}

static void loop_close(th_emitter *em) { th_em_put(em, "        }\n"); }

// --- library calls --------------------------------------------------------------------------------------------
static void gemm(th_emitter *em, const th_em_gemm *g) {
    char M[64], Nn[64], K[64];
    th_em_put(em, "    th_gemm(c, %d, %d, %s, %s, %s, v%d, v%d, v%d, 0.0f);\n", g->ta, g->tb, SZ(g->M, M), SZ(g->N, Nn),
              SZ(g->K, K), g->a, g->b, em->node);
}

static void zeros(th_emitter *em, th_cu_affine elements) {
    char t[64];
    th_em_put(em, "    memset(v%d, 0, (size_t)%s * 4);\n", em->node, SZ(elements, t));
}

// --- the ops lowered to runtime helpers (rt/th_rt.h) ------------------------------------------------------------
/* A call's arguments: the node's value and its inputs', literals, sizes of the node or of in[0] / in[1]
 * (rows as a matrix, elements, dimensions, (outer, len, inner) around the axis), the window constant. */
enum {
    A_END = 0, A_CTX, A_N, A_NULL, A_ZERO, A_ONE, A_SCRATCH, A_GEOM, A_OUT, A_IN0, A_IN1, A_IN2,
    A_ROWS, A_ROWS0, A_NUMEL0, A_NUMEL1, A_LAST, A_LAST0, A_DIM0, A_DIM1, A_DIM3, A_IN0_DIM0, A_IN0_DIM1,
    A_IN0_DIM3, A_OUTER, A_LEN, A_INNER, A_OUTER0, A_LEN0, A_INNER0, A_BEGIN, A_SIZE
};
/* what a call is assigned to: nothing, `if (...) return 1;` (a helper that fails on bad input), or the node's
 * value and a metric of the context */
enum { L_NONE = 0, L_CHECKED, L_LOSS, L_CORRECT };
/* the scratch floats a helper needs: a bias gradient's partial sums, a convolution's im2col patches and partial
 * filter gradient, an LSTM scan's gates, its gradient's state */
enum { S_NONE = 0, S_BIAS, S_CONV, S_SCAN, S_SCAN_GRAD };

typedef struct c_call {
    const char *fn;
    uint8_t args[9];
    uint8_t lhs, scratch;
} c_call;

static const c_call calls[KH_GOP_END] = {
    [KH_GOP_BIAS_ADD_GRAD] = {"th_bias_grad", {A_CTX, A_IN0, A_OUT, A_ROWS0, A_DIM0}, L_NONE, S_BIAS},
    [KH_GOP_SOFTMAX] = {"th_softmax", {A_IN0, A_OUT, A_ROWS, A_LAST}},
    [KH_GOP_SOFTMAX_GRAD] = {"th_softmax_grad", {A_IN0, A_IN1, A_OUT, A_ROWS, A_LAST}},
    /* Conv2D (x, w) -> y; its input gradient (w, dy) -> dx; its filter gradient (x, dy) -> dw */
    [KH_GOP_CONV2D] = {"th_conv2d", {A_CTX, A_GEOM, A_IN0, A_IN1, A_OUT, A_N}, L_NONE, S_CONV},
    [KH_GOP_CONV2D_BACKPROP_INPUT] = {"th_conv2d_bwd_input", {A_CTX, A_GEOM, A_IN0, A_IN1, A_OUT, A_N}, L_NONE, S_CONV},
    [KH_GOP_CONV2D_BACKPROP_FILTER] = {"th_conv2d_bwd_filter", {A_CTX, A_GEOM, A_IN0, A_IN1, A_OUT, A_N}, L_NONE, S_CONV},
    [KH_GOP_MAXPOOL] = {"th_maxpool", {A_CTX, A_GEOM, A_IN0, A_OUT, A_N, A_ZERO, A_NULL, A_NULL}},
    [KH_GOP_MAXPOOL_GRAD] = {"th_maxpool", {A_CTX, A_GEOM, A_IN0, A_NULL, A_N, A_ONE, A_IN1, A_OUT}}, /* (x, dy) */
    [KH_GOP_SLICE] = {"th_slice", {A_IN0, A_OUT, A_OUTER0, A_LEN0, A_BEGIN, A_SIZE, A_INNER0}},
    [KH_GOP_REVERSE] = {"th_reverse", {A_IN0, A_OUT, A_OUTER0, A_LEN0, A_INNER0}},
    [KH_GOP_MEAN] = {"th_mean", {A_IN0, A_OUT, A_OUTER0, A_LEN0, A_INNER0}},
    [KH_GOP_MEAN_GRAD] = {"th_mean_grad", {A_IN0, A_OUT, A_OUTER, A_LEN, A_INNER}},
    [KH_GOP_GATHER] = {"th_gather", {A_CTX, A_IN0, A_IN1, A_OUT, A_NUMEL1, A_IN0_DIM0, A_IN0_DIM1}, L_CHECKED},
    [KH_GOP_GATHER_GRAD] = {"th_gather_grad", {A_IN0, A_IN1, A_OUT, A_NUMEL0, A_DIM1}},
    /* the losses: (logits, labels, probs) -> loss; their gradients (probs, labels, dloss) -> dlogits */
    [KH_GOP_SOFTMAX_XENT] = {"th_softmax_xent", {A_IN2, A_IN1, A_OUT, A_N, A_IN0_DIM1}},
    [KH_GOP_SIGMOID_XENT] = {"th_sigmoid_xent", {A_IN2, A_IN1, A_OUT, A_N}},
    [KH_GOP_SOFTMAX_XENT_GRAD] = {"th_softmax_xent_grad", {A_IN0, A_IN1, A_IN2, A_OUT, A_N, A_DIM1}},
    [KH_GOP_SIGMOID_XENT_GRAD] = {"th_sigmoid_xent_grad", {A_IN0, A_IN1, A_IN2, A_OUT, A_N}},
    [KH_GOP_LOSS_SUM] = {"th_sum", {A_IN0, A_NUMEL0}, L_LOSS},
    [KH_GOP_CORRECT_COUNT] = {"th_correct", {A_IN0, A_IN1, A_N, A_LAST0}, L_CORRECT},
    /* the LSTM scans: (xw (N,T,4U), U) -> S (N,T,6,U); (S, U, dS) -> dXW; (S, dXW) -> dU */
    [KH_GOP_LSTM_SCAN] = {"th_lstm_scan", {A_CTX, A_IN0, A_IN1, A_OUT, A_SCRATCH, A_N, A_DIM1, A_DIM3}, L_NONE, S_SCAN},
    [KH_GOP_LSTM_SCAN_GRAD] = {"th_lstm_scan_grad", {A_CTX, A_IN0, A_IN1, A_IN2, A_OUT, A_SCRATCH, A_N, A_IN0_DIM1,
                                                     A_IN0_DIM3}, L_NONE, S_SCAN_GRAD},
    [KH_GOP_LSTM_SCAN_GRAD_U] = {"th_lstm_scan_grad_u", {A_CTX, A_IN0, A_IN1, A_OUT, A_N, A_IN0_DIM1, A_IN0_DIM3}},
};

/* one argument's text */
static const char *arg_text(th_emitter *em, int kind, char *buf, size_t len) {
    static const char *const fixed[] = {[A_CTX] = "c", [A_N] = "n", [A_NULL] = "NULL", [A_ZERO] = "0", [A_ONE] = "1",
                                        [A_SCRATCH] = "c->scratch"};
    const kh_gnode *nd = th_em_node(em, em->node);
    const int32_t *in = th_em_in(em);
    const kh_gnode *x = nd->n_in > 0 ? th_em_node(em, in[0]) : nd;
    int64_t alen, inner;
    switch (kind) {
    case A_CTX: case A_N: case A_NULL: case A_ZERO: case A_ONE: case A_SCRATCH: return fixed[kind];
    case A_GEOM: snprintf(buf, len, "&g%d", em->node); return buf;
    case A_OUT: snprintf(buf, len, "v%d", em->node); return buf;
    case A_IN0: case A_IN1: case A_IN2: snprintf(buf, len, "v%d", in[kind - A_IN0]); return buf;
    case A_ROWS: return th_em_size(em, th_em_rows(em, em->node), buf, len);
    case A_ROWS0: return th_em_size(em, th_em_rows(em, in[0]), buf, len);
    case A_NUMEL0: case A_NUMEL1: return th_em_size(em, th_em_numel(em, in[kind - A_NUMEL0]), buf, len);
    case A_OUTER: case A_OUTER0: {
        th_cu_affine o = th_em_around(em, kind == A_OUTER ? em->node : in[0], nd->attr.axis, &alen, &inner);
        return th_em_size(em, o, buf, len);
    }
    case A_BEGIN: snprintf(buf, len, "%d", nd->attr.begin); return buf;
    case A_SIZE: snprintf(buf, len, "%d", nd->attr.size); return buf;
    default: break;
    }
    int64_t v = 0;
    switch (kind) {
    case A_LAST: v = th_last_dim(nd); break;
    case A_LAST0: v = th_last_dim(x); break;
    case A_DIM0: v = nd->dims[0]; break;
    case A_DIM1: v = nd->dims[1]; break;
    case A_DIM3: v = nd->dims[3]; break;
    case A_IN0_DIM0: v = x->dims[0]; break;
    case A_IN0_DIM1: v = x->dims[1]; break;
    case A_IN0_DIM3: v = x->dims[3]; break;
    case A_LEN: case A_INNER: case A_LEN0: case A_INNER0:
        th_em_around(em, kind == A_LEN || kind == A_INNER ? em->node : in[0], nd->attr.axis, &alen, &inner);
        v = kind == A_LEN || kind == A_LEN0 ? alen : inner;
        break;
    default: break;
    }
    snprintf(buf, len, "%lld", (long long)v);
    return buf;
}

/* the geometry constant g<node> of a convolution or pooling node (and the convolution's scratch) */
static int window(th_emitter *em, int conv) {
    kh_conv2d_dims d;
    if (!th_em_window(em, &d)) return 0;
    if (conv) scratch(em, d.OH * d.OW * d.KH * d.KW * d.C + d.KH * d.KW * d.C * d.OC);
    th_em_put(em, "    static const th_conv g%d = {%lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld};\n",
              em->node, (long long)d.H, (long long)d.W, (long long)d.C, (long long)d.KH, (long long)d.KW,
              (long long)d.OC, (long long)d.OH, (long long)d.OW, (long long)d.SH, (long long)d.SW,
              (long long)d.pad_top, (long long)d.pad_left);
    return 1;
}

/* an op of the call table: its scratch, its window constant, the statement */
static int lower(th_emitter *em) {
    const kh_gnode *nd = th_em_node(em, em->node);
    const c_call *k = nd->op < KH_GOP_END ? &calls[nd->op] : NULL;
    if (!k || !k->fn) return 0;
    if (k->scratch == S_BIAS) scratch(em, nd->dims[0]);
    else if (k->scratch == S_SCAN) scratch(em, em->g->max_batch * 4 * nd->dims[3]);
    else if (k->scratch == S_SCAN_GRAD) scratch(em, (em->g->max_batch * 2 + 1) * th_em_node(em, th_em_in(em)[0])->dims[3]);
    for (int j = 0; j < (int)sizeof k->args && k->args[j]; j++)
        if (k->args[j] == A_GEOM && !window(em, k->scratch == S_CONV)) return 1;
    static const char *const lhs[] = {[L_NONE] = "", [L_CHECKED] = "if (", [L_LOSS] = "c->loss_sum = ",
                                      [L_CORRECT] = "c->correct = "};
    if (k->lhs == L_LOSS || k->lhs == L_CORRECT) th_em_put(em, "    v%d[0] = %s%s(", em->node, lhs[k->lhs], k->fn);
    else th_em_put(em, "    %s%s(", lhs[k->lhs], k->fn);
    char buf[64];
    for (int j = 0; j < (int)sizeof k->args && k->args[j]; j++)
        th_em_put(em, "%s%s", j ? ", " : "", arg_text(em, k->args[j], buf, sizeof buf));
    th_em_put(em, "%s;\n", k->lhs == L_CHECKED ? ")) return 1" : ")");
    return 1;
}

static void fill_batch(th_emitter *em) {
    th_em_put(em, "    for (int64_t k = 0; k < n; k++) v%d[k] = 1.0f / (float)n;\n", em->node);
}

static void concat(th_emitter *em) {
    const kh_gnode *nd = th_em_node(em, em->node);
    const int32_t *in = th_em_in(em);
    int64_t len, inner, pos = 0;
    char o[64];
    SZ(th_em_around(em, em->node, nd->attr.axis, &len, &inner), o);
    for (int j = 0; j < nd->n_in; j++) {
        int64_t lj = th_em_node(em, in[j])->dims[nd->attr.axis];
        th_em_put(em, "    th_concat_part(v%d, v%d, %s, %lld, %lld, %lld, %lld);\n", in[j], em->node, o, (long long)len,
                  (long long)pos, (long long)lj, (long long)inner);
        pos += lj;
    }
}

static kh_status prelude(th_sb *b, char *err, size_t errlen) { return th_prelude(b, err, errlen); }

const th_dialect th_dialect_c = {
    .name = "C",
    .prelude = prelude,
    .int_suffix = "",
    .indent = "        ",
    .body = "            ",
    .scalar = {[TH_CUARG_N] = "n", [TH_CUARG_LR] = "lr", [TH_CUARG_SEED] = "c->seed",
               [TH_CUARG_COUNTER] = "c->counter"},
    .fn_open = fn_open,
    .node_open = node_open,
    .fn_close = fn_close,
    .kernel_open = kernel_open,
    .arg_ptr = arg_ptr,
    .arg_scalar = arg_scalar,
    .kernel_close = kernel_close,
    .loop_open = loop_open,
    .loop_rows_open = loop_rows_open,
    .loop_close = loop_close,
    .gemm = gemm,
    .zeros = zeros,
    .ops = {[KH_GOP_FILL_BATCH] = fill_batch, [KH_GOP_CONCAT] = concat},
    .lower = lower,
};
