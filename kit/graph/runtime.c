/* runtime.c — the model-level calls of the graph runtime (khost/kit/graph_runtime.h): compile (checks,
 * lowering, the backend's compile step, the executor's prepare), the checks of every call's tensors, the step
 * and dropout counters and the probe state, each call handed to the session's executor. */
#include <stdlib.h>
#include <string.h>

#include "khost/kit/clock.h"
#include "khost/kit/graph_runtime.h"
#include "khost/kit/optimizer.h"
#include "runtime_api.h"

kh_grt_model *kh_grt_model_of(kh_bmodel *b) { return (kh_grt_model *)b; }
static kh_grt_model *M(kh_bmodel *b) { return (kh_grt_model *)b; }

/* After the session layer's checks and allocation: lowering, the backend's compile step, the executor's prepare
 * (a failure anywhere is cleaned up by kh_grt_model_free). */
static kh_status grt_build(kh_bmodel *b, const kh_model_spec *spec, const kh_compile_opts *opts) {
    kh_grt_model *m = M(b);
    const kh_grt_backend *be = kh_grt_be(m->s);
    m->max_batch = opts->max_batch;
    m->seed = opts->seed;
    double t0 = kh_now();
    kh_graph_lower_opts lo = {.max_batch = opts->max_batch,
                              .rnn_scan = be->rnn_scan,
                              .deterministic = KH_HAS_MEMBER(kh_compile_opts, opts->struct_size, deterministic)
                                                   ? opts->deterministic : 0};
    char why[256];
    kh_status st = kh_graph_lower(spec, &lo, &m->mg, why, sizeof why);
    if (st != KH_OK) return kh_grt_fail(m->s, st, "compile", "%s", why);
    m->lower_s = kh_now() - t0;
    st = be->prepare(m, spec);
    for (int f = 0; f < KH_GFN_COUNT && st == KH_OK; f++)
        if (m->plan[f] && m->plan[f]->arena_bytes > m->arena_bytes) m->arena_bytes = m->plan[f]->arena_bytes;
    if (st == KH_OK) st = kh_grt_ex(m->s)->prepare(m);
    if (st == KH_OK && be->ready) be->ready(m);
    return st;
}

kh_status kh_grt_compile(kh_bsession *bs, const kh_model_spec *spec, const kh_compile_opts *opts, kh_bmodel **out) {
    size_t size = bs ? kh_grt_be((kh_grt_session *)bs)->model_size : 0;
    return kh_session_compile(bs, spec, opts, size, grt_build, kh_grt_model_free, out);
}

void kh_grt_model_free(kh_bmodel *b) {
    if (!b) return;
    kh_grt_model *m = M(b);
    const kh_grt_backend *be = kh_grt_be(m->s);
    kh_grt_ex(m->s)->release(m);
    kh_grt_host_free(m);
    if (be->release) be->release(m);
    kh_model_graphs_free(&m->mg);
    free(m);
}

// --- checks ---------------------------------------------------------------------------------------------------
static kh_status check_slot(kh_grt_model *m, int32_t layer, int32_t slot, const kh_tensor *t, const char *op,
                            int32_t *v_out) {
    char why[300];
    kh_status st = kh_model_graphs_check_weight(&m->mg, layer, slot, t, v_out, why, sizeof why);
    return st == KH_OK ? st : kh_grt_fail(m->s, st, op, "%s", why);
}

static kh_status check_x(kh_grt_model *m, const kh_tensor *x, const char *op, int64_t *n) {
    char why[300];
    kh_status st = kh_model_graphs_check_x(&m->mg, m->max_batch, x, n, why, sizeof why);
    return st == KH_OK ? st : kh_grt_fail(m->s, st, op, "%s", why);
}

/* Labels index the probabilities in the loss: every one must be a class of the output. */
static kh_status check_y(kh_grt_model *m, const kh_tensor *y, int64_t n, const char *op) {
    char why[300];
    kh_status st = kh_model_graphs_check_labels(&m->mg, y, n, why, sizeof why);
    return st == KH_OK ? st : kh_grt_fail(m->s, st, op, "%s", why);
}

static kh_status check_out(kh_grt_model *m, const kh_tensor *out, int64_t n, int64_t per, const char *op) {
    char why[300];
    kh_status st = kh_model_graphs_check_out(out, n, per, why, sizeof why);
    return st == KH_OK ? st : kh_grt_fail(m->s, st, op, "%s", why);
}

