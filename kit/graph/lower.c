/* kit/graph/lower.c — a kh_model_spec becomes four graphs of primitive ops (train, eval, predict,
 * probe) over one variable table. Layers lower to TensorFlow's ops for them: Dense = MatMul + BiasAdd +
 * activation, Conv2D (NHWC, HWIO kernel) + BiasAdd, MaxPool, Flatten = Reshape, Embedding = Gather,
 * GlobalAveragePooling1D = Mean, Dropout (training functions only). A recurrent layer is unrolled per time
 * step: x_t = Slice(x), z = x_t W + h U + b, four gate Slices, Sigmoid/Tanh, c = f c + i g, h = o tanh(c);
 * the initial state is zero, so step 0 has no h U and no f c term (exactly zero in Keras's graph too). With
 * opts.rnn_scan a direction is a scan instead: xw = BiasAdd(MatMul(x (N, T, C), W), b) for every step at once,
 * S = LstmScan(xw, U) holding the time loop, h read back by Slices of S (khost/kit/graph.h).
 * Bidirectional: the backward LSTM reads Reverse(x) and its sequence output is reversed back, as Keras's
 * go_backwards; the halves are concatenated on the feature axis. The loss is softmax (sigmoid) cross-entropy
 * on the logits, with Keras's probability clipping; its value and the metrics come from the same ops in the
 * train and eval functions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/graph.h"
#include "khost/kit/status.h"
#include "khost/kit/spec.h"
#include "khost/kit/optimizer.h"

typedef struct lctx {
    kh_graph *g;
    const kh_model_spec *spec;
    const kh_model_shapes *sh;
    int train;        /* dropout active */
    int rnn_scan;     /* LSTM directions as scans (kh_graph_lower_opts.rnn_scan) */
    char *err;
    size_t errlen;
    kh_status st;
    int32_t *var_node; /* per model var: the Variable node in this graph */
    const kh_model_graphs *m;
} lctx;

static int32_t add(lctx *c, uint32_t op, const int32_t *in, int32_t n, const kh_gattr *a, int32_t layer) {
    if (c->st != KH_OK) return -1;
    kh_gattr at = a ? *a : kh_gattr_none();
    at.layer = layer;
    int32_t id = kh_graph_add(c->g, op, in, n, &at, 0, 0, NULL, 0);
    if (id < 0) {
        c->st = KH_ERR_INTERNAL;
        snprintf(c->err, c->errlen, "layer %d (%s): %s", layer,
                 layer >= 0 ? kh_layer_kind_name(c->spec->layers[layer].kind) : "loss", c->g->err);
    }
    return id;
}
static int32_t add1(lctx *c, uint32_t op, int32_t x, const kh_gattr *a, int32_t l) { return add(c, op, &x, 1, a, l); }
static int32_t add2(lctx *c, uint32_t op, int32_t x, int32_t y, const kh_gattr *a, int32_t l) {
    int32_t in[2] = {x, y};
    return add(c, op, in, 2, a, l);
}

static int32_t shaped(lctx *c, uint32_t op, uint32_t dtype, int32_t rank, const int64_t *dims, uint32_t flags,
                      const kh_gattr *a) {
    if (c->st != KH_OK) return -1;
    int32_t id = kh_graph_add(c->g, op, NULL, 0, a, dtype, rank, dims, flags);
    if (id < 0) {
        c->st = KH_ERR_INTERNAL;
        snprintf(c->err, c->errlen, "%s", c->g->err);
    }
    return id;
}

static int32_t reshape(lctx *c, int32_t x, int32_t rank, const int64_t *dims, int32_t layer) {
    if (c->st != KH_OK) return -1;
    kh_gattr a = kh_gattr_none();
    a.layer = layer;
    int32_t id = kh_graph_add(c->g, KH_GOP_RESHAPE, &x, 1, &a, 0, rank, dims, c->g->nodes[x].flags & KH_GVAL_BATCHED);
    if (id < 0) {
        c->st = KH_ERR_INTERNAL;
        snprintf(c->err, c->errlen, "layer %d: %s", layer, c->g->err);
    }
    return id;
}

