/* tests/theano_passes/test_theano_passes.c — each of theano's graph passes (plugins/theano/passes/) on small
 * hand-built graphs: graphs holding exactly the pattern a pass rewrites (the rewrite must happen: op counts, the
 * `changed` count, the shape of the node it builds) and graphs it must leave alone (a Reshape that changes the
 * shape, a Slice that does not cover its axis, an element-wise producer with two readers, an OUTPUT value, Apply
 * and GatherGrad nodes, a Zeros gradient of an Apply, a bias vector, the Elemwise bounds). Every rewritten graph
 * is then evaluated against the original by the float64 interpreter on random inputs, variables and dropout keys,
 * every node the pass maps compared with its image (tptest.c). Last, random graphs mixing every pattern go
 * through each pass alone and through the pipeline (th_optimize), compared the same way. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tptest.h"
#include "khost/kit/rng.h"

#define MB 3 /* max_batch of the small graphs; they are evaluated for n = 2 rows */

typedef struct rewrite {
    kh_graph out;
    int32_t *map;
    int32_t changed;
    kh_status st;
} rewrite;

static rewrite run(th_pass_fn fn, const kh_graph *g) {
    rewrite w;
    memset(&w, 0, sizeof w);
    w.map = malloc(((size_t)g->n_nodes + 1) * sizeof *w.map);
    w.st = tp_pass(fn, g, &w.out, w.map, &w.changed);
    return w;
}

static void done(rewrite *w) {
    if (w->st == KH_OK) kh_graph_release(&w->out);
    free(w->map);
}

static tp_equiv_result equiv(const kh_graph *g, const rewrite *w, const char *what) {
    tp_opts o = tp_default_opts();
    if (w->st != KH_OK) {
        tp_equiv_result r = {0, 0, 0, -1, 0};
        return r;
    }
    tp_equiv_result r = tp_equiv(g, &w->out, w->map, &o, what);
    if (!r.ok) {
        tp_dump(g, "original");
        tp_dump(&w->out, "rewritten");
    }
    return r;
}

static kh_graph fresh(void) {
    kh_graph g;
    kh_graph_init(&g, MB);
    return g;
}

static const kh_gnode *image(const rewrite *w, int32_t i) {
    static kh_gnode none; /* op 0: matches nothing */
    return w->st == KH_OK && w->map[i] >= 0 ? &w->out.nodes[w->map[i]] : &none;
}

static int same_dims(const kh_gnode *a, const kh_gnode *b) {
    if (a->rank != b->rank || ((a->flags ^ b->flags) & KH_GVAL_BATCHED)) return 0;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d]) return 0;
    return 1;
}

static kh_gattr attr_axis(int32_t axis, int32_t begin, int32_t size) {
    kh_gattr a = kh_gattr_none();
    a.axis = axis;
    a.begin = begin;
    a.size = size;
    return a;
}

static int32_t slice(kh_graph *g, int32_t x, int32_t axis, int32_t begin, int32_t size) {
    kh_gattr a = attr_axis(axis, begin, size);
    return tp_add(g, KH_GOP_SLICE, TP_IN(x), &a);
}

static int32_t reverse(kh_graph *g, int32_t x, int32_t axis) {
    kh_gattr a = attr_axis(axis, 0, 0);
    return tp_add(g, KH_GOP_REVERSE, TP_IN(x), &a);
}

static int32_t dropout(kh_graph *g, uint32_t op, int32_t x, float rate, int32_t salt) {
    kh_gattr a = kh_gattr_none();
    a.rate = rate;
    a.salt = salt;
    return tp_add(g, op, TP_IN(x), &a);
}

static void flag_out(kh_graph *g, int32_t node) {
    if (node >= 0) g->nodes[node].flags |= KH_GVAL_OUTPUT;
}

// --- canonicalize -----------------------------------------------------------------------------------------------
/* Reshape chains become one Reshape; a Reshape to the same shape, a Slice of a whole axis, Reverse(Reverse),
 * Neg(Neg), a one-input AddN or Concat become their input; Add/Sub of a Neg flip the operator. */
static void test_canon_rewrites(void) {
    kh_graph g = fresh();
    int32_t x = tp_input(&g, KH_GIN_X, KH_F32, TP_DIMS(MB, 6));
    int32_t dy = tp_input(&g, KH_GIN_DY, KH_F32, TP_DIMS(MB, 6));
    int32_t x3 = tp_var(&g, 0, 0, TP_DIMS(4, 6));
    int32_t r1 = tp_reshape(&g, x, TP_DIMS(MB, 2, 3));
    int32_t r2 = tp_reshape(&g, r1, TP_DIMS(MB, 3, 2)); /* -> Reshape(x) */
    int32_t rs = tp_reshape(&g, x, TP_DIMS(MB, 6));     /* -> x */
    int32_t sl = slice(&g, x, 1, 0, 6);                 /* -> x */
    int32_t rv = reverse(&g, reverse(&g, x3, 1), 1);    /* -> x3 */
    int32_t nn = TP1(&g, KH_GOP_NEG, TP1(&g, KH_GOP_NEG, dy)); /* -> dy */
    int32_t an = tp_add(&g, KH_GOP_ADDN, TP_IN(x), NULL);      /* -> x */
    kh_gattr ax = attr_axis(1, 0, 0);
    int32_t cc = tp_add(&g, KH_GOP_CONCAT, TP_IN(dy), &ax);   /* -> dy */
    int32_t ad = TP2(&g, KH_GOP_ADD, x, TP1(&g, KH_GOP_NEG, dy)); /* -> Sub(x, dy) */
    int32_t sb = TP2(&g, KH_GOP_SUB, x, TP1(&g, KH_GOP_NEG, dy)); /* -> Add(x, dy) */
    int32_t outs[] = {r2, rs, sl, rv, nn, an, cc, ad, sb};
    for (size_t k = 0; k < sizeof outs / sizeof *outs; k++) flag_out(&g, TP1(&g, KH_GOP_TANH, outs[k]));
    rewrite w = run(th_pass_canon, &g);
    CHECK(w.changed == 9, "canon: 9 rewrites (reshape chain, 6 identities, add/sub flips), got %d", w.changed);
    const kh_gnode *m = image(&w, r2);
    CHECK(m->op == KH_GOP_RESHAPE && tp_in(&w.out, w.map[r2], 0) == w.map[x] && m->rank == 3 && m->dims[1] == 3 &&
              m->dims[2] == 2 && (m->flags & KH_GVAL_BATCHED), "canon: Reshape(Reshape(x)) is one Reshape of x to (N,3,2)");
    CHECK(w.map[rs] == w.map[x], "canon: a Reshape to the same shape is its input");
    CHECK(w.map[sl] == w.map[x], "canon: a Slice of the whole axis is its input");
    CHECK(w.map[rv] == w.map[x3], "canon: Reverse(Reverse(x)) along one axis is x");
    CHECK(w.map[nn] == w.map[dy], "canon: Neg(Neg(x)) is x");
    CHECK(w.map[an] == w.map[x] && w.map[cc] == w.map[dy], "canon: a one-input AddN / Concat is its input");
    m = image(&w, ad);
    CHECK(m->op == KH_GOP_SUB && tp_in(&w.out, w.map[ad], 0) == w.map[x] && tp_in(&w.out, w.map[ad], 1) == w.map[dy],
          "canon: Add(a, Neg(b)) is Sub(a, b)");
    m = image(&w, sb);
    CHECK(m->op == KH_GOP_ADD && tp_in(&w.out, w.map[sb], 0) == w.map[x] && tp_in(&w.out, w.map[sb], 1) == w.map[dy],
          "canon: Sub(a, Neg(b)) is Add(a, b)");
    equiv(&g, &w, "canonicalize: rewrites");
    /* what canonicalisation left dead (the inner Reshape, the Negs, ...) goes with dead-code elimination */
    rewrite d = run(th_pass_dce, &w.out);
    CHECK(d.st == KH_OK && tp_count(&d.out, KH_GOP_RESHAPE) == 1 && tp_count(&d.out, KH_GOP_NEG) == 0 &&
              tp_count(&d.out, KH_GOP_REVERSE) == 0 && tp_count(&d.out, KH_GOP_SLICE) == 0 &&
              tp_count(&d.out, KH_GOP_ADDN) == 0 && tp_count(&d.out, KH_GOP_CONCAT) == 0,
          "canon + dce: one Reshape, no Neg, Reverse, Slice, AddN, Concat left (%s)", d.st == KH_OK ? tp_ops(&d.out) : "");
    done(&d);
    done(&w);
    kh_graph_release(&g);
}

