/* kit/base/flops.c — FLOPs and bytes of a model per sample, per step and per epoch, from its spec alone.
 *
 * The counting rules are docs/PERFORMANCE.md's ("How the numbers are counted"): a multiply-add is 2 FLOPs;
 * GEMM-like work (Dense, Conv2D, LSTM gates) is counted, element-wise work (biases, activations, pooling,
 * dropout, the loss) is not; the backward pass is the weight gradients (as many FLOPs as the forward) plus
 * the input gradients that somebody needs (none below the first layer with parameters); an optimizer step
 * costs a fixed number of FLOPs per parameter. Bytes are the same document's coarse traffic model, used
 * only to place a cell under the roofline. */
#include <string.h>

#include "khost/kit/status.h"
#include "khost/kit/spec.h"
#include "khost/kit/flops.h"

/* FLOPs per parameter of one update: every +, -, x, /, sqrt of the formula in khost/kit/formulas_impl.h
 * counted once (constants such as 1 - rho are computed once per step). */
static double opt_flops_per_param(uint32_t kind) {
    switch (kind) {
    case KH_OPT_SGD: return 2;       /* w -= lr g */
    case KH_OPT_RMSPROP: return 9;   /* a: 4, w: 5 */
    case KH_OPT_ADAM: return 12;     /* m: 3, v: 4, w: 5 */
    case KH_OPT_ADADELTA: return 16; /* a: 4, u: 6, w: 2, d: 4 */
    default: return -1;
    }
}

/* 4-byte passes over every parameter per step by the optimizer: reads of w, g and its slots, writes of w,
 * its slots and the cleared g (SGD 3 + 1, RMSprop 5 + 1, Adam/Adadelta 7 + 1). */
static double opt_passes(uint32_t kind) {
    switch (kind) {
    case KH_OPT_SGD: return 4;
    case KH_OPT_RMSPROP: return 6;
    default: return 8;
    }
}

/* 4-byte passes per step over an Embedding table's untouched rows that any correct backend must make:
 * Keras's dense optimizers update every row with a zero gradient, which changes the weights and slots of
 * RMSprop, Adam and Adadelta (read and write w and each slot) but leaves SGD's rows as they are. The
 * gradient itself is never read or cleared outside the rows the batch touched. */
static double table_passes(uint32_t kind) {
    switch (kind) {
    case KH_OPT_SGD: return 0;
    case KH_OPT_RMSPROP: return 4;
    default: return 6;
    }
}

/* Multiply-adds per sample of a layer's forward: the input part and the recurrent part (LSTMs). */
static void layer_macs(const kh_layer_spec *l, const kh_layer_shapes *s, double *in_part, double *rec_part) {
    *in_part = *rec_part = 0;
    switch (l->kind) {
    case KH_LAYER_DENSE:
        *in_part = (double)s->in_numel * l->units;
        break;
    case KH_LAYER_CONV2D: {
        double k = (double)l->kernel[0] * l->kernel[1] * s->in_shape[2];
        *in_part = (double)s->out_shape[0] * s->out_shape[1] * s->out_shape[2] * k;
        break;
    }
    case KH_LAYER_LSTM:
    case KH_LAYER_BILSTM: {
        double dirs = l->kind == KH_LAYER_BILSTM ? 2 : 1, t = s->in_shape[0], in = s->in_shape[1], u = l->units;
        *in_part = dirs * t * 4 * u * in;
        *rec_part = dirs * t * 4 * u * u;
        break;
    }
    default: /* Embedding is a lookup; the rest is element-wise */
        break;
    }
}

kh_status kh_spec_flops(const kh_model_spec *spec, const kh_model_shapes *sh, kh_model_flops *out,
                        kh_layer_flops *per_layer, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (!spec || !sh || sh->n_layers != spec->n_layers)
        return kh_errf(err, errlen, KH_ERR_INVALID, "flops: the shapes do not belong to the spec");
    double k = opt_flops_per_param(spec->optimizer.kind);
    if (k < 0) return kh_errf(err, errlen, KH_ERR_INVALID, "flops: unknown optimizer %u", spec->optimizer.kind);
    int grad_needed = 0; /* an earlier layer has parameters: the input gradient must be computed */
    double params = 0, table_params = 0, act = 0;
    for (int i = 0; i < spec->n_layers; i++) {
        const kh_layer_spec *l = &spec->layers[i];
        const kh_layer_shapes *s = &sh->layers[i];
        double in_part, rec_part;
        layer_macs(l, s, &in_part, &rec_part);
        kh_layer_flops f = {.forward = 2 * (in_part + rec_part)};
        /* weight gradients cost what the forward does; the recurrent state's gradient is always needed */
        f.backward = f.forward + 2 * rec_part + (grad_needed ? 2 * in_part : 0);
        out->forward += f.forward;
        out->backward += f.backward;
        if (per_layer) per_layer[i] = f;
        for (int p = 0; p < s->n_params; p++) {
            params += (double)s->params[p].numel;
            if (l->kind == KH_LAYER_EMBEDDING) table_params += (double)s->params[p].numel;
        }
        if (s->n_params > 0) grad_needed = 1;
        act += (double)s->out_numel;
    }
    out->params = params;
    out->optimizer = params * k;
    /* an Embedding table is touched only where the batch points (the gather reads and the gradient's
     * writes are in the activation traffic below), except by the dense optimizer over every row */
    out->param_bytes_train = 4 * ((params - table_params) * (3 + opt_passes(spec->optimizer.kind)) +
                                  table_params * table_passes(spec->optimizer.kind));
    out->param_bytes_eval = 4 * (params - table_params);
    /* each stored activation written once and read about twice in the forward; ~3x that in training */
    out->act_bytes_eval = 4 * 3 * act;
    out->act_bytes_train = 3 * out->act_bytes_eval;
    return KH_OK;
}

void kh_flops_epoch(const kh_model_flops *f, int64_t train_samples, int64_t batch_size, int64_t val_samples,
                    double *flops, double *bytes) {
    int64_t b = batch_size > 0 ? batch_size : 1;
    double steps = (double)((train_samples + b - 1) / b), vsteps = (double)((val_samples + b - 1) / b);
    double tr = (double)train_samples, va = (double)val_samples;
    if (flops) *flops = tr * (f->forward + f->backward) + steps * f->optimizer + va * f->forward;
    if (bytes)
        *bytes = steps * f->param_bytes_train + vsteps * f->param_bytes_eval + tr * f->act_bytes_train +
                 va * f->act_bytes_eval;
}
