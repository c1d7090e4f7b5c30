/* tf_entry.c — the module's one exported symbol, its descriptor, capabilities, sessions and settings.
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
#include "khost/kit/alloc.h"

static const kh_host_api *g_host;

#ifndef TF_GPU_HALF
#define TF_GPU_HALF 0 /* 1: CMake built tensorflow-cuda/tensorflow_cuda.so beside this module */
#endif
static kh_half g_half = KH_HALF_INIT("tensorflow", "tensorflow-cuda", "tensorflow_cuda.so", TF_CUDA_HALF_ENTRY,
                                     TF_GPU_HALF, TF_CUDA_HALF_VERSION, sizeof(tf_session), sizeof(tf_model));

const tf_cuda_table *tf_cuda_half(void) { return kh_half_load(&g_half); }
const tf_cuda_table *tf_gpu(void) { return kh_half_loaded(&g_half); }
const char *tf_cuda_why(void) { return kh_half_why(&g_half); }

void *tf_alloc(tf_session *s, size_t bytes) { return kh_host_alloc(s->host, bytes); }

void tf_free(tf_session *s, void *p) { kh_host_free(s->host, p); }

static kh_status tf_get_caps(uint32_t device_kind, kh_caps *out) {
    if (!out) return KH_ERR_INVALID;
    kh_caps c;
    memset(&c, 0, sizeof c);
    c.struct_size = out->struct_size;
    kh_graph_caps(&c); /* what the graph layer lowers */
    /* no KH_CAP_ONEHOT_INPUT: like Keras on TensorFlow, the one-hot input arrives as a dense tensor */
    if (device_kind == KH_DEVICE_CPU) {
        c.available = tf_blas_available();
        snprintf(c.note, sizeof c.note, "%s", c.available ? "dataflow executor, OpenBLAS MatMul, im2col Conv2D, NHWC"
                                                          : "built without BLAS: CPU path unavailable");
    } else if (device_kind == KH_DEVICE_CUDA) {
        const tf_cuda_table *cu = tf_cuda_half();
        if (cu) cu->caps(&c);
        else snprintf(c.note, sizeof c.note, "%s", tf_cuda_why());
    } else {
        snprintf(c.note, sizeof c.note, "unknown device kind %u", device_kind);
    }
    size_t n = out->struct_size < sizeof c ? out->struct_size : sizeof c;
    if (n < sizeof c.struct_size) return KH_ERR_INVALID;
    memcpy(out, &c, n);
    return KH_OK;
}

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