static int32_t var(lctx *c, int32_t layer, int32_t slot) {
    int32_t v = kh_model_graphs_var(c->m, layer, slot);
    if (v < 0) {
        c->st = KH_ERR_INTERNAL;
        snprintf(c->err, c->errlen, "layer %d: no variable for slot %d", layer, slot);
        return -1;
    }
    if (c->var_node[v] >= 0) return c->var_node[v];
    kh_gattr a = kh_gattr_none();
    a.layer = layer;
    a.slot = slot;
    const kh_gvar *gv = &c->m->vars[v];
    c->var_node[v] = shaped(c, KH_GOP_VARIABLE, KH_F32, gv->rank, gv->dims, 0, &a);
    return c->var_node[v];
}

static int32_t activation(lctx *c, int32_t x, uint32_t act, int32_t layer) {
    switch (act) {
    case KH_ACT_RELU: return add1(c, KH_GOP_RELU, x, NULL, layer);
    case KH_ACT_SIGMOID: return add1(c, KH_GOP_SIGMOID, x, NULL, layer);
    case KH_ACT_TANH: return add1(c, KH_GOP_TANH, x, NULL, layer);
    case KH_ACT_SOFTMAX: return add1(c, KH_GOP_SOFTMAX, x, NULL, layer);
    default: return x;
    }
}

/* One LSTM direction as a scan (rnn_scan): the input projection of every step as one MatMul of x (N, T, C),
 * the time loop inside LstmScan; h read back from S's component 0. */
static int32_t lstm_scan(lctx *c, int32_t x, int32_t W, int32_t Uw, int32_t b, int32_t layer, int64_t T, int64_t U,
                         int return_sequences, int reverse) {
    int64_t N = c->g->max_batch;
    int32_t xw = add2(c, KH_GOP_BIAS_ADD, add2(c, KH_GOP_MATMUL, x, W, NULL, layer), b, NULL, layer);
    int32_t S = add2(c, KH_GOP_LSTM_SCAN, xw, Uw, NULL, layer);
    kh_gattr h = kh_gattr_none(); /* component 0 of S: h */
    h.axis = 2;
    h.begin = 0;
    h.size = 1;
    if (return_sequences) {
        int64_t d3[3] = {N, T, U};
        int32_t out = reshape(c, add1(c, KH_GOP_SLICE, S, &h, layer), 3, d3, layer);
        if (reverse) {
            kh_gattr r = kh_gattr_none();
            r.axis = 1;
            out = add1(c, KH_GOP_REVERSE, out, &r, layer);
        }
        return out;
    }
    /* the last step processed (of the reversed sequence for the backward direction), as unrolled */
    kh_gattr last = kh_gattr_none();
    last.axis = 1;
    last.begin = (int32_t)(T - 1);
    last.size = 1;
    int64_t d2[2] = {N, U};
    return reshape(c, add1(c, KH_GOP_SLICE, add1(c, KH_GOP_SLICE, S, &last, layer), &h, layer), 2, d2, layer);
}

