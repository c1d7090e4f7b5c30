/* examples/sdk_backend/sdk_refcpu.c — a small third-party CPU backend, built out of tree against the
 * installed SDK (docs/WRITING_MODULES.md). It runs every layer through the helper library's float64
 * reference kit (<khost/kit/ref.h>): slow, exact, and complete enough for `khost run` and `khost verify`
 * (probes included). Images arrive NHWC (the layout it asks for); one-hot input arrives expanded because it
 * does not claim KH_CAP_ONEHOT_INPUT. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <khost/khost.h>
#include <khost/kit/ref.h>
#include <khost/kit/session.h>
#include <khost/kit/spec.h>
#include <khost/kit/status.h>

/* The kit's backend-session layer (<khost/kit/session.h>) owns the descriptor, the caps handshake, sessions,
 * the error text and the compile frame: this backend is its caps, its open and its model calls. */
struct kh_bsession {
    kh_session base; /* first member */
};

struct kh_bmodel {
    kh_bsession *s; /* first member */
    kh_ref_model *ref;
    kh_model_spec spec; /* as this backend sees its input: one-hot already expanded by the host */
    kh_layer_spec *layers;
    kh_metrics met[2];
};

#define fail(s, st, what, ...) kh_session_fail(&(s)->base, st, what, __VA_ARGS__)

static void caps(uint32_t kind, kh_caps *c) {
    c->available = kind == KH_DEVICE_CPU;
    for (uint32_t k = 1; k < KH_LAYER_KIND_END; k++) c->layer_kinds |= 1u << k;
    for (uint32_t a = 0; a < KH_ACT_END; a++) c->activations |= 1u << a;
    c->losses = (1u << KH_LOSS_CATEGORICAL_CROSSENTROPY) | (1u << KH_LOSS_BINARY_CROSSENTROPY);
    c->optimizers = (1u << KH_OPT_SGD) | (1u << KH_OPT_RMSPROP) | (1u << KH_OPT_ADAM) | (1u << KH_OPT_ADADELTA);
    c->flags = KH_CAP_CONV_SAME | KH_CAP_LSTM_SEQUENCES | KH_CAP_PREDICT | KH_CAP_PROBES;
    c->image_layout = KH_LAYOUT_NHWC;
    snprintf(c->note, sizeof c->note, "%s", kind == KH_DEVICE_CPU ? "float64 reference kit" : "cpu only");
}

static kh_status open_session(kh_session *s, char *err, size_t errlen) {
    if (s->dev.kind != KH_DEVICE_CPU) return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "sdk_refcpu: cpu only");
    return KH_OK;
}

static void close_session(kh_session *s) { (void)s; }

static kh_status environment(kh_session *s, char *buf, size_t n) {
    (void)s;
    snprintf(buf, n, "math=float64-reference");
    return KH_OK;
}

static void model_free(kh_bmodel *m) {
    if (!m) return;
    kh_ref_model_free(m->ref);
    free(m->layers);
    free(m);
}

static kh_status build(kh_bmodel *m, const kh_model_spec *spec, const kh_compile_opts *opts) {
    m->layers = malloc((size_t)spec->n_layers * sizeof *m->layers + 1);
    if (!m->layers) return fail(m->s, KH_ERR_NOMEM, "compile", "out of memory");
    m->spec = *spec; /* the spec need not outlive this call: keep a copy of its layers */
    memcpy(m->layers, spec->layers, (size_t)spec->n_layers * sizeof *m->layers);
    m->spec.layers = m->layers;
    if (spec->input_onehot > 0) {
        m->spec.input_dtype = KH_F32;
        m->spec.input_shape[m->spec.input_rank++] = spec->input_onehot;
        m->spec.input_onehot = 0;
    }
    char err[256];
    if (kh_ref_model_create(&m->spec, &m->ref, err, sizeof err) != KH_OK)
        return fail(m->s, KH_ERR_INVALID, "compile", "%s", err);
    kh_ref_model_set_dropout(m->ref, !opts->deterministic, opts->seed);
    return KH_OK;
}

static kh_status compile(kh_bsession *s, const kh_model_spec *spec, const kh_compile_opts *opts, kh_bmodel **out) {
    return kh_session_compile(s, spec, opts, sizeof(kh_bmodel), build, model_free, out);
}

static kh_status slot_numel(kh_bmodel *m, int32_t layer, int32_t slot, const kh_tensor *t, int64_t *n) {
    const kh_model_shapes *sh = kh_ref_model_shapes(m->ref);
    if (layer < 0 || layer >= sh->n_layers || slot < 0 || slot >= sh->layers[layer].n_params)
        return fail(m->s, KH_ERR_INVALID, "weights", "no weight (layer %d, slot %d)", layer, slot);
    const kh_param_shape *p = &sh->layers[layer].params[slot];
    if (t->dtype != KH_F32 || kh_tensor_numel(t) != p->numel)
        return fail(m->s, KH_ERR_INVALID, "weights", "layer %d slot %d: wrong dtype or size", layer, slot);
    *n = p->numel;
    return KH_OK;
}

static kh_status set_weight(kh_bmodel *m, int32_t layer, int32_t slot, const kh_tensor *w) {
    int64_t n;
    kh_status st = slot_numel(m, layer, slot, w, &n);
    return st != KH_OK ? st : kh_ref_model_set_weight_f32(m->ref, layer, slot, w->data, n);
}