/* Near misses canonicalisation must leave as they are. */
static void test_canon_keeps(void) {
    kh_graph g = fresh();
    int32_t x = tp_input(&g, KH_GIN_X, KH_F32, TP_DIMS(MB, 6));
    int32_t x3 = tp_input(&g, KH_GIN_DY, KH_F32, TP_DIMS(MB, 4, 6));
    int32_t v = tp_var(&g, 0, 0, TP_DIMS(MB, 6));
    int32_t keep[16], nk = 0;
    keep[nk++] = tp_reshape(&g, x, TP_DIMS(MB, 3, 2));            /* changes the shape */
    keep[nk++] = slice(&g, x, 1, 1, 5);                           /* does not start at 0 */
    keep[nk++] = slice(&g, x, 1, 0, 5);                           /* does not cover the axis */
    keep[nk++] = reverse(&g, reverse(&g, x3, 1), 2);              /* two different axes */
    keep[nk++] = TP1(&g, KH_GOP_NEG, TP1(&g, KH_GOP_RELU, x));    /* one Neg */
    kh_gattr ax = attr_axis(1, 0, 0);
    keep[nk++] = tp_add(&g, KH_GOP_CONCAT, TP_IN(x, x), &ax);
    keep[nk++] = tp_add(&g, KH_GOP_ADDN, TP_IN(x, x), NULL);
    keep[nk++] = TP2(&g, KH_GOP_ADD, x, TP1(&g, KH_GOP_RELU, x)); /* no Neg operand */
    /* same dims, but the Reshape makes a fixed value batched: not an identity */
    keep[nk++] = kh_graph_add(&g, KH_GOP_RESHAPE, &v, 1, NULL, 0, 2, (const int64_t[]){MB, 6}, KH_GVAL_BATCHED);
    CHECK(keep[nk - 1] >= 0, "batched reshape: %s", g.err);
    for (int k = 0; k < nk; k++) flag_out(&g, keep[k]);
    rewrite w = run(th_pass_canon, &g);
    CHECK(w.st == KH_OK && w.changed == 0 && w.out.n_nodes == g.n_nodes, "canon: no rewrite of near misses (%d rewrites)",
          w.changed);
    for (int k = 0; k < nk; k++)
        CHECK(image(&w, keep[k])->op == g.nodes[keep[k]].op && same_dims(image(&w, keep[k]), &g.nodes[keep[k]]),
              "canon: kept node %d (%s)", keep[k], kh_gop_name(g.nodes[keep[k]].op));
    equiv(&g, &w, "canonicalize: near misses kept");
    done(&w);
    kh_graph_release(&g);
}

/* The Reshape-chain rewrite adds a node whose input it takes from the destination's own edge array; the add
 * grows that array (64, 128, ... edges), so the input must not be read from the old one after the growth. The
 * chains here put the rewrite at every edge count around the first growth (ASan: a heap-use-after-free). */
static void test_canon_reshape_at_growth(void) {
    int bad = 0;
    for (int pre = 58; pre <= 70; pre++) {
        kh_graph g = fresh();
        int32_t t = tp_input(&g, KH_GIN_X, KH_F32, TP_DIMS(MB, 6));
        for (int k = 0; k < pre; k++) t = TP1(&g, k % 2 ? KH_GOP_RELU : KH_GOP_TANH, t);
        int32_t r2 = tp_reshape(&g, tp_reshape(&g, t, TP_DIMS(MB, 2, 3)), TP_DIMS(MB, 3, 2));
        tp_output(&g, 0, r2);
        rewrite w = run(th_pass_canon, &g);
        bad += !(image(&w, r2)->op == KH_GOP_RESHAPE && tp_in(&w.out, w.map[r2], 0) == w.map[t]);
        tp_opts o = tp_default_opts();
        o.quiet = 1;
        if (w.st == KH_OK) bad += !tp_equiv(&g, &w.out, w.map, &o, "canonicalize: reshape chain at edge growth").ok;
        done(&w);
        kh_graph_release(&g);
    }
    CHECK(bad == 0, "canon: reshape chains around the edge array's growth (%d wrong)", bad);
    printf("  %-58s 13 graphs\n", "canonicalize: reshape chains at the edge array's growth");
}

// --- constant folding -------------------------------------------------------------------------------------------
typedef enum { FOLD, FORWARD, KEEP } fate;
typedef struct fold_case {
    int32_t node;
    fate f;
    int32_t to; /* FORWARD: the node it becomes */
} fold_case;

static void test_constfold_elementwise(void) {
    kh_graph g = fresh();
    int32_t x = tp_input(&g, KH_GIN_X, KH_F32, TP_DIMS(MB, 6));
    int32_t dy = tp_input(&g, KH_GIN_DY, KH_F32, TP_DIMS(MB, 6));
    int32_t w4 = tp_var(&g, 0, 0, TP_DIMS(6, 4));
    int32_t b = tp_var(&g, 1, 0, TP_DIMS(6));
    int32_t z = tp_zeros(&g, TP_DIMS(MB, 6), 1);
    int32_t zw = tp_zeros(&g, TP_DIMS(6, 4), 0);
    fold_case c[40];
    int nc = 0;
#define FOLDS(expr) c[nc++] = (fold_case){(expr), FOLD, -1}
#define FORWARDS(expr, t) c[nc++] = (fold_case){(expr), FORWARD, (t)}
#define KEEPS(expr) c[nc++] = (fold_case){(expr), KEEP, -1}
    FOLDS(TP2(&g, KH_GOP_MUL, x, z));
    FOLDS(TP2(&g, KH_GOP_MUL, z, x));
    FOLDS(TP1(&g, KH_GOP_NEG, z));
    FOLDS(TP1(&g, KH_GOP_RELU, z));
    FOLDS(TP1(&g, KH_GOP_TANH, z));
    FOLDS(dropout(&g, KH_GOP_DROPOUT, z, 0.5f, 3));
    FOLDS(dropout(&g, KH_GOP_DROPOUT_GRAD, z, 0.5f, 3));
    FOLDS(TP2(&g, KH_GOP_MATMUL, z, w4));   /* (N,4) */
    FOLDS(TP2(&g, KH_GOP_MATMUL, x, zw));
    FOLDS(TP2(&g, KH_GOP_RELU_GRAD, x, z)); /* (y, dy): zero dy */
    FOLDS(TP2(&g, KH_GOP_SIGMOID_GRAD, x, z));
    FOLDS(TP2(&g, KH_GOP_TANH_GRAD, x, z));
    FOLDS(TP2(&g, KH_GOP_SOFTMAX_GRAD, x, z));
    FOLDS(TP1(&g, KH_GOP_BIAS_ADD_GRAD, z)); /* (6) */
    FOLDS(TP2(&g, KH_GOP_ADD, z, z));
    FOLDS(TP2(&g, KH_GOP_SUB, z, z));
    FOLDS(tp_add(&g, KH_GOP_ADDN, TP_IN(z, z, z), NULL));
    kh_gattr ax = attr_axis(1, 0, 0);
    FOLDS(tp_add(&g, KH_GOP_CONCAT, TP_IN(z, z), &ax)); /* (N,12) */
    FORWARDS(TP2(&g, KH_GOP_ADD, z, x), x);
    FORWARDS(TP2(&g, KH_GOP_ADD, x, z), x);
    FORWARDS(TP2(&g, KH_GOP_SUB, dy, z), dy);
    FORWARDS(tp_add(&g, KH_GOP_ADDN, TP_IN(z, dy, z), NULL), dy);
    int32_t an = tp_add(&g, KH_GOP_ADDN, TP_IN(x, z, dy), NULL); /* -> AddN(x, dy) */
    KEEPS(TP1(&g, KH_GOP_SIGMOID, z));                           /* 0.5 */
    KEEPS(TP1(&g, KH_GOP_SOFTMAX, z));                           /* 1/6 */
    KEEPS(TP2(&g, KH_GOP_BIAS_ADD, z, b));                       /* b on every row */
    KEEPS(TP2(&g, KH_GOP_TANH_GRAD, z, dy));                     /* dy (1 - 0^2) = dy */
    KEEPS(TP2(&g, KH_GOP_SIGMOID_GRAD, x, TP2(&g, KH_GOP_ADD, dy, x)));
    KEEPS(TP2(&g, KH_GOP_SUB, z, x));                            /* -x, not x */
    KEEPS(tp_add(&g, KH_GOP_CONCAT, TP_IN(z, x), &ax));
#undef FOLDS
#undef FORWARDS
#undef KEEPS
    for (int k = 0; k < nc; k++) flag_out(&g, c[k].node);
    flag_out(&g, an);
    rewrite w = run(th_pass_constfold, &g);
    int folds = 0, fwd = 0;
    for (int k = 0; k < nc; k++) {
        const kh_gnode *src = &g.nodes[c[k].node], *m = image(&w, c[k].node);
        if (c[k].f == FOLD) {
            folds++;
            CHECK(m->op == KH_GOP_ZEROS && same_dims(m, src), "constfold: %s of a zero is a Zeros of its shape (got %s)",
                  kh_gop_name(src->op), kh_gop_name(m->op));
        } else if (c[k].f == FORWARD) {
            fwd++;
            CHECK(w.map[c[k].node] == w.map[c[k].to], "constfold: %s with a zero operand is its other operand",
                  kh_gop_name(src->op));
        } else {
            CHECK(m->op == src->op && same_dims(m, src), "constfold: %s of a zero is kept (got %s)", kh_gop_name(src->op),
                  kh_gop_name(m->op));
        }
    }
    const kh_gnode *m = image(&w, an);
    CHECK(m->op == KH_GOP_ADDN && m->n_in == 2 && tp_in(&w.out, w.map[an], 0) == w.map[x] &&
              tp_in(&w.out, w.map[an], 1) == w.map[dy], "constfold: AddN(x, 0, dy) is AddN(x, dy)");
    CHECK(w.changed == folds + fwd + 1, "constfold: %d rewrites, got %d", folds + fwd + 1, w.changed);
    equiv(&g, &w, "constant-fold: element-wise and shape ops");
    done(&w);
    kh_graph_release(&g);
}

