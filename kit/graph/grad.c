/* kit/graph/grad.c — reverse-mode autodiff over the graph IR.
 *
 * Nodes are visited from y back to the leaves; each node's gradient is the aggregate of what its consumers
 * sent it, and the node's gradient function (grad_of) emits ordinary nodes that send gradients on to its
 * inputs. Aggregation: one contribution is used as is; contributions from Slices along one axis become a
 * Concat of the pieces (zeros where no slice read), so the unrolled recurrences cost O(T), not the O(T^2) of
 * padding every step's gradient to the whole sequence; anything else is summed by one AddN.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/graph.h"

typedef struct contrib {
    int32_t grad;     /* gradient node */
    int32_t slice_of; /* the Slice consumer it came through, or -1 */
    int32_t next;
} contrib;

typedef struct gctx {
    kh_graph *g;
    int32_t *head; /* per original node: first contribution, -1 none */
    contrib *pool;
    int32_t n_pool, cap_pool;
    kh_status st;
} gctx;

static int32_t emit(gctx *c, uint32_t op, const int32_t *in, int32_t n_in, const kh_gattr *a) {
    if (c->st != KH_OK) return -1;
    int32_t id = kh_graph_add(c->g, op, in, n_in, a, 0, 0, NULL, 0);
    if (id < 0) {
        c->st = KH_ERR_INTERNAL;
        return -1;
    }
    c->g->nodes[id].phase = 2;
    return id;
}

static int32_t emit1(gctx *c, uint32_t op, int32_t x, const kh_gattr *a) { return emit(c, op, &x, 1, a); }
static int32_t emit2(gctx *c, uint32_t op, int32_t x, int32_t y, const kh_gattr *a) {
    int32_t in[2] = {x, y};
    return emit(c, op, in, 2, a);
}

