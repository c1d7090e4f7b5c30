/* tests/graph/test_graph_ops.c — every differentiable op's gradient function (kit/graph/grad.c) against
 * central finite differences in float64, on random shapes.
 *
 * A case builds y = op(inputs) with f32 inputs as Variables, seeds autodiff with a random dy and compares the
 * gradient of sum(dy * y) w.r.t. each input — evaluated by the float64 reference interpreter — with the
 * numerical one. Each case then applies a mutant to the gradient graph, a typical mistake in that op's
 * gradient rule (a missing transpose, the activation's derivative taken from the wrong function, softmax
 * treated element-wise, slices stitched in the wrong order, a pooling gradient routed to the minimum, ...),
 * and asserts that the same check rejects it: a check that cannot fail proves nothing.
 * Shapes are drawn per run from a fixed seed (KHOST_TEST_SEED to vary it).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "khost/kit/graph.h"
#include "testutil.h"

#define MAXV 4
#define TOL 1e-6

typedef struct tcase tcase;
typedef struct gctx {
    kh_graph g;
    int32_t var[MAXV];  /* Variable node per f32 input */
    int32_t nv;
    double *val[MAXV];  /* their values (layer k = input k) */
    double *feed_i;     /* i32 input (indices / labels) as doubles */
    int32_t y, dy, grads[MAXV];
    double *r;          /* dy values */
    int64_t ny;
    int mutated;        /* evaluate the mutant's gradient nodes */
} gctx;

struct tcase {
    const char *name;
    void (*build)(gctx *c, kh_rng *r);
    /* rewrite the gradient graph into a typical mistake; returns the input whose gradient it breaks */
    int (*mutate)(gctx *c);
};

static double *store(void *ctx, int32_t layer, int32_t slot) {
    gctx *c = ctx;
    (void)slot;
    return layer >= 0 && layer < c->nv ? c->val[layer] : NULL;
}

static int32_t var(gctx *c, kh_rng *r, int32_t rank, const int64_t *dims, double lo, double hi) {
    kh_gattr a = kh_gattr_none();
    a.layer = c->nv;
    a.slot = 0;
    int32_t id = kh_graph_add(&c->g, KH_GOP_VARIABLE, NULL, 0, &a, KH_F32, rank, dims, 0);
    int64_t n = kh_graph_numel(&c->g, id, 1);
    c->val[c->nv] = gc_alloc(n);
    gc_fill(c->val[c->nv], n, r, lo, hi);
    c->var[c->nv++] = id;
    return id;
}

static int32_t feed_idx(gctx *c, kh_rng *r, int32_t rank, const int64_t *dims, int64_t below) {
    kh_gattr a = kh_gattr_none();
    a.input_id = KH_GIN_LABELS;
    int32_t id = kh_graph_add(&c->g, KH_GOP_INPUT, NULL, 0, &a, KH_I32, rank, dims, 0);
    int64_t n = kh_graph_numel(&c->g, id, 1);
    c->feed_i = gc_alloc(n);
    for (int64_t k = 0; k < n; k++) c->feed_i[k] = (double)kh_rng_below(r, (uint64_t)below);
    return id;
}

static int32_t op(gctx *c, uint32_t o, const int32_t *in, int n, const kh_gattr *a) {
    int32_t id = kh_graph_add(&c->g, o, in, n, a, 0, 0, NULL, 0);
    CHECK(id >= 0, "add %s: %s", kh_gop_name(o), c->g.err);
    return id;
}
static int32_t op1(gctx *c, uint32_t o, int32_t x, const kh_gattr *a) { return op(c, o, &x, 1, a); }
static int32_t op2(gctx *c, uint32_t o, int32_t x, int32_t y, const kh_gattr *a) {
    int32_t in[2] = {x, y};
    return op(c, o, in, 2, a);
}
static int64_t dim(kh_rng *r, int64_t lo, int64_t hi) { return lo + (int64_t)kh_rng_below(r, (uint64_t)(hi - lo + 1)); }
static kh_gattr attr(void) { return kh_gattr_none(); }

