/* kit/ref/model.c — the whole-model reference: a kh_model_spec run layer by layer with the reference
 * kernels, in float64. It is what `khost verify` and the parity tests compare a backend's forward, backward
 * and training step against, so it mirrors the backend probes of khost/backend.h: forward (training flag,
 * dropout optional), backward from an output gradient (parameter gradients overwritten), loss and accuracy,
 * one optimizer step with Keras 2 semantics. Shapes come from kh_spec_infer so every party agrees on them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/formulas.h" /* KH_EPSILON */
#include "khost/kit/ref.h"
#include "khost/kit/status.h"
#include "khost/kit/rng.h"
#include "khost/kit/spec.h"

// ---------------------------------------------------------------------------------------------------------
// state

typedef struct ref_layer {
    kh_layer_spec spec;
    const kh_layer_shapes *sh;
    double *w[KH_MAX_SLOTS];                  // weights, canonical layout (slot numel)
    double *g[KH_MAX_SLOTS];                  // gradients of the last backward (slot numel)
    double *opt1[KH_MAX_SLOTS], *opt2[KH_MAX_SLOTS]; // optimizer state, allocated on the first step
    // per-batch buffers, sized for cap_B samples
    double *out;                              // (B, out_numel)
    double *h[2], *c[2], *gates[2];           // LSTM saved values per direction: (B, T, U), (B, T, 4U)
    uint8_t *mask;                            // dropout mask (B, in_numel)
    int mask_active;                          // the last forward applied the mask
} ref_layer;

struct kh_ref_model {
    kh_model_spec spec;
    kh_layer_spec *layer_specs; // a copy: the caller's spec need not outlive create
    kh_model_shapes shapes;
    ref_layer *L;
    int64_t in_numel;   // per sample, the real (one-hot expanded) input
    int64_t max_numel;  // per sample, the largest activation anywhere
    int64_t cap_B, B;   // allocated batch, batch of the last forward (0: none yet)
    double *x;          // (B, in_numel) the input in float64 (unused for an Embedding input)
    int32_t *xi;        // (B, T) indices for an Embedding input
    double *dx;         // (B, in_numel) input gradient, f32-input models only
    double *dbuf[2];    // (B, max_numel) ping-pong activation gradients
    int dropout_on;
    uint64_t dropout_seed;
    int64_t n_train_forward; // training forwards since set_dropout: the mask stream index
    int64_t iterations; // optimizer steps taken
    char err[256];
};

static int index_input(const kh_ref_model *m) { return m->spec.input_dtype == KH_I32; }
static int embedding_input(const kh_ref_model *m) { return index_input(m) && m->spec.input_onehot <= 0; }

// ---------------------------------------------------------------------------------------------------------
// create / free

static void free_batch_buffers(kh_ref_model *m) {
    for (int32_t l = 0; l < m->shapes.n_layers; l++) {
        ref_layer *L = &m->L[l];
        free(L->out);
        free(L->mask);
        L->out = NULL;
        L->mask = NULL;
        for (int d = 0; d < 2; d++) {
            free(L->h[d]);
            free(L->c[d]);
            free(L->gates[d]);
            L->h[d] = L->c[d] = L->gates[d] = NULL;
        }
    }
    free(m->x);
    free(m->xi);
    free(m->dx);
    free(m->dbuf[0]);
    free(m->dbuf[1]);
    m->x = m->dx = m->dbuf[0] = m->dbuf[1] = NULL;
    m->xi = NULL;
    m->cap_B = 0;
}

static double *dalloc(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(double)); }

