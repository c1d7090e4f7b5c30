/* cntk_api.c — the model-level ABI calls: the session layer's compile frame, the argument checks common to every
 * device, then the session's executor (cntk_exec: cpu/model.c, or the GPU half's table). */
#include <stdlib.h>

#include "cntk_api.h"
#include "cpu/cpu.h" /* cntk_api_profile */

static int on_cuda(const cntk_model *m) { return m->s->base.dev.kind == KH_DEVICE_CUDA; }
static const cntk_exec *EX(const cntk_model *m) { return cntk_exec_of(m->s); }

static void model_free(kh_bmodel *m) {
    if (!m) return;
    EX(m)->free_model(m);
    cntk_plan_free(&m->plan);
    free(m);
}

/* Inside the frame (khost/kit/session.h): the plan, then the executor of the session's device. */
static kh_status build(kh_bmodel *m, const kh_model_spec *spec, const kh_compile_opts *opts) {
    kh_status st = cntk_plan_build(m->s, spec, opts, &m->plan);
    return st != KH_OK ? st : EX(m)->compile(m);
}

static kh_status compile(kh_bsession *s, const kh_model_spec *spec, const kh_compile_opts *opts, kh_bmodel **out) {
    return kh_session_compile(s, spec, opts, sizeof(cntk_model), build, model_free, out);
}

/* Common check of a (layer, slot) address. */
static kh_status check_slot(cntk_model *m, int32_t layer, int32_t slot, const kh_tensor *t, const char *op) {
    if (layer < 0 || layer >= m->plan.n_layers)
        return cntk_fail(m->s, KH_ERR_INVALID, op, "layer %d out of range (model has %d)", layer, m->plan.n_layers);
    const cntk_layer_plan *lp = &m->plan.layers[layer];
    if (slot < 0 || slot >= lp->sh.n_params)
        return cntk_layer_fail(m->s, KH_ERR_INVALID, lp->spec.kind, layer, op, "slot %d out of range (%d weights)",
                               slot, lp->sh.n_params);
    if (!t || !t->data)
        return cntk_layer_fail(m->s, KH_ERR_INVALID, lp->spec.kind, layer, op, "no tensor for slot %d", slot);
    const kh_param_shape *ps = &lp->sh.params[slot];
    int same = t->dtype == KH_F32 && t->rank == ps->rank;
    for (int i = 0; same && i < ps->rank; i++) same = t->dims[i] == ps->dims[i];
    if (!same)
        return cntk_layer_fail(m->s, KH_ERR_INVALID, lp->spec.kind, layer, op,
                               "slot %d (%s) must be f32 of %d dims [%lld, %lld, %lld, %lld]", slot, ps->name,
                               ps->rank, (long long)ps->dims[0], (long long)(ps->rank > 1 ? ps->dims[1] : 0),
                               (long long)(ps->rank > 2 ? ps->dims[2] : 0), (long long)(ps->rank > 3 ? ps->dims[3] : 0));
    return KH_OK;
}

static kh_status set_weight(kh_bmodel *m, int32_t layer, int32_t slot, const kh_tensor *w) {
    if (!m) return KH_ERR_INVALID;
    kh_status st = check_slot(m, layer, slot, w, "set_weight");
    return st != KH_OK ? st : EX(m)->set_weight(m, layer, slot, w);
}

static kh_status get_weight(kh_bmodel *m, int32_t layer, int32_t slot, kh_tensor *w) {
    if (!m) return KH_ERR_INVALID;
    kh_status st = check_slot(m, layer, slot, w, "get_weight");
    return st != KH_OK ? st : EX(m)->get_weight(m, layer, slot, w);
}

static kh_status get_grad(kh_bmodel *m, int32_t layer, int32_t slot, kh_tensor *g) {
    if (!m) return KH_ERR_INVALID;
    kh_status st = check_slot(m, layer, slot, g, "get_grad");
    return st != KH_OK ? st : EX(m)->get_grad(m, layer, slot, g);
}

static kh_status train_batch(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y) {
    if (!m) return KH_ERR_INVALID;
    kh_status st = kh_session_need(cntk_base(m->s), "train_batch", "x or y", x && y);
    return st != KH_OK ? st : EX(m)->train(m, x, y);
}

static kh_status eval_batch(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y) {
    if (!m) return KH_ERR_INVALID;
    kh_status st = kh_session_need(cntk_base(m->s), "eval_batch", "x or y", x && y);
    return st != KH_OK ? st : EX(m)->eval(m, x, y);
}

static kh_status predict(kh_bmodel *m, const kh_tensor *x, kh_tensor *out) {
    if (!m) return KH_ERR_INVALID;
    kh_status st = kh_session_need(cntk_base(m->s), "predict", "x or out", x && out);
    return st != KH_OK ? st : EX(m)->predict(m, x, out);
}

static kh_status read_metrics(kh_bmodel *m, uint32_t phase, kh_metrics *out, int32_t reset) {
    if (!m) return KH_ERR_INVALID;
    if (!out || phase > KH_PHASE_EVAL) return cntk_fail(m->s, KH_ERR_INVALID, "read_metrics", "bad phase %u", phase);
    return EX(m)->read_metrics(m, phase, out, reset);
}

static kh_status sync_model(kh_bmodel *m) {
    if (!m) return KH_ERR_INVALID;
    return EX(m)->sync(m);
}

static kh_status memory_info(kh_bmodel *m, kh_memory_info *out) {
    if (!m) return KH_ERR_INVALID;
    return kh_mem_count_report(&m->dev_mem, on_cuda(m),
                               "cudaMalloc by cntk for this model: parameter arena, activations, staging, cuDNN "
                               "workspace (cuBLAS's and cuDNN's own allocations not counted)", out);
}

static kh_status forward(kh_bmodel *m, const kh_tensor *x, kh_tensor *out) {
    if (!m) return KH_ERR_INVALID;
    kh_status st = kh_session_need(cntk_base(m->s), "forward", "x or out", x && out);
    return st != KH_OK ? st : EX(m)->forward_probe(m, x, out);
}

static kh_status backward(kh_bmodel *m, const kh_tensor *dy, kh_tensor *dx) {
    if (!m) return KH_ERR_INVALID;
    kh_status st = kh_session_need(cntk_base(m->s), "backward", "dy", dy != NULL);
    return st != KH_OK ? st : EX(m)->backward_probe(m, dy, dx);
}

const kh_backend_api cntk_model_api = {
    .struct_size = sizeof(kh_backend_api),
    .compile = compile,
    .model_free = model_free,
    .set_weight = set_weight,
    .get_weight = get_weight,
    .train_batch = train_batch,
    .eval_batch = eval_batch,
    .predict = predict,
    .read_metrics = read_metrics,
    .sync = sync_model,
    .forward = forward,
    .backward = backward,
    .get_grad = get_grad,
    .profile = cntk_api_profile,
    .memory_info = memory_info,
};
