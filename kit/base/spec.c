/* kit/base/spec.c — validate a model spec and infer every layer's shapes and parameter shapes, the way
 * Keras 2 builds a Sequential model. Host, backends, the reference kit and verify all use this one
 * function, so they agree on shapes, canonical weight layouts and initialisers. */
#include <stdlib.h>
#include <string.h>

#include "khost/kit/status.h"
#include "khost/kit/spec.h"
#include "khost/kit/geometry.h"

static void set_param(kh_param_shape *p, const char *name, int rank, const int64_t *dims, uint32_t init,
                      int64_t fan_in, int64_t fan_out) {
    memset(p, 0, sizeof *p);
    p->name = name;
    p->rank = rank;
    p->numel = 1;
    for (int i = 0; i < rank; i++) {
        p->dims[i] = dims[i];
        p->numel *= dims[i];
    }
    p->init = init;
    p->fan_in = fan_in;
    p->fan_out = fan_out;
}

static uint32_t pick(uint32_t requested, uint32_t keras_default) {
    return requested == KH_INIT_DEFAULT ? keras_default : requested;
}

static int64_t numel_of(int rank, const int32_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    return n;
}

static void add_lstm_params(kh_layer_shapes *ls, int base, const kh_layer_spec *l, int64_t in, int64_t u,
                            const char *const names[3]) {
    int64_t k[2] = {in, 4 * u}, r[2] = {u, 4 * u}, b[1] = {4 * u};
    set_param(&ls->params[base + 0], names[0], 2, k, pick(l->kernel_init, KH_INIT_GLOROT_UNIFORM), in, 4 * u);
    set_param(&ls->params[base + 1], names[1], 2, r, pick(l->recurrent_init, KH_INIT_ORTHOGONAL), u, 4 * u);
    set_param(&ls->params[base + 2], names[2], 1, b, pick(l->bias_init, KH_INIT_LSTM_BIAS), 4 * u, 4 * u);
}