/* Zero output gradients through the backward ops of convolutions, pooling and scans; Apply ops keep their zero
 * gradients (Adam and RMSprop still move the weights with non-zero slots). */
static void test_constfold_backward(void) {
    kh_graph g = fresh();
    int32_t x4 = tp_input(&g, KH_GIN_X, KH_F32, TP_DIMS(MB, 4, 4, 2));
    int32_t w4 = tp_var(&g, 0, 0, TP_DIMS(2, 2, 2, 3));
    kh_gattr cv = kh_gattr_none();
    cv.padding = KH_PAD_VALID;
    int32_t conv = tp_add(&g, KH_GOP_CONV2D, TP_IN(x4, w4), &cv); /* (N,3,3,3) */
    int32_t dz = tp_zeros(&g, TP_DIMS(MB, 3, 3, 3), 1);
    kh_gattr bi = cv, bf = cv;
    bi.shape_of = x4;
    bf.shape_of = w4;
    int32_t dx = tp_add(&g, KH_GOP_CONV2D_BACKPROP_INPUT, TP_IN(w4, dz), &bi);
    int32_t dw = tp_add(&g, KH_GOP_CONV2D_BACKPROP_FILTER, TP_IN(x4, dz), &bf);
    kh_gattr pa = kh_gattr_none();
    pa.window[0] = pa.window[1] = pa.strides[0] = pa.strides[1] = 2;
    int32_t mp = tp_add(&g, KH_GOP_MAXPOOL, TP_IN(x4), &pa);
    pa.shape_of = x4;
    int32_t mpg = tp_add(&g, KH_GOP_MAXPOOL_GRAD, TP_IN(x4, tp_zeros(&g, TP_DIMS(MB, 2, 2, 2), 1)), &pa);
    int32_t xw = tp_input(&g, KH_GIN_DY, KH_F32, TP_DIMS(MB, 3, 8));
    int32_t uk = tp_var(&g, 2, 1, TP_DIMS(2, 8));
    int32_t S = TP2(&g, KH_GOP_LSTM_SCAN, xw, uk);
    int32_t sg = tp_add(&g, KH_GOP_LSTM_SCAN_GRAD, TP_IN(S, uk, tp_zeros(&g, TP_DIMS(MB, 3, 6, 2), 1)), NULL);
    int32_t su = TP2(&g, KH_GOP_LSTM_SCAN_GRAD_U, S, tp_zeros(&g, TP_DIMS(MB, 3, 8), 1));
    int32_t ap1 = TP2(&g, KH_GOP_APPLY_ADAM, w4, dw);
    int32_t ap2 = TP2(&g, KH_GOP_APPLY_RMSPROP, uk, su);
    int32_t folded[] = {dx, dw, mpg, sg, su};
    flag_out(&g, conv);
    flag_out(&g, mp);
    flag_out(&g, dx);
    flag_out(&g, mpg);
    flag_out(&g, sg);
    flag_out(&g, S);
    rewrite w = run(th_pass_constfold, &g);
    for (size_t k = 0; k < sizeof folded / sizeof *folded; k++)
        CHECK(image(&w, folded[k])->op == KH_GOP_ZEROS && same_dims(image(&w, folded[k]), &g.nodes[folded[k]]),
              "constfold: %s of a zero gradient is a Zeros of its shape", kh_gop_name(g.nodes[folded[k]].op));
    CHECK(w.changed == 5, "constfold: 5 backward ops folded, got %d", w.changed);
    int32_t a1 = w.map[ap1], a2 = w.map[ap2];
    CHECK(image(&w, ap1)->op == KH_GOP_APPLY_ADAM && w.out.nodes[tp_in(&w.out, a1, 1)].op == KH_GOP_ZEROS &&
              image(&w, ap2)->op == KH_GOP_APPLY_RMSPROP && w.out.nodes[tp_in(&w.out, a2, 1)].op == KH_GOP_ZEROS,
          "constfold: the Apply ops stay, reading their (now Zeros) gradients");
    equiv(&g, &w, "constant-fold: backprops, scans, Apply of a zero gradient");
    done(&w);
    kh_graph_release(&g);
}

/* Zeros travel through a chain (each fold exposes the next); with dead-code elimination one Zeros is left. */
static void test_constfold_cascade(void) {
    kh_graph g = fresh();
    int32_t t = tp_zeros(&g, TP_DIMS(MB, 6), 1);
    t = TP1(&g, KH_GOP_NEG, t);
    t = tp_reshape(&g, t, TP_DIMS(MB, 2, 3));
    t = slice(&g, t, 2, 1, 2);
    t = reverse(&g, t, 1);
    kh_gattr mean = attr_axis(1, 0, 0);
    t = tp_add(&g, KH_GOP_MEAN, TP_IN(t), &mean); /* (N,2) */
    tp_output(&g, 0, t);
    rewrite w = run(th_pass_constfold, &g);
    CHECK(w.changed == 5 && image(&w, t)->op == KH_GOP_ZEROS && same_dims(image(&w, t), &g.nodes[t]),
          "constfold: Mean(Reverse(Slice(Reshape(Neg(0))))) is a Zeros (N,2) (%d rewrites)", w.changed);
    rewrite d = run(th_pass_dce, &w.out);
    CHECK(d.st == KH_OK && d.out.n_nodes == 1 && d.out.nodes[0].op == KH_GOP_ZEROS, "constfold + dce: one Zeros left");
    equiv(&g, &w, "constant-fold: a cascade");
    done(&d);
    done(&w);
    kh_graph_release(&g);
}

// --- merge ------------------------------------------------------------------------------------------------------
static void test_merge_duplicates(void) {
    kh_graph g = fresh();
    int32_t x = tp_input(&g, KH_GIN_X, KH_F32, TP_DIMS(MB, 6));
    int32_t r1 = TP1(&g, KH_GOP_RELU, x);
    int32_t r2 = TP1(&g, KH_GOP_RELU, x);
    g.nodes[r2].attr.layer = 4; /* the layer tag is display only */
    int32_t t1 = TP1(&g, KH_GOP_TANH, r1), t2 = TP1(&g, KH_GOP_TANH, r2); /* equal once r1 and r2 are */
    int32_t v1 = tp_var(&g, 3, 0, TP_DIMS(6, 6)), v2 = tp_var(&g, 3, 0, TP_DIMS(6, 6));
    int32_t m1 = TP2(&g, KH_GOP_MATMUL, t1, v1), m2 = TP2(&g, KH_GOP_MATMUL, t2, v2);
    int32_t z1 = tp_zeros(&g, TP_DIMS(MB, 6), 1), z2 = tp_zeros(&g, TP_DIMS(MB, 6), 1);
    int32_t s = TP2(&g, KH_GOP_ADD, TP2(&g, KH_GOP_ADD, m1, m2), TP2(&g, KH_GOP_SUB, z1, z2));
    /* two identical Elemwise programs */
    kh_gexpr e;
    memset(&e, 0, sizeof e);
    e.n_in = 2;
    e.n_ops = 2;
    e.ops[0] = (kh_gexpr_op){KH_GOP_MUL, -1, -2, 0, 0};
    e.ops[1] = (kh_gexpr_op){KH_GOP_SIGMOID, 0, 0, 0, 0};
    int32_t e1 = tp_elemwise(&g, &e, TP_IN(s, x)), e2 = tp_elemwise(&g, &e, TP_IN(s, x));
    int32_t y = TP2(&g, KH_GOP_MUL, e1, e2);
    tp_output(&g, 0, y);
    rewrite w = run(th_pass_merge, &g);
    CHECK(w.map[r1] == w.map[r2] && w.map[t1] == w.map[t2] && w.map[v1] == w.map[v2] && w.map[m1] == w.map[m2] &&
              w.map[z1] == w.map[z2] && w.map[e1] == w.map[e2],
          "merge: Relu, Tanh, Variable, MatMul, Zeros and Elemwise duplicates merged");
    CHECK(w.changed == 6 && w.out.n_nodes == g.n_nodes - 6, "merge: 6 merged (got %d, %d -> %d nodes)", w.changed,
          g.n_nodes, w.out.n_nodes);
    CHECK(tp_count(&w.out, KH_GOP_RELU) == 1 && tp_count(&w.out, KH_GOP_MATMUL) == 1 &&
              tp_count(&w.out, KH_GOP_ELEMWISE) == 1, "merge: op counts (%s)", tp_ops(&w.out));
    int32_t ym = w.map[y];
    CHECK(ym >= 0 && tp_in(&w.out, ym, 0) == w.map[e1] && tp_in(&w.out, ym, 1) == w.map[e1],
          "merge: the consumer reads the surviving node twice");
    equiv(&g, &w, "merge: duplicates");
    done(&w);
    kh_graph_release(&g);
}