static kh_status need_fn(kh_grt_model *m, kh_gfn fn, const char *op) {
    if (m->graph[fn]) return KH_OK;
    return kh_grt_fail(m->s, KH_ERR_UNSUPPORTED, op, "the model has no loss (compiled for probes only)");
}

// --- weights --------------------------------------------------------------------------------------------------
kh_status kh_grt_set_weight(kh_bmodel *b, int32_t layer, int32_t slot, const kh_tensor *w) {
    if (!b) return KH_ERR_INVALID;
    int32_t v = -1;
    kh_status st = check_slot(M(b), layer, slot, w, "set_weight", &v);
    return st == KH_OK ? kh_grt_ex(M(b)->s)->set_var(M(b), v, w->data) : st;
}

kh_status kh_grt_get_weight(kh_bmodel *b, int32_t layer, int32_t slot, kh_tensor *w) {
    if (!b) return KH_ERR_INVALID;
    int32_t v = -1;
    kh_status st = check_slot(M(b), layer, slot, w, "get_weight", &v);
    return st == KH_OK ? kh_grt_ex(M(b)->s)->get_var(M(b), v, w->data) : st;
}

// --- training, evaluation, prediction ---------------------------------------------------------------------------
/* The batch x with labels y, checked, for train or eval. */
static kh_status check_xy(kh_grt_model *m, kh_gfn fn, const kh_tensor *x, const kh_tensor *y, const char *op,
                          int64_t *n) {
    kh_status st = need_fn(m, fn, op);
    if (st == KH_OK) st = check_x(m, x, op, n);
    if (st == KH_OK) st = check_y(m, y, *n, op);
    return st;
}

/* Train or eval on a checked batch: training takes the step's learning rate and a dropout counter, and counts an
 * optimizer step when it ran. */
static kh_status run_batch(kh_bmodel *b, kh_gfn fn, const kh_tensor *x, const kh_tensor *y, const char *op) {
    if (!b) return KH_ERR_INVALID;
    kh_grt_model *m = M(b);
    int64_t n = 0;
    kh_status st = check_xy(m, fn, x, y, op, &n);
    if (st != KH_OK) return st;
    int train = fn == KH_GFN_TRAIN;
    double lr = train ? kh_optimizer_step_lr(&m->mg.opt, m->iterations) : 0.0;
    uint64_t counter = train ? m->n_forward++ : 0;
    st = kh_grt_ex(m->s)->run(m, fn, 0, n, lr, counter, x->data, y->data, NULL);
    if (st == KH_OK && train) m->iterations++;
    return st;
}

kh_status kh_grt_train_batch(kh_bmodel *b, const kh_tensor *x, const kh_tensor *y) {
    return run_batch(b, KH_GFN_TRAIN, x, y, "train_batch");
}

kh_status kh_grt_eval_batch(kh_bmodel *b, const kh_tensor *x, const kh_tensor *y) {
    return run_batch(b, KH_GFN_EVAL, x, y, "eval_batch");
}

/* x and out checked for a forward of n rows. */
static kh_status check_forward(kh_grt_model *m, const kh_tensor *x, kh_tensor *out, const char *op, int64_t *n) {
    kh_status st = check_x(m, x, op, n);
    return st == KH_OK ? check_out(m, out, *n, m->mg.out_numel, op) : st;
}

/* Run the forward of fn (predict, or the probe's part 0) and copy its output into out. */
static kh_status forward_to(kh_grt_model *m, kh_gfn fn, uint64_t counter, const kh_tensor *x, kh_tensor *out,
                            int64_t n) {
    kh_status st = kh_grt_ex(m->s)->run(m, fn, 0, n, 0.0, counter, x->data, NULL, NULL);
    return st == KH_OK ? kh_grt_ex(m->s)->read_node(m, fn, m->graph[fn]->outputs[KH_GOUT_Y], n, out->data) : st;
}

kh_status kh_grt_predict(kh_bmodel *b, const kh_tensor *x, kh_tensor *out) {
    if (!b) return KH_ERR_INVALID;
    int64_t n = 0;
    kh_status st = check_forward(M(b), x, out, "predict", &n);
    return st == KH_OK ? forward_to(M(b), KH_GFN_PREDICT, 0, x, out, n) : st;
}

