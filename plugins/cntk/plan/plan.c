/* cntk_plan.c — compile a model spec into the device-independent plan: shapes (kh_spec_infer), the
 * backend's layouts (images NCHW), which activation is fused with the loss, and how the input arrives.
 * Everything this backend cannot do is refused here, as KH_ERR_UNSUPPORTED with a reason, before any
 * executor allocates memory. */
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "khost/kit/status.h"
#include "khost/kit/spec.h"
#include "khost/kit/optimizer.h"

void cntk_plan_free(cntk_plan *p) {
    if (!p) return;
    free(p->layers);
    kh_model_shapes_free(&p->shapes);
    memset(p, 0, sizeof *p);
}

static int32_t layer_activation(const kh_layer_spec *l) {
    switch (l->kind) {
    case KH_LAYER_DENSE:
    case KH_LAYER_CONV2D:
    case KH_LAYER_ACTIVATION: return (int32_t)l->activation;
    default: return KH_ACT_LINEAR;
    }
}

kh_status cntk_plan_build(cntk_session *s, const kh_model_spec *spec, const kh_compile_opts *opts,
                          cntk_plan *out) {
    memset(out, 0, sizeof *out);
    char why[256];
    kh_status st = kh_spec_infer(spec, &out->shapes, why, sizeof why);
    if (st != KH_OK) return cntk_fail(s, st, "compile", "%s", why);
    if (!opts || opts->max_batch <= 0) {
        cntk_plan_free(out);
        return cntk_fail(s, KH_ERR_INVALID, "compile", "max_batch must be positive");
    }
    out->n_layers = spec->n_layers;
    out->layers = calloc((size_t)spec->n_layers, sizeof *out->layers);
    if (!out->layers) {
        cntk_plan_free(out);
        return cntk_fail(s, KH_ERR_NOMEM, "compile", "out of host memory for %d layers", spec->n_layers);
    }
    out->input_dtype = spec->input_dtype;
    out->input_onehot = spec->input_onehot;
    out->raw_rank = spec->input_rank;
    out->raw_numel = 1;
    for (int i = 0; i < spec->input_rank; i++) {
        out->raw_shape[i] = spec->input_shape[i];
        out->raw_numel *= spec->input_shape[i];
    }
    out->loss = spec->loss;
    out->opt = kh_optimizer_resolve(&spec->optimizer); /* Keras defaults, once */
    out->n_classes = spec->n_classes;
    out->max_batch = opts->max_batch;
    out->seed = opts->seed;
    out->deterministic = KH_HAS_MEMBER(kh_compile_opts, opts->struct_size, deterministic) ? opts->deterministic : 0;

    for (int i = 0; i < spec->n_layers; i++) {
        cntk_layer_plan *lp = &out->layers[i];
        const kh_layer_spec *l = &spec->layers[i];
        lp->index = i;
        lp->spec = *l;
        lp->sh = out->shapes.layers[i];
        lp->act = layer_activation(l);
        lp->image_in = lp->sh.in_rank == 3;
        lp->image_out = lp->sh.out_rank == 3;
        lp->in_numel = lp->sh.in_numel;
        lp->out_numel = lp->sh.out_numel;
        if (lp->act == KH_ACT_SOFTMAX && lp->image_out) {
            cntk_plan_free(out);
            return cntk_layer_fail(s, KH_ERR_UNSUPPORTED, l->kind, i, "compile",
                                   "softmax over the channels of an image tensor");
        }
        if (l->kind == KH_LAYER_EMBEDDING) lp->index_in = 1;
        if (i == 0 && spec->input_onehot > 0) {
            if (l->kind == KH_LAYER_LSTM || l->kind == KH_LAYER_BILSTM) {
                /* one_hot(x) @ W is a row lookup of W: no one-hot tensor, no GEMM */
                lp->index_in = 1;
                lp->onehot_in = spec->input_onehot;
            } else {
                out->expand_onehot = 1;
            }
        }
    }
    if (spec->input_onehot > 0 && out->layers[0].onehot_in == 0) out->expand_onehot = 1;

    cntk_layer_plan *last = &out->layers[out->n_layers - 1];
    out->out_numel = last->out_numel;
    out->out_rank = last->sh.out_rank;
    memcpy(out->out_shape, last->sh.out_shape, sizeof out->out_shape);
    if ((spec->loss == KH_LOSS_CATEGORICAL_CROSSENTROPY && last->act != KH_ACT_SOFTMAX) ||
        (spec->loss == KH_LOSS_BINARY_CROSSENTROPY && last->act != KH_ACT_SIGMOID)) {
        /* the loss gradient is fused with the output activation (as Keras's own graph simplifies it) */
        st = cntk_layer_fail(s, KH_ERR_UNSUPPORTED, last->spec.kind, last->index, "compile",
                             "%s needs a %s output (got %s)", kh_loss_name(spec->loss),
                             spec->loss == KH_LOSS_BINARY_CROSSENTROPY ? "sigmoid" : "softmax",
                             kh_activation_name((uint32_t)last->act));
        cntk_plan_free(out);
        return st;
    }
    last->fused_loss = spec->loss != KH_LOSS_NONE;
    return KH_OK;
}

kh_status cntk_plan_check_input(const cntk_plan *p, cntk_session *s, const kh_tensor *x, const char *op, int *n) {
    if (!x->data || x->rank < 1) return cntk_fail(s, KH_ERR_INVALID, op, "x has no data or rank 0");
    if (x->dtype != p->input_dtype)
        return cntk_fail(s, KH_ERR_INVALID, op, "x dtype %u, the model takes %s", x->dtype,
                         p->input_dtype == KH_I32 ? "i32 indices" : "f32");
    int64_t nb = x->dims[0];
    if (nb < 1 || nb > p->max_batch)
        return cntk_fail(s, KH_ERR_INVALID, op, "batch of %lld samples, compiled for 1..%d", (long long)nb,
                         p->max_batch);
    int64_t per = kh_tensor_numel(x) / nb;
    if (per != p->raw_numel || kh_tensor_numel(x) != nb * p->raw_numel)
        return cntk_fail(s, KH_ERR_INVALID, op, "x holds %lld values per sample, the model takes %lld",
                         (long long)per, (long long)p->raw_numel);
    *n = (int)nb;
    return KH_OK;
}
