/* cpu/profile.c — kh_backend_api.profile (ABI 1.1) for the CPU executor: forward and backward seconds per
 * layer over timed training steps. The drivers (cpu/model.c) add a layer's time only while
 * cntk_cpu_model.prof is set, so ordinary training pays one predictable branch per layer. The loss, the fused
 * optimizer step and input staging are the profile's other_s. The CUDA executor does not profile (its
 * layers are asynchronous; timing them needs events per layer): KH_ERR_UNSUPPORTED there.
 *
 * Each row's backward is split into its input and weight gradient (ABI 1.5) where the layer times its weight
 * gradient apart (cntk_prof_weight_grad: oneDNN's backward-weights primitive with the reorders it needs, the
 * BLAS Dense's and the LSTM's weight GEMMs and bias sums, Embedding's whole scatter); a layer without weights has
 * no weight gradient. The im2col convolution interleaves both gradients per sample on the pool and stays
 * unsplit (-1). */
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "khost/kit/profile.h"
#include "khost/kit/status.h"

void cntk_prof_weight_grad(cntk_cpu_model *m, const cntk_cpu_layer *L, double t0) {
    if (!m->prof) return;
    int32_t i = (int32_t)(L - m->L);
    m->prof[3 * i + 2] += kh_now() - t0;
    m->prof_split[i] = 1;
}

/* Layer l's row and its gradient split from the timed sums (prof, split: what the steps left in the model's). */
static void fill_row(const cntk_cpu_model *c, const double *prof, const uint8_t *split, int32_t l, kh_profile *out) {
    int32_t r = out->n_rows++;
    kh_profile_row *row = &out->rows[r];
    memset(row, 0, sizeof *row);
    row->layer = l;
    strncpy(row->what, kh_layer_kind_name(c->L[l].p->spec.kind), sizeof row->what - 1);
    row->forward_s = prof[3 * l];
    row->backward_s = prof[3 * l + 1];
    row->calls = 2; /* one forward and one backward call per step */
    double w = prof[3 * l + 2];
    if (w > row->backward_s) w = row->backward_s; /* two clock reads of one interval */
    if (split[l]) kh_profile_set_grad(out, r, row->backward_s - w, w);
    else if (c->L[l].n_params == 0) kh_profile_set_grad(out, r, row->backward_s, 0);
}

kh_status cntk_api_profile(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y, int32_t warmup, int32_t steps,
                           kh_profile *out) {
    if (!m) return KH_ERR_INVALID;
    if (!x || !y || !out || steps < 1 || warmup < 0 || out->cap_rows < 0 || (out->cap_rows > 0 && !out->rows))
        return cntk_fail(m->s, KH_ERR_INVALID, "profile", "missing x, y or out, or steps < 1");
    if (!m->cpu) return cntk_fail(m->s, KH_ERR_UNSUPPORTED, "profile", "per-layer profiling is implemented on cpu only");
    cntk_cpu_model *c = m->cpu;
    kh_status st = KH_OK;
    for (int32_t i = 0; i < warmup && st == KH_OK; i++) st = cntk_cpu_exec.train(m, x, y);
    if (st != KH_OK) return st;
    double *prof = calloc((size_t)c->n_layers * 3, sizeof *prof);
    uint8_t *split = calloc((size_t)c->n_layers + 1, 1);
    if (!prof || !split) {
        free(prof);
        free(split);
        return cntk_fail(m->s, KH_ERR_NOMEM, "profile", "out of memory");
    }
    c->prof = prof;
    c->prof_split = split;
    double t0 = kh_now();
    for (int32_t i = 0; i < steps && st == KH_OK; i++) st = cntk_cpu_exec.train(m, x, y);
    double total = kh_now() - t0;
    c->prof = NULL;
    c->prof_split = NULL;
    if (st == KH_OK) {
        double layers = 0;
        out->n_rows = 0;
        for (int32_t l = 0; l < c->n_layers && out->n_rows < out->cap_rows; l++) {
            fill_row(c, prof, split, l, out);
            layers += prof[3 * l] + prof[3 * l + 1];
        }
        kh_profile_close(out, steps, total, layers);
    }
    free(prof);
    free(split);
    return st;
}