// Size every per-batch buffer for B samples (keeps them when already large enough).
static kh_status ensure_batch(kh_ref_model *m, int64_t B) {
    if (B <= m->cap_B) return KH_OK;
    free_batch_buffers(m);
    int ok = 1;
    for (int32_t l = 0; l < m->shapes.n_layers; l++) {
        ref_layer *L = &m->L[l];
        ok &= (L->out = dalloc(B * L->sh->out_numel)) != NULL;
        if (L->spec.kind == KH_LAYER_DROPOUT) ok &= (L->mask = calloc((size_t)(B * L->sh->in_numel + 1), 1)) != NULL;
        if (L->spec.kind == KH_LAYER_LSTM || L->spec.kind == KH_LAYER_BILSTM) {
            int64_t T = L->sh->in_shape[0], U = L->spec.units;
            for (int d = 0; d < (L->spec.kind == KH_LAYER_BILSTM ? 2 : 1); d++) {
                ok &= (L->h[d] = dalloc(B * T * U)) != NULL;
                ok &= (L->c[d] = dalloc(B * T * U)) != NULL;
                ok &= (L->gates[d] = dalloc(B * T * 4 * U)) != NULL;
            }
        }
    }
    if (embedding_input(m)) {
        ok &= (m->xi = calloc((size_t)(B * m->in_numel + 1), sizeof(int32_t))) != NULL;
    } else {
        ok &= (m->x = dalloc(B * m->in_numel)) != NULL;
    }
    if (!index_input(m)) ok &= (m->dx = dalloc(B * m->in_numel)) != NULL;
    ok &= (m->dbuf[0] = dalloc(B * m->max_numel)) != NULL;
    ok &= (m->dbuf[1] = dalloc(B * m->max_numel)) != NULL;
    if (!ok) {
        free_batch_buffers(m);
        return KH_ERRF_TO(m, KH_ERR_NOMEM, "ref model: out of memory for a batch of %lld", (long long)B);
    }
    m->cap_B = B;
    return KH_OK;
}

kh_status kh_ref_model_create(const kh_model_spec *spec, kh_ref_model **out, char *err, size_t errlen) {
    *out = NULL;
    kh_ref_model *m = calloc(1, sizeof *m);
    if (!m) return kh_errf(err, errlen, KH_ERR_NOMEM, "ref model: out of memory");
    kh_status st = kh_spec_infer(spec, &m->shapes, err, errlen);
    if (st != KH_OK) {
        free(m);
        return st;
    }
    m->spec = *spec;
    m->layer_specs = malloc((size_t)spec->n_layers * sizeof *m->layer_specs);
    m->L = calloc((size_t)spec->n_layers, sizeof *m->L);
    if (!m->layer_specs || !m->L) goto nomem;
    memcpy(m->layer_specs, spec->layers, (size_t)spec->n_layers * sizeof *m->layer_specs);
    m->spec.layers = m->layer_specs;
    m->spec.name = NULL; // not owned
    m->in_numel = 1;
    for (int i = 0; i < m->shapes.in_rank; i++) m->in_numel *= m->shapes.in_shape[i];
    m->max_numel = m->in_numel;
    for (int32_t l = 0; l < spec->n_layers; l++) {
        ref_layer *L = &m->L[l];
        L->spec = spec->layers[l];
        L->sh = &m->shapes.layers[l];
        if (L->sh->in_numel > m->max_numel) m->max_numel = L->sh->in_numel;
        if (L->sh->out_numel > m->max_numel) m->max_numel = L->sh->out_numel;
        for (int s = 0; s < L->sh->n_params; s++) {
            L->w[s] = dalloc(L->sh->params[s].numel);
            L->g[s] = dalloc(L->sh->params[s].numel);
            if (!L->w[s] || !L->g[s]) goto nomem;
        }
    }
    *out = m;
    return KH_OK;
nomem:
    kh_ref_model_free(m);
    return kh_errf(err, errlen, KH_ERR_NOMEM, "ref model: out of memory for the weights");
}

void kh_ref_model_free(kh_ref_model *m) {
    if (!m) return;
    if (m->L) {
        free_batch_buffers(m);
        for (int32_t l = 0; l < m->shapes.n_layers; l++) {
            for (int s = 0; s < KH_MAX_SLOTS; s++) {
                free(m->L[l].w[s]);
                free(m->L[l].g[s]);
                free(m->L[l].opt1[s]);
                free(m->L[l].opt2[s]);
            }
        }
    }
    free(m->L);
    free(m->layer_specs);
    kh_model_shapes_free(&m->shapes);
    free(m);
}

