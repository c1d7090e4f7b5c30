/* cntk_api.c — the model-level ABI calls: argument checks common to every device, then the executor of
 * the model's device, chosen by the session's device kind (CPU: cntk_cpu_*; CUDA: cntk_cuda_*). */
#include <stdlib.h>
#include <string.h>

#include "cntk.h"
#include "cuda/gpu.h"

static int on_cuda(const cntk_model *m) { return m->s->dev.kind == KH_DEVICE_CUDA; }

kh_status cntk_api_compile(kh_bsession *s, const kh_model_spec *spec, const kh_compile_opts *opts,
                           kh_bmodel **out) {
    if (!out) return KH_ERR_INVALID;
    *out = NULL;
    if (!s) return KH_ERR_INVALID;
    if (!spec) return cntk_fail(s, KH_ERR_INVALID, "compile", "no model spec");
    cntk_model *m = calloc(1, sizeof *m);
    if (!m) return cntk_fail(s, KH_ERR_NOMEM, "compile", "out of host memory");
    m->s = s;
    kh_status st = cntk_plan_build(s, spec, opts, &m->plan);
    if (st == KH_OK) st = s->dev.kind == KH_DEVICE_CUDA ? cntk_cuda_compile(m) : cntk_cpu_compile(m);
    if (st != KH_OK) {
        cntk_api_model_free(m);
        return st;
    }
    *out = m;
    return KH_OK;
}

void cntk_api_model_free(kh_bmodel *m) {
    if (!m) return;
    cntk_cpu_free(m->cpu);
    if (m->cuda) cntk_cuda_free(m);
    cntk_plan_free(&m->plan);
    free(m);
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

kh_status cntk_api_set_weight(kh_bmodel *m, int32_t layer, int32_t slot, const kh_tensor *w) {
    if (!m) return KH_ERR_INVALID;
    kh_status st = check_slot(m, layer, slot, w, "set_weight");
    return st != KH_OK ? st : (on_cuda(m) ? cntk_cuda_set_weight : cntk_cpu_set_weight)(m, layer, slot, w);
}

kh_status cntk_api_get_weight(kh_bmodel *m, int32_t layer, int32_t slot, kh_tensor *w) {
    if (!m) return KH_ERR_INVALID;
    kh_status st = check_slot(m, layer, slot, w, "get_weight");
    return st != KH_OK ? st : (on_cuda(m) ? cntk_cuda_get_weight : cntk_cpu_get_weight)(m, layer, slot, w);
}

kh_status cntk_api_get_grad(kh_bmodel *m, int32_t layer, int32_t slot, kh_tensor *g) {
    if (!m) return KH_ERR_INVALID;
    kh_status st = check_slot(m, layer, slot, g, "get_grad");
    return st != KH_OK ? st : (on_cuda(m) ? cntk_cuda_get_grad : cntk_cpu_get_grad)(m, layer, slot, g);
}

kh_status cntk_api_train_batch(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y) {
    if (!m) return KH_ERR_INVALID;
    if (!x || !y) return cntk_fail(m->s, KH_ERR_INVALID, "train_batch", "missing x or y");
    return on_cuda(m) ? cntk_cuda_train(m, x, y) : cntk_cpu_train(m, x, y);
}

kh_status cntk_api_eval_batch(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y) {
    if (!m) return KH_ERR_INVALID;
    if (!x || !y) return cntk_fail(m->s, KH_ERR_INVALID, "eval_batch", "missing x or y");
    return on_cuda(m) ? cntk_cuda_eval(m, x, y) : cntk_cpu_eval(m, x, y);
}

kh_status cntk_api_predict(kh_bmodel *m, const kh_tensor *x, kh_tensor *out) {
    if (!m) return KH_ERR_INVALID;
    if (!x || !out) return cntk_fail(m->s, KH_ERR_INVALID, "predict", "missing x or out");
    return on_cuda(m) ? cntk_cuda_predict(m, x, out) : cntk_cpu_predict(m, x, out);
}

kh_status cntk_api_read_metrics(kh_bmodel *m, uint32_t phase, kh_metrics *out, int32_t reset) {
    if (!m) return KH_ERR_INVALID;
    if (!out || phase > KH_PHASE_EVAL) return cntk_fail(m->s, KH_ERR_INVALID, "read_metrics", "bad phase %u", phase);
    return on_cuda(m) ? cntk_cuda_read_metrics(m, phase, out, reset) : cntk_cpu_read_metrics(m, phase, out, reset);
}

/* The CPU executor runs synchronously (nothing is ever queued); the CUDA one waits for its stream. */
kh_status cntk_api_sync(kh_bmodel *m) {
    if (!m) return KH_ERR_INVALID;
    return on_cuda(m) ? cntk_cuda_sync(m) : KH_OK;
}

kh_status cntk_api_memory_info(kh_bmodel *m, kh_memory_info *out) {
    if (!m) return KH_ERR_INVALID;
    return kh_mem_count_report(&m->dev_mem, on_cuda(m),
                               "cudaMalloc by cntk for this model: parameter arena, activations, staging, cuDNN "
                               "workspace (cuBLAS's and cuDNN's own allocations not counted)", out);
}

kh_status cntk_api_forward(kh_bmodel *m, const kh_tensor *x, kh_tensor *out) {
    if (!m) return KH_ERR_INVALID;
    if (!x || !out) return cntk_fail(m->s, KH_ERR_INVALID, "forward", "missing x or out");
    return on_cuda(m) ? cntk_cuda_forward_probe(m, x, out) : cntk_cpu_forward_probe(m, x, out);
}

kh_status cntk_api_backward(kh_bmodel *m, const kh_tensor *dy, kh_tensor *dx) {
    if (!m) return KH_ERR_INVALID;
    if (!dy) return cntk_fail(m->s, KH_ERR_INVALID, "backward", "missing dy");
    return on_cuda(m) ? cntk_cuda_backward_probe(m, dy, dx) : cntk_cpu_backward_probe(m, dy, dx);
}