/* Same op and inputs but another attribute, leaf identity, program or shape: distinct values, never merged. */
static void test_merge_distinct(void) {
    kh_graph g = fresh();
    int32_t x = tp_input(&g, KH_GIN_X, KH_F32, TP_DIMS(MB, 6));
    int32_t dy = tp_input(&g, KH_GIN_DY, KH_F32, TP_DIMS(MB, 6)); /* another input id, same shape */
    int32_t x3 = tp_input(&g, KH_GIN_X, KH_F32, TP_DIMS(MB, 4, 4));
    int32_t w6 = tp_var(&g, 0, 0, TP_DIMS(6, 6)), w6b = tp_var(&g, 0, 1, TP_DIMS(6, 6)), w6c = tp_var(&g, 1, 0, TP_DIMS(6, 6));
    int32_t pairs[24][2], np = 0;
    pairs[np][0] = slice(&g, x, 1, 0, 3), pairs[np++][1] = slice(&g, x, 1, 3, 3);
    pairs[np][0] = reverse(&g, x3, 1), pairs[np++][1] = reverse(&g, x3, 2);
    pairs[np][0] = dropout(&g, KH_GOP_DROPOUT, x, 0.5f, 1), pairs[np++][1] = dropout(&g, KH_GOP_DROPOUT, x, 0.5f, 2);
    pairs[np][0] = dropout(&g, KH_GOP_DROPOUT, x, 0.25f, 4), pairs[np++][1] = dropout(&g, KH_GOP_DROPOUT, x, 0.5f, 4);
    pairs[np][0] = dropout(&g, KH_GOP_DROPOUT, x, 0.5f, 5), pairs[np++][1] = dropout(&g, KH_GOP_DROPOUT_GRAD, x, 0.5f, 5);
    pairs[np][0] = x, pairs[np++][1] = dy;
    pairs[np][0] = x, pairs[np++][1] = x3;
    kh_gattr tb = kh_gattr_none();
    tb.transpose_b = 1;
    pairs[np][0] = TP2(&g, KH_GOP_MATMUL, x, w6), pairs[np++][1] = tp_add(&g, KH_GOP_MATMUL, TP_IN(x, w6), &tb);
    pairs[np][0] = TP2(&g, KH_GOP_SUB, x, dy), pairs[np++][1] = TP2(&g, KH_GOP_SUB, dy, x);
    pairs[np][0] = TP1(&g, KH_GOP_RELU, x), pairs[np++][1] = TP1(&g, KH_GOP_RELU, dy);
    pairs[np][0] = w6b, pairs[np++][1] = w6c; /* another slot, another layer */
    pairs[np][0] = w6, pairs[np++][1] = w6b;
    pairs[np][0] = tp_zeros(&g, TP_DIMS(MB, 6), 1), pairs[np++][1] = tp_zeros(&g, TP_DIMS(MB, 3, 2), 1);
    pairs[np][0] = tp_zeros(&g, TP_DIMS(MB, 4), 1), pairs[np++][1] = tp_zeros(&g, TP_DIMS(MB, 4), 0); /* n vs MB rows */
    pairs[np][0] = tp_reshape(&g, x, TP_DIMS(MB, 2, 3)), pairs[np++][1] = tp_reshape(&g, x, TP_DIMS(MB, 3, 2));
    kh_gexpr e;
    memset(&e, 0, sizeof e);
    e.n_in = 1;
    e.n_ops = 1;
    e.ops[0] = (kh_gexpr_op){KH_GOP_RELU, -1, 0, 0, 0};
    int32_t ea = tp_elemwise(&g, &e, TP_IN(x));
    e.ops[0].op = KH_GOP_TANH;
    pairs[np][0] = ea, pairs[np++][1] = tp_elemwise(&g, &e, TP_IN(x));
    e.ops[0] = (kh_gexpr_op){KH_GOP_DROPOUT, -1, 0, 0.5f, 1};
    int32_t ed = tp_elemwise(&g, &e, TP_IN(x));
    e.ops[0].salt = 2;
    pairs[np][0] = ed, pairs[np++][1] = tp_elemwise(&g, &e, TP_IN(x));
    for (int k = 0; k < np; k++) {
        flag_out(&g, pairs[k][0]);
        flag_out(&g, pairs[k][1]);
    }
    rewrite w = run(th_pass_merge, &g);
    CHECK(w.changed == 0 && w.out.n_nodes == g.n_nodes, "merge: nothing merged (%d merges)", w.changed);
    for (int k = 0; k < np; k++)
        CHECK(w.map[pairs[k][0]] != w.map[pairs[k][1]], "merge: %s node %d and %s node %d kept apart",
              kh_gop_name(g.nodes[pairs[k][0]].op), pairs[k][0], kh_gop_name(g.nodes[pairs[k][1]].op), pairs[k][1]);
    equiv(&g, &w, "merge: distinct attributes, leaves, programs kept");
    done(&w);
    kh_graph_release(&g);
}

/* Apply ops and GatherGrad accumulators have effects: two identical ones are two updates (both must run). */
static void test_merge_effects(void) {
    kh_graph g = fresh();
    int32_t idx = tp_input(&g, KH_GIN_X, KH_I32, TP_DIMS(MB, 4));
    int32_t dy = tp_input(&g, KH_GIN_DY, KH_F32, TP_DIMS(MB, 4, 3));
    int32_t tab = tp_var(&g, 0, 0, TP_DIMS(5, 3));
    int32_t w = tp_var(&g, 1, 0, TP_DIMS(4, 3));
    kh_gattr ga = kh_gattr_none();
    ga.shape_of = tab;
    int32_t gg1 = tp_add(&g, KH_GOP_GATHER_GRAD, TP_IN(idx, dy), &ga);
    int32_t gg2 = tp_add(&g, KH_GOP_GATHER_GRAD, TP_IN(idx, dy), &ga);
    int32_t a1 = TP2(&g, KH_GOP_APPLY_GRADIENT_DESCENT, tab, gg1);
    int32_t a2 = TP2(&g, KH_GOP_APPLY_GRADIENT_DESCENT, tab, gg2);
    kh_gattr ta = kh_gattr_none();
    ta.transpose_a = 1;
    int32_t dyf = tp_reshape(&g, dy, TP_DIMS(MB, 12));
    int32_t gw = tp_add(&g, KH_GOP_MATMUL, TP_IN(dyf, dyf), &ta); /* (12, 12): some gradient */
    int32_t gw3 = tp_reshape(&g, slice(&g, gw, 1, 0, 1), TP_DIMS(4, 3));
    int32_t a3 = TP2(&g, KH_GOP_APPLY_ADAM, w, gw3);
    int32_t a4 = TP2(&g, KH_GOP_APPLY_ADAM, w, gw3);
    rewrite m = run(th_pass_merge, &g);
    CHECK(m.changed == 0 && tp_count(&m.out, KH_GOP_GATHER_GRAD) == 2 && tp_count(&m.out, KH_GOP_APPLY_GRADIENT_DESCENT) == 2 &&
              tp_count(&m.out, KH_GOP_APPLY_ADAM) == 2, "merge: GatherGrad and Apply duplicates all kept (%s)", tp_ops(&m.out));
    CHECK(m.map[a1] != m.map[a2] && m.map[a3] != m.map[a4] && m.map[gg1] != m.map[gg2], "merge: effects kept apart");
    /* numerically: both Adam steps and both descent steps happen (the weights after the run are compared) */
    equiv(&g, &m, "merge: Apply and GatherGrad never merged");
    done(&m);
    kh_graph_release(&g);
}

/* Nodes that take their shape from another node (Reshape, the backprops) merge too once earlier merges have
 * renumbered the graph: attr.shape_of is a node id, compared in the merged graph's numbering. */
static void test_merge_shape_of(void) {
    kh_graph g = fresh();
    int32_t x = tp_input(&g, KH_GIN_X, KH_F32, TP_DIMS(MB, 6));
    int32_t r1 = TP1(&g, KH_GOP_RELU, x), r2 = TP1(&g, KH_GOP_RELU, x); /* merged: later ids shift by one */
    int32_t s = tp_input(&g, KH_GIN_DY, KH_F32, TP_DIMS(MB, 2, 3));
    kh_gattr rs = kh_gattr_none();
    rs.shape_of = s;
    int32_t q1 = tp_add(&g, KH_GOP_RESHAPE, TP_IN(r1), &rs), q2 = tp_add(&g, KH_GOP_RESHAPE, TP_IN(r2), &rs);
    /* and two different shapes of the same size must stay apart whatever the numbering */
    int32_t s2 = tp_input(&g, KH_GIN_DY, KH_F32, TP_DIMS(MB, 3, 2));
    kh_gattr rs2 = kh_gattr_none();
    rs2.shape_of = s2;
    int32_t q3 = tp_add(&g, KH_GOP_RESHAPE, TP_IN(r1), &rs2);
    int32_t y = TP2(&g, KH_GOP_ADD, TP2(&g, KH_GOP_ADD, q1, q2), TP2(&g, KH_GOP_MUL, s, s));
    tp_output(&g, 0, y);
    flag_out(&g, q3);
    rewrite w = run(th_pass_merge, &g);
    CHECK(w.map[r1] == w.map[r2], "merge: the Relus merged");
    CHECK(w.map[q1] == w.map[q2], "merge: Reshape(r, shape_of s) twice merged after a renumbering (%d merges)", w.changed);
    CHECK(w.map[q3] != w.map[q1] && same_dims(image(&w, q3), &g.nodes[q3]), "merge: a Reshape to another shape kept");
    CHECK(w.changed == 2, "merge: 2 merges, got %d", w.changed);
    equiv(&g, &w, "merge: shape_of nodes after a renumbering");
    done(&w);
    kh_graph_release(&g);
}