const kh_model_shapes *kh_ref_model_shapes(const kh_ref_model *m) { return &m->shapes; }
const char *kh_ref_model_last_error(const kh_ref_model *m) { return m->err; }
int64_t kh_ref_model_iterations(const kh_ref_model *m) { return m->iterations; }

void kh_ref_model_set_dropout(kh_ref_model *m, int enabled, uint64_t seed) {
    m->dropout_on = enabled != 0;
    m->dropout_seed = seed;
    m->n_train_forward = 0; // masks restart, so two models enabled alike draw alike
}

// ---------------------------------------------------------------------------------------------------------
// weights and gradients

static const kh_param_shape *slot_shape(const kh_ref_model *m, int32_t layer, int32_t slot) {
    if (layer < 0 || layer >= m->shapes.n_layers) return NULL;
    if (slot < 0 || slot >= m->shapes.layers[layer].n_params) return NULL;
    return &m->shapes.layers[layer].params[slot];
}

static kh_status check_slot(kh_ref_model *m, int32_t layer, int32_t slot, int64_t n) {
    const kh_param_shape *p = slot_shape(m, layer, slot);
    if (!p) return KH_ERRF_TO(m, KH_ERR_INVALID, "ref model: no weight (layer %d, slot %d)", layer, slot);
    if (p->numel != n)
        return KH_ERRF_TO(m, KH_ERR_INVALID, "ref model: layer %d slot %d (%s) has %lld elements, got %lld", layer,
                          slot, p->name, (long long)p->numel, (long long)n);
    return KH_OK;
}

kh_status kh_ref_model_set_weight(kh_ref_model *m, int32_t layer, int32_t slot, const double *w, int64_t n) {
    kh_status st = check_slot(m, layer, slot, n);
    if (st != KH_OK) return st;
    memcpy(m->L[layer].w[slot], w, (size_t)n * sizeof(double));
    return KH_OK;
}

kh_status kh_ref_model_set_weight_f32(kh_ref_model *m, int32_t layer, int32_t slot, const float *w, int64_t n) {
    kh_status st = check_slot(m, layer, slot, n);
    if (st != KH_OK) return st;
    for (int64_t i = 0; i < n; i++) m->L[layer].w[slot][i] = (double)w[i];
    return KH_OK;
}

kh_status kh_ref_model_get_weight(const kh_ref_model *m, int32_t layer, int32_t slot, double *w, int64_t n) {
    const kh_param_shape *p = slot_shape(m, layer, slot);
    if (!p || p->numel != n) return KH_ERR_INVALID;
    memcpy(w, m->L[layer].w[slot], (size_t)n * sizeof(double));
    return KH_OK;
}

double *kh_ref_model_weight(kh_ref_model *m, int32_t layer, int32_t slot) {
    return slot_shape(m, layer, slot) ? m->L[layer].w[slot] : NULL;
}

const double *kh_ref_model_grad(const kh_ref_model *m, int32_t layer, int32_t slot) {
    return slot_shape(m, layer, slot) ? m->L[layer].g[slot] : NULL;
}

// ---------------------------------------------------------------------------------------------------------
// forward

// The input of layer l: the previous layer's output, or the model input.
static const double *layer_input(const kh_ref_model *m, int32_t l) { return l == 0 ? m->x : m->L[l - 1].out; }

static kh_status conv_dims(kh_ref_model *m, int32_t l, kh_conv2d_dims *d) {
    const ref_layer *L = &m->L[l];
    const kh_layer_spec *s = &L->spec;
    int is_conv = s->kind == KH_LAYER_CONV2D;
    // defaults as kh_spec_infer: pooling window 2, pooling stride = window, conv stride 1
    int64_t kh = s->kernel[0] > 0 ? s->kernel[0] : 2, kw = s->kernel[1] > 0 ? s->kernel[1] : 2;
    int64_t sh = s->strides[0] > 0 ? s->strides[0] : (is_conv ? 1 : kh);
    int64_t sw = s->strides[1] > 0 ? s->strides[1] : (is_conv ? 1 : kw);
    int64_t C = L->sh->in_shape[2];
    kh_status st = kh_conv2d_geometry(d, m->B, L->sh->in_shape[0], L->sh->in_shape[1], C, kh, kw,
                                          is_conv ? s->units : C, sh, sw, (int)s->padding);
    if (st != KH_OK || d->OH != L->sh->out_shape[0] || d->OW != L->sh->out_shape[1])
        return KH_ERRF_TO(m, KH_ERR_INTERNAL, "ref layer %d (%s): geometry disagrees with kh_spec_infer", l,
                          kh_layer_kind_name(s->kind));
    return KH_OK;
}

