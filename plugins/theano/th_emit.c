/* th_emit.c — the one walk of theano's code generator (th_emit.h): one optimised graph function in node order,
 * each node through the ops both dialects write the same way (below) or the dialect's own op table. The probe
 * function's forward is part 0, its backward part 1. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "khost/kit/status.h"
#include "th_emit.h"

void th_em_fail(th_emitter *em, kh_status st, const char *fmt, ...) {
    if (em->st != KH_OK) return;
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    em->st = kh_errf(em->err, em->errlen, st, "node %d (%s): %s", em->node,
                     kh_gop_name(th_em_node(em, em->node)->op), why);
}

void th_em_put(th_emitter *em, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    th_sb_vprintf(em->code, fmt, ap);
    va_end(ap);
}

// --- sizes ------------------------------------------------------------------------------------------------------
static int64_t per_row(const kh_gnode *x) {
    int64_t e = 1;
    for (int d = 1; d < x->rank; d++) e *= x->dims[d];
    return e;
}

th_cu_affine th_em_numel(const th_emitter *em, int32_t i) {
    const kh_gnode *x = th_em_node(em, i);
    return x->flags & KH_GVAL_BATCHED ? th_aff(per_row(x), 0) : th_aff(0, per_row(x) * x->dims[0]);
}

th_cu_affine th_em_rows(const th_emitter *em, int32_t i) {
    const kh_gnode *x = th_em_node(em, i);
    if (x->rank == 1) return th_aff(0, 1);
    int64_t r = 1;
    for (int d = 1; d < x->rank - 1; d++) r *= x->dims[d];
    return x->flags & KH_GVAL_BATCHED ? th_aff(r, 0) : th_aff(0, r * x->dims[0]);
}

th_cu_affine th_em_around(const th_emitter *em, int32_t i, int axis, int64_t *len, int64_t *inner) {
    const kh_gnode *x = th_em_node(em, i);
    int64_t o = 1;
    for (int d = 1; d < axis; d++) o *= x->dims[d];
    *len = x->dims[axis];
    *inner = 1;
    for (int d = axis + 1; d < x->rank; d++) *inner *= x->dims[d];
    if (axis == 0) return th_aff(0, 1);
    return x->flags & KH_GVAL_BATCHED ? th_aff(o, 0) : th_aff(0, o * x->dims[0]);
}

const char *th_em_size(const th_emitter *em, th_cu_affine x, char *buf, size_t len) {
    const char *s = em->d->int_suffix;
    if (x.a == 0) snprintf(buf, len, "%lld%s", (long long)x.b, s);
    else if (x.b == 0) snprintf(buf, len, "(n * %lld%s)", (long long)x.a, s);
    else snprintf(buf, len, "(n * %lld%s + %lld%s)", (long long)x.a, s, (long long)x.b, s);
    return buf;
}

int th_em_window(th_emitter *em, kh_conv2d_dims *d) {
    const kh_gnode *nd = th_em_node(em, em->node);
    const int32_t *in = th_em_in(em);
    uint32_t op = nd->op;
    int pool = op == KH_GOP_MAXPOOL || op == KH_GOP_MAXPOOL_GRAD;
    /* the input's shape: the backward-input node's shape_of; the filter's: in[1], in[0] or shape_of */
    int32_t xn = op == KH_GOP_CONV2D_BACKPROP_INPUT ? nd->attr.shape_of : in[0];
    int32_t wn = pool ? xn : op == KH_GOP_CONV2D ? in[1] : op == KH_GOP_CONV2D_BACKPROP_INPUT ? in[0] : nd->attr.shape_of;
    if (xn < 0 || wn < 0 || xn >= em->g->n_nodes || wn >= em->g->n_nodes) {
        th_em_fail(em, KH_ERR_INTERNAL, "convolution without its input or filter shape");
        return 0;
    }
    const kh_gnode *X = th_em_node(em, xn), *W = th_em_node(em, wn);
    int64_t SH = nd->attr.strides[0] > 0 ? nd->attr.strides[0] : 1, SW = nd->attr.strides[1] > 0 ? nd->attr.strides[1] : 1;
    int64_t KH = pool ? nd->attr.window[0] : W->dims[0], KW = pool ? nd->attr.window[1] : W->dims[1];
    if (X->rank != 4 || W->rank != 4 ||
        kh_conv2d_geometry(d, 1, X->dims[1], X->dims[2], X->dims[3], KH, KW, W->dims[3], SH, SW, nd->attr.padding) !=
            KH_OK) {
        th_em_fail(em, KH_ERR_INVALID, "inconsistent convolution or pooling geometry");
        return 0;
    }
    return 1;
}

// --- what both dialects write the same way ------------------------------------------------------------------------
static const th_cu_ref no_var = {TH_CU_NONE, 0, 0, 0};

static int is_dropout(uint32_t op) { return op == KH_GOP_DROPOUT || op == KH_GOP_DROPOUT_GRAD; }

/* One kernel computing program e at every element of the node: o[k] = the program over i<j>[k] (a vector input
 * at the column j), dropout keys derived from the model's seed and the function's forward counter. */