// --- dead code --------------------------------------------------------------------------------------------------
static void test_dce(void) {
    kh_graph g = fresh();
    int32_t x = tp_input(&g, KH_GIN_X, KH_F32, TP_DIMS(MB, 6));
    int32_t dy = tp_input(&g, KH_GIN_DY, KH_F32, TP_DIMS(MB, 6));
    int32_t dead1 = TP1(&g, KH_GOP_RELU, x);
    int32_t dead2 = TP1(&g, KH_GOP_TANH, dead1);
    int32_t dead3 = dropout(&g, KH_GOP_DROPOUT, x, 0.5f, 1); /* a dead dropout: the live one's mask is its own */
    int32_t live = dropout(&g, KH_GOP_DROPOUT, x, 0.5f, 2);
    int32_t flagged = TP1(&g, KH_GOP_SIGMOID, x); /* OUTPUT without an outputs[] entry (the probe's gradients) */
    flag_out(&g, flagged);
    int32_t named = TP1(&g, KH_GOP_NEG, dy); /* in outputs[] (its flag cleared below) */
    int32_t shape_src = TP1(&g, KH_GOP_RELU, tp_input(&g, KH_GIN_DY, KH_F32, TP_DIMS(MB, 2, 3)));
    kh_gattr rs = kh_gattr_none();
    rs.shape_of = shape_src; /* read only as a shape */
    int32_t shaped = tp_add(&g, KH_GOP_RESHAPE, TP_IN(live), &rs);
    int32_t w = tp_var(&g, 0, 0, TP_DIMS(6));
    int32_t gw = TP1(&g, KH_GOP_BIAS_ADD_GRAD, TP2(&g, KH_GOP_MUL, x, dy));
    int32_t ap = TP2(&g, KH_GOP_APPLY_RMSPROP, w, gw); /* a sink: nothing reads it */
    int32_t dead4 = TP1(&g, KH_GOP_NEG, gw);
    tp_output(&g, 0, shaped);
    tp_output(&g, 1, named);
    g.nodes[named].flags &= ~(uint32_t)KH_GVAL_OUTPUT;
    rewrite d = run(th_pass_dce, &g);
    CHECK(d.changed == 4 && d.out.n_nodes == g.n_nodes - 4, "dce: 4 dead nodes removed (got %d)", d.changed);
    CHECK(d.map[dead1] < 0 && d.map[dead2] < 0 && d.map[dead3] < 0 && d.map[dead4] < 0, "dce: the dead nodes are gone");
    CHECK(d.map[flagged] >= 0 && (image(&d, flagged)->flags & KH_GVAL_OUTPUT), "dce: an OUTPUT value kept, still flagged");
    CHECK(d.map[named] >= 0 && d.out.outputs[1] == d.map[named], "dce: an outputs[] entry kept");
    CHECK(d.map[shape_src] >= 0 && image(&d, shaped)->attr.shape_of == d.map[shape_src],
          "dce: a node read only as a shape kept");
    CHECK(d.map[ap] >= 0 && d.map[gw] >= 0 && tp_count(&d.out, KH_GOP_APPLY_RMSPROP) == 1, "dce: Apply and its gradient kept");
    equiv(&g, &d, "dead-code: sinks, outputs, shapes kept");
    rewrite again = run(th_pass_dce, &d.out);
    CHECK(again.changed == 0 && again.out.n_nodes == d.out.n_nodes, "dce: a second run removes nothing");
    done(&again);
    done(&d);
    kh_graph_release(&g);
}

// --- element-wise fusion ----------------------------------------------------------------------------------------
static const kh_gexpr *prog(const rewrite *w, int32_t i) {
    const kh_gnode *m = image(w, i);
    return m->op == KH_GOP_ELEMWISE ? &w->out.exprs[m->attr.expr] : NULL;
}

/* A dense layer's epilogue: Relu(BiasAdd(MatMul(x, w), b)) is MatMul + one Elemwise reading the bias as a
 * vector. */
static void test_fuse_dense(void) {
    kh_graph g = fresh();
    int32_t x = tp_input(&g, KH_GIN_X, KH_F32, TP_DIMS(MB, 6));
    int32_t w = tp_var(&g, 0, 0, TP_DIMS(6, 4)), b = tp_var(&g, 0, 1, TP_DIMS(4));
    int32_t mm = TP2(&g, KH_GOP_MATMUL, x, w);
    int32_t h = TP1(&g, KH_GOP_RELU, TP2(&g, KH_GOP_BIAS_ADD, mm, b));
    tp_output(&g, 0, h);
    rewrite f = run(th_pass_fuse, &g);
    const kh_gexpr *e = prog(&f, h);
    CHECK(e && e->n_in == 2 && e->n_ops == 2 && e->vec[0] == 0 && e->vec[1] == 1 && tp_in(&f.out, f.map[h], 0) == f.map[mm] &&
              tp_in(&f.out, f.map[h], 1) == f.map[b], "fuse: Relu(BiasAdd(mm, b)) is one Elemwise(mm, b as a vector), 2 ops");
    CHECK(f.changed == 1 && tp_count(&f.out, KH_GOP_ELEMWISE) == 1 && tp_count(&f.out, KH_GOP_BIAS_ADD) == 0 &&
              tp_count(&f.out, KH_GOP_RELU) == 0 && tp_count(&f.out, KH_GOP_MATMUL) == 1, "fuse: %s (%d rewrites)",
          tp_ops(&f.out), f.changed);
    CHECK(tp_fused_form(&f.out), "fuse: every element-wise node in an Elemwise");
    equiv(&g, &f, "fuse: dense epilogue");
    done(&f);
    kh_graph_release(&g);
}

/* A producer with two readers is computed once, as its own Elemwise, whichever groups its readers join; an
 * OUTPUT value stays materialised; a bias vector computed element-wise stays a vector input. */
static void test_fuse_boundaries(void) {
    kh_graph g = fresh();
    int32_t x = tp_input(&g, KH_GIN_X, KH_F32, TP_DIMS(MB, 6));
    int32_t w = tp_var(&g, 0, 0, TP_DIMS(6, 6)), b = tp_var(&g, 0, 1, TP_DIMS(6));
    int32_t t = TP1(&g, KH_GOP_TANH, x);                                              /* two readers, one group */
    int32_t y1 = TP2(&g, KH_GOP_ADD, TP1(&g, KH_GOP_RELU, t), TP1(&g, KH_GOP_SIGMOID, t));
    int32_t u = TP1(&g, KH_GOP_SIGMOID, x);                                           /* a MatMul and a Relu read it */
    int32_t y2 = TP2(&g, KH_GOP_ADD, TP2(&g, KH_GOP_MATMUL, u, w), TP1(&g, KH_GOP_RELU, u));
    int32_t o = TP1(&g, KH_GOP_NEG, x);                                               /* an OUTPUT read by a Tanh */
    flag_out(&g, o);
    int32_t y3 = TP1(&g, KH_GOP_TANH, o);
    int32_t bv = TP1(&g, KH_GOP_RELU, b);                                             /* an element-wise bias */
    int32_t y4 = TP1(&g, KH_GOP_SIGMOID, TP2(&g, KH_GOP_BIAS_ADD, x, bv));
    int32_t sq = TP1(&g, KH_GOP_RELU, x);                                             /* read twice by one Mul */
    int32_t y5 = TP2(&g, KH_GOP_MUL, sq, sq);
    int32_t ys[] = {y1, y2, y3, y4, y5};
    for (size_t k = 0; k < sizeof ys / sizeof *ys; k++) flag_out(&g, ys[k]);
    rewrite f = run(th_pass_fuse, &g);
    const kh_gexpr *e;
    CHECK((e = prog(&f, t)) && e->n_ops == 1 && (e = prog(&f, y1)) && e->n_ops == 3 && e->n_in == 1 &&
              tp_in(&f.out, f.map[y1], 0) == f.map[t], "fuse: Tanh with two readers computed once; Add(Relu, Sigmoid) of it");
    CHECK((e = prog(&f, u)) && e->n_ops == 1 && (e = prog(&f, y2)) && e->n_ops == 2,
          "fuse: a producer read by a MatMul stays its own Elemwise");
    CHECK((e = prog(&f, o)) && (image(&f, o)->flags & KH_GVAL_OUTPUT) && (e = prog(&f, y3)) && e->n_ops == 1 &&
              tp_in(&f.out, f.map[y3], 0) == f.map[o], "fuse: an OUTPUT value stays materialised");
    CHECK((e = prog(&f, bv)) && e->n_ops == 1 && image(&f, bv)->rank == 1 && (e = prog(&f, y4)) && e->n_ops == 2 &&
              e->n_in == 2 && e->vec[1] == 1 && tp_in(&f.out, f.map[y4], 1) == f.map[bv],
          "fuse: an element-wise bias stays a vector input");
    CHECK((e = prog(&f, sq)) && (e = prog(&f, y5)) && e->n_ops == 1, "fuse: a value read twice by one node stays");
    CHECK(tp_fused_form(&f.out), "fuse: every element-wise node in an Elemwise");
    CHECK(tp_count(&f.out, KH_GOP_ELEMWISE) == 10, "fuse: 10 Elemwise nodes (%s)", tp_ops(&f.out));
    equiv(&g, &f, "fuse: readers, outputs, vectors");
    /* Not a fixed point: in the fused graph t and sq have one reader each (their readers' groups read them
     * once), so a second run absorbs them — by the rule "no other reader", which counts edges. */
    rewrite again = run(th_pass_fuse, &f.out);
    CHECK(again.changed == 2 && again.out.n_nodes == f.out.n_nodes - 2,
          "fuse: a second run absorbs the two once-shared producers, nothing else (%d)", again.changed);
    equiv(&f.out, &again, "fuse: a second run");
    done(&again);
    done(&f);
    kh_graph_release(&g);
}

