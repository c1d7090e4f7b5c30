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

static void fn_open(th_emitter *em) {
    th_em_put(em, "__attribute__((visibility(\"default\"))) int th_main(th_rt_ctx *c, int64_t n, int part) {\n");
    declare_values(em);
}

/* the probe's parts are blocks `if (part == p)`; each node opens with its number and op */
static void node_open(th_emitter *em) {
    if (em->part != em->open_part) {
        if (em->open_part >= 0) th_em_put(em, "    }\n");
        th_em_put(em, "    if (part == %d) {\n", em->part);
        em->open_part = em->part;
    }
    th_em_put(em, "    /* %%%d %s */\n", em->node, kh_gop_name(th_em_node(em, em->node)->op));
}

static void fn_close(th_emitter *em) {
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
#define NODE th_em_node(em, em->node)
#define IN th_em_in(em)

static void fill_batch(th_emitter *em) {
    th_em_put(em, "    for (int64_t k = 0; k < n; k++) v%d[k] = 1.0f / (float)n;\n", em->node);
}

static void bias_add_grad(th_emitter *em) {
    char r[64];
    scratch(em, NODE->dims[0]);
    th_em_put(em, "    th_bias_grad(c, v%d, v%d, %s, %lld);\n", IN[0], em->node, SZ(th_em_rows(em, IN[0]), r),
              (long long)NODE->dims[0]);
}

static void softmax(th_emitter *em) {
    char r[64];
    th_em_put(em, "    th_softmax(v%d, v%d, %s, %lld);\n", IN[0], em->node, SZ(th_em_rows(em, em->node), r),
              (long long)th_last_dim(NODE));
}

static void softmax_grad(th_emitter *em) {
    char r[64];
    th_em_put(em, "    th_softmax_grad(v%d, v%d, v%d, %s, %lld);\n", IN[0], IN[1], em->node,
              SZ(th_em_rows(em, em->node), r), (long long)th_last_dim(NODE));
}

/* the geometry constant g<node> of a convolution or pooling node; convolutions claim their im2col patches and a
 * partial filter gradient */
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

/* Conv2D (x, w) -> y; its input gradient (w, dy) -> dx; its filter gradient (x, dy) -> dw */
static void conv(th_emitter *em) {
    static const char *const fn[3] = {"th_conv2d", "th_conv2d_bwd_input", "th_conv2d_bwd_filter"};
    uint32_t op = NODE->op;
    int k = op == KH_GOP_CONV2D ? 0 : op == KH_GOP_CONV2D_BACKPROP_INPUT ? 1 : 2;
    if (window(em, 1))
        th_em_put(em, "    %s(c, &g%d, v%d, v%d, v%d, n);\n", fn[k], em->node, IN[0], IN[1], em->node);
}

static void maxpool(th_emitter *em) {
    if (window(em, 0)) th_em_put(em, "    th_maxpool(c, &g%d, v%d, v%d, n, 0, NULL, NULL);\n", em->node, IN[0], em->node);
}

static void maxpool_grad(th_emitter *em) { /* (x, dy) */
    if (window(em, 0))
        th_em_put(em, "    th_maxpool(c, &g%d, v%d, NULL, n, 1, v%d, v%d);\n", em->node, IN[0], IN[1], em->node);
}

/* Slice, Reverse, Mean: (outer, len, inner) around the axis of the input; MeanGrad: of the output */
static void along(th_emitter *em) {
    const kh_gattr *a = &NODE->attr;
    uint32_t op = NODE->op;
    int64_t len, inner;
    char o[64];
    SZ(th_em_around(em, op == KH_GOP_MEAN_GRAD ? em->node : IN[0], a->axis, &len, &inner), o);
    if (op == KH_GOP_SLICE)
        th_em_put(em, "    th_slice(v%d, v%d, %s, %lld, %d, %d, %lld);\n", IN[0], em->node, o, (long long)len, a->begin,
                  a->size, (long long)inner);
    else
        th_em_put(em, "    %s(v%d, v%d, %s, %lld, %lld);\n",
                  op == KH_GOP_REVERSE ? "th_reverse" : op == KH_GOP_MEAN ? "th_mean" : "th_mean_grad", IN[0], em->node,
                  o, (long long)len, (long long)inner);
}

static void concat(th_emitter *em) {
    const kh_gnode *nd = NODE;
    int64_t len, inner, pos = 0;
    char o[64];
    SZ(th_em_around(em, em->node, nd->attr.axis, &len, &inner), o);
    for (int j = 0; j < nd->n_in; j++) {
        int64_t lj = th_em_node(em, IN[j])->dims[nd->attr.axis];
        th_em_put(em, "    th_concat_part(v%d, v%d, %s, %lld, %lld, %lld, %lld);\n", IN[j], em->node, o, (long long)len,
                  (long long)pos, (long long)lj, (long long)inner);
        pos += lj;
    }
}

static void gather(th_emitter *em) {
    const kh_gnode *T = th_em_node(em, IN[0]);
    char ni[64];
    th_em_put(em, "    if (th_gather(c, v%d, v%d, v%d, %s, %lld, %lld)) return 1;\n", IN[0], IN[1], em->node,
              SZ(th_em_numel(em, IN[1]), ni), (long long)T->dims[0], (long long)T->dims[1]);
}

static void gather_grad(th_emitter *em) {
    char ni[64];
    th_em_put(em, "    th_gather_grad(v%d, v%d, v%d, %s, %lld);\n", IN[0], IN[1], em->node, SZ(th_em_numel(em, IN[0]), ni),
              (long long)NODE->dims[1]);
}

static void softmax_xent(th_emitter *em) {
    th_em_put(em, "    th_softmax_xent(v%d, v%d, v%d, n, %lld);\n", IN[2], IN[1], em->node,
              (long long)th_em_node(em, IN[0])->dims[1]);
}

static void sigmoid_xent(th_emitter *em) { th_em_put(em, "    th_sigmoid_xent(v%d, v%d, v%d, n);\n", IN[2], IN[1], em->node); }

static void softmax_xent_grad(th_emitter *em) {
    th_em_put(em, "    th_softmax_xent_grad(v%d, v%d, v%d, v%d, n, %lld);\n", IN[0], IN[1], IN[2], em->node,
              (long long)NODE->dims[1]);
}

static void sigmoid_xent_grad(th_emitter *em) {
    th_em_put(em, "    th_sigmoid_xent_grad(v%d, v%d, v%d, v%d, n);\n", IN[0], IN[1], IN[2], em->node);
}

static void loss_sum(th_emitter *em) {
    char na[64];
    th_em_put(em, "    v%d[0] = c->loss_sum = th_sum(v%d, %s);\n", em->node, IN[0], SZ(th_em_numel(em, IN[0]), na));
}

static void correct_count(th_emitter *em) {
    th_em_put(em, "    v%d[0] = c->correct = th_correct(v%d, v%d, n, %lld);\n", em->node, IN[0], IN[1],
              (long long)th_last_dim(th_em_node(em, IN[0])));
}

/* the LSTM scans: (xw (N,T,4U), U) -> S (N,T,6,U); (S, U, dS) -> dXW; (S, dXW) -> dU */
static void lstm_scan(th_emitter *em) {
    int64_t T = NODE->dims[1], U = NODE->dims[3];
    scratch(em, em->g->max_batch * 4 * U);
    th_em_put(em, "    th_lstm_scan(c, v%d, v%d, v%d, c->scratch, n, %lld, %lld);\n", IN[0], IN[1], em->node,
              (long long)T, (long long)U);
}

static void lstm_scan_grad(th_emitter *em) {
    const kh_gnode *S = th_em_node(em, IN[0]);
    scratch(em, (em->g->max_batch * 2 + 1) * S->dims[3]);
    th_em_put(em, "    th_lstm_scan_grad(c, v%d, v%d, v%d, v%d, c->scratch, n, %lld, %lld);\n", IN[0], IN[1], IN[2],
              em->node, (long long)S->dims[1], (long long)S->dims[3]);
}

static void lstm_scan_grad_u(th_emitter *em) {
    const kh_gnode *S = th_em_node(em, IN[0]);
    th_em_put(em, "    th_lstm_scan_grad_u(c, v%d, v%d, v%d, n, %lld, %lld);\n", IN[0], IN[1], em->node,
              (long long)S->dims[1], (long long)S->dims[3]);
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
    .ops = {
        [KH_GOP_FILL_BATCH] = fill_batch,
        [KH_GOP_BIAS_ADD_GRAD] = bias_add_grad,
        [KH_GOP_SOFTMAX] = softmax,
        [KH_GOP_SOFTMAX_GRAD] = softmax_grad,
        [KH_GOP_CONV2D] = conv,
        [KH_GOP_CONV2D_BACKPROP_INPUT] = conv,
        [KH_GOP_CONV2D_BACKPROP_FILTER] = conv,
        [KH_GOP_MAXPOOL] = maxpool,
        [KH_GOP_MAXPOOL_GRAD] = maxpool_grad,
        [KH_GOP_SLICE] = along,
        [KH_GOP_REVERSE] = along,
        [KH_GOP_MEAN] = along,
        [KH_GOP_MEAN_GRAD] = along,
        [KH_GOP_CONCAT] = concat,
        [KH_GOP_GATHER] = gather,
        [KH_GOP_GATHER_GRAD] = gather_grad,
        [KH_GOP_SOFTMAX_XENT] = softmax_xent,
        [KH_GOP_SIGMOID_XENT] = sigmoid_xent,
        [KH_GOP_SOFTMAX_XENT_GRAD] = softmax_xent_grad,
        [KH_GOP_SIGMOID_XENT_GRAD] = sigmoid_xent_grad,
        [KH_GOP_LOSS_SUM] = loss_sum,
        [KH_GOP_CORRECT_COUNT] = correct_count,
        [KH_GOP_LSTM_SCAN] = lstm_scan,
        [KH_GOP_LSTM_SCAN_GRAD] = lstm_scan_grad,
        [KH_GOP_LSTM_SCAN_GRAD_U] = lstm_scan_grad_u,
    },
};
