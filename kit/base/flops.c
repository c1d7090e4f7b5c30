/* kit/base/flops.c — FLOPs and bytes of a model per sample, per step and per epoch, from its spec alone.
 *
 * The counting rules are docs/PERFORMANCE.md's ("How the numbers are counted"): a multiply-add is 2 FLOPs;
 * GEMM-like work (Dense, Conv2D, LSTM gates) is counted, element-wise work (biases, activations, pooling,
 * dropout, the loss) is not; the backward pass is the weight gradients (as many FLOPs as the forward) plus
 * the input gradients that somebody needs (none below the first layer with parameters); an optimizer step
 * costs a fixed number of FLOPs per parameter. Bytes are the same document's compulsory traffic, used
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

/* The optimizer's slots per parameter (RMSprop's a; Adam's m, v; Adadelta's a, d). */
static double opt_slots(uint32_t kind) {
    switch (kind) {
    case KH_OPT_SGD: return 0;
    case KH_OPT_RMSPROP: return 1;
    default: return 2;
    }
}

/* A layer whose output any implementation must store: one that computes (Dense, Conv2D, pooling, the LSTMs).
 * Activation, Dropout and Flatten can be fused into their producer, and an Embedding's gathered rows into its
 * consumer (fastText's average), so their outputs need no memory of their own. */
static int output_stored(uint32_t kind) {
    switch (kind) {
    case KH_LAYER_ACTIVATION:
    case KH_LAYER_DROPOUT:
    case KH_LAYER_FLATTEN:
    case KH_LAYER_EMBEDDING: return 0;
    default: return 1;
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
    double params = 0, table_params = 0, out_fwd = 0, out_grad = 0, gathered = 0;
    for (int i = 0; i < spec->n_layers; i++) {
        const kh_layer_spec *l = &spec->layers[i];
        const kh_layer_shapes *s = &sh->layers[i];
        double in_part, rec_part;
        layer_macs(l, s, &in_part, &rec_part);
        kh_layer_flops f = {.forward = 2 * (in_part + rec_part)};
        /* weight gradients cost what the forward does; the recurrent state's gradient is always needed */
        f.weight_grad = f.forward;
        f.input_grad = 2 * rec_part + (grad_needed ? 2 * in_part : 0);
        f.backward = f.weight_grad + f.input_grad;
        out->forward += f.forward;
        out->backward += f.backward;
        if (per_layer) per_layer[i] = f;
        for (int p = 0; p < s->n_params; p++) {
            params += (double)s->params[p].numel;
            if (l->kind == KH_LAYER_EMBEDDING) table_params += (double)s->params[p].numel;
        }
        if (s->n_params > 0) grad_needed = 1;
        if (l->kind == KH_LAYER_EMBEDDING) gathered += (double)s->out_numel;
        if (output_stored(l->kind)) {
            out_fwd += (double)s->out_numel;
            if (grad_needed) out_grad += (double)s->out_numel; /* a gradient flows back through this output */
        }
    }
    out->params = params;
    out->optimizer = params * k;
    /* Parameters: the update reads and writes w and each slot once. The gradient is not counted: an update
     * fused into the weight-gradient computation never stores it. A table's rows are all updated by the
     * dense optimizers (Keras's Adam moves a row with a zero gradient); SGD leaves an untouched row alone and
     * its touched rows' update is not counted (their number depends on the data). */
    double slots = opt_slots(spec->optimizer.kind), dense = params - table_params;
    double table_kept = spec->optimizer.kind == KH_OPT_SGD ? 0 : table_params;
    out->param_bytes_train = 4 * (dense + table_kept) * (2 + 2 * slots);
    out->param_bytes_eval = 4 * dense;
    out->ws_param_train = 4 * (dense + table_kept) * (1 + slots);
    out->ws_param_eval = 4 * dense;
    /* Activations: each stored output written once and read once; in training its gradient too; gathered
     * rows read once. The batch's inputs and labels are not counted (small beside the rest). */
    out->act_bytes_eval = 4 * (2 * out_fwd + gathered);
    out->act_bytes_train = 4 * (2 * out_fwd + 2 * out_grad + gathered);
    out->ws_act_eval = 4 * (out_fwd + gathered);
    out->ws_act_train = 4 * (out_fwd + out_grad + gathered);
    return KH_OK;
}

void kh_flops_phases(const kh_model_flops *f, int64_t train_samples, int64_t batch_size, int64_t val_samples,
                     kh_flops_phase *train, kh_flops_phase *eval) {
    int64_t b = batch_size > 0 ? batch_size : 1;
    double steps = (double)((train_samples + b - 1) / b), vsteps = (double)((val_samples + b - 1) / b);
    double tr = (double)train_samples, va = (double)val_samples;
    double tb = train_samples < b ? tr : (double)b, vb = val_samples < b ? va : (double)b; /* one full step */
    train->flops = tr * (f->forward + f->backward) + steps * f->optimizer;
    train->bytes = steps * f->param_bytes_train + tr * f->act_bytes_train;
    train->working_set = f->ws_param_train + tb * f->ws_act_train;
    eval->flops = va * f->forward;
    eval->bytes = vsteps * f->param_bytes_eval + va * f->act_bytes_eval;
    eval->working_set = f->ws_param_eval + vb * f->ws_act_eval;
}

void kh_flops_epoch(const kh_model_flops *f, int64_t train_samples, int64_t batch_size, int64_t val_samples,
                    double *flops, double *bytes) {
    kh_flops_phase t, e;
    kh_flops_phases(f, train_samples, batch_size, val_samples, &t, &e);
    if (flops) *flops = t.flops + e.flops;
    if (bytes) *bytes = t.bytes + e.bytes;
}