/* KH_GEXPR_MAX_OPS: a chain of 40 unary ops is two programs (32 + 8); KH_GEXPR_MAX_IN: a sum of 12 inputs is
 * split so that no program reads more than 8; an AddN of 9 stays an AddN, one of 8 is one program of 7 adds. */
static void test_fuse_bounds(void) {
    kh_graph g = fresh();
    int32_t x = tp_input(&g, KH_GIN_X, KH_F32, TP_DIMS(MB, 6));
    const uint32_t un[] = {KH_GOP_TANH, KH_GOP_RELU, KH_GOP_SIGMOID, KH_GOP_NEG};
    int32_t t = x;
    for (int k = 0; k < 40; k++) t = TP1(&g, un[k % 4], t);
    flag_out(&g, t);
    int32_t leaf[12];
    for (int k = 0; k < 12; k++) leaf[k] = tp_var(&g, 10 + k, 0, TP_DIMS(MB, 6));
    int32_t s = leaf[0];
    for (int k = 1; k < 12; k++) s = TP2(&g, k % 3 ? KH_GOP_ADD : KH_GOP_SUB, s, leaf[k]);
    flag_out(&g, s);
    int32_t a9 = tp_add(&g, KH_GOP_ADDN, leaf, 9, NULL);
    int32_t a8 = tp_add(&g, KH_GOP_ADDN, leaf + 2, 8, NULL);
    flag_out(&g, a9);
    flag_out(&g, TP1(&g, KH_GOP_RELU, a8));
    /* an AddN of k inputs is k - 1 instructions: five AddN(t, v x 7) (2 distinct inputs, 7 adds each) and a
     * Tanh are 36 instructions, more than one program holds */
    int32_t v = tp_var(&g, 30, 0, TP_DIMS(MB, 6)), an = tp_input(&g, KH_GIN_DY, KH_F32, TP_DIMS(MB, 6));
    for (int k = 0; k < 5; k++) an = tp_add(&g, KH_GOP_ADDN, TP_IN(an, v, v, v, v, v, v, v), NULL);
    an = TP1(&g, KH_GOP_TANH, an);
    flag_out(&g, an);
    rewrite f = run(th_pass_fuse, &g);
    const kh_gexpr *e = prog(&f, t);
    int ops_chain = 0, groups_chain = 0, ops_sum = 0, max_in_sum = 0, ops_an = 0, groups_an = 0;
    for (int32_t i = 0; i < f.out.n_nodes; i++) {
        const kh_gnode *n = &f.out.nodes[i];
        if (n->op != KH_GOP_ELEMWISE) continue;
        const kh_gexpr *p = &f.out.exprs[n->attr.expr];
        int from_leaf = 0, from_v = 0;
        for (int j = 0; j < n->n_in; j++) {
            const kh_gnode *src = &f.out.nodes[tp_in(&f.out, i, j)];
            from_leaf |= src->op == KH_GOP_VARIABLE;
            from_v |= src->op == KH_GOP_VARIABLE && src->attr.layer == 30;
        }
        if (n->n_in == 1 && !from_leaf) {
            ops_chain += p->n_ops;
            groups_chain++;
        } else if (from_v) {
            ops_an += p->n_ops;
            groups_an++;
        } else if (p->ops[p->n_ops - 1].op != KH_GOP_RELU) {
            ops_sum += p->n_ops;
            if (n->n_in > max_in_sum) max_in_sum = n->n_in;
        }
    }
    CHECK(e && e->n_ops <= KH_GEXPR_MAX_OPS && groups_chain == 2 && ops_chain == 40,
          "fuse: 40 unary ops in 2 programs of at most 32 (%d programs, %d ops)", groups_chain, ops_chain);
    CHECK(ops_sum == 11 && max_in_sum <= KH_GEXPR_MAX_IN && max_in_sum >= 6,
          "fuse: 11 adds/subs of 12 inputs, no program over 8 inputs (%d ops, widest %d)", ops_sum, max_in_sum);
    CHECK(image(&f, a9)->op == KH_GOP_ADDN && image(&f, a9)->n_in == 9, "fuse: an AddN of 9 stays");
    e = prog(&f, an);
    CHECK(e && groups_an == 2 && ops_an == 36, "fuse: 5 AddN of 8 and a Tanh: 36 instructions in 2 programs (%d, %d)",
          groups_an, ops_an);
    e = prog(&f, a8);
    CHECK(!e, "fuse: the AddN of 8 joined its Relu");
    CHECK(tp_fused_form(&f.out), "fuse: bounds held everywhere");
    equiv(&g, &f, "fuse: KH_GEXPR_MAX_OPS / MAX_IN bounds");
    done(&f);
    kh_graph_release(&g);
}

/* Dropout and its gradient inside a program draw the same masks (key: seed, counter, salt; the element's index)
 * as the nodes did; an Elemwise node is absorbed as a whole program. */
static void test_fuse_dropout_programs(void) {
    kh_graph g = fresh();
    int32_t x = tp_input(&g, KH_GIN_X, KH_F32, TP_DIMS(MB, 2, 3));
    int32_t dy = tp_input(&g, KH_GIN_DY, KH_F32, TP_DIMS(MB, 2, 3));
    int32_t b = tp_var(&g, 0, 0, TP_DIMS(3));
    int32_t d1 = dropout(&g, KH_GOP_DROPOUT, TP2(&g, KH_GOP_BIAS_ADD, x, b), 0.5f, 7);
    kh_gexpr e;
    memset(&e, 0, sizeof e);
    e.n_in = 3;
    e.vec[2] = 1;
    e.n_ops = 3;
    e.ops[0] = (kh_gexpr_op){KH_GOP_TANH_GRAD, -1, -2, 0, 0};
    e.ops[1] = (kh_gexpr_op){KH_GOP_ADD, 0, -3, 0, 0};
    e.ops[2] = (kh_gexpr_op){KH_GOP_DROPOUT_GRAD, 1, 0, 0.25f, 9};
    int32_t ew = tp_elemwise(&g, &e, TP_IN(TP1(&g, KH_GOP_TANH, d1), dy, b));
    int32_t y = TP2(&g, KH_GOP_MUL, dropout(&g, KH_GOP_DROPOUT_GRAD, ew, 0.5f, 7), x);
    tp_output(&g, 0, y);
    rewrite f = run(th_pass_fuse, &g);
    const kh_gexpr *p = prog(&f, y);
    CHECK(p && p->n_ops == 8 && p->n_in == 3 && tp_count(&f.out, KH_GOP_ELEMWISE) == 1,
          "fuse: the whole chain (with the Elemwise) is one program of 8 ops over x, b, dy (%s)", tp_ops(&f.out));
    equiv(&g, &f, "fuse: dropout masks and nested programs");
    done(&f);
    kh_graph_release(&g);
}

/* A value the graph refers to outside its edges — another node's shape (attr.shape_of), or an outputs[] entry —
 * must survive fusion even when its one reader absorbs it. */
static void test_fuse_referenced(void) {
    kh_graph g = fresh();
    int32_t x = tp_input(&g, KH_GIN_X, KH_F32, TP_DIMS(MB, 2, 3));
    int32_t dy = tp_input(&g, KH_GIN_DY, KH_F32, TP_DIMS(MB, 6));
    int32_t a = TP2(&g, KH_GOP_MUL, x, x);
    int32_t r = TP1(&g, KH_GOP_RELU, a); /* a's only reader */
    kh_gattr rs = kh_gattr_none();
    rs.shape_of = a;
    int32_t z = tp_add(&g, KH_GOP_RESHAPE, TP_IN(dy), &rs);
    int32_t c = TP1(&g, KH_GOP_SIGMOID, x); /* named in outputs[] without the flag */
    int32_t y = TP2(&g, KH_GOP_ADD, TP2(&g, KH_GOP_ADD, r, z), TP1(&g, KH_GOP_TANH, c));
    tp_output(&g, 0, y);
    tp_output(&g, 1, c);
    g.nodes[c].flags &= ~(uint32_t)KH_GVAL_OUTPUT;
    rewrite f = run(th_pass_fuse, &g);
    CHECK(f.st == KH_OK && f.map[a] >= 0 && image(&f, z)->op == KH_GOP_RESHAPE &&
              image(&f, z)->attr.shape_of == f.map[a], "fuse: a node read as a shape survives");
    CHECK(f.st == KH_OK && f.map[c] >= 0 && f.out.outputs[1] == f.map[c], "fuse: an outputs[] node survives");
    equiv(&g, &f, "fuse: shape_of and outputs[] references");
    done(&f);
    kh_graph_release(&g);
}