static void emit_program(th_emitter *em, const kh_gexpr *e, const int32_t *in) {
    const th_dialect *d = em->d;
    int32_t i = em->node;
    const kh_gnode *nd = th_em_node(em, i);
    int64_t C = nd->rank == 1 ? nd->dims[0] : th_last_dim(nd);
    th_cu_affine cnt = th_em_numel(em, i);
    char decl[64];
    d->kernel_open(em, NULL, cnt);
    d->arg_ptr(em, i, no_var, "float *o");
    int any_vec = 0, any_key = 0;
    for (int j = 0; j < e->n_in; j++) {
        snprintf(decl, sizeof decl, "const float *i%d", j);
        d->arg_ptr(em, in[j], no_var, decl);
        any_vec |= e->vec[j];
    }
    for (int k = 0; k < e->n_ops; k++) any_key |= is_dropout(e->ops[k].op);
    if (any_key) {
        d->arg_scalar(em, TH_CUARG_SEED);
        d->arg_scalar(em, TH_CUARG_COUNTER);
    }
    for (int k = 0; k < e->n_ops; k++)
        if (is_dropout(e->ops[k].op))
            th_em_put(em, "%sconst uint64_t key%d = kh_crng_key(%s, %s, %dull);\n", d->indent, k,
                      d->scalar[TH_CUARG_SEED], d->scalar[TH_CUARG_COUNTER], e->ops[k].salt);
    d->loop_rows_open(em, cnt, th_em_rows(em, i), C, any_vec);
    th_expr_text(em->code, e, "k", "j", "key", "float");
    th_em_put(em, "            o[k] = t%d;\n", e->n_ops - 1);
    d->loop_close(em);
    d->kernel_close(em);
}

static void emit_elemwise(th_emitter *em) {
    emit_program(em, &em->g->exprs[th_em_node(em, em->node)->attr.expr], th_em_in(em));
}

/* AddN of more inputs than an Elemwise program takes */
static void emit_addn_wide(th_emitter *em) {
    const th_dialect *d = em->d;
    const int32_t *in = th_em_in(em);
    int32_t k = th_em_node(em, em->node)->n_in;
    th_cu_affine cnt = th_em_numel(em, em->node);
    char decl[64];
    d->kernel_open(em, NULL, cnt);
    d->arg_ptr(em, em->node, no_var, "float *o");
    for (int j = 0; j < k; j++) {
        snprintf(decl, sizeof decl, "const float *i%d", j);
        d->arg_ptr(em, in[j], no_var, decl);
    }
    d->loop_open(em, cnt);
    th_em_put(em, "%sfloat s = i0[k];\n", d->body);
    for (int j = 1; j < k; j++) th_em_put(em, "%ss += i%d[k];\n", d->body, j);
    th_em_put(em, "%so[k] = s;\n", d->body);
    d->loop_close(em);
    d->kernel_close(em);
}

/* One fused update loop over a variable (and its optimizer slots) with the gradient in[1]. */
static void emit_apply(th_emitter *em) {
    const th_dialect *d = em->d;
    const kh_gnode *nd = th_em_node(em, em->node);
    const int32_t *in = th_em_in(em);
    int32_t v = kh_model_graphs_var(em->env->mg, nd->attr.layer, nd->attr.slot);
    if (v < 0) {
        th_em_fail(em, KH_ERR_INTERNAL, "no variable (%d, %d)", nd->attr.layer, nd->attr.slot);
        return;
    }
    int clear = th_em_node(em, in[1])->op == KH_GOP_GATHER_GRAD; /* the accumulator starts from zero next step */
    int slots = nd->op == KH_GOP_APPLY_ADAM || nd->op == KH_GOP_APPLY_ADADELTA ? 2 : nd->op == KH_GOP_APPLY_RMSPROP;
    th_cu_affine cnt = th_aff(0, em->env->mg->vars[v].numel);
    d->kernel_open(em, NULL, cnt);
    d->arg_ptr(em, -1, (th_cu_ref){TH_CU_VAR, v, 0, 0}, "float *w");
    if (slots >= 1) d->arg_ptr(em, -1, (th_cu_ref){TH_CU_SLOT1, v, 0, 0}, "float *s1");
    if (slots >= 2) d->arg_ptr(em, -1, (th_cu_ref){TH_CU_SLOT2, v, 0, 0}, "float *s2");
    d->arg_ptr(em, in[1], no_var, "float *g");
    d->arg_scalar(em, TH_CUARG_LR);
    char call[256];
    th_update_text(nd->op, &em->env->mg->opt, call, sizeof call);
    d->loop_open(em, cnt);
    th_em_put(em, "%sconst float gk = g[k];\n%s%s;\n", d->body, d->body, call);
    if (clear) th_em_put(em, "%sg[k] = 0.0f;\n", d->body);
    d->loop_close(em);
    d->kernel_close(em);
}

