/* cpu/profile.c — kh_backend_api.profile (ABI 1.1) for the CPU executor: forward and backward seconds per
 * layer over timed training steps. The drivers (cpu/model.c) add a layer's time only while
 * cntk_cpu_model.prof is set, so ordinary training pays one predictable branch per layer. The loss, the fused
 * optimizer step and input staging are the profile's other_s. The CUDA executor does not profile (its
 * layers are asynchronous; timing them needs events per layer): KH_ERR_UNSUPPORTED there. */
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "khost/kit/status.h"
#include "khost/kit/clock.h"

kh_status cntk_api_profile(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y, int32_t warmup, int32_t steps,
                           kh_profile *out) {
    if (!m) return KH_ERR_INVALID;
    if (!x || !y || !out || steps < 1 || warmup < 0)
        return cntk_fail(m->s, KH_ERR_INVALID, "profile", "missing x, y or out, or steps < 1");
    if (!m->cpu) return cntk_fail(m->s, KH_ERR_UNSUPPORTED, "profile", "per-layer profiling is implemented on cpu only");
    cntk_cpu_model *c = m->cpu;
    kh_status st = KH_OK;
    for (int32_t i = 0; i < warmup && st == KH_OK; i++) st = cntk_cpu_exec.train(m, x, y);
    if (st != KH_OK) return st;
    double *prof = calloc((size_t)c->n_layers * 2, sizeof *prof);
    if (!prof) return cntk_fail(m->s, KH_ERR_NOMEM, "profile", "out of memory");
    c->prof = prof;
    double t0 = kh_now();
    for (int32_t i = 0; i < steps && st == KH_OK; i++) st = cntk_cpu_exec.train(m, x, y);
    double total = kh_now() - t0;
    c->prof = NULL;
    if (st == KH_OK) {
        double layers = 0;
        out->n_rows = 0;
        for (int32_t l = 0; l < c->n_layers && out->n_rows < out->cap_rows; l++) {
            kh_profile_row *r = &out->rows[out->n_rows++];
            memset(r, 0, sizeof *r);
            r->layer = l;
            strncpy(r->what, kh_layer_kind_name(c->L[l].p->spec.kind), sizeof r->what - 1);
            r->forward_s = prof[2 * l];
            r->backward_s = prof[2 * l + 1];
            r->calls = 2; /* one forward and one backward call per step */
            layers += r->forward_s + r->backward_s;
        }
        out->steps = steps;
        out->total_s = total;
        out->other_s = total > layers ? total - layers : 0;
    }
    free(prof);
    return st;
}