// --- the pipeline -----------------------------------------------------------------------------------------------
/* A graph holding every pass's pattern at once: level 0 copies it, level 1 runs the five passes in order. */
static void test_pipeline(void) {
    kh_graph g = fresh();
    int32_t x = tp_input(&g, KH_GIN_X, KH_F32, TP_DIMS(MB, 6));
    int32_t lab = tp_input(&g, KH_GIN_LABELS, KH_I32, TP_DIMS(MB));
    int32_t w = tp_var(&g, 0, 0, TP_DIMS(6, 4)), b = tp_var(&g, 0, 1, TP_DIMS(4));
    int32_t h = TP1(&g, KH_GOP_RELU, TP2(&g, KH_GOP_BIAS_ADD, TP2(&g, KH_GOP_MATMUL, x, w), b));
    int32_t h2 = TP1(&g, KH_GOP_RELU, TP2(&g, KH_GOP_BIAS_ADD, TP2(&g, KH_GOP_MATMUL, x, w), b)); /* duplicate */
    int32_t d = dropout(&g, KH_GOP_DROPOUT, TP1(&g, KH_GOP_NEG, TP1(&g, KH_GOP_NEG, h2)), 0.5f, 1);
    int32_t logits = TP2(&g, KH_GOP_ADD, h, TP2(&g, KH_GOP_SUB, d, tp_zeros(&g, TP_DIMS(MB, 4), 1)));
    int32_t p = TP1(&g, KH_GOP_SOFTMAX, logits);
    int32_t loss = tp_add(&g, KH_GOP_SOFTMAX_XENT, TP_IN(logits, lab, p), NULL);
    int32_t ls = TP1(&g, KH_GOP_LOSS_SUM, loss);
    tp_output(&g, 0, ls);
    tp_output(&g, 1, TP2(&g, KH_GOP_CORRECT_COUNT, p, lab));
    int32_t fb = kh_graph_add(&g, KH_GOP_FILL_BATCH, NULL, 0, NULL, KH_F32, 1, (const int64_t[]){MB}, KH_GVAL_BATCHED);
    int32_t dl = tp_add(&g, KH_GOP_SOFTMAX_XENT_GRAD, TP_IN(p, lab, fb), NULL);
    int32_t dz = TP2(&g, KH_GOP_ADDN, dl, tp_zeros(&g, TP_DIMS(MB, 4), 1));
    int32_t dh = TP2(&g, KH_GOP_RELU_GRAD, h, dz);
    int32_t db = TP1(&g, KH_GOP_BIAS_ADD_GRAD, dh);
    kh_gattr ta = kh_gattr_none();
    ta.transpose_a = 1;
    int32_t dw = tp_add(&g, KH_GOP_MATMUL, TP_IN(x, dh), &ta);
    TP2(&g, KH_GOP_APPLY_ADAM, w, dw);
    TP2(&g, KH_GOP_APPLY_ADAM, b, db);
    TP1(&g, KH_GOP_TANH, dh); /* dead */
    int32_t *map = malloc((size_t)g.n_nodes * sizeof *map);
    kh_graph out;
    th_opt_report rep;
    char err[256] = "";
    kh_status st = th_optimize(&g, 0, &out, map, &rep, err, sizeof err);
    CHECK(st == KH_OK && rep.n == 0 && out.n_nodes == g.n_nodes, "pipeline level 0: a copy (%s)", err);
    int ident = st == KH_OK;
    for (int32_t i = 0; ident && i < g.n_nodes; i++)
        ident = map[i] == i && out.nodes[i].op == g.nodes[i].op && out.nodes[i].n_in == g.nodes[i].n_in;
    CHECK(ident, "pipeline level 0: node for node");
    if (st == KH_OK) kh_graph_release(&out);
    st = th_optimize(&g, 1, &out, map, &rep, err, sizeof err);
    CHECK(st == KH_OK, "pipeline: %s", err);
    if (st == KH_OK) {
        static const char *const names[] = {"canonicalize", "constant-fold", "merge", "dead-code", "fuse-elemwise"};
        CHECK(rep.n == 5, "pipeline: 5 pass runs, got %d", rep.n);
        for (int k = 0; k < rep.n && k < 5; k++) {
            CHECK(strcmp(rep.run[k].name, names[k]) == 0, "pipeline: pass %d is %s, not %s", k, names[k], rep.run[k].name);
            CHECK(rep.run[k].nodes_before == (k ? rep.run[k - 1].nodes_after : g.n_nodes), "pipeline: node counts chain");
            printf("    %-14s %3d -> %3d nodes, %2d rewrites\n", rep.run[k].name, rep.run[k].nodes_before,
                   rep.run[k].nodes_after, rep.run[k].changed);
        }
        CHECK(rep.n == 5 && rep.run[4].nodes_after == out.n_nodes, "pipeline: the last run's count is the result's");
        CHECK(rep.n == 5 && rep.run[0].changed == 1 && rep.run[1].changed == 2 && rep.run[2].changed >= 4 &&
                  rep.run[3].changed >= 1 && rep.run[4].changed >= 1, "pipeline: every pass rewrote something");
        CHECK(tp_count(&out, KH_GOP_MATMUL) == 2 && tp_count(&out, KH_GOP_ZEROS) == 0 && tp_count(&out, KH_GOP_NEG) == 0 &&
                  tp_count(&out, KH_GOP_TANH) == 0 && tp_count(&out, KH_GOP_APPLY_ADAM) == 2 && tp_fused_form(&out),
              "pipeline: one forward MatMul + the weight gradient's, no Zeros, no Neg, dead Tanh gone (%s)", tp_ops(&out));
        tp_opts o = tp_default_opts();
        o.label_below = 4;
        tp_equiv(&g, &out, map, &o, "pipeline: every pass on one graph");
        kh_graph_release(&out);
    }
    free(map);
    kh_graph_release(&g);
}

// --- random graphs ----------------------------------------------------------------------------------------------
/* Graphs over one shape (N,6) with (6) vectors: element-wise chains, sums, biases, MatMuls, Reshape round trips,
 * Slice/Concat tilings, reverses, zeros, exact duplicates of earlier nodes, Elemwise programs, dropout, OUTPUT
 * flags, Apply ops; each pass alone and the pipeline must keep every mapped value. */
typedef struct rgen {
    kh_graph *g;
    kh_rng *r;
    int32_t full[512], vec[512];
    int nf, nv;
} rgen;

static int32_t pick(rgen *q, const int32_t *pool, int n) {
    uint64_t k = kh_rng_uniform(q->r) < 0.7 ? (uint64_t)n - 1 - kh_rng_below(q->r, (uint64_t)(n < 6 ? n : 6))
                                            : kh_rng_below(q->r, (uint64_t)n);
    return pool[k];
}

static int32_t pf(rgen *q) { return pick(q, q->full, q->nf); }
static int32_t pv(rgen *q) { return pick(q, q->vec, q->nv); }
static uint64_t below(rgen *q, uint64_t n) { return kh_rng_below(q->r, n); }