static kh_status layer_forward(kh_ref_model *m, int32_t l, int training) {
    ref_layer *L = &m->L[l];
    const kh_layer_spec *s = &L->spec;
    const kh_layer_shapes *sh = L->sh;
    const double *in = layer_input(m, l);
    const int64_t B = m->B;
    switch (s->kind) {
    case KH_LAYER_DENSE:
        kh_ref_dense_forward(L->out, in, L->w[0], L->w[1], B, sh->in_shape[0], s->units, (int)s->activation);
        return KH_OK;
    case KH_LAYER_ACTIVATION: {
        int64_t C = sh->in_shape[sh->in_rank - 1];
        kh_ref_activation_forward(L->out, in, B * sh->in_numel / C, C, (int)s->activation);
        return KH_OK;
    }
    case KH_LAYER_DROPOUT: {
        int64_t n = B * sh->in_numel;
        L->mask_active = training && m->dropout_on && s->rate > 0.0f;
        if (L->mask_active) {
            kh_rng r;
            kh_rng_seed(&r, kh_seed_mix(m->dropout_seed, (uint64_t)m->n_train_forward, (uint64_t)l, 0));
            kh_ref_dropout_mask(L->mask, n, (double)s->rate, &r);
        }
        kh_ref_dropout_forward(L->out, L->mask_active ? L->mask : NULL, in, n, (double)s->rate);
        return KH_OK;
    }
    case KH_LAYER_FLATTEN:
        kh_ref_flatten_forward(L->out, in, B * sh->in_numel);
        return KH_OK;
    case KH_LAYER_CONV2D:
    case KH_LAYER_MAXPOOL2D: {
        kh_conv2d_dims d;
        kh_status st = conv_dims(m, l, &d);
        if (st != KH_OK) return st;
        if (s->kind == KH_LAYER_CONV2D) kh_ref_conv2d_forward(L->out, in, L->w[0], L->w[1], &d, (int)s->activation);
        else kh_ref_maxpool2d_forward(L->out, in, &d);
        return KH_OK;
    }
    case KH_LAYER_EMBEDDING: {
        if (kh_ref_embedding_forward(L->out, m->xi, L->w[0], B * sh->in_numel, s->input_dim, s->units) != KH_OK)
            return KH_ERRF_TO(m, KH_ERR_INVALID, "ref layer %d (embedding): an index is outside [0, %d)", l,
                              s->input_dim);
        return KH_OK;
    }
    case KH_LAYER_LSTM:
        kh_ref_lstm_forward(L->out, L->h[0], L->c[0], L->gates[0], in, L->w[0], L->w[1], L->w[2], B,
                            sh->in_shape[0], sh->in_shape[1], s->units, s->return_sequences, 0);
        return KH_OK;
    case KH_LAYER_BILSTM: {
        const double *W[2] = {L->w[0], L->w[3]}, *Uw[2] = {L->w[1], L->w[4]}, *b[2] = {L->w[2], L->w[5]};
        kh_ref_bilstm_forward(L->out, L->h, L->c, L->gates, in, W, Uw, b, B, sh->in_shape[0], sh->in_shape[1],
                              s->units, s->return_sequences);
        return KH_OK;
    }
    case KH_LAYER_GAP1D:
        kh_ref_gap1d_forward(L->out, in, B, sh->in_shape[0], sh->in_shape[1]);
        return KH_OK;
    default:
        return KH_ERRF_TO(m, KH_ERR_UNSUPPORTED, "ref layer %d: unknown kind %u", l, s->kind);
    }
}

