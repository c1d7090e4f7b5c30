/* cuda/lazy.c — cntk.so's side of the GPU half (cuda/half.h): the cntk_cuda_* entry points, each routed to
 * cntk_cuda.so, which khost/kit/half.h loads on the first get_caps(cuda) or open on a CUDA device — never in a
 * cpu cell, so cpu cells map no cuBLAS/cuDNN. When the half cannot be loaded (or was not built) the CUDA kind
 * is unavailable and the note / error gives the loader's reason. */
#include <stdio.h>
#include <string.h>

#include "cuda/gpu.h"
#include "cuda/half.h"
#include "khost/kit/status.h"

#ifndef CNTK_GPU_HALF
#define CNTK_GPU_HALF 0 /* 1: CMake built cntk-cuda/cntk_cuda.so beside this module */
#endif
static kh_half g_half = KH_HALF_INIT("cntk", "cntk-cuda", "cntk_cuda.so", CNTK_CUDA_HALF_ENTRY, CNTK_GPU_HALF,
                                     CNTK_CUDA_HALF_VERSION, sizeof(cntk_session), sizeof(cntk_model),
                                     sizeof(cntk_plan));
#define g_t ((const cntk_cuda_table *)kh_half_loaded(&g_half)) /* the half once loaded, else NULL */
#define g_why kh_half_why(&g_half)

static const cntk_cuda_table *half(void) { return kh_half_load(&g_half); }

void cntk_cuda_caps(kh_caps *c) {
    const cntk_cuda_table *t = half();
    if (t) {
        t->caps(c);
        return;
    }
    c->available = 0;
    snprintf(c->note, sizeof c->note, "%s", g_why);
}

kh_status cntk_cuda_open(cntk_session *s, char *err, size_t errlen) {
    const cntk_cuda_table *t = half();
    if (!t) return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "cntk open on %s: %s", s->dev.id, g_why);
    return t->open(s, err, errlen);
}

/* Everything below runs only on sessions and models that the half opened or compiled. */
void cntk_cuda_close(cntk_session *s) {
    if (g_t) g_t->close(s);
}

kh_status cntk_cuda_environment(cntk_session *s, char *buf, size_t n) {
    if (g_t) return g_t->environment(s, buf, n);
    snprintf(buf, n, "cuda=not loaded");
    return KH_OK;
}

#define HALF_OR_FAIL(m, op)                                                                                \
    do {                                                                                                  \
        if (!g_t) return cntk_fail((m)->s, KH_ERR_INTERNAL, (op), "the GPU half is not loaded: %s", g_why); \
    } while (0)

kh_status cntk_cuda_compile(cntk_model *m) {
    if (!half()) return cntk_fail(m->s, KH_ERR_UNSUPPORTED, "compile", "%s", g_why);
    return g_t->compile(m);
}

void cntk_cuda_free(cntk_model *m) {
    if (g_t) g_t->free_model(m);
}

kh_status cntk_cuda_set_weight(cntk_model *m, int32_t layer, int32_t slot, const kh_tensor *w) {
    HALF_OR_FAIL(m, "set_weight");
    return g_t->set_weight(m, layer, slot, w);
}

kh_status cntk_cuda_get_weight(cntk_model *m, int32_t layer, int32_t slot, kh_tensor *w) {
    HALF_OR_FAIL(m, "get_weight");
    return g_t->get_weight(m, layer, slot, w);
}

kh_status cntk_cuda_get_grad(cntk_model *m, int32_t layer, int32_t slot, kh_tensor *g) {
    HALF_OR_FAIL(m, "get_grad");
    return g_t->get_grad(m, layer, slot, g);
}

kh_status cntk_cuda_train(cntk_model *m, const kh_tensor *x, const kh_tensor *y) {
    HALF_OR_FAIL(m, "train_batch");
    return g_t->train(m, x, y);
}

kh_status cntk_cuda_eval(cntk_model *m, const kh_tensor *x, const kh_tensor *y) {
    HALF_OR_FAIL(m, "eval_batch");
    return g_t->eval(m, x, y);
}

kh_status cntk_cuda_predict(cntk_model *m, const kh_tensor *x, kh_tensor *out) {
    HALF_OR_FAIL(m, "predict");
    return g_t->predict(m, x, out);
}

kh_status cntk_cuda_forward_probe(cntk_model *m, const kh_tensor *x, kh_tensor *out) {
    HALF_OR_FAIL(m, "forward");
    return g_t->forward_probe(m, x, out);
}

kh_status cntk_cuda_backward_probe(cntk_model *m, const kh_tensor *dy, kh_tensor *dx) {
    HALF_OR_FAIL(m, "backward");
    return g_t->backward_probe(m, dy, dx);
}

kh_status cntk_cuda_read_metrics(cntk_model *m, uint32_t phase, kh_metrics *out, int32_t reset) {
    HALF_OR_FAIL(m, "read_metrics");
    return g_t->read_metrics(m, phase, out, reset);
}

kh_status cntk_cuda_sync(cntk_model *m) {
    HALF_OR_FAIL(m, "sync");
    return g_t->sync(m);
}
