/* cuda/stub.c — the CUDA executor's entry points in a build without the CUDA toolkit or cuDNN: the
 * device kind is reported unavailable ("built without CUDA") and nothing can be opened on it. */
#include <stdio.h>

#include "cuda/gpu.h"
#include "khost/kit/status.h"

void cntk_cuda_caps(kh_caps *c) {
    c->available = 0;
    snprintf(c->note, sizeof c->note, "built without CUDA (no CUDA toolkit/cuDNN at configure time)");
}

kh_status cntk_cuda_open(cntk_session *s, char *err, size_t errlen) {
    return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "cntk open on %s: built without CUDA", s->dev.id);
}

void cntk_cuda_close(cntk_session *s) { (void)s; }

kh_status cntk_cuda_environment(cntk_session *s, char *buf, size_t n) {
    (void)s;
    snprintf(buf, n, "cuda=none");
    return KH_OK;
}

static kh_status no_cuda(cntk_model *m) {
    return cntk_fail(m->s, KH_ERR_UNSUPPORTED, "compile", "built without CUDA");
}

kh_status cntk_cuda_compile(cntk_model *m) { return no_cuda(m); }
void cntk_cuda_free(cntk_model *m) { (void)m; }
kh_status cntk_cuda_set_weight(cntk_model *m, int32_t l, int32_t s, const kh_tensor *w) {
    (void)l, (void)s, (void)w;
    return no_cuda(m);
}
kh_status cntk_cuda_get_weight(cntk_model *m, int32_t l, int32_t s, kh_tensor *w) {
    (void)l, (void)s, (void)w;
    return no_cuda(m);
}
kh_status cntk_cuda_get_grad(cntk_model *m, int32_t l, int32_t s, kh_tensor *g) {
    (void)l, (void)s, (void)g;
    return no_cuda(m);
}
kh_status cntk_cuda_train(cntk_model *m, const kh_tensor *x, const kh_tensor *y) {
    (void)x, (void)y;
    return no_cuda(m);
}
kh_status cntk_cuda_eval(cntk_model *m, const kh_tensor *x, const kh_tensor *y) {
    (void)x, (void)y;
    return no_cuda(m);
}
kh_status cntk_cuda_predict(cntk_model *m, const kh_tensor *x, kh_tensor *out) {
    (void)x, (void)out;
    return no_cuda(m);
}
kh_status cntk_cuda_forward_probe(cntk_model *m, const kh_tensor *x, kh_tensor *out) {
    (void)x, (void)out;
    return no_cuda(m);
}
kh_status cntk_cuda_backward_probe(cntk_model *m, const kh_tensor *dy, kh_tensor *dx) {
    (void)dy, (void)dx;
    return no_cuda(m);
}
kh_status cntk_cuda_read_metrics(cntk_model *m, uint32_t phase, kh_metrics *out, int32_t reset) {
    (void)phase, (void)out, (void)reset;
    return no_cuda(m);
}
kh_status cntk_cuda_sync(cntk_model *m) { return no_cuda(m); }