static kh_status run_forward(kh_ref_model *m, int training) {
    for (int32_t l = 0; l < m->shapes.n_layers; l++) {
        kh_status st = layer_forward(m, l, training);
        if (st != KH_OK) {
            m->B = 0;
            return st;
        }
    }
    if (training) m->n_train_forward++;
    return KH_OK;
}

kh_status kh_ref_model_forward(kh_ref_model *m, const kh_tensor *x, int training) {
    int64_t per = 1;
    for (int i = 0; i < m->spec.input_rank; i++) per *= m->spec.input_shape[i];
    if (x && x->layout == KH_LAYOUT_NCHW)
        return KH_ERRF_TO(m, KH_ERR_INVALID, "ref model: images must be NHWC (Keras order), as the task gives them");
    if (!x || x->rank != m->spec.input_rank + 1 || x->dtype != m->spec.input_dtype || x->dims[0] < 1)
        return KH_ERRF_TO(m, KH_ERR_INVALID, "ref model: input must be (n, input...) %s of rank %d",
                          m->spec.input_dtype == KH_I32 ? "i32" : "f32", m->spec.input_rank + 1);
    for (int i = 0; i < m->spec.input_rank; i++) {
        if (x->dims[i + 1] != m->spec.input_shape[i])
            return KH_ERRF_TO(m, KH_ERR_INVALID, "ref model: input dimension %d is %lld, the spec says %d", i + 1,
                              (long long)x->dims[i + 1], m->spec.input_shape[i]);
    }
    int64_t B = x->dims[0];
    kh_status st = ensure_batch(m, B);
    if (st != KH_OK) return st;
    m->B = B;
    if (m->spec.input_dtype == KH_F32) {
        const float *src = x->data;
        for (int64_t i = 0; i < B * per; i++) m->x[i] = (double)src[i];
    } else if (m->spec.input_onehot > 0) {
        // the model's real input is one_hot(x, depth): (B, input..., depth)
        const int32_t *src = x->data;
        int32_t depth = m->spec.input_onehot;
        memset(m->x, 0, (size_t)(B * per * depth) * sizeof(double));
        for (int64_t i = 0; i < B * per; i++) {
            if (src[i] < 0 || src[i] >= depth) {
                m->B = 0;
                return KH_ERRF_TO(m, KH_ERR_INVALID, "ref model: one-hot index %d outside [0, %d)", src[i], depth);
            }
            m->x[i * depth + src[i]] = 1.0;
        }
    } else {
        memcpy(m->xi, x->data, (size_t)(B * per) * sizeof(int32_t));
    }
    return run_forward(m, training);
}

kh_status kh_ref_model_forward_d(kh_ref_model *m, const double *x, int64_t n, int training) {
    if (m->spec.input_dtype != KH_F32 || n < 1)
        return KH_ERRF_TO(m, KH_ERR_INVALID, "ref model: a float64 input needs an f32-input model and n >= 1");
    kh_status st = ensure_batch(m, n);
    if (st != KH_OK) return st;
    m->B = n;
    memcpy(m->x, x, (size_t)(n * m->in_numel) * sizeof(double));
    return run_forward(m, training);
}

const double *kh_ref_model_output(const kh_ref_model *m, int64_t *numel) {
    if (m->B == 0) {
        if (numel) *numel = 0;
        return NULL;
    }
    const ref_layer *last = &m->L[m->shapes.n_layers - 1];
    if (numel) *numel = m->B * last->sh->out_numel;
    return last->out;
}

// ---------------------------------------------------------------------------------------------------------
// backward

