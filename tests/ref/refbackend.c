/* tests/ref/refbackend.c — a test-only backend module that wraps the float64 reference kit behind the
 * float32 backend ABI, to exercise `khost verify` end to end (the plumbing: caps, layouts, one-hot
 * expansion, probes, train step, metrics). Verify must pass it, and must fail it when it is broken on purpose.
 *
 * Environment (read at compile time of each model; test-only, a real backend would take registry keys):
 *   KHOST_REFBACKEND_LAYOUT=nchw     ask the host for NCHW images (and produce NCHW conv-shaped outputs)
 *   KHOST_REFBACKEND_PERTURB=grad    scale every reported weight gradient by 1.01
 *   KHOST_REFBACKEND_PERTURB=lr      train with lr * 1.01
 *   KHOST_REFBACKEND_PERTURB=layout  claim NCHW but read images as if NHWC (a transposition bug)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/khost.h"
#include "khost/kit/status.h"
#include "khost/kit/spec.h"
#include "khost/kit/ref.h"

struct kh_bsession {
    const kh_host_api *host;
    char err[512];
};

struct kh_bmodel {
    kh_bsession *s;
    kh_ref_model *ref;
    kh_model_spec spec;   // as the backend sees its input (one-hot already expanded by the host)
    kh_layer_spec *layers;
    int nchw, perturb_grad, perturb_layout;
    int64_t in_per;       // input elements per sample
    float *xbuf;          // NHWC copy of an NCHW batch
    kh_metrics met[2];
};

static int env_is(const char *name, const char *value) {
    const char *v = getenv(name);
    return v && !strcmp(v, value);
}

static int want_nchw(void) {
    return env_is("KHOST_REFBACKEND_LAYOUT", "nchw") || env_is("KHOST_REFBACKEND_PERTURB", "layout");
}

// ---------------------------------------------------------------------------------------------------------

static kh_status get_caps(uint32_t kind, kh_caps *c) {
    uint32_t size = c->struct_size;
    memset(c, 0, size < sizeof *c ? size : sizeof *c);
    c->struct_size = size;
    c->available = kind == KH_DEVICE_CPU;
    for (uint32_t k = 1; k < KH_LAYER_KIND_END; k++) c->layer_kinds |= 1u << k;
    for (uint32_t a = 0; a < KH_ACT_END; a++) c->activations |= 1u << a;
    c->losses = (1u << KH_LOSS_CATEGORICAL_CROSSENTROPY) | (1u << KH_LOSS_BINARY_CROSSENTROPY);
    c->optimizers = (1u << KH_OPT_SGD) | (1u << KH_OPT_RMSPROP) | (1u << KH_OPT_ADAM) | (1u << KH_OPT_ADADELTA);
    c->flags = KH_CAP_CONV_SAME | KH_CAP_LSTM_SEQUENCES | KH_CAP_PREDICT | KH_CAP_PROBES; // no one-hot: host expands
    c->image_layout = want_nchw() ? KH_LAYOUT_NCHW : KH_LAYOUT_NHWC;
    snprintf(c->note, sizeof c->note, "%s", kind == KH_DEVICE_CPU ? "reference kit (test)" : "cpu only");
    return KH_OK;
}

static kh_status open_session(const kh_host_api *host, const kh_device *dev, kh_bsession **out, char *err,
                              size_t errlen) {
    *out = NULL;
    if (dev->kind != KH_DEVICE_CPU) return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "refbackend: cpu only");
    kh_bsession *s = calloc(1, sizeof *s);
    if (!s) return kh_errf(err, errlen, KH_ERR_NOMEM, "refbackend: out of memory");
    s->host = host;
    *out = s;
    return KH_OK;
}

static void close_session(kh_bsession *s) { free(s); }
static const char *last_error(kh_bsession *s) { return s ? s->err : "no session"; }
static kh_status environment(kh_bsession *s, char *buf, size_t n) {
    snprintf(buf, n, "ref=float64");
    return KH_OK;
}

static void model_free(kh_bmodel *m) {
    if (!m) return;
    kh_ref_model_free(m->ref);
    free(m->layers);
    free(m->xbuf);
    free(m);
}

static kh_status compile(kh_bsession *s, const kh_model_spec *spec, const kh_compile_opts *opts, kh_bmodel **out) {
    *out = NULL;
    kh_bmodel *m = calloc(1, sizeof *m);
    if (!m) return KH_ERRF_TO(s, KH_ERR_NOMEM, "refbackend compile: out of memory");
    m->s = s;
    m->spec = *spec;
    m->layers = malloc((size_t)spec->n_layers * sizeof *m->layers + 1);
    if (!m->layers) {
        model_free(m);
        return KH_ERRF_TO(s, KH_ERR_NOMEM, "refbackend compile: out of memory");
    }
    memcpy(m->layers, spec->layers, (size_t)spec->n_layers * sizeof *m->layers);
    m->spec.layers = m->layers;
    if (spec->input_onehot > 0) {
        // without KH_CAP_ONEHOT_INPUT the host hands us one_hot(x) as floats
        m->spec.input_dtype = KH_F32;
        m->spec.input_shape[m->spec.input_rank++] = spec->input_onehot;
        m->spec.input_onehot = 0;
    }
    if (env_is("KHOST_REFBACKEND_PERTURB", "lr")) m->spec.optimizer.lr *= 1.01f;
    m->perturb_grad = env_is("KHOST_REFBACKEND_PERTURB", "grad");
    m->perturb_layout = env_is("KHOST_REFBACKEND_PERTURB", "layout");
    m->nchw = want_nchw();
    m->in_per = 1;
    for (int i = 0; i < m->spec.input_rank; i++) m->in_per *= m->spec.input_shape[i];
    char err[256];
    if (kh_ref_model_create(&m->spec, &m->ref, err, sizeof err) != KH_OK) {
        model_free(m);
        return KH_ERRF_TO(s, KH_ERR_INVALID, "refbackend compile: %s", err);
    }
    int64_t maxb = opts->max_batch > 0 ? opts->max_batch : 1;
    m->xbuf = malloc((size_t)(maxb * m->in_per) * sizeof(float) + 1);
    if (!m->xbuf) {
        model_free(m);
        return KH_ERRF_TO(s, KH_ERR_NOMEM, "refbackend compile: out of memory");
    }
    kh_ref_model_set_dropout(m->ref, !opts->deterministic, opts->seed);
    *out = m;
    return KH_OK;
}

// ---------------------------------------------------------------------------------------------------------
// weights

static kh_status copy_slot(kh_bmodel *m, int32_t layer, int32_t slot, const kh_tensor *t, int64_t *n) {
    const kh_model_shapes *sh = kh_ref_model_shapes(m->ref);
    if (layer < 0 || layer >= sh->n_layers || slot < 0 || slot >= sh->layers[layer].n_params)
        return KH_ERRF_TO(m->s, KH_ERR_INVALID, "refbackend: no weight (layer %d, slot %d)", layer, slot);
    const kh_param_shape *p = &sh->layers[layer].params[slot];
    if (t->dtype != KH_F32 || t->rank != p->rank)
        return KH_ERRF_TO(m->s, KH_ERR_INVALID, "refbackend: layer %d slot %d: wrong dtype or rank", layer, slot);
    for (int d = 0; d < p->rank; d++) {
        if (t->dims[d] != p->dims[d])
            return KH_ERRF_TO(m->s, KH_ERR_INVALID, "refbackend: layer %d slot %d: dimension %d is %lld, want %lld",
                              layer, slot, d, (long long)t->dims[d], (long long)p->dims[d]);
    }
    *n = p->numel;
    return KH_OK;
}

static kh_status set_weight(kh_bmodel *m, int32_t layer, int32_t slot, const kh_tensor *w) {
    int64_t n = 0;
    kh_status st = copy_slot(m, layer, slot, w, &n);
    if (st != KH_OK) return st;
    return kh_ref_model_set_weight_f32(m->ref, layer, slot, w->data, n);
}

static kh_status get_weight(kh_bmodel *m, int32_t layer, int32_t slot, kh_tensor *w) {
    int64_t n = 0;
    kh_status st = copy_slot(m, layer, slot, w, &n);
    if (st != KH_OK) return st;
    const double *src = kh_ref_model_weight(m->ref, layer, slot);
    for (int64_t i = 0; i < n; i++) ((float *)w->data)[i] = (float)src[i];
    return KH_OK;
}

static kh_status get_grad(kh_bmodel *m, int32_t layer, int32_t slot, kh_tensor *g) {
    int64_t n = 0;
    kh_status st = copy_slot(m, layer, slot, g, &n);
    if (st != KH_OK) return st;
    const double *src = kh_ref_model_grad(m->ref, layer, slot);
    double scale = m->perturb_grad ? 1.01 : 1.0;
    for (int64_t i = 0; i < n; i++) ((float *)g->data)[i] = (float)(src[i] * scale);
    return KH_OK;
}

// ---------------------------------------------------------------------------------------------------------
// running

// The batch as the reference wants it: NCHW images back to NHWC (unless the layout bug is injected).
static kh_status ref_input(kh_bmodel *m, const kh_tensor *x, kh_tensor *view) {
    *view = *x;
    if (x->rank != m->spec.input_rank + 1 || x->dims[0] < 1)
        return KH_ERRF_TO(m->s, KH_ERR_INVALID, "refbackend: input rank %d, want %d", x->rank, m->spec.input_rank + 1);
    if (m->nchw && x->rank == 4 && x->dtype == KH_F32) {
        int64_t n = x->dims[0], c = x->dims[1], h = x->dims[2], w = x->dims[3];
        const float *src = x->data;
        if (!m->perturb_layout) {
            for (int64_t b = 0; b < n; b++)
                for (int64_t k = 0; k < c; k++)
                    for (int64_t i = 0; i < h; i++)
                        for (int64_t j = 0; j < w; j++)
                            m->xbuf[((b * h + i) * w + j) * c + k] = src[((b * c + k) * h + i) * w + j];
        } else {
            memcpy(m->xbuf, src, (size_t)(n * c * h * w) * sizeof(float));
        }
        view->dims[1] = h, view->dims[2] = w, view->dims[3] = c;
        view->layout = KH_LAYOUT_NHWC;
        view->data = m->xbuf;
    }
    return KH_OK;
}

static kh_status forward_run(kh_bmodel *m, const kh_tensor *x, int training) {
    kh_tensor view;
    kh_status st = ref_input(m, x, &view);
    if (st != KH_OK) return st;
    if (kh_ref_model_forward(m->ref, &view, training) != KH_OK)
        return KH_ERRF_TO(m->s, KH_ERR_INVALID, "refbackend forward: %s", kh_ref_model_last_error(m->ref));
    return KH_OK;
}

// Copy a float64 (n, h, w, c) or flat result into out, NCHW when out says so.
static void write_out(kh_tensor *out, const double *src) {
    float *dst = out->data;
    if (out->layout == KH_LAYOUT_NCHW && out->rank == 4) {
        int64_t n = out->dims[0], c = out->dims[1], h = out->dims[2], w = out->dims[3];
        for (int64_t b = 0; b < n; b++)
            for (int64_t k = 0; k < c; k++)
                for (int64_t i = 0; i < h; i++)
                    for (int64_t j = 0; j < w; j++)
                        dst[((b * c + k) * h + i) * w + j] = (float)src[((b * h + i) * w + j) * c + k];
        return;
    }
    for (int64_t i = 0; i < kh_tensor_numel(out); i++) dst[i] = (float)src[i];
}

static kh_status probe_forward(kh_bmodel *m, const kh_tensor *x, kh_tensor *out) {
    kh_status st = forward_run(m, x, 1);
    if (st != KH_OK) return st;
    int64_t n = 0;
    const double *y = kh_ref_model_output(m->ref, &n);
    if (kh_tensor_numel(out) != n) return KH_ERRF_TO(m->s, KH_ERR_INVALID, "refbackend forward: output size mismatch");
    write_out(out, y);
    return KH_OK;
}

static kh_status probe_backward(kh_bmodel *m, const kh_tensor *dy, kh_tensor *dx) {
    int64_t n = 0;
    if (!kh_ref_model_output(m->ref, &n) || kh_tensor_numel(dy) != n)
        return KH_ERRF_TO(m->s, KH_ERR_INVALID, "refbackend backward: no forward, or dy size mismatch");
    double *d = malloc((size_t)n * sizeof *d + 1);
    if (!d) return KH_ERRF_TO(m->s, KH_ERR_NOMEM, "refbackend backward: out of memory");
    const float *src = dy->data;
    if (dy->layout == KH_LAYOUT_NCHW && dy->rank == 4) {
        int64_t b0 = dy->dims[0], c = dy->dims[1], h = dy->dims[2], w = dy->dims[3];
        for (int64_t b = 0; b < b0; b++)
            for (int64_t k = 0; k < c; k++)
                for (int64_t i = 0; i < h; i++)
                    for (int64_t j = 0; j < w; j++) d[((b * h + i) * w + j) * c + k] = src[((b * c + k) * h + i) * w + j];
    } else {
        for (int64_t i = 0; i < n; i++) d[i] = src[i];
    }
    kh_status st = kh_ref_model_backward(m->ref, d);
    free(d);
    if (st != KH_OK) return KH_ERRF_TO(m->s, st, "refbackend backward: %s", kh_ref_model_last_error(m->ref));
    const double *g = kh_ref_model_input_grad(m->ref);
    if (dx && g) write_out(dx, g);
    return KH_OK;
}

static kh_status train_batch(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y) {
    kh_tensor view;
    kh_status st = ref_input(m, x, &view);
    if (st != KH_OK) return st;
    double loss;
    int64_t correct;
    if (kh_ref_model_train_step(m->ref, &view, y->data, &loss, &correct) != KH_OK)
        return KH_ERRF_TO(m->s, KH_ERR_INVALID, "refbackend train: %s", kh_ref_model_last_error(m->ref));
    m->met[KH_PHASE_TRAIN].loss_sum += loss * (double)x->dims[0];
    m->met[KH_PHASE_TRAIN].correct += (double)correct;
    m->met[KH_PHASE_TRAIN].samples += x->dims[0];
    return KH_OK;
}

static kh_status eval_batch(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y) {
    kh_status st = forward_run(m, x, 0);
    if (st != KH_OK) return st;
    double loss;
    int64_t correct;
    if (kh_ref_model_loss(m->ref, y->data, &loss, &correct) != KH_OK)
        return KH_ERRF_TO(m->s, KH_ERR_INVALID, "refbackend eval: %s", kh_ref_model_last_error(m->ref));
    m->met[KH_PHASE_EVAL].loss_sum += loss * (double)x->dims[0];
    m->met[KH_PHASE_EVAL].correct += (double)correct;
    m->met[KH_PHASE_EVAL].samples += x->dims[0];
    return KH_OK;
}

static kh_status predict(kh_bmodel *m, const kh_tensor *x, kh_tensor *out) {
    kh_status st = forward_run(m, x, 0);
    if (st != KH_OK) return st;
    write_out(out, kh_ref_model_output(m->ref, NULL));
    return KH_OK;
}

static kh_status read_metrics(kh_bmodel *m, uint32_t phase, kh_metrics *out, int32_t reset) {
    if (phase > KH_PHASE_EVAL) return KH_ERRF_TO(m->s, KH_ERR_INVALID, "refbackend: bad phase %u", phase);
    *out = m->met[phase];
    if (reset) memset(&m->met[phase], 0, sizeof m->met[phase]);
    return KH_OK;
}

static kh_status sync_model(kh_bmodel *m) { return KH_OK; }

// ---------------------------------------------------------------------------------------------------------

static const kh_backend_api api = {
    .struct_size = sizeof(kh_backend_api),
    .get_caps = get_caps,
    .open = open_session,
    .close = close_session,
    .last_error = last_error,
    .environment = environment,
    .compile = compile,
    .model_free = model_free,
    .set_weight = set_weight,
    .get_weight = get_weight,
    .train_batch = train_batch,
    .eval_batch = eval_batch,
    .predict = predict,
    .read_metrics = read_metrics,
    .sync = sync_model,
    .forward = probe_forward,
    .backward = probe_backward,
    .get_grad = get_grad,
};

static const kh_module_desc desc = {
    KH_MODULE_DESC_HEAD,
    .kind = KH_MODULE_BACKEND,
    .name = "refbackend",
    .version = "test",
    .description = "test-only backend: the float64 reference kit behind the float32 ABI",
    .api = &api,
};

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host);
KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) { return &desc; }