static void random_step(rgen *q) {
    kh_graph *g = q->g;
    int32_t y = -1, yv = -1;
    static const uint32_t un[] = {KH_GOP_NEG, KH_GOP_RELU, KH_GOP_SIGMOID, KH_GOP_TANH};
    static const uint32_t bin[] = {KH_GOP_ADD, KH_GOP_SUB, KH_GOP_MUL, KH_GOP_RELU_GRAD, KH_GOP_SIGMOID_GRAD,
                                   KH_GOP_TANH_GRAD};
    switch (below(q, 13)) {
    case 0: y = TP1(g, un[below(q, 4)], pf(q)); break;
    case 1: y = dropout(g, below(q, 2) ? KH_GOP_DROPOUT : KH_GOP_DROPOUT_GRAD, pf(q), below(q, 2) ? 0.5f : 0.25f,
                        (int32_t)below(q, 3)); break;
    case 2: case 3: y = TP2(g, bin[below(q, 6)], pf(q), pf(q)); break;
    case 4: {
        int32_t in[10];
        int k = 1 + (int)below(q, 10);
        for (int j = 0; j < k; j++) in[j] = pf(q);
        y = tp_add(g, KH_GOP_ADDN, in, k, NULL);
        break;
    }
    case 5: y = TP2(g, KH_GOP_BIAS_ADD, pf(q), pv(q)); break;
    case 6: {
        kh_gattr t = kh_gattr_none();
        t.transpose_b = (int32_t)below(q, 2);
        y = tp_add(g, KH_GOP_MATMUL, TP_IN(pf(q), tp_var(g, 0, 0, TP_DIMS(6, 6))), &t);
        break;
    }
    case 7: {
        static const int64_t d23[3] = {MB, 2, 3}, d32[3] = {MB, 3, 2};
        int32_t m = tp_reshape(g, pf(q), below(q, 2) ? d23 : d32, 3);
        if (below(q, 2)) m = reverse(g, m, 1 + (int32_t)below(q, 2));
        if (below(q, 3) == 0) m = TP1(g, un[below(q, 4)], m);
        y = below(q, 4) ? tp_reshape(g, m, TP_DIMS(MB, 6)) : tp_reshape(g, tp_reshape(g, m, TP_DIMS(MB, 1, 6)), TP_DIMS(MB, 6));
        break;
    }
    case 8: {
        kh_gattr ax = attr_axis(1, 0, 0);
        int k = (int)below(q, 7);
        if (k == 0) y = slice(g, pf(q), 1, 0, 6);
        else if (k == 6) y = tp_add(g, KH_GOP_CONCAT, TP_IN(pf(q)), &ax);
        else y = tp_add(g, KH_GOP_CONCAT, TP_IN(slice(g, pf(q), 1, 0, k), slice(g, pf(q), 1, k, 6 - k)), &ax);
        break;
    }
    case 9: y = below(q, 2) ? reverse(g, pf(q), 1) : reverse(g, reverse(g, pf(q), 1), 1); break;
    case 10:
        switch (below(q, 5)) {
        case 0: yv = TP1(g, un[below(q, 4)], pv(q)); break;
        case 1: yv = TP2(g, bin[below(q, 3)], pv(q), pv(q)); break;
        case 2: yv = TP1(g, KH_GOP_BIAS_ADD_GRAD, pf(q)); break;
        case 3: yv = tp_zeros(g, TP_DIMS(6), 0); break;
        default: y = tp_zeros(g, TP_DIMS(MB, 6), 1); break;
        }
        break;
    case 11: { /* an exact duplicate of an earlier computation */
        int32_t i = (int32_t)below(q, (uint64_t)g->n_nodes);
        const kh_gnode *n = &g->nodes[i];
        if (n->op == KH_GOP_INPUT) break;
        kh_gnode copy = *n;
        int32_t in[16];
        if (copy.n_in > 0) memcpy(in, kh_graph_inputs(g, i), (size_t)copy.n_in * sizeof *in);
        int32_t id = kh_graph_add(g, copy.op, in, copy.n_in, &copy.attr, copy.dtype, copy.rank, copy.dims,
                                  copy.flags & KH_GVAL_BATCHED);
        CHECK(id >= 0, "duplicate of %s: %s", kh_gop_name(copy.op), g->err);
        if (id >= 0 && copy.rank == 2 && copy.dims[1] == 6 && (copy.flags & KH_GVAL_BATCHED)) y = id;
        else if (id >= 0 && copy.rank == 1 && copy.dims[0] == 6 && !(copy.flags & KH_GVAL_BATCHED)) yv = id;
        break;
    }
    default: { /* a small Elemwise program over full inputs and a vector */
        kh_gexpr e;
        memset(&e, 0, sizeof e);
        int32_t in[4];
        e.n_in = 1 + (int)below(q, 3);
        for (int j = 0; j < e.n_in; j++) {
            e.vec[j] = j > 0 && below(q, 3) == 0;
            in[j] = e.vec[j] ? pv(q) : pf(q);
        }
        e.n_ops = 1 + (int)below(q, 4);
        for (int k = 0; k < e.n_ops; k++) {
            int32_t a = k && below(q, 2) ? (int32_t)below(q, (uint64_t)k) : -1 - (int32_t)below(q, (uint64_t)e.n_in);
            int32_t c = k && below(q, 2) ? (int32_t)below(q, (uint64_t)k) : -1 - (int32_t)below(q, (uint64_t)e.n_in);
            switch (below(q, 3)) {
            case 0: e.ops[k] = (kh_gexpr_op){un[below(q, 4)], a, 0, 0, 0}; break;
            case 1: e.ops[k] = (kh_gexpr_op){KH_GOP_DROPOUT, a, 0, 0.5f, (int32_t)below(q, 3)}; break;
            default: e.ops[k] = (kh_gexpr_op){bin[below(q, 6)], a, c, 0, 0}; break;
            }
        }
        y = tp_elemwise(g, &e, in, e.n_in);
        break;
    }
    }
    if (y >= 0) {
        if (below(q, 10) == 0) flag_out(g, y);
        q->full[q->nf++] = y;
    }
    if (yv >= 0) q->vec[q->nv++] = yv;
}

static void random_graph(kh_graph *g, kh_rng *r) {
    *g = fresh();
    rgen q = {.g = g, .r = r};
    q.full[q.nf++] = tp_input(g, KH_GIN_X, KH_F32, TP_DIMS(MB, 6));
    q.full[q.nf++] = tp_input(g, KH_GIN_DY, KH_F32, TP_DIMS(MB, 6));
    q.vec[q.nv++] = tp_var(g, 1, 0, TP_DIMS(6));
    q.vec[q.nv++] = tp_var(g, 1, 1, TP_DIMS(6));
    int steps = 8 + (int)kh_rng_below(r, 40);
    for (int k = 0; k < steps && q.nf < 500 && q.nv < 500 && g->n_nodes < 400; k++) random_step(&q);
    tp_output(g, 0, q.full[q.nf - 1]);
    if (kh_rng_below(r, 2)) tp_output(g, 1, pf(&q));
    if (kh_rng_below(r, 2)) { /* training-style sinks */
        kh_gattr ta = kh_gattr_none();
        ta.transpose_a = 1;
        int32_t gw = tp_add(g, KH_GOP_MATMUL, TP_IN(pf(&q), pf(&q)), &ta);
        TP2(g, KH_GOP_APPLY_GRADIENT_DESCENT, tp_var(g, 0, 0, TP_DIMS(6, 6)), gw);
        TP2(g, kh_rng_below(r, 2) ? KH_GOP_APPLY_RMSPROP : KH_GOP_APPLY_ADAM, tp_var(g, 1, 0, TP_DIMS(6)), pv(&q));
    }
}

static void test_random_graphs(int count) {
    static const struct {
        const char *name;
        th_pass_fn fn;
    } passes[] = {{"canonicalize", th_pass_canon}, {"constant-fold", th_pass_constfold}, {"merge", th_pass_merge},
                  {"dead-code", th_pass_dce}, {"fuse-elemwise", th_pass_fuse}};
    kh_rng r;
    kh_rng_seed(&r, 4242);
    tp_opts o = tp_default_opts();
    o.quiet = 1;
    int bad = 0;
    long nodes_in = 0, nodes_out = 0, rewrites[5] = {0}, refused = 0;
    for (int k = 0; k < count; k++) {
        kh_graph g;
        random_graph(&g, &r);
        char what[96];
        for (size_t p = 0; p < sizeof passes / sizeof *passes; p++) {
            rewrite w = run(passes[p].fn, &g);
            snprintf(what, sizeof what, "random graph %d: %s", k, passes[p].name);
            rewrites[p] += w.changed;
            if (w.st != KH_OK || !tp_equiv(&g, &w.out, w.map, &o, what).ok) {
                bad++;
                tp_dump(&g, what);
            }
            done(&w);
        }
        int32_t *map = malloc((size_t)g.n_nodes * sizeof *map);
        kh_graph out;
        th_opt_report rep;
        char err[256] = "";
        kh_status st = th_optimize(&g, 1, &out, map, &rep, err, sizeof err);
        snprintf(what, sizeof what, "random graph %d: pipeline", k);
        CHECK(st == KH_OK, "%s: %s", what, err);
        if (st == KH_OK) {
            nodes_in += g.n_nodes;
            nodes_out += out.n_nodes;
            int ok = tp_equiv(&g, &out, map, &o, what).ok;
            CHECK(tp_fused_form(&out), "%s: every element-wise node fused, within the bounds", what);
            rewrite again = run(th_pass_fuse, &out); /* not a fixed point (test_fuse_boundaries), but exact */
            refused += again.changed;
            snprintf(what, sizeof what, "random graph %d: fuse after the pipeline", k);
            if (again.st != KH_OK || !tp_equiv(&out, &again.out, again.map, &o, what).ok) bad++;
            done(&again);
            if (!ok) {
                bad++;
                tp_dump(&g, what);
                tp_dump(&out, "optimised");
            }
            kh_graph_release(&out);
        } else {
            bad++;
        }
        free(map);
        kh_graph_release(&g);
    }
    CHECK(bad == 0, "random graphs: %d of %d rewrites changed a value", bad, count * 7);
    printf("  %-58s %d graphs, %ld -> %ld nodes\n    rewrites: canon %ld, fold %ld, merge %ld, dce %ld, fuse %ld; "
           "a second fusion after the pipeline: %ld\n", "random graphs: each pass alone, the pipeline, fuse again",
           count, nodes_in, nodes_out, rewrites[0], rewrites[1], rewrites[2], rewrites[3], rewrites[4], refused);
}

int main(void) {
    test_canon_rewrites();
    test_canon_keeps();
    test_canon_reshape_at_growth();
    test_constfold_elementwise();
    test_constfold_backward();
    test_constfold_cascade();
    test_merge_duplicates();
    test_merge_distinct();
    test_merge_effects();
    test_merge_shape_of();
    test_dce();
    test_fuse_dense();
    test_fuse_boundaries();
    test_fuse_bounds();
    test_fuse_dropout_programs();
    test_fuse_referenced();
    test_pipeline();
    test_random_graphs(1000);
    return kh_test_finish("test_theano_passes");
}
