/* kit/base/status.c — error-text helpers and the names of ABI enums, for messages. */
#include <stdarg.h>
#include <stdio.h>

#include "khost/kit/status.h"

kh_status kh_errf(char *buf, size_t n, kh_status status, const char *fmt, ...) {
    if (buf && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, n, fmt, ap);
        va_end(ap);
    }
    return status;
}

const char *kh_status_name(kh_status s) {
    switch (s) {
    case KH_OK: return "ok";
    case KH_ERR_INVALID: return "invalid argument";
    case KH_ERR_UNSUPPORTED: return "unsupported";
    case KH_ERR_NOMEM: return "out of memory";
    case KH_ERR_DEVICE: return "device error";
    case KH_ERR_IO: return "I/O error";
    case KH_ERR_DATA: return "malformed data";
    case KH_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *kh_layer_kind_name(uint32_t kind) {
    static const char *names[] = {"?", "dense", "activation", "dropout", "flatten", "conv2d", "maxpooling2d",
                                  "embedding", "lstm", "bidirectional_lstm", "globalaveragepooling1d"};
    return kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

const char *kh_activation_name(uint32_t act) {
    static const char *names[] = {"linear", "relu", "sigmoid", "tanh", "softmax"};
    return act < sizeof names / sizeof names[0] ? names[act] : "?";
}

const char *kh_optimizer_name(uint32_t opt) {
    static const char *names[] = {"sgd", "rmsprop", "adam", "adadelta"};
    return opt < sizeof names / sizeof names[0] ? names[opt] : "?";
}

const char *kh_loss_name(uint32_t loss) {
    static const char *names[] = {"none", "categorical_crossentropy", "binary_crossentropy"};
    return loss < sizeof names / sizeof names[0] ? names[loss] : "?";
}
