/* tf_entry.c — the module's one exported symbol: tensorflow as a graph-runtime backend (khost/kit/graph_runtime.h)
 * with its settings, its compile step, its CPU executor and its GPU half.
 *
 * Settings ([plugin tensorflow] in the registry; each clamped to the device's threads so inter-op x intra-op
 * work never oversubscribes the cores):
 *   inter_op_parallelism  1 runs nodes in graph order on the calling thread; more lets independent expensive
 *                         nodes run at once on the pool (default: the device's threads)
 *   intra_op_parallelism  parts a big kernel (GEMM, convolution, element-wise) splits into (default: threads)
 *   inline_cost           ops estimated under this many flops run inline on the thread that readied them
 *                         (default 262144: below ~0.1 ms a hand-off to another thread costs more than it saves)
 *   deterministic         GPU: 1 (default) prefer deterministic cuDNN algorithms (the fastest working one, with a
 *                         warning, where none is); 0 take the fastest working one
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf.h"
#include "tf_cuda.h"
#include "khost/kit/status.h"

#ifndef TF_GPU_HALF
#define TF_GPU_HALF 0 /* 1: CMake built tensorflow-cuda/tensorflow_cuda.so beside this module */
#endif
static kh_half g_half = KH_HALF_INIT("tensorflow", "tensorflow-cuda", "tensorflow_cuda.so", TF_CUDA_HALF_ENTRY,
                                     TF_GPU_HALF, TF_CUDA_HALF_VERSION, sizeof(tf_session), sizeof(tf_model));

/* An integer setting from [plugin tensorflow], else dflt; a malformed value is an error naming the key. */
static kh_status setting(const kh_host_api *h, const char *key, int64_t dflt, int64_t lo, int64_t *out, char *err,
                         size_t errlen) {
    *out = dflt;
    const char *v = h && h->config_get ? h->config_get("plugin tensorflow", key) : NULL;
    if (!v || !*v) return KH_OK;
    char *end;
    long long x = strtoll(v, &end, 10);
    if (*end || x < lo)
        return kh_errf(err, errlen, KH_ERR_INVALID, "tensorflow: [plugin tensorflow] %s = '%s': expected an integer >= %lld",
                       key, v, (long long)lo);
    *out = x;
    return KH_OK;
}

static kh_status tf_configure(kh_grt_session *rts, char *err, size_t errlen) {
    tf_session *s = (tf_session *)rts;
    if (rts->dev.kind == KH_DEVICE_CUDA) rts->threads = 1;
    int64_t inter, intra, inl, det;
    kh_status st = setting(rts->host, "inter_op_parallelism", rts->threads, 1, &inter, err, errlen);
    if (st == KH_OK) st = setting(rts->host, "intra_op_parallelism", rts->threads, 1, &intra, err, errlen);
    if (st == KH_OK) st = setting(rts->host, "inline_cost", 262144, 0, &inl, err, errlen);
    if (st == KH_OK) st = setting(rts->host, "deterministic", 1, 0, &det, err, errlen);
    if (st == KH_OK && det > 1)
        st = kh_errf(err, errlen, KH_ERR_INVALID, "tensorflow: [plugin tensorflow] deterministic = %lld: expected 0 or 1",
                     (long long)det);
    if (st != KH_OK) return st;
    s->set.inter_op = (int)(inter < rts->threads ? inter : rts->threads);
    s->set.intra_op = (int)(intra < rts->threads ? intra : rts->threads);
    s->set.inline_cost = inl;
    s->set.deterministic = (int)det;
    return KH_OK;
}

static const kh_grt_backend g_backend = {
    .name = "tensorflow",
    .version = TF_VERSION,
    .description = "dataflow-executor strategy: a graph of primitive ops with generated gradients, run op by op (NHWC; "
                   "LSTMs unrolled per step)",
    .session_size = sizeof(tf_session),
    .model_size = sizeof(tf_model),
    .cpu = &tf_cpu_exec,
    .cuda = &g_half,
    .configure = tf_configure,
    .prepare = tf_prepare,
    .release = tf_release,
    .profile = tf_api_profile,
    .device_memory_what = "cudaMalloc by tensorflow for this model: weights, optimizer slots, arena, staging, cuDNN "
                          "workspaces (cuBLAS's and cuDNN's own allocations not counted)",
};

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) { return kh_grt_module(&g_backend, host); }