static kh_status copy_out(kh_bmodel *m, int32_t layer, int32_t slot, kh_tensor *t, const double *src) {
    int64_t n;
    kh_status st = slot_numel(m, layer, slot, t, &n);
    if (st != KH_OK) return st;
    for (int64_t i = 0; i < n; i++) ((float *)t->data)[i] = (float)src[i];
    return KH_OK;
}

static kh_status get_weight(kh_bmodel *m, int32_t layer, int32_t slot, kh_tensor *w) {
    return copy_out(m, layer, slot, w, kh_ref_model_weight(m->ref, layer, slot));
}

static kh_status get_grad(kh_bmodel *m, int32_t layer, int32_t slot, kh_tensor *g) {
    return copy_out(m, layer, slot, g, kh_ref_model_grad(m->ref, layer, slot));
}

static void add(kh_metrics *mt, double loss_mean, int64_t correct, int64_t n) {
    mt->loss_sum += loss_mean * (double)n;
    mt->correct += (double)correct;
    mt->samples += n;
}

static kh_status train_batch(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y) {
    double loss;
    int64_t correct;
    if (kh_ref_model_train_step(m->ref, x, y->data, &loss, &correct) != KH_OK)
        return fail(m->s, KH_ERR_INVALID, "train_batch", "%s", kh_ref_model_last_error(m->ref));
    add(&m->met[KH_PHASE_TRAIN], loss, correct, x->dims[0]);
    return KH_OK;
}

static kh_status eval_batch(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y) {
    double loss;
    int64_t correct;
    if (kh_ref_model_forward(m->ref, x, 0) != KH_OK || kh_ref_model_loss(m->ref, y->data, &loss, &correct) != KH_OK)
        return fail(m->s, KH_ERR_INVALID, "eval_batch", "%s", kh_ref_model_last_error(m->ref));
    add(&m->met[KH_PHASE_EVAL], loss, correct, x->dims[0]);
    return KH_OK;
}

static kh_status write_output(kh_bmodel *m, kh_tensor *out) {
    int64_t n = 0;
    const double *y = kh_ref_model_output(m->ref, &n);
    if (!y || kh_tensor_numel(out) != n) return fail(m->s, KH_ERR_INVALID, "output", "size mismatch");
    for (int64_t i = 0; i < n; i++) ((float *)out->data)[i] = (float)y[i];
    return KH_OK;
}

static kh_status predict(kh_bmodel *m, const kh_tensor *x, kh_tensor *out) {
    if (kh_ref_model_forward(m->ref, x, 0) != KH_OK)
        return fail(m->s, KH_ERR_INVALID, "predict", "%s", kh_ref_model_last_error(m->ref));
    return write_output(m, out);
}

static kh_status probe_forward(kh_bmodel *m, const kh_tensor *x, kh_tensor *out) {
    if (kh_ref_model_forward(m->ref, x, 1) != KH_OK)
        return fail(m->s, KH_ERR_INVALID, "forward", "%s", kh_ref_model_last_error(m->ref));
    return write_output(m, out);
}

static kh_status probe_backward(kh_bmodel *m, const kh_tensor *dy, kh_tensor *dx) {
    int64_t n = kh_tensor_numel(dy);
    double *d = malloc((size_t)n * sizeof *d + 1);
    if (!d) return fail(m->s, KH_ERR_NOMEM, "backward", "out of memory");
    for (int64_t i = 0; i < n; i++) d[i] = ((const float *)dy->data)[i];
    kh_status st = kh_ref_model_backward(m->ref, d);
    free(d);
    if (st != KH_OK) return fail(m->s, st, "backward", "%s", kh_ref_model_last_error(m->ref));
    const double *g = kh_ref_model_input_grad(m->ref);
    if (dx && g)
        for (int64_t i = 0; i < kh_tensor_numel(dx); i++) ((float *)dx->data)[i] = (float)g[i];
    return KH_OK;
}

static kh_status read_metrics(kh_bmodel *m, uint32_t phase, kh_metrics *out, int32_t reset) {
    if (phase > KH_PHASE_EVAL) return fail(m->s, KH_ERR_INVALID, "read_metrics", "bad phase %u", phase);
    *out = m->met[phase];
    if (reset) memset(&m->met[phase], 0, sizeof m->met[phase]);
    return KH_OK;
}

static kh_status sync_model(kh_bmodel *m) {
    (void)m;
    return KH_OK; /* synchronous: every call finished its work */
}

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) {
    static kh_session_backend backend = {
        .name = "sdk_refcpu", .version = "1.0", .description = "out-of-tree example backend: the reference kit",
        .session_size = sizeof(kh_bsession), .caps = caps, .open = open_session, .close = close_session,
        .environment = environment,
        .model = {.compile = compile, .model_free = model_free, .set_weight = set_weight, .get_weight = get_weight,
                  .train_batch = train_batch, .eval_batch = eval_batch, .predict = predict,
                  .read_metrics = read_metrics, .sync = sync_model, .forward = probe_forward,
                  .backward = probe_backward, .get_grad = get_grad},
    };
    return kh_session_module(&backend, host);
}
