/* tf_profile.c — kh_backend_api.profile (ABI 1.1): the executor times every node of the training function
 * while tf_fn.prof_s is set (tf_exec.c's run_node; one predictable branch otherwise), and the times are
 * summed per model layer (kh_gnode.attr.layer; phases 0-1 forward, 2 backward, 3 the Apply ops) and per op
 * kind (kit/graph/profile_fill.c, which also splits each row's backward into its input and weight gradient).
 * The profiled steps run the nodes one at a time, in graph order (inter_op_parallelism 1; each kernel still
 * splits over the pool): with nodes overlapping, a node's wall time would include the time the other node
 * took the shared threads, the rows would add up to more than the step, and a layer's rate would be understated
 * by as much. The setting is restored after. `calls` is nodes per step (each node runs once per step). CPU only
 * (the CUDA path would need events around each op). */
#include <stdlib.h>

#include "tf.h"
#include "khost/kit/status.h"
#include "khost/kit/clock.h"
#include "khost/kit/profile.h"

/* the executor's nodes with a kernel; variables, inputs and views do no work */
static int node_works(const void *ctx, int32_t node) { return ((const tf_fn *)ctx)->kernel[node] != NULL; }

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
    double *t = calloc((size_t)f->n + 1, sizeof *t);
    if (!t) return tf_fail(m->s, KH_ERR_NOMEM, "profile", "out of host memory");
    int inter_op = m->s->set.inter_op;
    m->s->set.inter_op = 1; /* the warm-up too: the timed steps start from the serial schedule's state */
    kh_status st = KH_OK;
    for (int32_t i = 0; i < warmup && st == KH_OK; i++) st = kh_grt_train_batch(b, x, y);
    double total = 0;
    if (st == KH_OK) {
        f->prof_s = t;
        double t0 = kh_now();
        for (int32_t i = 0; i < steps && st == KH_OK; i++) st = kh_grt_train_batch(b, x, y);
        total = kh_now() - t0;
        f->prof_s = NULL;
    }
    m->s->set.inter_op = inter_op;
    if (st == KH_OK &&
        kh_graph_profile_fill(f->g, node_works, f, m->layer_kinds, m->rt.mg.shapes.n_layers, t, steps, total, out) !=
            KH_OK)
        st = tf_fail(m->s, KH_ERR_NOMEM, "profile", "out of host memory");
    free(t);
    return st;
}
