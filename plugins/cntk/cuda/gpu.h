/* cuda/gpu.h — the CUDA executor of the cntk backend: the entry points cuda/half.c puts into its cntk_exec table.
 *
 * Built from cuda/session.c, cuda/model.c, cuda/layers.c, cuda/lstm.c and
 * cuda/kernels.cu into the GPU half (cntk_cuda.so; cntk.so reaches it through cuda/lazy.c) when
 * CMake finds the CUDA toolkit and cuDNN; in builds without them cuda/lazy.c answers "built without CUDA".
 * The entry points are the CPU executor's (cntk_exec, plan/plan.h) and run from the same device-independent plan.
 */
#ifndef KHOST_CNTK_CUDA_H
#define KHOST_CNTK_CUDA_H

#include "plan/plan.h"

/* Capabilities of the CUDA device kind: fills c->available and c->note (the rest is shared with the CPU).
 * Probes the CUDA runtime (driver present? devices? cuDNN loadable?) without creating a context. */
void cntk_cuda_caps(kh_caps *c);

/* Session state on a CUDA device: streams and library handles (s->cuda), the kit's session on the host's primary
 * context (kh_cuda_session_open: current on the thread, never a new one). */
kh_status cntk_cuda_open(cntk_session *s, char *err, size_t errlen);
void cntk_cuda_close(cntk_session *s);
kh_status cntk_cuda_environment(cntk_session *s, char *buf, size_t n);

/* The model-level entry points, from the plan (m->plan) into m->cuda. */
kh_status cntk_cuda_compile(cntk_model *m);
void cntk_cuda_free(cntk_model *m);
kh_status cntk_cuda_set_weight(cntk_model *m, int32_t layer, int32_t slot, const kh_tensor *w);
kh_status cntk_cuda_get_weight(cntk_model *m, int32_t layer, int32_t slot, kh_tensor *w);
kh_status cntk_cuda_get_grad(cntk_model *m, int32_t layer, int32_t slot, kh_tensor *g);
kh_status cntk_cuda_train(cntk_model *m, const kh_tensor *x, const kh_tensor *y);
kh_status cntk_cuda_eval(cntk_model *m, const kh_tensor *x, const kh_tensor *y);
kh_status cntk_cuda_predict(cntk_model *m, const kh_tensor *x, kh_tensor *out);
kh_status cntk_cuda_forward_probe(cntk_model *m, const kh_tensor *x, kh_tensor *out);
kh_status cntk_cuda_backward_probe(cntk_model *m, const kh_tensor *dy, kh_tensor *dx);
kh_status cntk_cuda_read_metrics(cntk_model *m, uint32_t phase, kh_metrics *out, int32_t reset);
kh_status cntk_cuda_sync(cntk_model *m);

#endif