/* A zero block of node x's shape with `len` elements along `axis`: a backward node like every other. */
static int32_t zeros_like(gctx *c, const kh_gnode *x, int axis, int64_t len) {
    if (c->st != KH_OK) return -1;
    int64_t dims[KH_G_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = len;
    int32_t id = kh_graph_add(c->g, KH_GOP_ZEROS, NULL, 0, NULL, KH_F32, x->rank, dims, x->flags & KH_GVAL_BATCHED);
    if (id < 0) {
        c->st = KH_ERR_INTERNAL;
        return -1;
    }
    c->g->nodes[id].phase = 2;
    return id;
}

static void send(gctx *c, int32_t to, int32_t grad, int32_t slice_of) {
    if (c->st != KH_OK || grad < 0) return;
    if (c->n_pool == c->cap_pool) {
        int32_t nc = c->cap_pool ? c->cap_pool * 2 : 256;
        contrib *p = realloc(c->pool, (size_t)nc * sizeof *p);
        if (!p) {
            c->st = KH_ERR_NOMEM;
            return;
        }
        c->pool = p;
        c->cap_pool = nc;
    }
    c->pool[c->n_pool] = (contrib){grad, slice_of, c->head[to]};
    c->head[to] = c->n_pool++;
}

static int cmp_begin(const void *a, const void *b, const kh_graph *g) {
    int32_t sa = ((const int32_t *)a)[1], sb = ((const int32_t *)b)[1];
    return g->nodes[sa].attr.begin - g->nodes[sb].attr.begin;
}

/* Sum (or stitch) the gradients sent to `node`; -1 when none arrived. */
static int32_t aggregate(gctx *c, int32_t node) {
    int32_t n = 0, n_slice = 0, axis = -1, mixed_axis = 0;
    for (int32_t k = c->head[node]; k >= 0; k = c->pool[k].next) {
        n++;
        if (c->pool[k].slice_of >= 0) {
            int32_t ax = c->g->nodes[c->pool[k].slice_of].attr.axis;
            if (axis >= 0 && ax != axis) mixed_axis = 1;
            axis = ax;
            n_slice++;
        }
    }
    if (n == 0) return -1;
    if (n == 1 && n_slice == 0) return c->pool[c->head[node]].grad;
    int32_t *terms = malloc(((size_t)n + 1) * sizeof *terms);
    int32_t (*sl)[2] = malloc(((size_t)n + 1) * sizeof *sl);
    int32_t *pieces = malloc(((size_t)2 * n + 2) * sizeof *pieces);
    if (!terms || !sl || !pieces) {
        free(terms);
        free(sl);
        free(pieces);
        c->st = KH_ERR_NOMEM;
        return -1;
    }
    int32_t nt = 0, ns = 0;
    for (int32_t k = c->head[node]; k >= 0; k = c->pool[k].next) {
        if (c->pool[k].slice_of >= 0 && !mixed_axis) {
            sl[ns][0] = c->pool[k].grad;
            sl[ns][1] = c->pool[k].slice_of;
            ns++;
        } else if (c->pool[k].slice_of >= 0) {
            /* slices along different axes: pad this one alone */
            int32_t s = c->pool[k].slice_of;
            kh_gnode x = c->g->nodes[node];
            kh_gattr a = kh_gattr_none();
            a.axis = c->g->nodes[s].attr.axis;
            int32_t parts[3], np = 0;
            int32_t b = c->g->nodes[s].attr.begin, sz = c->g->nodes[s].attr.size;
            if (b > 0) parts[np++] = zeros_like(c, &x, a.axis, b);
            parts[np++] = c->pool[k].grad;
            if (b + sz < x.dims[a.axis]) parts[np++] = zeros_like(c, &x, a.axis, x.dims[a.axis] - b - sz);
            terms[nt++] = np == 1 ? parts[0] : emit(c, KH_GOP_CONCAT, parts, np, &a);
        } else {
            terms[nt++] = c->pool[k].grad;
        }
    }
    if (ns > 0) {
        /* insertion sort by begin (a handful to a few hundred pieces) */
        for (int32_t i = 1; i < ns; i++)
            for (int32_t j = i; j > 0 && cmp_begin(sl[j - 1], sl[j], c->g) > 0; j--) {
                int32_t t0 = sl[j][0], t1 = sl[j][1];
                sl[j][0] = sl[j - 1][0], sl[j][1] = sl[j - 1][1];
                sl[j - 1][0] = t0, sl[j - 1][1] = t1;
            }
        kh_gnode xs = c->g->nodes[node]; /* a copy: adding nodes may move the array */
        const kh_gnode *x = &xs;
        int64_t pos = 0;
        int32_t np = 0;
        int overlap = 0;
        for (int32_t i = 0; i < ns && c->st == KH_OK; i++) {
            const kh_gattr sa_v = c->g->nodes[sl[i][1]].attr, *sa = &sa_v;
            if (sa->begin < pos) overlap = 1;
            if (sa->begin > pos) pieces[np++] = zeros_like(c, x, axis, sa->begin - pos);
            pieces[np++] = sl[i][0];
            pos = sa->begin + sa->size;
        }
        if (overlap) {
            /* overlapping slices: stitch each separately and sum */
            for (int32_t i = 0; i < ns && c->st == KH_OK; i++) {
                const kh_gattr sa_v = c->g->nodes[sl[i][1]].attr, *sa = &sa_v;
                int32_t parts[3], q = 0;
                if (sa->begin > 0) parts[q++] = zeros_like(c, x, axis, sa->begin);
                parts[q++] = sl[i][0];
                if (sa->begin + sa->size < x->dims[axis]) parts[q++] = zeros_like(c, x, axis, x->dims[axis] - sa->begin - sa->size);
                kh_gattr a = kh_gattr_none();
                a.axis = axis;
                terms[nt++] = q == 1 ? parts[0] : emit(c, KH_GOP_CONCAT, parts, q, &a);
            }
        } else {
            if (pos < x->dims[axis]) pieces[np++] = zeros_like(c, x, axis, x->dims[axis] - pos);
            kh_gattr a = kh_gattr_none();
            a.axis = axis;
            terms[nt++] = np == 1 ? pieces[0] : emit(c, KH_GOP_CONCAT, pieces, np, &a);
        }
    }
    int32_t r = nt == 1 ? terms[0] : emit(c, KH_GOP_ADDN, terms, nt, NULL);
    free(terms);
    free(sl);
    free(pieces);
    return c->st == KH_OK ? r : -1;
}

/* Emit the gradients of node i's inputs from its output gradient d; `need` says which inputs want one. */
static void grad_of(gctx *c, int32_t i, int32_t d, const uint8_t *need) {
    kh_graph *g = c->g;
    kh_gnode nd = g->nodes[i]; /* copy: emitting may move the array */
    const int32_t *inp = kh_graph_inputs(g, i);
    int32_t a = nd.n_in > 0 ? inp[0] : -1, b = nd.n_in > 1 ? inp[1] : -1;
    int need_a = a >= 0 && need[a], need_b = b >= 0 && need[b];
    kh_gattr at = kh_gattr_none();
    at.layer = nd.attr.layer;
    switch (nd.op) {
    case KH_GOP_MATMUL: {
        /* also the rank-3 forms (graph.h): for y = x (N,T,K) W, dx = dy W^T stays (N,T,K) and dW = x^T dy is the
         * (N,T,K)^T (N,T,M) form; for y = x^T z of two sequences, dx = z dy^T and dz = x dy are (N,T,.) again */
        int ta = nd.attr.transpose_a, tb = nd.attr.transpose_b;
        if (need_a) {
            kh_gattr x = at;
            if (!ta) { x.transpose_a = 0; x.transpose_b = !tb; send(c, a, emit2(c, KH_GOP_MATMUL, d, b, &x), -1); }
            else { x.transpose_a = tb; x.transpose_b = 1; send(c, a, emit2(c, KH_GOP_MATMUL, b, d, &x), -1); }
        }
        if (need_b) {
            kh_gattr x = at;
            if (!tb) { x.transpose_a = !ta; x.transpose_b = 0; send(c, b, emit2(c, KH_GOP_MATMUL, a, d, &x), -1); }
            else { x.transpose_a = 1; x.transpose_b = ta; send(c, b, emit2(c, KH_GOP_MATMUL, d, a, &x), -1); }
        }
        return;
    }
    case KH_GOP_BIAS_ADD:
        if (need_a) send(c, a, d, -1);
        if (need_b) send(c, b, emit1(c, KH_GOP_BIAS_ADD_GRAD, d, &at), -1);
        return;
    case KH_GOP_ADD:
        if (need_a) send(c, a, d, -1);
        if (need_b) send(c, b, d, -1);
        return;
    case KH_GOP_SUB:
        if (need_a) send(c, a, d, -1);
        if (need_b) send(c, b, emit1(c, KH_GOP_NEG, d, &at), -1);
        return;
    case KH_GOP_ADDN:
        for (int k = 0; k < nd.n_in; k++)
            if (need[inp[k]]) send(c, kh_graph_inputs(g, i)[k], d, -1);
        return;
    case KH_GOP_MUL:
        if (need_a) send(c, a, emit2(c, KH_GOP_MUL, d, b, &at), -1);
        if (need_b) send(c, b, emit2(c, KH_GOP_MUL, d, a, &at), -1);
        return;
    case KH_GOP_NEG:
        if (need_a) send(c, a, emit1(c, KH_GOP_NEG, d, &at), -1);
        return;
    case KH_GOP_RELU: case KH_GOP_SIGMOID: case KH_GOP_TANH: case KH_GOP_SOFTMAX: {
        uint32_t op = nd.op == KH_GOP_RELU ? KH_GOP_RELU_GRAD : nd.op == KH_GOP_SIGMOID ? KH_GOP_SIGMOID_GRAD
                    : nd.op == KH_GOP_TANH ? KH_GOP_TANH_GRAD : KH_GOP_SOFTMAX_GRAD;
        if (need_a) send(c, a, emit2(c, op, i, d, &at), -1);
        return;
    }
    case KH_GOP_CONV2D: {
        kh_gattr x = at;
        x.padding = nd.attr.padding;
        x.strides[0] = nd.attr.strides[0];
        x.strides[1] = nd.attr.strides[1];
        if (need_a) { x.shape_of = a; send(c, a, emit2(c, KH_GOP_CONV2D_BACKPROP_INPUT, b, d, &x), -1); }
        if (need_b) { x.shape_of = b; send(c, b, emit2(c, KH_GOP_CONV2D_BACKPROP_FILTER, a, d, &x), -1); }
        return;
    }
    case KH_GOP_MAXPOOL: {
        kh_gattr x = nd.attr;
        x.shape_of = a;
        if (need_a) send(c, a, emit2(c, KH_GOP_MAXPOOL_GRAD, a, d, &x), -1);
        return;
    }
    case KH_GOP_RESHAPE: {
        kh_gattr x = at;
        x.shape_of = a;
        if (need_a) send(c, a, emit1(c, KH_GOP_RESHAPE, d, &x), -1);
        return;
    }
    case KH_GOP_SLICE:
        if (need_a) send(c, a, d, i);
        return;
    case KH_GOP_CONCAT: {
        int32_t pos = 0;
        for (int k = 0; k < nd.n_in; k++) {
            int32_t x = kh_graph_inputs(g, i)[k];
            int32_t sz = (int32_t)g->nodes[x].dims[nd.attr.axis];
            if (need[x]) {
                kh_gattr s = at;
                s.axis = nd.attr.axis;
                s.begin = pos;
                s.size = sz;
                send(c, x, emit1(c, KH_GOP_SLICE, d, &s), -1);
            }
            pos += sz;
        }
        return;
    }
    case KH_GOP_REVERSE: {
        kh_gattr x = at;
        x.axis = nd.attr.axis;
        if (need_a) send(c, a, emit1(c, KH_GOP_REVERSE, d, &x), -1);
        return;
    }
    case KH_GOP_MEAN: {
        kh_gattr x = at;
        x.axis = nd.attr.axis;
        x.size = (int32_t)g->nodes[a].dims[nd.attr.axis];
        if (need_a) send(c, a, emit1(c, KH_GOP_MEAN_GRAD, d, &x), -1);
        return;
    }
    case KH_GOP_GATHER: {
        kh_gattr x = at;
        x.shape_of = a;
        if (need_a) send(c, a, emit2(c, KH_GOP_GATHER_GRAD, b, d, &x), -1);
        return;
    }
    case KH_GOP_DROPOUT: {
        kh_gattr x = nd.attr;
        if (need_a) send(c, a, emit1(c, KH_GOP_DROPOUT_GRAD, d, &x), -1);
        return;
    }
    case KH_GOP_SOFTMAX_XENT: case KH_GOP_SIGMOID_XENT: {
        int32_t in3[3] = {inp[2], inp[1], d};
        uint32_t op = nd.op == KH_GOP_SOFTMAX_XENT ? KH_GOP_SOFTMAX_XENT_GRAD : KH_GOP_SIGMOID_XENT_GRAD;
        if (need_a) send(c, a, emit(c, op, in3, 3, &at), -1);
        return;
    }
    case KH_GOP_LSTM_SCAN: {
        /* dS reaches here stitched from the Slices that read h (and c) with zeros elsewhere: LstmScanGrad reads
         * only its components 0 and 1 (graph.h: only h and c of S are differentiable) */
        if (!need_a && !need_b) return;
        int32_t in3[3] = {i, b, d};
        int32_t dxw = emit(c, KH_GOP_LSTM_SCAN_GRAD, in3, 3, &at);
        if (need_a) send(c, a, dxw, -1);
        if (need_b) send(c, b, emit2(c, KH_GOP_LSTM_SCAN_GRAD_U, i, dxw, &at), -1);
        return;
    }
    case KH_GOP_INPUT: case KH_GOP_VARIABLE: case KH_GOP_ZEROS: case KH_GOP_FILL_BATCH:
        return;
    default:
        /* gradient ops, metrics, Apply: not differentiable here (no second derivatives are needed) */
        c->st = KH_ERR_UNSUPPORTED;
        snprintf(g->err, sizeof g->err, "autodiff: no gradient for %s (node %d)", kh_gop_name(nd.op), i);
        return;
    }
}

kh_status kh_graph_gradients(kh_graph *g, int32_t y, int32_t dy, const int32_t *wrt, int32_t n, int32_t *grads) {
    if (y < 0 || y >= g->n_nodes || dy < 0 || dy >= g->n_nodes) return KH_ERR_INVALID;
    int32_t n0 = g->n_nodes;
    uint8_t *reach = calloc((size_t)n0, 1); /* depends on some wrt node */
    uint8_t *live = calloc((size_t)n0, 1);  /* y depends on it */
    gctx c = {.g = g, .head = malloc((size_t)n0 * sizeof(int32_t)), .st = KH_OK};
    if (!reach || !live || !c.head) {
        free(reach);
        free(live);
        free(c.head);
        return KH_ERR_NOMEM;
    }
    for (int32_t i = 0; i < n0; i++) c.head[i] = -1;
    for (int32_t k = 0; k < n; k++) {
        grads[k] = -1;
        if (wrt[k] >= 0 && wrt[k] < n0) reach[wrt[k]] = 1;
    }
    for (int32_t i = 0; i < n0; i++) {
        const int32_t *in = kh_graph_inputs(g, i);
        for (int j = 0; j < g->nodes[i].n_in && !reach[i]; j++) reach[i] = reach[in[j]];
    }
    live[y] = 1;
    for (int32_t i = y; i >= 0; i--) {
        if (!live[i]) continue;
        const int32_t *in = kh_graph_inputs(g, i);
        for (int j = 0; j < g->nodes[i].n_in; j++) live[in[j]] = 1;
    }
    uint8_t *need = calloc((size_t)n0, 1);
    if (!need) c.st = KH_ERR_NOMEM;
    for (int32_t i = 0; need && i < n0; i++) need[i] = reach[i] && live[i];
    if (c.st == KH_OK) send(&c, y, dy, -1);
    for (int32_t i = y; i >= 0 && c.st == KH_OK; i--) {
        if (!need[i] || c.head[i] < 0) continue;
        int32_t d = aggregate(&c, i);
        if (d < 0) continue;
        int is_target = 0;
        for (int32_t k = 0; k < n; k++)
            if (wrt[k] == i) {
                grads[k] = d;
                is_target = 1;
            }
        if (!is_target || g->nodes[i].n_in > 0) grad_of(&c, i, d, need);
    }
    free(reach);
    free(live);
    free(need);
    free(c.head);
    free(c.pool);
    return c.st;
}
