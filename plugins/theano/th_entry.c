/* th_entry.c — the module's one exported symbol, its descriptor, capabilities, sessions and settings.
 *
 * Settings ([plugin theano] in the registry):
 *   cc         the C compiler generated code is built with (default: cc)
 *   cflags     its flags (default: -O3 -march=native -fopenmp -ffp-contract=fast -fno-math-errno
 *              -fno-trapping-math); without -fopenmp the generated loops run on one thread
 *   cache_dir  the generated-code cache (default: $XDG_CACHE_HOME/khost/theano, else ~/.cache/khost/theano)
 *   optimize   1 runs the graph passes (default), 0 compiles the graph as lowered (to measure the passes)
 *   deterministic  GPU: 1 (default) prefers deterministic cuDNN algorithms (the fastest working one, with a
 *              warning, where none is); 0 takes the fastest working one
 *   dump_dir   a folder: each function's passes, op counts, optimised graph and generated source are written
 *              there at compile (<function>.graph.txt, <function>.c)
 * The generated loops use OpenMP with the device's threads; idle workers spin 3000 iterations, then sleep
 * (OMP_WAIT_POLICY=passive, GOMP_SPINCOUNT=3000 unless set).
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "th_spawn.h"
#include "th.h"
#include "th_cuda.h"
#include "khost/kit/status.h"
#include "khost/kit/alloc.h"


#ifndef TH_GPU_HALF
#define TH_GPU_HALF 0 /* 1: CMake built theano-cuda/theano_cuda.so beside this module */
#endif
static kh_half g_half = KH_HALF_INIT("theano", "theano-cuda", "theano_cuda.so", TH_CUDA_HALF_ENTRY, TH_GPU_HALF,
                                     TH_CUDA_HALF_VERSION, sizeof(th_session), sizeof(th_model));

const th_cuda_table *th_cuda_half(void) { return kh_half_load(&g_half); }
const th_cuda_table *th_gpu(void) { return kh_half_loaded(&g_half); }
const char *th_cuda_why(void) { return kh_half_why(&g_half); }

#define TH_DEFAULT_CFLAGS "-O3 -march=native -fopenmp -ffp-contract=fast -fno-math-errno -fno-trapping-math"

static kh_status th_get_caps(uint32_t device_kind, kh_caps *out) {
    if (!out) return KH_ERR_INVALID;
    kh_caps c;
    memset(&c, 0, sizeof c);
    c.struct_size = out->struct_size;
    kh_graph_caps(&c); /* what the graph layer lowers */
    if (device_kind == KH_DEVICE_CPU) {
        c.available = th_blas_available();
        snprintf(c.note, sizeof c.note, "%s", c.available ? "optimised graph compiled to C (cc + dlopen), OpenBLAS GEMM"
                                                          : "built without BLAS: CPU path unavailable");
    } else if (device_kind == KH_DEVICE_CUDA) {
        const th_cuda_table *cu = th_cuda_half();
        if (cu) cu->caps(&c); /* the note says plainly that this path has never run on a GPU */
        else snprintf(c.note, sizeof c.note, "%s", th_cuda_why());
    } else {
        snprintf(c.note, sizeof c.note, "unknown device kind %u", device_kind);
    }
    size_t n = out->struct_size < sizeof c ? out->struct_size : sizeof c;
    if (n < sizeof c.struct_size) return KH_ERR_INVALID;
    memcpy(out, &c, n);
    return KH_OK;
}

static kh_status text_setting(const kh_host_api *h, const char *key, const char *dflt, char *out, size_t len,
                              char *err, size_t errlen) {
    const char *v = h && h->config_get ? h->config_get("plugin theano", key) : NULL;
    if (!v || !*v) v = dflt;
    if (strlen(v) >= len)
        return kh_errf(err, errlen, KH_ERR_INVALID, "theano: [plugin theano] %s is longer than %zu characters", key, len - 1);
    snprintf(out, len, "%s", v);
    return KH_OK;
}