/* MatMul: op(A) is (M, K), op(B) is (K, N), each operand's row stride its last axis */
static void emit_matmul(th_emitter *em) {
    const kh_gnode *nd = th_em_node(em, em->node);
    const int32_t *in = th_em_in(em);
    const kh_gnode *A = th_em_node(em, in[0]), *B = th_em_node(em, in[1]);
    int64_t ca = th_last_dim(A), cb = th_last_dim(B);
    th_cu_affine ra = th_em_rows(em, in[0]), rb = th_em_rows(em, in[1]);
    th_em_gemm g = {.ta = nd->attr.transpose_a != 0, .tb = nd->attr.transpose_b != 0, .lda = ca, .ldb = cb,
                    .a = in[0], .b = in[1]};
    g.M = g.ta ? th_aff(0, ca) : ra;
    g.K = g.ta ? ra : th_aff(0, ca);
    g.N = g.tb ? rb : th_aff(0, cb);
    em->d->gemm(em, &g);
}

static void emit_zeros(th_emitter *em) { em->d->zeros(em, th_em_numel(em, em->node)); }

static void emit_none(th_emitter *em) { (void)em; } /* inputs, variables and reshapes are storage */

static const th_op_emit shared_ops[KH_GOP_END] = {
    [KH_GOP_INPUT] = emit_none, [KH_GOP_VARIABLE] = emit_none, [KH_GOP_RESHAPE] = emit_none,
    [KH_GOP_ELEMWISE] = emit_elemwise, [KH_GOP_MATMUL] = emit_matmul, [KH_GOP_ZEROS] = emit_zeros,
    [KH_GOP_APPLY_GRADIENT_DESCENT] = emit_apply, [KH_GOP_APPLY_RMSPROP] = emit_apply,
    [KH_GOP_APPLY_ADAM] = emit_apply, [KH_GOP_APPLY_ADADELTA] = emit_apply,
};

static void emit_node(th_emitter *em) {
    const kh_gnode *nd = th_em_node(em, em->node);
    th_op_emit f = nd->op < KH_GOP_END ? shared_ops[nd->op] : NULL;
    if (!f && nd->op < KH_GOP_END) f = em->d->ops[nd->op];
    if (f) {
        f(em);
        return;
    }
    if (em->d->lower && em->d->lower(em)) return;
    kh_gexpr e;
    if (nd->op == KH_GOP_ADDN && nd->n_in > KH_GEXPR_MAX_IN) emit_addn_wide(em);
    else if (kh_gop_elementwise(nd->op) && th_expr_single(nd, &e)) emit_program(em, &e, th_em_in(em));
    else th_em_fail(em, KH_ERR_UNSUPPORTED, "no %s code for this op", em->d->name);
}

kh_status th_emit(const th_emit_env *env, const th_dialect *d, th_sb *out, th_cu_plan *plan, char *err,
                  size_t errlen) {
    if (env->plan->n_nodes != env->g->n_nodes)
        return kh_errf(err, errlen, KH_ERR_INTERNAL, "the memory plan has %d nodes, the graph %d", env->plan->n_nodes,
                       env->g->n_nodes);
    if (env->profile && d != &th_dialect_c)
        return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "no profiling variant in the %s dialect", d->name);
    kh_status st = d->prelude(out, err, errlen);
    if (st != KH_OK) return st;
    th_emitter em = {.env = env, .d = d, .g = env->g, .out = out, .code = out, .plan = plan, .st = KH_OK,
                     .err = err, .errlen = errlen, .open_part = -1, .kernel = -1, .prof_node = -1};
    static const char *const names[KH_GFN_COUNT] = {"train", "eval", "predict", "probe"};
    th_sb_printf(out, "\n/* ==== generated: %s function%s, %d nodes, arena %lld bytes ==== */\n", names[env->fn],
                 env->profile ? " (profiling variant)" : "", env->g->n_nodes, (long long)env->plan->arena_bytes);
    d->fn_open(&em);
    for (int32_t i = 0; i < env->g->n_nodes && em.st == KH_OK; i++) {
        em.node = i;
        em.part = env->fn == KH_GFN_PROBE && env->g->nodes[i].phase != 0 ? 1 : 0;
        em.scratch = 0;
        d->node_open(&em);
        emit_node(&em);
    }
    if (em.st == KH_OK) d->fn_close(&em);
    if (em.st == KH_OK && (out->oom || em.sig.oom || em.body.oom))
        em.st = kh_errf(err, errlen, KH_ERR_NOMEM, "out of memory generating %s code", d->name);
    th_sb_free(&em.sig);
    th_sb_free(&em.body);
    return em.st;
}

kh_status th_emit_c(const th_emit_env *env, th_sb *out, char *err, size_t errlen) {
    return th_emit(env, &th_dialect_c, out, NULL, err, errlen);
}

kh_status th_emit_cuda(const th_emit_env *env, th_sb *out, th_cu_plan *plan, char *err, size_t errlen) {
    memset(plan, 0, sizeof *plan);
    kh_status st = th_emit(env, &th_dialect_cuda, out, plan, err, errlen);
    if (st != KH_OK) th_cu_plan_free(plan);
    return st;
}
