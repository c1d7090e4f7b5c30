/* tf_cuda_stub.c — the CUDA executor of builds without the CUDA toolkit, cuBLAS or cuDNN: the device kind is
 * reported unavailable with the reason, and every entry point refuses. */
#include <stdio.h>

#include "tf_cuda.h"
#include "khost/kit/status.h"

void tf_cuda_caps(kh_caps *c) {
    c->available = 0;
    snprintf(c->note, sizeof c->note, "built without CUDA (toolkit, cuBLAS or cuDNN not found)");
}

kh_status tf_cuda_open(tf_session *s, char *err, size_t errlen) {
    return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "tensorflow open on %s: built without CUDA", s->dev.id);
}
void tf_cuda_close(tf_session *s) { (void)s; }
kh_status tf_cuda_environment(tf_session *s, char *buf, size_t n) {
    (void)s;
    snprintf(buf, n, "cuda=none");
    return KH_OK;
}
kh_status tf_cuda_compile(tf_model *m) { return tf_fail(m->s, KH_ERR_UNSUPPORTED, "compile", "built without CUDA"); }
void tf_cuda_free(tf_model *m) { (void)m; }
kh_status tf_cuda_set_var(tf_model *m, int32_t v, const float *w) {
    (void)v, (void)w;
    return tf_fail(m->s, KH_ERR_UNSUPPORTED, "set_weight", "built without CUDA");
}
kh_status tf_cuda_get_var(tf_model *m, int32_t v, float *w) {
    (void)v, (void)w;
    return tf_fail(m->s, KH_ERR_UNSUPPORTED, "get_weight", "built without CUDA");
}
kh_status tf_cuda_run(tf_model *m, kh_gfn fn, int part, int64_t n, double lr, uint64_t counter, const void *x,
                      const int32_t *labels, const float *dy) {
    (void)fn, (void)part, (void)n, (void)lr, (void)counter, (void)x, (void)labels, (void)dy;
    return tf_fail(m->s, KH_ERR_UNSUPPORTED, "run", "built without CUDA");
}
kh_status tf_cuda_read_node(tf_model *m, kh_gfn fn, int32_t node, int64_t n, float *dst) {
    (void)fn, (void)node, (void)n, (void)dst;
    return tf_fail(m->s, KH_ERR_UNSUPPORTED, "read", "built without CUDA");
}
kh_status tf_cuda_read_metrics(tf_model *m, uint32_t phase, kh_metrics *out, int32_t reset) {
    (void)phase, (void)out, (void)reset;
    return tf_fail(m->s, KH_ERR_UNSUPPORTED, "read_metrics", "built without CUDA");
}
kh_status tf_cuda_sync(tf_model *m) { (void)m; return KH_OK; }