kh_status kh_grt_read_metrics(kh_bmodel *b, uint32_t phase, kh_metrics *out, int32_t reset) {
    if (!b) return KH_ERR_INVALID;
    kh_grt_model *m = M(b);
    if (!out || phase > KH_PHASE_EVAL) return kh_grt_fail(m->s, KH_ERR_INVALID, "read_metrics", "bad phase %u", phase);
    return kh_grt_ex(m->s)->read_metrics(m, phase, out, reset);
}

kh_status kh_grt_sync(kh_bmodel *b) {
    if (!b) return KH_ERR_INVALID;
    return kh_grt_ex(M(b)->s)->sync(M(b));
}

/* The device memory the GPU executor counted for the model; a cpu model is not counted (peak RSS holds it). */
kh_status kh_grt_memory_info(kh_bmodel *b, kh_memory_info *out) {
    if (!b) return KH_ERR_INVALID;
    kh_grt_model *m = kh_grt_model_of(b);
    const char *what = kh_grt_be(m->s)->device_memory_what;
    return kh_mem_count_report(&m->dev_mem, m->s->dev.kind == KH_DEVICE_CUDA, what ? what : "", out);
}

// --- probes ---------------------------------------------------------------------------------------------------
kh_status kh_grt_forward(kh_bmodel *b, const kh_tensor *x, kh_tensor *out) {
    if (!b) return KH_ERR_INVALID;
    kh_grt_model *m = M(b);
    int64_t n = 0;
    kh_status st = check_forward(m, x, out, "forward", &n);
    if (st != KH_OK) return st;
    m->probe_counter = m->n_forward++;
    st = forward_to(m, KH_GFN_PROBE, m->probe_counter, x, out, n);
    if (st != KH_OK) return st;
    m->last_n = (int32_t)n;
    m->have_grad = 0;
    return KH_OK;
}

kh_status kh_grt_backward(kh_bmodel *b, const kh_tensor *dy, kh_tensor *dx) {
    if (!b) return KH_ERR_INVALID;
    kh_grt_model *m = M(b);
    if (m->last_n <= 0) return kh_grt_fail(m->s, KH_ERR_INVALID, "backward", "no forward() before backward()");
    int64_t n = m->last_n;
    if (!dy || !dy->data || dy->dtype != KH_F32 || kh_tensor_numel(dy) != n * m->mg.out_numel)
        return kh_grt_fail(m->s, KH_ERR_INVALID, "backward", "dy must be f32 with %lld values",
                           (long long)(n * m->mg.out_numel));
    int32_t dxn = m->graph[KH_GFN_PROBE]->outputs[KH_GOUT_DX];
    if (dx && dxn >= 0 && check_out(m, dx, n, m->mg.input_numel, "backward") != KH_OK) return KH_ERR_INVALID;
    kh_status st = kh_grt_ex(m->s)->run(m, KH_GFN_PROBE, 1, n, 0.0, m->probe_counter, NULL, NULL, dy->data);
    if (st != KH_OK) return st;
    m->have_grad = 1;
    return dx && dxn >= 0 ? kh_grt_ex(m->s)->read_node(m, KH_GFN_PROBE, dxn, n, dx->data) : KH_OK;
}

kh_status kh_grt_get_grad(kh_bmodel *b, int32_t layer, int32_t slot, kh_tensor *g) {
    if (!b) return KH_ERR_INVALID;
    kh_grt_model *m = M(b);
    int32_t v = -1;
    kh_status st = check_slot(m, layer, slot, g, "get_grad", &v);
    if (st != KH_OK) return st;
    if (!m->have_grad) return kh_grt_fail(m->s, KH_ERR_INVALID, "get_grad", "no backward() since the last forward()");
    int32_t node = m->mg.probe_grads[v];
    const int32_t *map = m->node_map[KH_GFN_PROBE];
    if (node >= 0 && map) node = map[node];
    if (node < 0) { /* a variable the loss does not reach */
        memset(g->data, 0, (size_t)m->mg.vars[v].numel * sizeof(float));
        return KH_OK;
    }
    return kh_grt_ex(m->s)->read_node(m, KH_GFN_PROBE, node, m->last_n, g->data);
}