/* Evaluate the graph; return sum(dy * y) (the objective) and, when g_out is given, the gradients. */
static double evaluate(gctx *c, double **g_out) {
    kh_graph_ref_env env;
    memset(&env, 0, sizeof env);
    env.var = store;
    env.ctx = c;
    env.feeds[KH_GIN_LABELS] = c->feed_i;
    env.feeds[KH_GIN_DY] = c->r;
    env.seed = 42;
    env.counter = 3;
    double **v = calloc((size_t)c->g.n_nodes, sizeof *v);
    char err[256];
    kh_status st = kh_graph_eval_ref(&c->g, 1, &env, v, err, sizeof err);
    CHECK(st == KH_OK, "eval: %s", err);
    double obj = 0.0;
    if (st == KH_OK) {
        for (int64_t k = 0; k < c->ny; k++) obj += c->r[k] * v[c->y][k];
        for (int32_t k = 0; g_out && k < c->nv; k++) {
            int64_t n = kh_graph_numel(&c->g, c->var[k], 1);
            if (c->grads[k] >= 0) memcpy(g_out[k], v[c->grads[k]], (size_t)n * sizeof(double));
            else memset(g_out[k], 0, (size_t)n * sizeof(double));
        }
    }
    for (int32_t i = 0; i < c->g.n_nodes; i++) free(v[i]);
    free(v);
    return obj;
}

static double objective(void *ctx) { return evaluate(ctx, NULL); }

static void run_case(const tcase *t, kh_rng *r) {
    gctx c;
    memset(&c, 0, sizeof c);
    kh_graph_init(&c.g, 1);
    c.y = -1;
    t->build(&c, r);
    if (c.y < 0) return;
    const kh_gnode *yn = &c.g.nodes[c.y];
    kh_gattr a = kh_gattr_none();
    a.input_id = KH_GIN_DY;
    c.dy = kh_graph_add(&c.g, KH_GOP_INPUT, NULL, 0, &a, KH_F32, yn->rank, c.g.nodes[c.y].dims, 0);
    c.ny = kh_graph_numel(&c.g, c.y, 1);
    c.r = gc_alloc(c.ny);
    gc_fill(c.r, c.ny, r, -1.0, 1.0);
    kh_status st = kh_graph_gradients(&c.g, c.y, c.dy, c.var, c.nv, c.grads);
    CHECK(st == KH_OK, "%s: autodiff: %s", t->name, c.g.err);
    double *ga[MAXV], *num[MAXV];
    for (int32_t k = 0; k < c.nv; k++) {
        int64_t n = kh_graph_numel(&c.g, c.var[k], 1);
        ga[k] = gc_alloc(n);
        num[k] = gc_alloc(n);
        gc_numeric(num[k], c.val[k], n, objective, &c);
    }
    evaluate(&c, ga);
    for (int32_t k = 0; k < c.nv; k++) {
        int64_t n = kh_graph_numel(&c.g, c.var[k], 1);
        double e = gc_rel_err(ga[k], num[k], n);
        printf("  %-26s d(input %d)  err %.2e\n", t->name, k, e);
        CHECK(e <= TOL, "%s: gradient of input %d: %.3e", t->name, k, e);
    }
    /* the mutant must be caught by the same comparison */
    int broken = t->mutate(&c);
    evaluate(&c, ga);
    int64_t nb = kh_graph_numel(&c.g, c.var[broken], 1);
    double em = gc_rel_err(ga[broken], num[broken], nb);
    printf("  %-26s mutant on input %d  err %.2e\n", t->name, broken, em);
    CHECK(em > TOL, "%s: the mutant was not detected (%.3e)", t->name, em);
    for (int32_t k = 0; k < c.nv; k++) {
        free(ga[k]);
        free(num[k]);
        free(c.val[k]);
    }
    free(c.feed_i);
    free(c.r);
    kh_graph_release(&c.g);
}

/* Point input k's gradient at a new node: what a wrong rule would have emitted. */
static int regrad(gctx *c, int k, uint32_t o, const int32_t *in, int n, const kh_gattr *a) {
    c->grads[k] = op(c, o, in, n, a);
    return k;
}