/* One LSTM direction over x (N, T, C) with the variables of (layer, slot0..slot0+2). */
static int32_t lstm(lctx *c, int32_t x, int32_t layer, int32_t slot0, int64_t T, int64_t C, int64_t U,
                    int return_sequences, int reverse) {
    int32_t W = var(c, layer, slot0), Uw = var(c, layer, slot0 + 1), b = var(c, layer, slot0 + 2);
    int64_t N = c->g->max_batch;
    if (reverse) {
        kh_gattr r = kh_gattr_none();
        r.axis = 1;
        x = add1(c, KH_GOP_REVERSE, x, &r, layer);
    }
    if (c->rnn_scan) return lstm_scan(c, x, W, Uw, b, layer, T, U, return_sequences, reverse);
    int32_t *hs = return_sequences ? malloc((size_t)T * sizeof *hs) : NULL;
    if (return_sequences && !hs) {
        c->st = KH_ERR_NOMEM;
        snprintf(c->err, c->errlen, "layer %d: out of memory", layer);
        return -1;
    }
    int32_t h = -1, cs = -1;
    int64_t d2[2] = {N, C}, d3[3] = {N, 1, U};
    for (int64_t t = 0; t < T && c->st == KH_OK; t++) {
        kh_gattr s = kh_gattr_none();
        s.axis = 1;
        s.begin = (int32_t)t;
        s.size = 1;
        int32_t xt = reshape(c, add1(c, KH_GOP_SLICE, x, &s, layer), 2, d2, layer);
        int32_t z = add2(c, KH_GOP_MATMUL, xt, W, NULL, layer);
        if (h >= 0) z = add2(c, KH_GOP_ADD, z, add2(c, KH_GOP_MATMUL, h, Uw, NULL, layer), NULL, layer);
        z = add2(c, KH_GOP_BIAS_ADD, z, b, NULL, layer);
        int32_t gate[4];
        for (int k = 0; k < 4; k++) {
            kh_gattr q = kh_gattr_none();
            q.axis = 1;
            q.begin = (int32_t)(k * U);
            q.size = (int32_t)U;
            gate[k] = add1(c, KH_GOP_SLICE, z, &q, layer);
        }
        int32_t i = add1(c, KH_GOP_SIGMOID, gate[0], NULL, layer);
        int32_t f = add1(c, KH_GOP_SIGMOID, gate[1], NULL, layer);
        int32_t g = add1(c, KH_GOP_TANH, gate[2], NULL, layer);
        int32_t o = add1(c, KH_GOP_SIGMOID, gate[3], NULL, layer);
        int32_t ig = add2(c, KH_GOP_MUL, i, g, NULL, layer);
        cs = cs >= 0 ? add2(c, KH_GOP_ADD, add2(c, KH_GOP_MUL, f, cs, NULL, layer), ig, NULL, layer) : ig;
        h = add2(c, KH_GOP_MUL, o, add1(c, KH_GOP_TANH, cs, NULL, layer), NULL, layer);
        if (hs) hs[t] = reshape(c, h, 3, d3, layer);
    }
    int32_t out = h;
    if (hs && c->st == KH_OK) {
        kh_gattr q = kh_gattr_none();
        q.axis = 1;
        out = add(c, KH_GOP_CONCAT, hs, (int32_t)T, &q, layer);
        if (reverse) out = add1(c, KH_GOP_REVERSE, out, &q, layer);
    }
    free(hs);
    return out;
}