static kh_status infer_layer(const kh_model_spec *spec, int idx, int32_t rank, const int32_t *shape,
                             uint32_t dtype, kh_layer_shapes *ls, char *err, size_t errlen) {
    const kh_layer_spec *l = &spec->layers[idx];
    const char *kn = kh_layer_kind_name(l->kind);
    ls->in_rank = rank;
    memcpy(ls->in_shape, shape, sizeof ls->in_shape);
    ls->in_numel = numel_of(rank, shape);
    ls->out_rank = rank;
    memcpy(ls->out_shape, shape, sizeof ls->out_shape);

    if (dtype == KH_I32 && l->kind != KH_LAYER_EMBEDDING)
        return kh_errf(err, errlen, KH_ERR_INVALID,
                       "layer %d (%s): takes float input, but the model input is integer indices "
                       "(an Embedding must come first, or set input_onehot)", idx, kn);
    switch (l->kind) {
    case KH_LAYER_DENSE: {
        if (rank != 1)
            return kh_errf(err, errlen, KH_ERR_INVALID, "layer %d (dense): needs a flat input, got rank %d "
                           "(add Flatten)", idx, rank);
        if (l->units <= 0) return kh_errf(err, errlen, KH_ERR_INVALID, "layer %d (dense): units %d", idx, l->units);
        if (l->activation >= KH_ACT_END)
            return kh_errf(err, errlen, KH_ERR_INVALID, "layer %d (dense): unknown activation %u", idx, l->activation);
        int64_t k[2] = {shape[0], l->units}, b[1] = {l->units};
        ls->n_params = 2;
        set_param(&ls->params[0], "kernel", 2, k, pick(l->kernel_init, KH_INIT_GLOROT_UNIFORM), shape[0], l->units);
        set_param(&ls->params[1], "bias", 1, b, pick(l->bias_init, KH_INIT_ZEROS), l->units, l->units);
        ls->out_rank = 1;
        ls->out_shape[0] = l->units;
        break;
    }
    case KH_LAYER_ACTIVATION:
        if (l->activation >= KH_ACT_END)
            return kh_errf(err, errlen, KH_ERR_INVALID, "layer %d (activation): unknown activation %u", idx,
                           l->activation);
        break;
    case KH_LAYER_DROPOUT:
        if (!(l->rate >= 0.0f && l->rate < 1.0f))
            return kh_errf(err, errlen, KH_ERR_INVALID, "layer %d (dropout): rate %g not in [0, 1)", idx,
                           (double)l->rate);
        break;
    case KH_LAYER_FLATTEN:
        ls->out_rank = 1;
        ls->out_shape[0] = (int32_t)ls->in_numel;
        ls->out_shape[1] = ls->out_shape[2] = 0;
        break;
    case KH_LAYER_CONV2D:
    case KH_LAYER_MAXPOOL2D: {
        if (rank != 3)
            return kh_errf(err, errlen, KH_ERR_INVALID, "layer %d (%s): needs (H, W, C) input, got rank %d", idx,
                           kn, rank);
        int is_conv = l->kind == KH_LAYER_CONV2D;
        int32_t k0 = l->kernel[0] > 0 ? l->kernel[0] : (is_conv ? 0 : 2);
        int32_t k1 = l->kernel[1] > 0 ? l->kernel[1] : (is_conv ? 0 : 2);
        int32_t s0 = l->strides[0] > 0 ? l->strides[0] : (is_conv ? 1 : k0);
        int32_t s1 = l->strides[1] > 0 ? l->strides[1] : (is_conv ? 1 : k1);
        if (k0 <= 0 || k1 <= 0 || s0 <= 0 || s1 <= 0 || l->padding > KH_PAD_SAME)
            return kh_errf(err, errlen, KH_ERR_INVALID, "layer %d (%s): bad kernel %dx%d / strides %dx%d / padding %u",
                           idx, kn, k0, k1, s0, s1, l->padding);
        kh_conv2d_dims d; /* the output size by the rules every kernel's geometry follows */
        if (kh_conv2d_geometry(&d, 0, shape[0], shape[1], 1, k0, k1, 1, s0, s1, (int)l->padding) != KH_OK)
            return kh_errf(err, errlen, KH_ERR_INVALID, "layer %d (%s): %dx%d window does not fit %dx%d input", idx,
                           kn, k0, k1, shape[0], shape[1]);
        ls->out_shape[0] = (int32_t)d.OH;
        ls->out_shape[1] = (int32_t)d.OW;
        if (is_conv) {
            if (l->units <= 0)
                return kh_errf(err, errlen, KH_ERR_INVALID, "layer %d (conv2d): filters %d", idx, l->units);
            if (l->activation >= KH_ACT_END || l->activation == KH_ACT_SOFTMAX)
                return kh_errf(err, errlen, KH_ERR_INVALID, "layer %d (conv2d): activation %u not allowed", idx,
                               l->activation);
            ls->out_shape[2] = l->units;
            int64_t rf = (int64_t)k0 * k1;
            int64_t k[4] = {k0, k1, shape[2], l->units}, b[1] = {l->units};
            ls->n_params = 2;
            set_param(&ls->params[0], "kernel", 4, k, pick(l->kernel_init, KH_INIT_GLOROT_UNIFORM), rf * shape[2],
                      rf * l->units);
            set_param(&ls->params[1], "bias", 1, b, pick(l->bias_init, KH_INIT_ZEROS), l->units, l->units);
        }
        break;
    }
    case KH_LAYER_EMBEDDING: {
        if (idx != 0 || dtype != KH_I32 || spec->input_onehot > 0 || rank != 1)
            return kh_errf(err, errlen, KH_ERR_INVALID,
                           "layer %d (embedding): must be the first layer, on (T) integer input", idx);
        if (l->input_dim <= 0 || l->units <= 0)
            return kh_errf(err, errlen, KH_ERR_INVALID, "layer %d (embedding): input_dim %d, output_dim %d", idx,
                           l->input_dim, l->units);
        int64_t e[2] = {l->input_dim, l->units};
        ls->n_params = 1;
        set_param(&ls->params[0], "embeddings", 2, e, pick(l->kernel_init, KH_INIT_UNIFORM_005), l->input_dim,
                  l->units);
        ls->out_rank = 2;
        ls->out_shape[0] = shape[0];
        ls->out_shape[1] = l->units;
        break;
    }
    case KH_LAYER_LSTM:
    case KH_LAYER_BILSTM: {
        if (rank != 2)
            return kh_errf(err, errlen, KH_ERR_INVALID, "layer %d (%s): needs (T, features) input, got rank %d", idx,
                           kn, rank);
        if (l->units <= 0) return kh_errf(err, errlen, KH_ERR_INVALID, "layer %d (%s): units %d", idx, kn, l->units);
        int bi = l->kind == KH_LAYER_BILSTM;
        static const char *const fw[3] = {"forward_kernel", "forward_recurrent_kernel", "forward_bias"};
        static const char *const bw[3] = {"backward_kernel", "backward_recurrent_kernel", "backward_bias"};
        static const char *const uni[3] = {"kernel", "recurrent_kernel", "bias"};
        add_lstm_params(ls, 0, l, shape[1], l->units, bi ? fw : uni);
        ls->n_params = 3;
        if (bi) {
            add_lstm_params(ls, 3, l, shape[1], l->units, bw);
            ls->n_params = 6;
        }
        int32_t width = l->units * (bi ? 2 : 1);
        if (l->return_sequences) {
            ls->out_rank = 2;
            ls->out_shape[0] = shape[0];
            ls->out_shape[1] = width;
        } else {
            ls->out_rank = 1;
            ls->out_shape[0] = width;
            ls->out_shape[1] = 0;
        }
        break;
    }
    case KH_LAYER_GAP1D:
        if (rank != 2)
            return kh_errf(err, errlen, KH_ERR_INVALID, "layer %d (globalaveragepooling1d): needs (T, C) input, got "
                           "rank %d", idx, rank);
        ls->out_rank = 1;
        ls->out_shape[0] = shape[1];
        ls->out_shape[1] = 0;
        break;
    default:
        return kh_errf(err, errlen, KH_ERR_INVALID, "layer %d: unknown layer kind %u", idx, l->kind);
    }
    for (int i = ls->out_rank; i < 3; i++) ls->out_shape[i] = 0;
    ls->out_numel = numel_of(ls->out_rank, ls->out_shape);
    return KH_OK;
}

