/* kit/ref/loss.c — reference losses and accuracy with Keras 2 semantics: categorical cross-entropy on
 * softmax probabilities with class-index labels, binary cross-entropy on sigmoid outputs, probabilities
 * clipped to [1e-7, 1 - 1e-7], mean over the batch. Gradients are taken w.r.t. the logits before the final
 * softmax/sigmoid (the fused form every backend uses); the formulas are khost/kit/formulas.h's. */
#include "khost/kit/formulas.h"
#include "khost/kit/ref.h"

double kh_ref_cce_forward(const double *probs, const int32_t *labels, int64_t B, int64_t C) {
    // probs (B, C), labels (B) in [0, C)
    double sum = 0.0;
    for (int64_t n = 0; n < B; n++) sum += kh_cce_loss_d(probs[n * C + labels[n]]);
    return B > 0 ? sum / (double)B : 0.0;
}

void kh_ref_cce_backward(double *dlogits, const double *probs, const int32_t *labels, int64_t B, int64_t C) {
    // dlogits (B, C) overwritten, probs (B, C), labels (B)
    double inv_n = B > 0 ? 1.0 / (double)B : 0.0;
    for (int64_t n = 0; n < B; n++) {
        const double *p = probs + n * C;
        double p_true = p[labels[n]];
        for (int64_t j = 0; j < C; j++) dlogits[n * C + j] = kh_softmax_cce_grad_d(p[j], j == labels[n], p_true, inv_n);
    }
}

double kh_ref_bce_forward(const double *probs, const int32_t *labels, int64_t B) {
    // probs (B), labels (B) 0/1
    double sum = 0.0;
    for (int64_t n = 0; n < B; n++) sum += kh_bce_loss_d(probs[n], (double)labels[n]);
    return B > 0 ? sum / (double)B : 0.0;
}

void kh_ref_bce_backward(double *dlogits, const double *probs, const int32_t *labels, int64_t B) {
    // dlogits (B) overwritten
    double inv_n = B > 0 ? 1.0 / (double)B : 0.0;
    for (int64_t n = 0; n < B; n++) dlogits[n] = kh_sigmoid_bce_grad_d(probs[n], (double)labels[n], inv_n);
}

int64_t kh_ref_accuracy_categorical(const double *probs, const int32_t *labels, int64_t B, int64_t C) {
    int64_t correct = 0;
    for (int64_t n = 0; n < B; n++) {
        const double *p = probs + n * C;
        int64_t best = 0; // argmax returns the first maximum, as numpy/TensorFlow
        for (int64_t j = 1; j < C; j++) {
            if (p[j] > p[best]) best = j;
        }
        correct += best == labels[n];
    }
    return correct;
}

int64_t kh_ref_accuracy_binary(const double *probs, const int32_t *labels, int64_t B) {
    int64_t correct = 0;
    // Keras binary_accuracy compares round(p): round half to even makes 0.5 a prediction of 0
    for (int64_t n = 0; n < B; n++) correct += (probs[n] > 0.5 ? 1 : 0) == labels[n];
    return correct;
}