// Back-propagate dout through layer l into dinp (NULL: the input gradient is not wanted). act is the
// activation to differentiate for Dense/Conv2D: the fused loss passes KH_ACT_LINEAR with dout = dlogits.
static kh_status layer_backward(kh_ref_model *m, int32_t l, double *dinp, const double *dout, int act) {
    ref_layer *L = &m->L[l];
    const kh_layer_spec *s = &L->spec;
    const kh_layer_shapes *sh = L->sh;
    const double *in = layer_input(m, l);
    const int64_t B = m->B;
    switch (s->kind) {
    case KH_LAYER_DENSE:
        if (kh_ref_dense_backward(dinp, L->g[0], L->g[1], dout, L->out, in, L->w[0], B, sh->in_shape[0], s->units,
                                  act) != KH_OK)
            return KH_ERRF_TO(m, KH_ERR_NOMEM, "ref layer %d (dense) backward: out of memory", l);
        return KH_OK;
    case KH_LAYER_ACTIVATION: {
        int64_t C = sh->in_shape[sh->in_rank - 1];
        if (dinp) kh_ref_activation_backward(dinp, dout, L->out, B * sh->in_numel / C, C, (int)s->activation);
        return KH_OK;
    }
    case KH_LAYER_DROPOUT:
        if (dinp)
            kh_ref_dropout_backward(dinp, dout, L->mask_active ? L->mask : NULL, B * sh->in_numel, (double)s->rate);
        return KH_OK;
    case KH_LAYER_FLATTEN:
        if (dinp) kh_ref_flatten_backward(dinp, dout, B * sh->in_numel);
        return KH_OK;
    case KH_LAYER_CONV2D:
    case KH_LAYER_MAXPOOL2D: {
        kh_conv2d_dims d;
        kh_status st = conv_dims(m, l, &d);
        if (st != KH_OK) return st;
        if (s->kind == KH_LAYER_CONV2D) {
            if (kh_ref_conv2d_backward(dinp, L->g[0], L->g[1], dout, L->out, in, L->w[0], &d, act) != KH_OK)
                return KH_ERRF_TO(m, KH_ERR_NOMEM, "ref layer %d (conv2d) backward: out of memory", l);
        } else if (dinp) {
            kh_ref_maxpool2d_backward(dinp, dout, in, &d);
        }
        return KH_OK;
    }
    case KH_LAYER_EMBEDDING:
        kh_ref_embedding_backward(L->g[0], dout, m->xi, B * sh->in_numel, s->units);
        return KH_OK;
    case KH_LAYER_LSTM:
        if (kh_ref_lstm_backward(dinp, L->g[0], L->g[1], L->g[2], dout, L->h[0], L->c[0], L->gates[0], in, L->w[0],
                                 L->w[1], B, sh->in_shape[0], sh->in_shape[1], s->units, s->return_sequences,
                                 0) != KH_OK)
            return KH_ERRF_TO(m, KH_ERR_NOMEM, "ref layer %d (lstm) backward: out of memory", l);
        return KH_OK;
    case KH_LAYER_BILSTM: {
        double *dW[2] = {L->g[0], L->g[3]}, *dU[2] = {L->g[1], L->g[4]}, *db[2] = {L->g[2], L->g[5]};
        const double *W[2] = {L->w[0], L->w[3]}, *Uw[2] = {L->w[1], L->w[4]};
        const double *h[2] = {L->h[0], L->h[1]}, *c[2] = {L->c[0], L->c[1]}, *g[2] = {L->gates[0], L->gates[1]};
        if (kh_ref_bilstm_backward(dinp, dW, dU, db, dout, h, c, g, in, W, Uw, B, sh->in_shape[0], sh->in_shape[1],
                                   s->units, s->return_sequences) != KH_OK)
            return KH_ERRF_TO(m, KH_ERR_NOMEM, "ref layer %d (bidirectional lstm) backward: out of memory", l);
        return KH_OK;
    }
    case KH_LAYER_GAP1D:
        if (dinp) kh_ref_gap1d_backward(dinp, dout, B, sh->in_shape[0], sh->in_shape[1]);
        return KH_OK;
    default:
        return KH_ERRF_TO(m, KH_ERR_UNSUPPORTED, "ref layer %d: unknown kind %u", l, s->kind);
    }
}