/* The forward pass; *pre_act receives the last layer's pre-activation (the logits). */
static int32_t forward(lctx *c, int32_t x, int32_t *pre_act) {
    const kh_model_spec *sp = c->spec;
    int64_t N = c->g->max_batch;
    for (int32_t i = 0; i < sp->n_layers && c->st == KH_OK; i++) {
        const kh_layer_spec *l = &sp->layers[i];
        const kh_layer_shapes *ls = &c->sh->layers[i];
        int32_t pre = -1;
        switch (l->kind) {
        case KH_LAYER_DENSE:
            if (ls->in_rank != 1) {
                c->st = KH_ERR_UNSUPPORTED;
                snprintf(c->err, c->errlen, "layer %d (dense): input of rank %d (only vectors)", i, ls->in_rank);
                return -1;
            }
            pre = add2(c, KH_GOP_BIAS_ADD, add2(c, KH_GOP_MATMUL, x, var(c, i, 0), NULL, i), var(c, i, 1), NULL, i);
            x = activation(c, pre, l->activation, i);
            break;
        case KH_LAYER_ACTIVATION:
            if (l->activation == KH_ACT_SOFTMAX && ls->in_rank == 3) {
                c->st = KH_ERR_UNSUPPORTED;
                snprintf(c->err, c->errlen, "layer %d (activation): softmax over the channels of an image tensor", i);
                return -1;
            }
            pre = x;
            x = activation(c, x, l->activation, i);
            break;
        case KH_LAYER_DROPOUT:
            if (c->train && l->rate > 0.0f) {
                kh_gattr a = kh_gattr_none();
                a.rate = l->rate;
                a.salt = i;
                x = add1(c, KH_GOP_DROPOUT, x, &a, i);
            }
            break;
        case KH_LAYER_FLATTEN: {
            int64_t d[2] = {N, ls->out_numel};
            x = reshape(c, x, 2, d, i);
            break;
        }
        case KH_LAYER_CONV2D: {
            kh_gattr a = kh_gattr_none();
            a.padding = (int32_t)l->padding;
            a.strides[0] = l->strides[0] > 0 ? l->strides[0] : 1;
            a.strides[1] = l->strides[1] > 0 ? l->strides[1] : 1;
            pre = add2(c, KH_GOP_BIAS_ADD, add2(c, KH_GOP_CONV2D, x, var(c, i, 0), &a, i), var(c, i, 1), NULL, i);
            if (l->activation == KH_ACT_SOFTMAX) {
                c->st = KH_ERR_UNSUPPORTED;
                snprintf(c->err, c->errlen, "layer %d (conv2d): softmax over the channels of an image tensor", i);
                return -1;
            }
            x = activation(c, pre, l->activation, i);
            break;
        }
        case KH_LAYER_MAXPOOL2D: {
            kh_gattr a = kh_gattr_none();
            a.window[0] = l->kernel[0];
            a.window[1] = l->kernel[1];
            a.strides[0] = l->strides[0] > 0 ? l->strides[0] : l->kernel[0];
            a.strides[1] = l->strides[1] > 0 ? l->strides[1] : l->kernel[1];
            a.padding = (int32_t)l->padding;
            x = add1(c, KH_GOP_MAXPOOL, x, &a, i);
            break;
        }
        case KH_LAYER_EMBEDDING:
            x = add2(c, KH_GOP_GATHER, var(c, i, 0), x, NULL, i);
            break;
        case KH_LAYER_LSTM:
            x = lstm(c, x, i, 0, ls->in_shape[0], ls->in_shape[1], l->units, l->return_sequences, 0);
            break;
        case KH_LAYER_BILSTM: {
            int64_t T = ls->in_shape[0], C = ls->in_shape[1];
            int32_t f = lstm(c, x, i, 0, T, C, l->units, l->return_sequences, 0);
            int32_t b = lstm(c, x, i, 3, T, C, l->units, l->return_sequences, 1);
            kh_gattr a = kh_gattr_none();
            a.axis = l->return_sequences ? 2 : 1;
            x = add2(c, KH_GOP_CONCAT, f, b, &a, i);
            break;
        }
        case KH_LAYER_GAP1D: {
            kh_gattr a = kh_gattr_none();
            a.axis = 1;
            x = add1(c, KH_GOP_MEAN, x, &a, i);
            break;
        }
        default:
            c->st = KH_ERR_UNSUPPORTED;
            snprintf(c->err, c->errlen, "layer %d: kind %u has no lowering", i, l->kind);
            return -1;
        }
        if (i == sp->n_layers - 1) *pre_act = pre;
    }
    return c->st == KH_OK ? x : -1;
}

int32_t kh_model_graphs_var(const kh_model_graphs *m, int32_t layer, int32_t slot) {
    for (int32_t v = 0; v < m->n_vars; v++)
        if (m->vars[v].layer == layer && m->vars[v].slot == slot) return v;
    return -1;
}

void kh_model_graphs_free(kh_model_graphs *m) {
    if (!m) return;
    for (int f = 0; f < KH_GFN_COUNT; f++) kh_graph_release(&m->fn[f]);
    kh_model_shapes_free(&m->shapes);
    free(m->vars);
    free(m->probe_grads);
    memset(m, 0, sizeof *m);
}

