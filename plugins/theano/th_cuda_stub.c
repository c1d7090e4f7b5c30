/* th_cuda_stub.c — theano's GPU path in builds without the CUDA toolkit, cuBLAS or cuDNN: the device kind is
 * reported unavailable with the reason, and every entry point refuses. (The code generator and NVRTC loader are
 * built anyway: tests/theano_cuda compiles the generated CUDA C without a GPU.) */
#include <stdio.h>

#include "th_cuda.h"
#include "khost/kit/status.h"

#define NO_CUDA "built without CUDA (toolkit, cuBLAS or cuDNN not found)"

void th_cuda_caps(kh_caps *c) {
    c->available = 0;
    snprintf(c->note, sizeof c->note, "%s", NO_CUDA);
}

kh_status th_cuda_open(th_session *s, char *err, size_t errlen) {
    return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "theano open on %s: %s", s->dev.id, NO_CUDA);
}
void th_cuda_close(th_session *s) { (void)s; }
kh_status th_cuda_environment(th_session *s, char *buf, size_t n) {
    (void)s;
    snprintf(buf, n, " cuda=none");
    return KH_OK;
}
kh_status th_cuda_compile(th_model *m) { return th_fail(m->s, KH_ERR_UNSUPPORTED, "compile", NO_CUDA); }
void th_cuda_free(th_model *m) { (void)m; }
kh_status th_cuda_set_var(th_model *m, int32_t v, const float *w) {
    (void)v, (void)w;
    return th_fail(m->s, KH_ERR_UNSUPPORTED, "set_weight", NO_CUDA);
}
kh_status th_cuda_get_var(th_model *m, int32_t v, float *w) {
    (void)v, (void)w;
    return th_fail(m->s, KH_ERR_UNSUPPORTED, "get_weight", NO_CUDA);
}
kh_status th_cuda_run(th_model *m, kh_gfn fn, int part, int64_t n, double lr, uint64_t counter, const void *x,
                      const int32_t *labels, const float *dy) {
    (void)fn, (void)part, (void)n, (void)lr, (void)counter, (void)x, (void)labels, (void)dy;
    return th_fail(m->s, KH_ERR_UNSUPPORTED, "run", NO_CUDA);
}
kh_status th_cuda_read_node(th_model *m, kh_gfn fn, int32_t node, int64_t n, float *dst) {
    (void)fn, (void)node, (void)n, (void)dst;
    return th_fail(m->s, KH_ERR_UNSUPPORTED, "read", NO_CUDA);
}
kh_status th_cuda_read_metrics(th_model *m, uint32_t phase, kh_metrics *out, int32_t reset) {
    (void)phase, (void)out, (void)reset;
    return th_fail(m->s, KH_ERR_UNSUPPORTED, "read_metrics", NO_CUDA);
}
kh_status th_cuda_sync(th_model *m) {
    (void)m;
    return KH_OK;
}