// --- cases ----------------------------------------------------------------------------------------------------
static void b_matmul(gctx *c, kh_rng *r) { /* square operands so transposition mistakes keep their shapes */
    int64_t n = dim(r, 2, 5), d[2] = {n, n};
    int32_t a = var(c, r, 2, d, -1, 1), b = var(c, r, 2, d, -1, 1);
    c->y = op2(c, KH_GOP_MATMUL, a, b, NULL);
}
static int m_matmul(gctx *c) { c->g.nodes[c->grads[0]].attr.transpose_b ^= 1; return 0; }
static void b_matmul_t(gctx *c, kh_rng *r) {
    int64_t n = dim(r, 2, 5), d[2] = {n, n};
    kh_gattr a = attr();
    a.transpose_a = 1;
    a.transpose_b = 1;
    int32_t x = var(c, r, 2, d, -1, 1), w = var(c, r, 2, d, -1, 1);
    c->y = op2(c, KH_GOP_MATMUL, x, w, &a);
}
static int m_matmul_t(gctx *c) { c->g.nodes[c->grads[1]].attr.transpose_a ^= 1; return 1; }
static void b_bias(gctx *c, kh_rng *r) {
    int64_t ch = dim(r, 2, 4), d[3], db[1] = {ch};
    d[0] = dim(r, 1, 3), d[1] = dim(r, 2, 3), d[2] = ch;
    int32_t x = var(c, r, 3, d, -1, 1), b = var(c, r, 1, db, -1, 1);
    c->y = op2(c, KH_GOP_BIAS_ADD, x, b, NULL);
}
static int m_bias(gctx *c) { /* reduce the activations instead of the gradient */
    c->g.ins[c->g.nodes[c->grads[1]].in_off] = c->var[0];
    return 1;
}
static void b_ew2(gctx *c, kh_rng *r, uint32_t o) {
    int64_t d[2];
    d[0] = dim(r, 1, 3), d[1] = dim(r, 2, 5);
    int32_t a = var(c, r, 2, d, -1, 1), b = var(c, r, 2, d, -1, 1);
    c->y = op2(c, o, a, b, NULL);
}
static void b_add(gctx *c, kh_rng *r) { b_ew2(c, r, KH_GOP_ADD); }
static int m_add(gctx *c) { return regrad(c, 1, KH_GOP_NEG, &c->dy, 1, NULL); }
static void b_sub(gctx *c, kh_rng *r) { b_ew2(c, r, KH_GOP_SUB); }
static int m_sub(gctx *c) { c->grads[1] = c->dy; return 1; } /* the minus sign forgotten */
static void b_mul(gctx *c, kh_rng *r) { b_ew2(c, r, KH_GOP_MUL); }
static int m_mul(gctx *c) { int32_t in[2] = {c->dy, c->var[0]}; return regrad(c, 0, KH_GOP_MUL, in, 2, NULL); }
static void b_addn(gctx *c, kh_rng *r) {
    int64_t d[2];
    d[0] = dim(r, 1, 3), d[1] = dim(r, 2, 4);
    int32_t in[3];
    for (int k = 0; k < 3; k++) in[k] = var(c, r, 2, d, -1, 1);
    c->y = op(c, KH_GOP_ADDN, in, 3, NULL);
}
static int m_addn(gctx *c) { c->grads[2] = -1; return 2; } /* the last operand forgotten */
static void b_neg(gctx *c, kh_rng *r) {
    int64_t d[1] = {dim(r, 2, 6)};
    c->y = op1(c, KH_GOP_NEG, var(c, r, 1, d, -1, 1), NULL);
}
static int m_neg(gctx *c) { c->grads[0] = c->dy; return 0; }
static void b_unary(gctx *c, kh_rng *r, uint32_t o) {
    int64_t d[2];
    d[0] = dim(r, 1, 3), d[1] = dim(r, 2, 6);
    /* away from relu's kink: |x| >= 0.1 */
    int32_t x = var(c, r, 2, d, -2, 2);
    for (int64_t k = 0; k < d[0] * d[1]; k++)
        if (fabs(c->val[0][k]) < 0.1) c->val[0][k] = c->val[0][k] < 0 ? -0.5 : 0.5;
    c->y = op1(c, o, x, NULL);
}
static void b_relu(gctx *c, kh_rng *r) { b_unary(c, r, KH_GOP_RELU); }
static int m_relu(gctx *c) { c->grads[0] = c->dy; return 0; } /* no derivative */
static void b_sigmoid(gctx *c, kh_rng *r) { b_unary(c, r, KH_GOP_SIGMOID); }
static int m_sigmoid(gctx *c) { c->g.nodes[c->grads[0]].op = KH_GOP_TANH_GRAD; return 0; }
static void b_tanh(gctx *c, kh_rng *r) { b_unary(c, r, KH_GOP_TANH); }
static int m_tanh(gctx *c) { c->g.nodes[c->grads[0]].op = KH_GOP_SIGMOID_GRAD; return 0; }
static void b_softmax(gctx *c, kh_rng *r) { b_unary(c, r, KH_GOP_SOFTMAX); }
static int m_softmax(gctx *c) { c->g.nodes[c->grads[0]].op = KH_GOP_SIGMOID_GRAD; return 0; } /* element-wise */
static void b_conv(gctx *c, kh_rng *r, int padding, int64_t k) {
    int64_t ch = dim(r, 1, 3), x[4], w[4] = {k, k, ch, ch};
    x[0] = dim(r, 1, 2), x[1] = dim(r, 4, 6), x[2] = dim(r, 4, 6), x[3] = ch;
    kh_gattr a = attr();
    a.padding = padding;
    int32_t xn = var(c, r, 4, x, -1, 1), wn = var(c, r, 4, w, -1, 1);
    c->y = op2(c, KH_GOP_CONV2D, xn, wn, &a);
}
static void b_conv_same(gctx *c, kh_rng *r) { b_conv(c, r, KH_PAD_SAME, 3); }
static void b_conv_valid(gctx *c, kh_rng *r) { b_conv(c, r, KH_PAD_VALID, 2); }
static void b_conv_even_same(gctx *c, kh_rng *r) { b_conv(c, r, KH_PAD_SAME, 2); }
static int m_conv_same(gctx *c) { /* correlate dy with the kernel as stored: not flipped nor transposed */
    kh_gattr a = attr();
    a.padding = KH_PAD_SAME;
    int32_t in[2] = {c->dy, c->var[1]};
    return regrad(c, 0, KH_GOP_CONV2D, in, 2, &a);
}
static int m_conv_filter(gctx *c) { /* the filter gradient from the layer's output instead of its gradient */
    kh_gattr a = c->g.nodes[c->grads[1]].attr;
    int32_t in[2] = {c->var[0], c->y};
    return regrad(c, 1, KH_GOP_CONV2D_BACKPROP_FILTER, in, 2, &a);
}
static void b_pool(gctx *c, kh_rng *r, int padding) {
    int64_t x[4];
    for (int k = 0; k < 4; k++) x[k] = k == 0 ? dim(r, 1, 2) : k == 3 ? dim(r, 1, 3) : dim(r, 4, 7);
    kh_gattr a = attr();
    a.window[0] = a.window[1] = 2;
    a.strides[0] = a.strides[1] = 2;
    a.padding = padding;
    c->y = op1(c, KH_GOP_MAXPOOL, var(c, r, 4, x, -1, 1), &a);
}
static void b_pool_valid(gctx *c, kh_rng *r) { b_pool(c, r, KH_PAD_VALID); }
static void b_pool_same(gctx *c, kh_rng *r) { b_pool(c, r, KH_PAD_SAME); }
static int m_pool(gctx *c) { /* route to the minimum */
    kh_gattr a = c->g.nodes[c->grads[0]].attr;
    int32_t in[2] = {op1(c, KH_GOP_NEG, c->var[0], NULL), c->dy};
    return regrad(c, 0, KH_GOP_MAXPOOL_GRAD, in, 2, &a);
}
static void b_reshape(gctx *c, kh_rng *r) {
    int64_t d[3] = {2, dim(r, 2, 3), 3}, o[2] = {2, 0};
    o[1] = d[1] * 3;
    int32_t x = var(c, r, 3, d, -1, 1);
    c->y = kh_graph_add(&c->g, KH_GOP_RESHAPE, &x, 1, NULL, 0, 2, o, 0);
}
static int m_reshape(gctx *c) { /* the gradient's elements permuted on the way back */
    kh_gattr a = attr(), b = attr();
    a.axis = 1;
    b.shape_of = c->var[0];
    return regrad(c, 0, KH_GOP_RESHAPE, (int32_t[]){op1(c, KH_GOP_REVERSE, c->dy, &a)}, 1, &b);
}
static void b_slices(gctx *c, kh_rng *r) { /* y = concat of slices read in another order: stitched gradient */
    int64_t T = dim(r, 3, 5), d[3] = {2, T, 2};
    int32_t x = var(c, r, 3, d, -1, 1), parts[5];
    for (int64_t t = 0; t < T; t++) {
        kh_gattr a = attr();
        a.axis = 1;
        a.begin = (int32_t)((t + 1) % T);
        a.size = 1;
        parts[t] = op1(c, KH_GOP_TANH, op1(c, KH_GOP_SLICE, x, &a), NULL);
    }
    kh_gattr a = attr();
    a.axis = 2;
    c->y = op(c, KH_GOP_CONCAT, parts, (int)T, &a);
}
static int m_slices(gctx *c) { /* stitched in reverse order */
    const kh_gnode *n = &c->g.nodes[c->grads[0]];
    int32_t *in = c->g.ins + n->in_off;
    for (int i = 0, j = n->n_in - 1; i < j; i++, j--) {
        int32_t t = in[i];
        in[i] = in[j];
        in[j] = t;
    }
    return 0;
}
static void b_slice_gap(gctx *c, kh_rng *r) { /* two slices that overlap and leave gaps */
    int64_t d[2] = {2, dim(r, 6, 8)};
    int32_t x = var(c, r, 2, d, -1, 1);
    kh_gattr a = attr(), b = attr(), q = attr();
    a.axis = b.axis = q.axis = 1;
    a.begin = 1, a.size = 3; /* [1, 4) */
    b.begin = 2, b.size = 2; /* [2, 4) */
    q.begin = 1, q.size = 2;
    int32_t sa = op1(c, KH_GOP_SIGMOID, op1(c, KH_GOP_SLICE, x, &a), NULL);
    c->y = op2(c, KH_GOP_MUL, op1(c, KH_GOP_SLICE, x, &b), op1(c, KH_GOP_SLICE, sa, &q), NULL);
}
static int m_slice_gap(gctx *c) { c->grads[0] = op1(c, KH_GOP_NEG, c->grads[0], NULL); return 0; }
static void b_concat(gctx *c, kh_rng *r) {
    int64_t d[2] = {2, dim(r, 2, 3)};
    kh_gattr a = attr();
    a.axis = 1;
    int32_t x0 = var(c, r, 2, d, -1, 1), x1 = var(c, r, 2, d, -1, 1);
    c->y = op2(c, KH_GOP_CONCAT, x0, x1, &a);
}
static int m_concat(gctx *c) { c->g.nodes[c->grads[0]].attr.begin = c->g.nodes[c->grads[1]].attr.begin; return 0; }
static void b_reverse(gctx *c, kh_rng *r) {
    int64_t d[3] = {2, dim(r, 2, 5), 2};
    kh_gattr a = attr();
    a.axis = 1;
    c->y = op1(c, KH_GOP_REVERSE, var(c, r, 3, d, -1, 1), &a);
}
static int m_reverse(gctx *c) { c->grads[0] = c->dy; return 0; }
static void b_mean(gctx *c, kh_rng *r) {
    int64_t d[3] = {2, 0, 0};
    d[1] = dim(r, 2, 5), d[2] = dim(r, 1, 3);
    kh_gattr a = attr();
    a.axis = 1;
    c->y = op1(c, KH_GOP_MEAN, var(c, r, 3, d, -1, 1), &a);
}
static int m_mean(gctx *c) { /* divided by half the count */
    int32_t in[2] = {c->grads[0], c->grads[0]};
    return regrad(c, 0, KH_GOP_ADDN, in, 2, NULL);
}
static void b_gather(gctx *c, kh_rng *r) { /* repeated indices must accumulate */
    int64_t V = dim(r, 3, 5), t[2] = {V, 0}, i[2] = {2, 0};
    t[1] = dim(r, 2, 3);
    i[1] = dim(r, 3, 6);
    int32_t tab = var(c, r, 2, t, -1, 1);
    int32_t idx = feed_idx(c, r, 2, i, V);
    c->y = op2(c, KH_GOP_GATHER, tab, idx, NULL);
}
static int m_gather(gctx *c) { c->g.ins[c->g.nodes[c->grads[0]].in_off + 1] = c->y; return 0; } /* activations */
static void b_dropout(gctx *c, kh_rng *r) {
    int64_t d[2] = {3, dim(r, 4, 8)};
    kh_gattr a = attr();
    a.rate = 0.4f;
    a.salt = 2;
    c->y = op1(c, KH_GOP_DROPOUT, var(c, r, 2, d, -1, 1), &a);
}
static int m_dropout(gctx *c) { c->grads[0] = c->dy; return 0; } /* unmasked */
static void b_xent(gctx *c, kh_rng *r, int sigmoid) {
    int64_t C = sigmoid ? 1 : dim(r, 2, 5), d[2] = {0, C}, l[1];
    d[0] = dim(r, 2, 4);
    l[0] = d[0];
    int32_t x = var(c, r, 2, d, -2, 2);
    int32_t p = op1(c, sigmoid ? KH_GOP_SIGMOID : KH_GOP_SOFTMAX, x, NULL);
    int32_t lab = feed_idx(c, r, 1, l, sigmoid ? 2 : C);
    int32_t in[3] = {x, lab, p};
    c->y = op(c, sigmoid ? KH_GOP_SIGMOID_XENT : KH_GOP_SOFTMAX_XENT, in, 3, NULL);
}
static void b_softmax_xent(gctx *c, kh_rng *r) { b_xent(c, r, 0); }
static void b_sigmoid_xent(gctx *c, kh_rng *r) { b_xent(c, r, 1); }
static int m_xent(gctx *c) { /* the logits where the probabilities belong: softmax forgotten */
    c->g.ins[c->g.nodes[c->grads[0]].in_off] = c->var[0];
    return 0;
}