static int32_t feed(lctx *c, int which, uint32_t dtype, int32_t rank, const int64_t *dims) {
    kh_gattr a = kh_gattr_none();
    a.input_id = which;
    return shaped(c, KH_GOP_INPUT, dtype, rank, dims, KH_GVAL_BATCHED, &a);
}

static int32_t model_input(lctx *c) {
    const kh_model_graphs *m = c->m;
    int64_t d[4] = {c->g->max_batch, 0, 0, 0};
    for (int i = 0; i < m->input_rank; i++) d[i + 1] = m->input_shape[i];
    return feed(c, KH_GIN_X, m->input_dtype, m->input_rank + 1, d);
}

/* Loss, metrics: outputs [0] loss sum and [1] correct count; returns the per-sample loss node. */
static int32_t loss_and_metrics(lctx *c, int32_t y, int32_t logits) {
    int64_t d[1] = {c->g->max_batch};
    int32_t labels = feed(c, KH_GIN_LABELS, KH_I32, 1, d);
    int32_t in[3] = {logits, labels, y};
    int32_t loss = add(c, c->m->loss == KH_LOSS_BINARY_CROSSENTROPY ? KH_GOP_SIGMOID_XENT : KH_GOP_SOFTMAX_XENT, in,
                       3, NULL, -1);
    int32_t ls = add1(c, KH_GOP_LOSS_SUM, loss, NULL, -1);
    int32_t cc = add2(c, KH_GOP_CORRECT_COUNT, y, labels, NULL, -1);
    if (c->st != KH_OK) return -1;
    for (int32_t i = loss; i < c->g->n_nodes; i++) c->g->nodes[i].phase = 1;
    c->g->nodes[ls].flags |= KH_GVAL_OUTPUT;
    c->g->nodes[cc].flags |= KH_GVAL_OUTPUT;
    c->g->outputs[KH_GOUT_LOSS_SUM] = ls;
    c->g->outputs[KH_GOUT_CORRECT] = cc;
    c->g->n_outputs = 2;
    return loss;
}

static uint32_t apply_op(uint32_t kind) {
    switch (kind) {
    case KH_OPT_RMSPROP: return KH_GOP_APPLY_RMSPROP;
    case KH_OPT_ADAM: return KH_GOP_APPLY_ADAM;
    case KH_OPT_ADADELTA: return KH_GOP_APPLY_ADADELTA;
    default: return KH_GOP_APPLY_GRADIENT_DESCENT;
    }
}

