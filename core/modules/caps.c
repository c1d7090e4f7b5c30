/* core/modules/caps.c — check a model spec against a backend's capabilities (ggml's supports_op, declaratively). */
#include "modules/caps.h"

#include <stdio.h>
#include <string.h>

#include "khost/kit/status.h"

void kh_caps_unavailable_reason(const kh_caps *c, char *why, size_t n) {
    snprintf(why, n, "device kind not available: %s", c->note[0] ? c->note : "no reason given");
}

int kh_caps_check(const kh_caps *c, const kh_model_spec *spec, char *why, size_t n) {
    if (!c->available) {
        kh_caps_unavailable_reason(c, why, n);
        return -1;
    }
    for (int i = 0; i < spec->n_layers; i++) {
        const kh_layer_spec *l = &spec->layers[i];
        const char *kn = kh_layer_kind_name(l->kind);
        if (l->kind >= 32 || !(c->layer_kinds & (1u << l->kind))) {
            snprintf(why, n, "layer %d %s", i, kn);
            return -1;
        }
        int has_act = l->kind == KH_LAYER_DENSE || l->kind == KH_LAYER_CONV2D || l->kind == KH_LAYER_ACTIVATION;
        if (has_act && (l->activation >= 32 || !(c->activations & (1u << l->activation)))) {
            snprintf(why, n, "layer %d %s activation=%s", i, kn, kh_activation_name(l->activation));
            return -1;
        }
        if (l->kind == KH_LAYER_CONV2D && l->padding == KH_PAD_SAME && !(c->flags & KH_CAP_CONV_SAME)) {
            snprintf(why, n, "layer %d %s padding=same", i, kn);
            return -1;
        }
        if ((l->kind == KH_LAYER_LSTM || l->kind == KH_LAYER_BILSTM) && l->return_sequences &&
            !(c->flags & KH_CAP_LSTM_SEQUENCES)) {
            snprintf(why, n, "layer %d %s return_sequences", i, kn);
            return -1;
        }
    }
    if (spec->loss != KH_LOSS_NONE && (spec->loss >= 32 || !(c->losses & (1u << spec->loss)))) {
        snprintf(why, n, "loss %s", kh_loss_name(spec->loss));
        return -1;
    }
    if (spec->optimizer.kind >= 32 || !(c->optimizers & (1u << spec->optimizer.kind))) {
        snprintf(why, n, "optimizer %s", kh_optimizer_name(spec->optimizer.kind));
        return -1;
    }
    return 0;
}

void kh_caps_describe(const kh_caps *c, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = 0;
    for (uint32_t k = 1; k < KH_LAYER_KIND_END && len < n; k++)
        if (c->layer_kinds & (1u << k))
            len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? " " : "", kh_layer_kind_name(k));
    if (len < n && (c->flags & KH_CAP_CONV_SAME)) len += (size_t)snprintf(buf + len, n - len, " +same");
    if (len < n && (c->flags & KH_CAP_ONEHOT_INPUT)) len += (size_t)snprintf(buf + len, n - len, " +onehot");
    if (len < n && (c->flags & KH_CAP_PROBES)) len += (size_t)snprintf(buf + len, n - len, " +probes");
    if (len < n)
        snprintf(buf + len, n - len, "; layout %s", c->image_layout == KH_LAYOUT_NCHW ? "NCHW" : "NHWC");
}