static void b_matmul_seq(gctx *c, kh_rng *r) { /* (N,T,K) x (K,K): a sequence's rows through one matrix */
    int64_t k = dim(r, 2, 4), x[3] = {0, 0, k}, w[2] = {k, k};
    x[0] = dim(r, 1, 3), x[1] = dim(r, 2, 4);
    int32_t xn = var(c, r, 3, x, -1, 1), wn = var(c, r, 2, w, -1, 1);
    c->y = op2(c, KH_GOP_MATMUL, xn, wn, NULL);
}
/* dx = dy W^T: W as stored (square, so the shapes still agree) */
static int m_matmul_seq(gctx *c) { c->g.nodes[c->grads[0]].attr.transpose_b ^= 1; return 0; }
static void b_matmul_seq_t(gctx *c, kh_rng *r) { /* (N,T,K)^T x (N,T,K) -> (K,K): the sum over every row (square
                                                    again for the mutant) */
    int64_t k = dim(r, 2, 4), x[3] = {0, 0, k};
    x[0] = dim(r, 1, 3), x[1] = dim(r, 2, 4);
    kh_gattr a = attr();
    a.transpose_a = 1;
    int32_t xn = var(c, r, 3, x, -1, 1), zn = var(c, r, 3, x, -1, 1);
    c->y = op2(c, KH_GOP_MATMUL, xn, zn, &a);
}
/* dz = x dy: dy transposed by mistake */
static int m_matmul_seq_t(gctx *c) { c->g.nodes[c->grads[1]].attr.transpose_b ^= 1; return 1; }
/* An LSTM scan over xw (N,T,4U) with a recurrent kernel (U,4U); y reads h and c of every step (the only
 * differentiable components), so both dS paths of the gradient are exercised. */