static kh_status th_open(const kh_host_api *host, const kh_device *dev, kh_bsession **out, char *err, size_t errlen) {
    if (!out) return KH_ERR_INVALID;
    *out = NULL;
    if (!dev) return kh_errf(err, errlen, KH_ERR_INVALID, "theano open: no device");
    const char *id = dev->id[0] ? dev->id : "?";
    if (dev->kind != KH_DEVICE_CPU && dev->kind != KH_DEVICE_CUDA)
        return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "theano open on %s: unknown device kind %u", id, dev->kind);
    if (dev->kind == KH_DEVICE_CPU && !th_blas_available())
        return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "theano open on %s: built without BLAS", id);
    kh_bsession *b = calloc(1, sizeof *b);
    if (!b) return kh_errf(err, errlen, KH_ERR_NOMEM, "theano open on %s: out of memory", id);
    th_session *s = &b->s;
    s->host = host ? host : th_module_host();
    size_t dn = dev->struct_size < sizeof s->dev ? dev->struct_size : sizeof s->dev;
    memcpy(&s->dev, dev, dn);
    s->dev.struct_size = sizeof s->dev;
    if (!s->dev.id[0]) snprintf(s->dev.id, sizeof s->dev.id, "cpu");
    s->threads = KH_HAS_MEMBER(kh_device, dev->struct_size, threads) && dev->threads > 0 ? dev->threads : 1;
    char opt[16], det[16];
    kh_status st = text_setting(s->host, "cc", "cc", s->set.cc, sizeof s->set.cc, err, errlen);
    if (st == KH_OK) st = text_setting(s->host, "cflags", TH_DEFAULT_CFLAGS, s->set.cflags, sizeof s->set.cflags, err, errlen);
    if (st == KH_OK) st = text_setting(s->host, "cache_dir", "", s->set.cache_dir, sizeof s->set.cache_dir, err, errlen);
    if (st == KH_OK) st = text_setting(s->host, "dump_dir", "", s->set.dump_dir, sizeof s->set.dump_dir, err, errlen);
    if (st == KH_OK) st = text_setting(s->host, "optimize", "1", opt, sizeof opt, err, errlen);
    if (st == KH_OK && strcmp(opt, "0") != 0 && strcmp(opt, "1") != 0)
        st = kh_errf(err, errlen, KH_ERR_INVALID, "theano: [plugin theano] optimize = '%s': expected 0 or 1", opt);
    if (st == KH_OK) st = text_setting(s->host, "deterministic", "1", det, sizeof det, err, errlen);
    if (st == KH_OK && strcmp(det, "0") != 0 && strcmp(det, "1") != 0)
        st = kh_errf(err, errlen, KH_ERR_INVALID, "theano: [plugin theano] deterministic = '%s': expected 0 or 1", det);
    if (st != KH_OK) {
        free(b);
        return st;
    }
    s->set.passes = opt[0] == '1';
    s->set.deterministic = det[0] == '1';
    /* the C compiler's deadline per call: a compiler that hangs must not hang the cell */
    char cct[32];
    st = text_setting(s->host, "cc_timeout", "600", cct, sizeof cct, err, errlen);
    if (st == KH_OK) {
        char *end = NULL;
        double sec = strtod(cct, &end);
        if (end == cct || *end || !(sec > 0) || sec > 1e7)
            st = kh_errf(err, errlen, KH_ERR_INVALID,
                         "theano: [plugin theano] cc_timeout = '%s': expected seconds > 0 (default 600)", cct);
        else
            th_spawn_set_timeout(sec);
    }
    if (st != KH_OK) {
        free(b);
        return st;
    }
    st = th_build_open(s, err, errlen);
    if (st != KH_OK) {
        free(b);
        return st;
    }
    if (dev->kind == KH_DEVICE_CUDA) {
        const th_cuda_table *cu = th_cuda_half();
        st = cu ? cu->open(s, err, errlen)
                : kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "theano open on %s: %s", id, th_cuda_why());
        if (st != KH_OK) {
            th_build_close(s);
            free(b);
            return st;
        }
    }
    th_blas_threads(1); /* the generated code's OpenMP loops split big GEMMs; BLAS never starts threads */
    /* Idle OpenMP workers spin briefly, then sleep (unless the user chose otherwise): the scans open two short
     * parallel regions per time step. Spinning without a bound on a shared or oversubscribed machine turned
     * each region's barrier into a wait for a descheduled thread (lstm_text_generation 30x slower under load);
     * sleeping at once cost a futex wake per region (40 ms per step against 22 ms with a 3000-iteration spin).
     * libgomp reads both when the first generated object loads it. */
    setenv("OMP_WAIT_POLICY", "passive", 0);
    setenv("GOMP_SPINCOUNT", "3000", 0);
    *out = b;
    return KH_OK;
}

static void th_close(kh_bsession *b) {
    if (!b) return;
    if (b->s.cuda) th_gpu()->close(&b->s);
    th_build_close(&b->s);
    free(b);
}

static const char *th_last_error(kh_bsession *b) { return b ? b->s.err : "theano: no session"; }

static kh_status th_environment(kh_bsession *b, char *buf, size_t n) {
    if (!b || !buf || n == 0) return KH_ERR_INVALID;
    th_session *s = &b->s;
    char ver[64];
    if (s->cuda) {
        snprintf(buf, n, "optimize=%d", s->set.passes);
        size_t k = strlen(buf);
        return th_gpu()->environment(s, buf + k, n - k);
    }
    snprintf(buf, n, "blas=%s threads=%d cc=%s cflags=\"%s\" optimize=%d cache=%s", th_blas_version(ver, sizeof ver),
             s->threads, s->set.cc, s->set.cflags, s->set.passes, th_build_cache_dir(s));
    return KH_OK;
}

static const kh_backend_api th_backend_api = {
    .struct_size = sizeof(kh_backend_api),
    .get_caps = th_get_caps,
    .open = th_open,
    .close = th_close,
    .last_error = th_last_error,
    .environment = th_environment,
    .compile = th_api_compile,
    .model_free = th_api_model_free,
    .set_weight = th_api_set_weight,
    .get_weight = th_api_get_weight,
    .train_batch = th_api_train_batch,
    .eval_batch = th_api_eval_batch,
    .predict = th_api_predict,
    .read_metrics = th_api_read_metrics,
    .sync = th_api_sync,
    .forward = th_api_forward,
    .backward = th_api_backward,
    .get_grad = th_api_get_grad,
    .compile_info = th_api_compile_info,
    .memory_info = th_api_memory_info,
};

static const kh_module_desc g_desc = {
    KH_MODULE_DESC_HEAD,
    .kind = KH_MODULE_BACKEND,
    .name = "theano",
    .version = TH_VERSION,
    .description = "compiler strategy: the graph optimised (fusion), emitted as C (cc + dlopen) or CUDA C (NVRTC + "
                   "driver API) (NHWC; LSTMs as scans)",
    .api = &th_backend_api,
};

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) {
    th_set_module_host(host);
    return &g_desc;
}
