/* cpu/loss.c — the two cross-entropies fused with their output activation, and the metrics.
 * y holds probabilities (the softmax / sigmoid already applied by the last layer's forward); the gradient
 * written is w.r.t. the logits, with Keras's clipping folded in (khost/kit/formulas.h), so the last layer's
 * backward skips its activation derivative (fused). Metrics are summed in double: loss over samples,
 * correct predictions (first argmax; binary p > 0.5), sample count. */
#include "cpu/cpu.h"
#include "khost/kit/formulas.h"

kh_status cntk_loss_eval(cntk_cpu_model *m, const float *y, const int32_t *labels, int n, kh_metrics *met,
                         float *dz) {
    const cntk_plan *p = m->plan;
    const cntk_layer_plan *last = &p->layers[p->n_layers - 1];
    float inv_n = 1.0f / (float)n;
    double loss = 0, correct = 0;
    if (p->loss == KH_LOSS_CATEGORICAL_CROSSENTROPY) {
        int64_t C = p->out_numel;
        for (int s = 0; s < n; s++) {
            int32_t lab = labels[s];
            if (lab < 0 || lab >= C)
                return cntk_layer_fail(m->s, KH_ERR_INVALID, last->spec.kind, last->index, "loss",
                                       "label %d of sample %d outside [0, %lld)", lab, s, (long long)C);
            const float *row = y + s * C;
            int64_t best = 0;
            for (int64_t c = 1; c < C; c++)
                if (row[c] > row[best]) best = c;
            correct += best == lab;
            float pt = row[lab];
            loss += (double)kh_cce_loss(pt);
            if (dz)
                for (int64_t c = 0; c < C; c++) dz[s * C + c] = kh_softmax_cce_grad(row[c], c == lab, pt, inv_n);
        }
    } else if (p->loss == KH_LOSS_BINARY_CROSSENTROPY) {
        for (int s = 0; s < n; s++) {
            int32_t lab = labels[s];
            if (lab != 0 && lab != 1)
                return cntk_layer_fail(m->s, KH_ERR_INVALID, last->spec.kind, last->index, "loss",
                                       "binary label %d of sample %d is not 0 or 1", lab, s);
            float pr = y[s];
            correct += (pr > 0.5f) == (lab == 1);
            loss += (double)kh_bce_loss(pr, (float)lab);
            if (dz) dz[s] = kh_sigmoid_bce_grad(pr, (float)lab, inv_n);
        }
    } else {
        return cntk_fail(m->s, KH_ERR_UNSUPPORTED, "loss", "the model was compiled without a loss");
    }
    met->loss_sum += loss;
    met->correct += correct;
    met->samples += n;
    return KH_OK;
}