// Run the backward pass from gradient dtop flowing into layer `top`'s output (top_act: the activation to
// differentiate at `top`), down to the input. Parameter gradients are zeroed first: overwrite semantics.
static kh_status run_backward(kh_ref_model *m, int32_t top, const double *dtop, int top_act) {
    if (m->B == 0) return KH_ERRF_TO(m, KH_ERR_INVALID, "ref model: backward without a forward");
    for (int32_t l = 0; l < m->shapes.n_layers; l++) {
        for (int s = 0; s < m->L[l].sh->n_params; s++)
            memset(m->L[l].g[s], 0, (size_t)m->L[l].sh->params[s].numel * sizeof(double));
    }
    const double *dcur = dtop;
    int ping = 0;
    for (int32_t l = top; l >= 0; l--) {
        double *dprev = l == 0 ? m->dx : m->dbuf[ping];
        if (dprev == dcur) dprev = m->dbuf[ping ^= 1]; // never write the buffer being read
        int act = l == top ? top_act : (int)m->L[l].spec.activation;
        kh_status st = layer_backward(m, l, dprev, dcur, act);
        if (st != KH_OK) return st;
        dcur = dprev;
        ping ^= 1;
    }
    if (top < 0 && m->dx) {
        // the whole model was the fused activation: the logit gradient is the input gradient
        memcpy(m->dx, dtop, (size_t)(m->B * m->in_numel) * sizeof(double));
    }
    return KH_OK;
}

kh_status kh_ref_model_backward(kh_ref_model *m, const double *dy) {
    int32_t top = m->shapes.n_layers - 1;
    return run_backward(m, top, dy, (int)m->L[top].spec.activation);
}

const double *kh_ref_model_input_grad(const kh_ref_model *m) { return m->dx; }

// ---------------------------------------------------------------------------------------------------------
// loss

static kh_status check_labels(kh_ref_model *m, const int32_t *labels, int64_t classes) {
    for (int64_t n = 0; n < m->B; n++) {
        if (labels[n] < 0 || labels[n] >= classes)
            return KH_ERRF_TO(m, KH_ERR_INVALID, "ref model: label %d of sample %lld outside [0, %lld)", labels[n],
                              (long long)n, (long long)classes);
    }
    return KH_OK;
}

kh_status kh_ref_model_loss(kh_ref_model *m, const int32_t *labels, double *loss_mean, int64_t *correct) {
    int64_t numel;
    const double *p = kh_ref_model_output(m, &numel);
    if (!p) return KH_ERRF_TO(m, KH_ERR_INVALID, "ref model: loss without a forward");
    int64_t C = numel / m->B;
    double loss;
    int64_t ok;
    if (m->spec.loss == KH_LOSS_CATEGORICAL_CROSSENTROPY) {
        kh_status st = check_labels(m, labels, C);
        if (st != KH_OK) return st;
        loss = kh_ref_cce_forward(p, labels, m->B, C);
        ok = kh_ref_accuracy_categorical(p, labels, m->B, C);
    } else if (m->spec.loss == KH_LOSS_BINARY_CROSSENTROPY) {
        kh_status st = check_labels(m, labels, 2);
        if (st != KH_OK) return st;
        loss = kh_ref_bce_forward(p, labels, m->B);
        ok = kh_ref_accuracy_binary(p, labels, m->B);
    } else {
        return KH_ERRF_TO(m, KH_ERR_INVALID, "ref model: the spec has no loss");
    }
    if (loss_mean) *loss_mean = loss;
    if (correct) *correct = ok;
    return KH_OK;
}