static kh_status tf_open(const kh_host_api *host, const kh_device *dev, kh_bsession **out, char *err, size_t errlen) {
    if (!out) return KH_ERR_INVALID;
    *out = NULL;
    if (!dev) return kh_errf(err, errlen, KH_ERR_INVALID, "tensorflow open: no device");
    const char *id = dev->id[0] ? dev->id : "?";
    if (dev->kind != KH_DEVICE_CPU && dev->kind != KH_DEVICE_CUDA)
        return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "tensorflow open on %s: unknown device kind %u", id, dev->kind);
    if (dev->kind == KH_DEVICE_CPU && !tf_blas_available())
        return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "tensorflow open on %s: built without BLAS", id);
    kh_bsession *b = calloc(1, sizeof *b);
    if (!b) return kh_errf(err, errlen, KH_ERR_NOMEM, "tensorflow open on %s: out of memory", id);
    tf_session *s = &b->s;
    s->host = host ? host : g_host;
    size_t dn = dev->struct_size < sizeof s->dev ? dev->struct_size : sizeof s->dev;
    memcpy(&s->dev, dev, dn);
    s->dev.struct_size = sizeof s->dev;
    if (!s->dev.id[0])
        snprintf(s->dev.id, sizeof s->dev.id, dev->kind == KH_DEVICE_CUDA ? "cuda:%d" : "cpu", dev->ordinal);
    s->threads = KH_HAS_MEMBER(kh_device, dev->struct_size, threads) && dev->threads > 0 ? dev->threads : 1;
    if (dev->kind == KH_DEVICE_CUDA) s->threads = 1;
    int64_t inter, intra, inl, det;
    kh_status st = setting(s->host, "inter_op_parallelism", s->threads, 1, &inter, err, errlen);
    if (st == KH_OK) st = setting(s->host, "intra_op_parallelism", s->threads, 1, &intra, err, errlen);
    if (st == KH_OK) st = setting(s->host, "inline_cost", 262144, 0, &inl, err, errlen);
    if (st == KH_OK) st = setting(s->host, "deterministic", 1, 0, &det, err, errlen);
    if (st == KH_OK && det > 1)
        st = kh_errf(err, errlen, KH_ERR_INVALID, "tensorflow: [plugin tensorflow] deterministic = %lld: expected 0 or 1",
                     (long long)det);
    if (st != KH_OK) {
        free(b);
        return st;
    }
    s->set.inter_op = (int)(inter < s->threads ? inter : s->threads);
    s->set.intra_op = (int)(intra < s->threads ? intra : s->threads);
    s->set.inline_cost = inl;
    s->set.deterministic = (int)det;
    if (dev->kind == KH_DEVICE_CUDA) {
        const tf_cuda_table *cu = tf_cuda_half();
        st = cu ? cu->open(s, err, errlen)
                : kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "tensorflow open on %s: %s", id, tf_cuda_why());
        if (st != KH_OK) {
            free(b);
            return st;
        }
        *out = b;
        return KH_OK;
    }
    if (s->threads > 1 && tf_pool_create(s->threads - 1, &s->pool) != KH_OK) {
        int workers = s->threads - 1;
        free(b);
        return kh_errf(err, errlen, KH_ERR_INTERNAL, "tensorflow open on %s: cannot start %d worker threads", id,
                       workers);
    }
    tf_blas_single_threaded(); /* BLAS calls stay on the thread that runs the op */
    *out = b;
    return KH_OK;
}

static void tf_close(kh_bsession *b) {
    if (!b) return;
    if (b->s.cuda) tf_gpu()->close(&b->s);
    tf_pool_destroy(b->s.pool);
    free(b);
}

static const char *tf_last_error(kh_bsession *b) { return b ? b->s.err : "tensorflow: no session"; }

static kh_status tf_environment(kh_bsession *b, char *buf, size_t n) {
    if (!b || !buf || n == 0) return KH_ERR_INVALID;
    tf_session *s = &b->s;
    if (s->dev.kind == KH_DEVICE_CUDA) return tf_gpu()->environment(s, buf, n);
    char ver[64];
    snprintf(buf, n, "blas=%s (single-threaded calls) threads=%d inter_op=%d intra_op=%d inline_cost=%lld",
             tf_blas_version(ver, sizeof ver), s->threads, s->set.inter_op, s->set.intra_op,
             (long long)s->set.inline_cost);
    return KH_OK;
}

static const kh_backend_api tf_backend_api = {
    .struct_size = sizeof(kh_backend_api),
    .get_caps = tf_get_caps,
    .open = tf_open,
    .close = tf_close,
    .last_error = tf_last_error,
    .environment = tf_environment,
    .compile = tf_api_compile,
    .model_free = tf_api_model_free,
    .set_weight = tf_api_set_weight,
    .get_weight = tf_api_get_weight,
    .train_batch = tf_api_train_batch,
    .eval_batch = tf_api_eval_batch,
    .predict = tf_api_predict,
    .read_metrics = tf_api_read_metrics,
    .sync = tf_api_sync,
    .forward = tf_api_forward,
    .backward = tf_api_backward,
    .get_grad = tf_api_get_grad,
    .profile = tf_api_profile,
    .memory_info = tf_api_memory_info,
};

static const kh_module_desc g_desc = {
    KH_MODULE_DESC_HEAD,
    .kind = KH_MODULE_BACKEND,
    .name = "tensorflow",
    .version = TF_VERSION,
    .description = "dataflow-executor strategy: a graph of primitive ops with generated gradients, run op by op (NHWC; "
                   "LSTMs unrolled per step)",
    .api = &tf_backend_api,
};

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) {
    g_host = host;
    return &g_desc;
}