static kh_status build(kh_model_graphs *m, kh_gfn fn, const kh_model_spec *spec, const kh_graph_lower_opts *o,
                       char *err, size_t errlen) {
    kh_graph *g = &m->fn[fn];
    kh_status st = kh_graph_init(g, o->max_batch);
    if (st != KH_OK) return kh_errf(err, errlen, st, "max_batch %lld", (long long)o->max_batch);
    int32_t *vn = malloc(((size_t)m->n_vars + 1) * sizeof *vn);
    if (!vn) return kh_errf(err, errlen, KH_ERR_NOMEM, "out of memory");
    for (int32_t v = 0; v < m->n_vars; v++) vn[v] = -1;
    lctx c = {.g = g, .spec = spec, .sh = &m->shapes, .err = err, .errlen = errlen, .st = KH_OK, .var_node = vn,
              .m = m};
    c.train = (fn == KH_GFN_TRAIN || fn == KH_GFN_PROBE) && !o->deterministic;
    c.rnn_scan = o->rnn_scan != 0;
    int32_t x = model_input(&c), logits = -1;
    int32_t y = forward(&c, x, &logits);
    if (c.st == KH_OK && (fn == KH_GFN_TRAIN || fn == KH_GFN_EVAL)) {
        int32_t loss = loss_and_metrics(&c, y, logits);
        if (c.st == KH_OK && fn == KH_GFN_TRAIN) {
            int64_t d[1] = {g->max_batch};
            int32_t seed = shaped(&c, KH_GOP_FILL_BATCH, KH_F32, 1, d, KH_GVAL_BATCHED, NULL);
            int32_t *gr = malloc(((size_t)m->n_vars + 1) * sizeof *gr);
            if (!gr) c.st = KH_ERR_NOMEM;
            if (c.st == KH_OK) {
                c.st = kh_graph_gradients(g, loss, seed, vn, m->n_vars, gr);
                if (c.st != KH_OK) snprintf(err, errlen, "autodiff: %s", g->err);
            }
            for (int32_t v = 0; v < m->n_vars && c.st == KH_OK; v++) {
                if (gr[v] < 0) continue; /* a weight the loss does not reach keeps its value */
                int32_t a = add2(&c, apply_op(m->opt.kind), vn[v], gr[v], NULL, m->vars[v].layer);
                if (a >= 0) g->nodes[a].phase = 3;
            }
            free(gr);
        }
    } else if (c.st == KH_OK && fn == KH_GFN_PREDICT) {
        g->nodes[y].flags |= KH_GVAL_OUTPUT;
        g->outputs[KH_GOUT_Y] = y;
        g->n_outputs = 1;
    } else if (c.st == KH_OK && fn == KH_GFN_PROBE) {
        int64_t ydims[KH_G_MAX_RANK];
        memcpy(ydims, g->nodes[y].dims, sizeof ydims);
        int32_t dy = feed(&c, KH_GIN_DY, KH_F32, g->nodes[y].rank, ydims);
        g->keep_forward = 1; /* backward may run several times after one forward */
        int32_t nw = m->n_vars + 1;
        int32_t *wrt = malloc((size_t)nw * sizeof *wrt), *gr = malloc((size_t)nw * sizeof *gr);
        if (!wrt || !gr) c.st = KH_ERR_NOMEM;
        if (c.st == KH_OK) {
            memcpy(wrt, vn, (size_t)m->n_vars * sizeof *wrt);
            wrt[m->n_vars] = m->input_dtype == KH_F32 ? x : -1;
            c.st = kh_graph_gradients(g, y, dy, wrt, nw, gr);
            if (c.st != KH_OK) snprintf(err, errlen, "autodiff: %s", g->err);
        }
        if (c.st == KH_OK) {
            memcpy(m->probe_grads, gr, (size_t)m->n_vars * sizeof *gr);
            g->nodes[y].flags |= KH_GVAL_OUTPUT;
            g->outputs[KH_GOUT_Y] = y;
            g->outputs[KH_GOUT_DX] = gr[m->n_vars];
            if (gr[m->n_vars] >= 0) g->nodes[gr[m->n_vars]].flags |= KH_GVAL_OUTPUT;
            for (int32_t v = 0; v < m->n_vars; v++)
                if (gr[v] >= 0) g->nodes[gr[v]].flags |= KH_GVAL_OUTPUT;
            g->n_outputs = 2;
        }
        free(wrt);
        free(gr);
    }
    free(vn);
    return c.st;
}

void kh_graph_caps(kh_caps *c) {
    for (uint32_t k = KH_LAYER_DENSE; k < KH_LAYER_KIND_END; k++) c->layer_kinds |= 1u << k;
    for (uint32_t a = 0; a < KH_ACT_END; a++) c->activations |= 1u << a;
    c->losses = (1u << KH_LOSS_NONE) | (1u << KH_LOSS_CATEGORICAL_CROSSENTROPY) | (1u << KH_LOSS_BINARY_CROSSENTROPY);
    c->optimizers = (1u << KH_OPT_SGD) | (1u << KH_OPT_RMSPROP) | (1u << KH_OPT_ADAM) | (1u << KH_OPT_ADADELTA);
    c->flags = KH_CAP_CONV_SAME | KH_CAP_LSTM_SEQUENCES | KH_CAP_PREDICT | KH_CAP_PROBES;
    c->image_layout = KH_LAYOUT_NHWC;
}