kh_status kh_ref_model_loss_backward(kh_ref_model *m, const int32_t *labels) {
    int64_t numel;
    const double *p = kh_ref_model_output(m, &numel);
    if (!p) return KH_ERRF_TO(m, KH_ERR_INVALID, "ref model: loss backward without a forward");
    int32_t top = m->shapes.n_layers - 1;
    const ref_layer *last = &m->L[top];
    uint32_t want = m->spec.loss == KH_LOSS_CATEGORICAL_CROSSENTROPY ? KH_ACT_SOFTMAX : KH_ACT_SIGMOID;
    int fusable = (last->spec.kind == KH_LAYER_DENSE || last->spec.kind == KH_LAYER_CONV2D ||
                   last->spec.kind == KH_LAYER_ACTIVATION) && last->spec.activation == want;
    if (m->spec.loss == KH_LOSS_NONE) return KH_ERRF_TO(m, KH_ERR_INVALID, "ref model: the spec has no loss");
    if (!fusable)
        return KH_ERRF_TO(m, KH_ERR_UNSUPPORTED, "ref model: %s needs the last layer to end in %s",
                          kh_loss_name(m->spec.loss), kh_activation_name(want));
    int64_t C = numel / m->B;
    kh_status st = check_labels(m, labels, m->spec.loss == KH_LOSS_CATEGORICAL_CROSSENTROPY ? C : 2);
    if (st != KH_OK) return st;
    // dlogits lives in dbuf[0]; run_backward's ping-pong never writes the buffer it reads
    double *dlogits = m->dbuf[0];
    if (m->spec.loss == KH_LOSS_CATEGORICAL_CROSSENTROPY) kh_ref_cce_backward(dlogits, p, labels, m->B, C);
    else kh_ref_bce_backward(dlogits, p, labels, m->B);
    if (last->spec.kind == KH_LAYER_ACTIVATION) return run_backward(m, top - 1, dlogits, top >= 1 ? (int)m->L[top - 1].spec.activation : 0);
    return run_backward(m, top, dlogits, KH_ACT_LINEAR);
}

// ---------------------------------------------------------------------------------------------------------
// optimizer

kh_status kh_ref_model_apply_gradients(kh_ref_model *m) {
    const kh_optimizer_spec *o = &m->spec.optimizer;
    // Keras 2 uses its backend epsilon when none is given; a zero here can only mean "default"
    double eps = o->epsilon > 0.0f ? (double)o->epsilon : KH_EPSILON;
    double lr = kh_ref_lr_decayed((double)o->lr, (double)o->decay, m->iterations);
    double lr_adam = kh_ref_adam_lr_t(lr, (double)o->beta_1, (double)o->beta_2, m->iterations);
    int n_state = o->kind == KH_OPT_ADAM || o->kind == KH_OPT_ADADELTA ? 2 : o->kind == KH_OPT_RMSPROP ? 1 : 0;
    if (o->kind > KH_OPT_ADADELTA) return KH_ERRF_TO(m, KH_ERR_UNSUPPORTED, "ref model: unknown optimizer %u", o->kind);
    for (int32_t l = 0; l < m->shapes.n_layers; l++) {
        ref_layer *L = &m->L[l];
        for (int s = 0; s < L->sh->n_params; s++) {
            int64_t n = L->sh->params[s].numel;
            // state starts at zero, as Keras's K.zeros accumulators
            if (n_state >= 1 && !L->opt1[s] && !(L->opt1[s] = dalloc(n)))
                return KH_ERRF_TO(m, KH_ERR_NOMEM, "ref model: out of memory for optimizer state");
            if (n_state >= 2 && !L->opt2[s] && !(L->opt2[s] = dalloc(n)))
                return KH_ERRF_TO(m, KH_ERR_NOMEM, "ref model: out of memory for optimizer state");
            switch (o->kind) {
            case KH_OPT_SGD: kh_ref_sgd_update(L->w[s], L->g[s], n, lr); break;
            case KH_OPT_RMSPROP: kh_ref_rmsprop_update(L->w[s], L->opt1[s], L->g[s], n, lr, (double)o->rho, eps); break;
            case KH_OPT_ADAM:
                kh_ref_adam_update(L->w[s], L->opt1[s], L->opt2[s], L->g[s], n, lr_adam, (double)o->beta_1,
                                   (double)o->beta_2, eps);
                break;
            default: kh_ref_adadelta_update(L->w[s], L->opt1[s], L->opt2[s], L->g[s], n, lr, (double)o->rho, eps); break;
            }
        }
    }
    m->iterations++;
    return KH_OK;
}

kh_status kh_ref_model_train_step(kh_ref_model *m, const kh_tensor *x, const int32_t *labels, double *loss_mean,
                                  int64_t *correct) {
    kh_status st = kh_ref_model_forward(m, x, 1);
    if (st == KH_OK) st = kh_ref_model_loss(m, labels, loss_mean, correct);
    if (st == KH_OK) st = kh_ref_model_loss_backward(m, labels);
    if (st == KH_OK) st = kh_ref_model_apply_gradients(m);
    return st;
}
