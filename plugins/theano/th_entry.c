/* th_entry.c — the module's one exported symbol: theano as a graph-runtime backend (khost/kit/graph_runtime.h)
 * with its settings, its compile step (th_model.c), its CPU executor and its GPU half.
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

#ifndef TH_GPU_HALF
#define TH_GPU_HALF 0 /* 1: CMake built theano-cuda/theano_cuda.so beside this module */
#endif
static kh_half g_half = KH_HALF_INIT("theano", "theano-cuda", "theano_cuda.so", TH_CUDA_HALF_ENTRY, TH_GPU_HALF,
                                     TH_CUDA_HALF_VERSION, sizeof(th_session), sizeof(th_model));

#define TH_DEFAULT_CFLAGS "-O3 -march=native -fopenmp -ffp-contract=fast -fno-math-errno -fno-trapping-math"

static kh_status text_setting(const kh_host_api *h, const char *key, const char *dflt, char *out, size_t len,
                              char *err, size_t errlen) {
    const char *v = h && h->config_get ? h->config_get("plugin theano", key) : NULL;
    if (!v || !*v) v = dflt;
    if (strlen(v) >= len)
        return kh_errf(err, errlen, KH_ERR_INVALID, "theano: [plugin theano] %s is longer than %zu characters", key, len - 1);
    snprintf(out, len, "%s", v);
    return KH_OK;
}

/* The settings, then the generated-code cache (both devices use it). */
static kh_status th_configure(kh_grt_session *rts, char *err, size_t errlen) {
    th_session *s = (th_session *)rts;
    const kh_host_api *h = rts->host;
    char opt[16], det[16];
    kh_status st = text_setting(h, "cc", "cc", s->set.cc, sizeof s->set.cc, err, errlen);
    if (st == KH_OK) st = text_setting(h, "cflags", TH_DEFAULT_CFLAGS, s->set.cflags, sizeof s->set.cflags, err, errlen);
    if (st == KH_OK) st = text_setting(h, "cache_dir", "", s->set.cache_dir, sizeof s->set.cache_dir, err, errlen);
    if (st == KH_OK) st = text_setting(h, "dump_dir", "", s->set.dump_dir, sizeof s->set.dump_dir, err, errlen);
    if (st == KH_OK) st = text_setting(h, "optimize", "1", opt, sizeof opt, err, errlen);
    if (st == KH_OK && strcmp(opt, "0") != 0 && strcmp(opt, "1") != 0)
        st = kh_errf(err, errlen, KH_ERR_INVALID, "theano: [plugin theano] optimize = '%s': expected 0 or 1", opt);
    if (st == KH_OK) st = text_setting(h, "deterministic", "1", det, sizeof det, err, errlen);
    if (st == KH_OK && strcmp(det, "0") != 0 && strcmp(det, "1") != 0)
        st = kh_errf(err, errlen, KH_ERR_INVALID, "theano: [plugin theano] deterministic = '%s': expected 0 or 1", det);
    if (st != KH_OK) return st;
    s->set.passes = opt[0] == '1';
    s->set.deterministic = det[0] == '1';
    /* the C compiler's deadline per call: a compiler that hangs must not hang the cell */
    char cct[32];
    st = text_setting(h, "cc_timeout", "600", cct, sizeof cct, err, errlen);
    if (st != KH_OK) return st;
    char *end = NULL;
    double sec = strtod(cct, &end);
    if (end == cct || *end || !(sec > 0) || sec > 1e7)
        return kh_errf(err, errlen, KH_ERR_INVALID,
                       "theano: [plugin theano] cc_timeout = '%s': expected seconds > 0 (default 600)", cct);
    th_spawn_set_timeout(sec);
    return th_build_open(s, err, errlen);
}

static void th_unconfigure(kh_grt_session *rts) { th_build_close((th_session *)rts); }

// --- the CPU executor's session side -----------------------------------------------------------------------------
static void cpu_caps(kh_caps *c) {
    c->available = th_blas_available();
    snprintf(c->note, sizeof c->note, "%s", c->available ? "optimised graph compiled to C (cc + dlopen), OpenBLAS GEMM"
                                                         : "built without BLAS: CPU path unavailable");
}

static kh_status cpu_open(kh_grt_session *rts, char *err, size_t errlen) {
    if (!th_blas_available())
        return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "theano open on %s: built without BLAS", rts->dev.id);
    th_blas_threads(1); /* the generated code's OpenMP loops split big GEMMs; BLAS never starts threads */
    /* Idle OpenMP workers spin briefly, then sleep (unless the user chose otherwise): the scans open two short
     * parallel regions per time step. Spinning without a bound on a shared or oversubscribed machine turned
     * each region's barrier into a wait for a descheduled thread (lstm_text_generation 30x slower under load);
     * sleeping at once cost a futex wake per region (40 ms per step against 22 ms with a 3000-iteration spin).
     * libgomp reads both when the first generated object loads it. */
    setenv("OMP_WAIT_POLICY", "passive", 0);
    setenv("GOMP_SPINCOUNT", "3000", 0);
    return KH_OK;
}

static void cpu_close(kh_grt_session *rts) { (void)rts; }

static kh_status cpu_environment(kh_grt_session *rts, char *buf, size_t n) {
    th_session *s = (th_session *)rts;
    char ver[64];
    snprintf(buf, n, "blas=%s threads=%d cc=%s cflags=\"%s\" optimize=%d cache=%s", th_blas_version(ver, sizeof ver),
             rts->threads, s->set.cc, s->set.cflags, s->set.passes, th_build_cache_dir(s));
    return KH_OK;
}

const kh_grt_exec th_cpu_exec = {
    .caps = cpu_caps,
    .open = cpu_open,
    .close = cpu_close,
    .environment = cpu_environment,
    .prepare = th_cpu_prepare,
    .release = th_cpu_release,
    .run = th_cpu_run,
    KH_GRT_HOST_STORAGE,
};

static const kh_grt_backend g_backend = {
    .name = "theano",
    .version = TH_VERSION,
    .description = "compiler strategy: the graph optimised (fusion), emitted as C (cc + dlopen) or CUDA C (NVRTC + "
                   "driver API) (NHWC; LSTMs as scans)",
    .session_size = sizeof(th_session),
    .model_size = sizeof(th_model),
    .rnn_scan = 1, /* recurrent layers as scans: one generated time loop each */
    .cpu = &th_cpu_exec,
    .cuda = &g_half,
    .configure = th_configure,
    .unconfigure = th_unconfigure,
    .prepare = th_prepare,
    .release = th_release,
    .ready = th_ready,
    .profile = th_api_profile,
    .compile_info = th_api_compile_info,
    .device_memory_what = "cuMemAlloc by theano for this model: weights, optimizer slots, arena, scratch, feeds, "
                          "cuDNN workspace (cuBLAS's and cuDNN's own allocations not counted)",
};

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) { return kh_grt_module(&g_backend, host); }
