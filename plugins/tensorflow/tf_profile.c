/* tf_profile.c — kh_backend_api.profile (ABI 1.1): the executor times every node of the training function
 * while tf_fn.prof_s is set (tf_exec.c's run_node; one predictable branch otherwise), and the times are
 * summed per model layer (kh_gnode.attr.layer; phases 0-1 forward, 2 backward, 3 the Apply ops) and per op
 * kind. With inter-op parallelism nodes overlap, so the rows may add up to more than the steps' wall time:
 * they are time spent in each node, not a partition of the wall clock. `calls` is nodes per step (each node
 * runs once per step). CPU only (the CUDA path would need
 * events around each op). */
#include <stdlib.h>
#include <string.h>

#include "tf.h"
#include "khost/kit/status.h"
#include "khost/kit/clock.h"

static void add(kh_profile_row *r, int phase, double t) {
    if (phase <= 1) r->forward_s += t;
    else if (phase == 2) r->backward_s += t;
    else r->optimizer_s += t;
    r->calls++;
}

static void fill(const tf_model *m, const tf_fn *f, const double *t, int32_t steps, kh_profile *out) {
    const kh_graph *g = f->g;
    int32_t n_layers = m->rt.mg.shapes.n_layers;
    out->n_rows = 0;
    for (int32_t l = 0; l < n_layers && out->n_rows < out->cap_rows; l++) {
        kh_profile_row *r = &out->rows[out->n_rows++];
        memset(r, 0, sizeof *r);
        r->layer = l;
        strncpy(r->what, kh_layer_kind_name(m->layer_kinds[l]), sizeof r->what - 1);
    }
    int32_t layer_rows = out->n_rows;
    int32_t kind_row[KH_GOP_END];
    for (int k = 0; k < KH_GOP_END; k++) kind_row[k] = -1;
    double in_layers = 0;
    for (int32_t i = 0; i < f->n; i++) {
        const kh_gnode *nd = &g->nodes[i];
        if (!f->kernel[i]) continue; /* variables, inputs, views: no work */
        if (nd->attr.layer >= 0 && nd->attr.layer < layer_rows) {
            add(&out->rows[nd->attr.layer], nd->phase, t[i]);
            in_layers += t[i];
        }
        if (nd->op >= KH_GOP_END) continue;
        if (kind_row[nd->op] < 0) {
            if (out->n_rows >= out->cap_rows) continue;
            kind_row[nd->op] = out->n_rows++;
            kh_profile_row *r = &out->rows[kind_row[nd->op]];
            memset(r, 0, sizeof *r);
            r->layer = -1;
            strncpy(r->what, kh_gop_name(nd->op), sizeof r->what - 1);
        }
        add(&out->rows[kind_row[nd->op]], nd->phase, t[i]);
    }
    out->steps = steps;
    out->other_s = out->total_s > in_layers ? out->total_s - in_layers : 0;
}

kh_status tf_api_profile(kh_bmodel *b, const kh_tensor *x, const kh_tensor *y, int32_t warmup, int32_t steps,
                         kh_profile *out) {
    if (!b) return KH_ERR_INVALID;
    tf_model *m = (tf_model *)kh_grt_model_of(b);
    if (!x || !y || !out || steps < 1 || warmup < 0)
        return tf_fail(m->s, KH_ERR_INVALID, "profile", "missing x, y or out, or steps < 1");
    if (m->s->rt.dev.kind != KH_DEVICE_CPU)
        return tf_fail(m->s, KH_ERR_UNSUPPORTED, "profile", "per-op profiling is implemented on cpu only");
    tf_fn *f = &m->fn[KH_GFN_TRAIN];
    if (!f->g || f->n == 0) return tf_fail(m->s, KH_ERR_INVALID, "profile", "the model has no training function");
    kh_status st = KH_OK;
    for (int32_t i = 0; i < warmup && st == KH_OK; i++) st = kh_grt_train_batch(b, x, y);
    if (st != KH_OK) return st;
    double *t = calloc((size_t)f->n + 1, sizeof *t);
    if (!t) return tf_fail(m->s, KH_ERR_NOMEM, "profile", "out of host memory");
    f->prof_s = t;
    double t0 = kh_now();
    for (int32_t i = 0; i < steps && st == KH_OK; i++) st = kh_grt_train_batch(b, x, y);
    out->total_s = kh_now() - t0;
    f->prof_s = NULL;
    if (st == KH_OK) fill(m, f, t, steps, out);
    free(t);
    return st;
}