static int32_t scan_of(gctx *c, kh_rng *r) {
    int64_t U = dim(r, 2, 3), x[3] = {0, 0, 4 * U}, u[2] = {U, 4 * U};
    x[0] = dim(r, 1, 2), x[1] = dim(r, 3, 4);
    int32_t xw = var(c, r, 3, x, -1, 1), uw = var(c, r, 2, u, -1, 1);
    return op2(c, KH_GOP_LSTM_SCAN, xw, uw, NULL);
}
static void b_lstm_scan(gctx *c, kh_rng *r) {
    kh_gattr a = attr();
    a.axis = 2;
    a.begin = 0;
    a.size = 2;
    c->y = op1(c, KH_GOP_SLICE, scan_of(c, r), &a);
}
static int m_lstm_scan(gctx *c) { /* backpropagation not carried through h_{t-1} U: dXW computed with U = 0 */
    int32_t gn = c->grads[0];
    const kh_gnode *u = &c->g.nodes[c->var[1]];
    int32_t z = kh_graph_add(&c->g, KH_GOP_ZEROS, NULL, 0, NULL, KH_F32, u->rank, u->dims, 0);
    int32_t in[3] = {c->g.ins[c->g.nodes[gn].in_off], z, c->g.ins[c->g.nodes[gn].in_off + 2]};
    return regrad(c, 0, KH_GOP_LSTM_SCAN_GRAD, in, 3, NULL);
}
static void b_lstm_scan_last(gctx *c, kh_rng *r) { /* the lowering's last-step h: Slice(Slice(S, 1), 2), reshaped */
    int32_t s = scan_of(c, r);
    const kh_gnode *sn = &c->g.nodes[s];
    int64_t T = sn->dims[1], d[2] = {sn->dims[0], sn->dims[3]};
    kh_gattr l = attr(), h = attr();
    l.axis = 1, l.begin = (int32_t)(T - 1), l.size = 1;
    h.axis = 2, h.begin = 0, h.size = 1;
    int32_t x = op1(c, KH_GOP_SLICE, op1(c, KH_GOP_SLICE, s, &l), &h);
    c->y = kh_graph_add(&c->g, KH_GOP_RESHAPE, &x, 1, NULL, 0, 2, d, 0);
}
static int m_lstm_scan_u(gctx *c) { /* dU from the forward pre-activations instead of their gradient */
    c->g.ins[c->g.nodes[c->grads[1]].in_off + 1] = c->var[0];
    return 1;
}