kh_status kh_spec_infer(const kh_model_spec *spec, kh_model_shapes *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (!spec || spec->struct_size < offsetof(kh_model_spec, n_classes) + sizeof(int32_t))
        return kh_errf(err, errlen, KH_ERR_INVALID, "model spec: missing or struct_size too small");
    if (spec->n_layers <= 0 || !spec->layers)
        return kh_errf(err, errlen, KH_ERR_INVALID, "model spec: no layers");
    if (spec->input_rank < 1 || spec->input_rank > 3)
        return kh_errf(err, errlen, KH_ERR_INVALID, "model spec: input rank %d not in 1..3", spec->input_rank);
    if (spec->input_dtype != KH_F32 && spec->input_dtype != KH_I32)
        return kh_errf(err, errlen, KH_ERR_INVALID, "model spec: input dtype %u must be f32 or i32", spec->input_dtype);
    for (int i = 0; i < spec->input_rank; i++)
        if (spec->input_shape[i] <= 0)
            return kh_errf(err, errlen, KH_ERR_INVALID, "model spec: input dimension %d is %d", i, spec->input_shape[i]);
    if (spec->input_onehot < 0 || (spec->input_onehot > 0 && (spec->input_dtype != KH_I32 || spec->input_rank > 2)))
        return kh_errf(err, errlen, KH_ERR_INVALID, "model spec: input_onehot needs i32 input of rank <= 2");

    int32_t rank = spec->input_rank, shape[3] = {0, 0, 0};
    for (int i = 0; i < rank; i++) shape[i] = spec->input_shape[i];
    uint32_t dtype = spec->input_dtype;
    if (spec->input_onehot > 0) {
        shape[rank++] = spec->input_onehot;
        dtype = KH_F32;
    }
    out->in_rank = rank;
    memcpy(out->in_shape, shape, sizeof shape);
    out->layers = calloc((size_t)spec->n_layers, sizeof *out->layers);
    if (!out->layers) return kh_errf(err, errlen, KH_ERR_NOMEM, "model spec: out of memory");
    out->n_layers = spec->n_layers;
    for (int i = 0; i < spec->n_layers; i++) {
        kh_layer_shapes *ls = &out->layers[i];
        kh_status st = infer_layer(spec, i, rank, shape, dtype, ls, err, errlen);
        if (st != KH_OK) {
            kh_model_shapes_free(out);
            return st;
        }
        for (int p = 0; p < ls->n_params; p++) out->total_params += ls->params[p].numel;
        rank = ls->out_rank;
        memcpy(shape, ls->out_shape, sizeof shape);
        dtype = KH_F32;
    }
    /* the output must match the loss */
    int32_t last_rank = out->layers[out->n_layers - 1].out_rank;
    int32_t last_width = out->layers[out->n_layers - 1].out_shape[0];
    if (spec->loss == KH_LOSS_CATEGORICAL_CROSSENTROPY &&
        (last_rank != 1 || last_width != spec->n_classes || spec->n_classes < 2)) {
        kh_model_shapes_free(out);
        return kh_errf(err, errlen, KH_ERR_INVALID, "model spec: categorical loss needs a (%d) output, the last "
                       "layer gives rank %d width %d", spec->n_classes, last_rank, last_width);
    }
    if (spec->loss == KH_LOSS_BINARY_CROSSENTROPY && (last_rank != 1 || last_width != 1)) {
        kh_model_shapes_free(out);
        return kh_errf(err, errlen, KH_ERR_INVALID, "model spec: binary loss needs a (1) output");
    }
    if (spec->loss > KH_LOSS_BINARY_CROSSENTROPY || spec->optimizer.kind > KH_OPT_ADADELTA) {
        kh_model_shapes_free(out);
        return kh_errf(err, errlen, KH_ERR_INVALID, "model spec: unknown loss %u or optimizer %u", spec->loss,
                       spec->optimizer.kind);
    }
    return KH_OK;
}

void kh_model_shapes_free(kh_model_shapes *s) {
    if (!s) return;
    free(s->layers);
    s->layers = NULL;
    s->n_layers = 0;
}