kh_status kh_graph_lower(const kh_model_spec *spec, const kh_graph_lower_opts *o, kh_model_graphs *m, char *err,
                         size_t errlen) {
    memset(m, 0, sizeof *m);
    if (!spec || !o || o->max_batch < 1) return kh_errf(err, errlen, KH_ERR_INVALID, "no spec or max_batch < 1");
    kh_status st = kh_spec_infer(spec, &m->shapes, err, errlen);
    if (st != KH_OK) return st;
    if (o->onehot_input) {
        kh_model_graphs_free(m);
        return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "one-hot input expansion inside the graph");
    }
    m->loss = spec->loss;
    m->opt = kh_optimizer_resolve(&spec->optimizer);
    m->deterministic = o->deterministic;
    m->input_dtype = spec->input_onehot > 0 ? KH_F32 : spec->input_dtype;
    m->input_rank = m->shapes.in_rank;
    memcpy(m->input_shape, m->shapes.in_shape, sizeof m->input_shape);
    m->input_numel = 1;
    for (int i = 0; i < m->input_rank; i++) m->input_numel *= m->input_shape[i];
    const kh_layer_shapes *last = &m->shapes.layers[spec->n_layers - 1];
    m->out_rank = last->out_rank;
    memcpy(m->out_shape, last->out_shape, sizeof m->out_shape);
    m->out_numel = last->out_numel;
    const kh_layer_spec *ll = &spec->layers[spec->n_layers - 1];
    uint32_t last_act = (ll->kind == KH_LAYER_DENSE || ll->kind == KH_LAYER_CONV2D || ll->kind == KH_LAYER_ACTIVATION)
                            ? ll->activation : KH_ACT_LINEAR;
    if ((spec->loss == KH_LOSS_CATEGORICAL_CROSSENTROPY && (last_act != KH_ACT_SOFTMAX || last->out_rank != 1)) ||
        (spec->loss == KH_LOSS_BINARY_CROSSENTROPY && (last_act != KH_ACT_SIGMOID || last->out_numel != 1))) {
        kh_model_graphs_free(m);
        return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "layer %d (%s): %s needs a %s output of (N, %s)",
                       spec->n_layers - 1, kh_layer_kind_name(ll->kind), kh_loss_name(spec->loss),
                       spec->loss == KH_LOSS_BINARY_CROSSENTROPY ? "sigmoid" : "softmax",
                       spec->loss == KH_LOSS_BINARY_CROSSENTROPY ? "1" : "classes");
    }
    int32_t nv = 0;
    for (int32_t l = 0; l < spec->n_layers; l++) nv += m->shapes.layers[l].n_params;
    m->vars = calloc((size_t)nv + 1, sizeof *m->vars);
    m->probe_grads = calloc((size_t)nv + 1, sizeof *m->probe_grads);
    if (!m->vars || !m->probe_grads) {
        kh_model_graphs_free(m);
        return kh_errf(err, errlen, KH_ERR_NOMEM, "out of memory");
    }
    for (int32_t l = 0; l < spec->n_layers; l++)
        for (int32_t s = 0; s < m->shapes.layers[l].n_params; s++) {
            const kh_param_shape *p = &m->shapes.layers[l].params[s];
            kh_gvar *v = &m->vars[m->n_vars++];
            v->layer = l;
            v->slot = s;
            v->numel = p->numel;
            v->rank = p->rank;
            memcpy(v->dims, p->dims, sizeof v->dims);
            v->name = p->name;
        }
    for (int f = 0; f < KH_GFN_COUNT; f++) {
        if ((f == KH_GFN_TRAIN || f == KH_GFN_EVAL) && spec->loss == KH_LOSS_NONE) continue;
        st = build(m, (kh_gfn)f, spec, o, err, errlen);
        if (st != KH_OK) {
            kh_model_graphs_free(m);
            return st;
        }
    }
    return KH_OK;
}
