/* runtime_api.h — the graph runtime's model-level kh_backend_api members (runtime.c), which
 * runtime_session.c puts into the session layer's api table, and how a session reaches its graph backend and
 * executor. */
#ifndef KHOST_KIT_GRAPH_RUNTIME_API_H
#define KHOST_KIT_GRAPH_RUNTIME_API_H

#include "khost/kit/graph_runtime.h"

/* The session layer's description of a graph backend (runtime_session.c): the layer's part first, so a session's
 * backend pointer leads back to the graph backend without a call up into runtime_session.c. */
typedef struct kh_grt_desc {
    kh_session_backend sb;
    const kh_grt_backend *be;
} kh_grt_desc;

static inline const kh_grt_backend *kh_grt_be(const kh_grt_session *s) {
    return ((const kh_grt_desc *)(const void *)s->backend)->be;
}
static inline const kh_grt_exec *kh_grt_ex(const kh_grt_session *s) { return (const kh_grt_exec *)s->exec; }

kh_status kh_grt_compile(kh_bsession *s, const kh_model_spec *spec, const kh_compile_opts *opts, kh_bmodel **out);
void kh_grt_model_free(kh_bmodel *m);
kh_status kh_grt_set_weight(kh_bmodel *m, int32_t layer, int32_t slot, const kh_tensor *w);
kh_status kh_grt_get_weight(kh_bmodel *m, int32_t layer, int32_t slot, kh_tensor *w);
kh_status kh_grt_eval_batch(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y);
kh_status kh_grt_predict(kh_bmodel *m, const kh_tensor *x, kh_tensor *out);
kh_status kh_grt_read_metrics(kh_bmodel *m, uint32_t phase, kh_metrics *out, int32_t reset);
kh_status kh_grt_sync(kh_bmodel *m);
kh_status kh_grt_memory_info(kh_bmodel *m, kh_memory_info *out);
kh_status kh_grt_forward(kh_bmodel *m, const kh_tensor *x, kh_tensor *out);
kh_status kh_grt_backward(kh_bmodel *m, const kh_tensor *dy, kh_tensor *dx);
kh_status kh_grt_get_grad(kh_bmodel *m, int32_t layer, int32_t slot, kh_tensor *g);

#endif