/* The shape rules of the rank-3 and scan forms: what they infer, and the forms they refuse with a message. */
static void check_shapes(void) {
    kh_graph g;
    kh_graph_init(&g, 4);
    int64_t x[3] = {4, 5, 3}, w[2] = {3, 8}, u[2] = {2, 8}, y4[4] = {4, 5, 6, 2};
    int32_t xn = kh_graph_add(&g, KH_GOP_INPUT, NULL, 0, NULL, KH_F32, 3, x, KH_GVAL_BATCHED);
    int32_t wn = kh_graph_add(&g, KH_GOP_VARIABLE, NULL, 0, NULL, KH_F32, 2, w, 0);
    int32_t un = kh_graph_add(&g, KH_GOP_VARIABLE, NULL, 0, NULL, KH_F32, 2, u, 0);
    int32_t in[3] = {xn, wn, -1};
    int32_t xw = kh_graph_add(&g, KH_GOP_MATMUL, in, 2, NULL, 0, 0, NULL, 0);
    const kh_gnode *n = &g.nodes[xw];
    CHECK(xw >= 0 && n->rank == 3 && n->dims[0] == 4 && n->dims[1] == 5 && n->dims[2] == 8 &&
              (n->flags & KH_GVAL_BATCHED), "matmul (N,T,K)x(K,M): (N,T,M), batched");
    kh_gattr ta = attr();
    ta.transpose_a = 1;
    in[0] = xn, in[1] = xw;
    int32_t dw = kh_graph_add(&g, KH_GOP_MATMUL, in, 2, &ta, 0, 0, NULL, 0);
    n = &g.nodes[dw];
    CHECK(dw >= 0 && n->rank == 2 && n->dims[0] == 3 && n->dims[1] == 8 && !(n->flags & KH_GVAL_BATCHED),
          "matmul (N,T,K)^T(N,T,M): (K,M), not batched");
    in[0] = wn, in[1] = xn; /* a rank-3 right operand without transpose_a */
    CHECK(kh_graph_add(&g, KH_GOP_MATMUL, in, 2, NULL, 0, 0, NULL, 0) < 0 && strstr(g.err, "rank-3"),
          "matmul: rank-3 right operand refused (%s)", g.err);
    in[0] = xn, in[1] = wn; /* transposed rank-3 left operand with a matrix */
    CHECK(kh_graph_add(&g, KH_GOP_MATMUL, in, 2, &ta, 0, 0, NULL, 0) < 0, "matmul: (N,T,K)^T x matrix refused");
    int32_t s4 = kh_graph_add(&g, KH_GOP_INPUT, NULL, 0, NULL, KH_F32, 4, y4, KH_GVAL_BATCHED);
    in[0] = s4, in[1] = wn;
    CHECK(kh_graph_add(&g, KH_GOP_MATMUL, in, 2, NULL, 0, 0, NULL, 0) < 0 && strstr(g.err, "ranks 4 and 2"),
          "matmul: rank 4 refused (%s)", g.err);
    in[0] = xw, in[1] = un;
    int32_t sc = kh_graph_add(&g, KH_GOP_LSTM_SCAN, in, 2, NULL, 0, 0, NULL, 0);
    n = &g.nodes[sc];
    CHECK(sc >= 0 && n->rank == 4 && n->dims[1] == 5 && n->dims[2] == 6 && n->dims[3] == 2 &&
              (n->flags & KH_GVAL_BATCHED), "lstm_scan: (N,T,6,U), batched");
    in[0] = xn; /* 3 features: not 4U */
    CHECK(kh_graph_add(&g, KH_GOP_LSTM_SCAN, in, 2, NULL, 0, 0, NULL, 0) < 0 && strstr(g.err, "(U, 4U)"),
          "lstm_scan: xw of the wrong width refused (%s)", g.err);
    in[0] = sc, in[1] = un, in[2] = s4;
    int32_t gd = kh_graph_add(&g, KH_GOP_LSTM_SCAN_GRAD, in, 3, NULL, 0, 0, NULL, 0);
    CHECK(gd >= 0 && g.nodes[gd].rank == 3 && g.nodes[gd].dims[2] == 8, "lstm_scan_grad: (N,T,4U)");
    in[2] = xw;
    CHECK(kh_graph_add(&g, KH_GOP_LSTM_SCAN_GRAD, in, 3, NULL, 0, 0, NULL, 0) < 0 && strstr(g.err, "dS"),
          "lstm_scan_grad: dS of another shape refused (%s)", g.err);
    in[0] = sc, in[1] = gd;
    int32_t gu = kh_graph_add(&g, KH_GOP_LSTM_SCAN_GRAD_U, in, 2, NULL, 0, 0, NULL, 0);
    CHECK(gu >= 0 && g.nodes[gu].rank == 2 && g.nodes[gu].dims[0] == 2 && g.nodes[gu].dims[1] == 8 &&
              !(g.nodes[gu].flags & KH_GVAL_BATCHED), "lstm_scan_grad_u: (U,4U)");
    in[1] = xn;
    CHECK(kh_graph_add(&g, KH_GOP_LSTM_SCAN_GRAD_U, in, 2, NULL, 0, 0, NULL, 0) < 0, "lstm_scan_grad_u: bad dXW");
    CHECK(!kh_gop_inplace_ok(KH_GOP_LSTM_SCAN, 0) && !kh_gop_inplace_ok(KH_GOP_LSTM_SCAN_GRAD, 2) &&
              !kh_gop_inplace_ok(KH_GOP_LSTM_SCAN_GRAD_U, 1), "scan ops never in place");
    kh_graph_release(&g);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0); /* keep the log when a sanitizer stops the run */
    const tcase cases[] = {
        {"matmul", b_matmul, m_matmul},
        {"matmul transposed", b_matmul_t, m_matmul_t},
        {"matmul (N,T,K)x(K,K)", b_matmul_seq, m_matmul_seq},
        {"matmul (N,T,K)^T(N,T,K)", b_matmul_seq_t, m_matmul_seq_t},
        {"bias_add", b_bias, m_bias},
        {"add", b_add, m_add},
        {"sub", b_sub, m_sub},
        {"mul", b_mul, m_mul},
        {"add_n", b_addn, m_addn},
        {"neg", b_neg, m_neg},
        {"relu", b_relu, m_relu},
        {"sigmoid", b_sigmoid, m_sigmoid},
        {"tanh", b_tanh, m_tanh},
        {"softmax", b_softmax, m_softmax},
        {"conv2d same 3x3", b_conv_same, m_conv_same},
        {"conv2d valid 2x2", b_conv_valid, m_conv_filter},
        {"conv2d same 2x2 (asym.)", b_conv_even_same, m_conv_filter},
        {"maxpool valid", b_pool_valid, m_pool},
        {"maxpool same", b_pool_same, m_pool},
        {"reshape", b_reshape, m_reshape},
        {"slice (stitched)", b_slices, m_slices},
        {"slice (gaps, overlap)", b_slice_gap, m_slice_gap},
        {"concat", b_concat, m_concat},
        {"reverse", b_reverse, m_reverse},
        {"mean", b_mean, m_mean},
        {"gather", b_gather, m_gather},
        {"dropout", b_dropout, m_dropout},
        {"softmax_xent", b_softmax_xent, m_xent},
        {"sigmoid_xent", b_sigmoid_xent, m_xent},
        {"lstm_scan (h, c)", b_lstm_scan, m_lstm_scan},
        {"lstm_scan (last h)", b_lstm_scan_last, m_lstm_scan_u},
    };
    const char *s = getenv("KHOST_TEST_SEED");
    kh_rng r;
    kh_rng_seed(&r, s ? strtoull(s, NULL, 10) : 2024);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) run_case(&cases[k], &r);
    check_shapes();
    return kh_test_finish("test_graph_ops");
}
