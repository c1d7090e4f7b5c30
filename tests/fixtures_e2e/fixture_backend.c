/* tests/fixtures_e2e/fixture_backend.c — a tiny real backend for the host's end-to-end tests: softmax
 * regression (Dense + softmax, categorical cross-entropy, SGD/RMSprop) on the cpu, in plain C.
 * FIXTURE_MODE selects a misbehaving variant from the same source: 1 segfaults in train_batch of the second
 * epoch (after the 32 batches of the first, so the per-epoch checkpoint has something to keep), 2 hangs
 * there, 3 produces a NaN loss (divergence), 4 reports every device kind unavailable (as a backend built
 * without BLAS does on the cpu), 5 also offers the CUDA kind (computing on the host: tests with the fake
 * driver of tests/core_devices) and says in its environment string which kh_device.math it was opened with
 * ("math=<n>", -1 when the host's kh_device ends before it). Names: fixture, fixture_segv, fixture_hang,
 * fixture_nan, fixture_nodev, fixture_cuda (and fixture_cuda13, declaring ABI 1.3: FIXTURE_MINOR_OVERRIDE).
 * FIXTURE_FAULTS (a working backend, built by tests/core_safety as fixture_faults) injects resource faults
 * from the environment: KHOST_FIXTURE_SLOW_MS sleeps that long per training batch (a cell to kill midway);
 * KHOST_FIXTURE_ALLOC_MB allocates and touches that much at compile, answering KH_ERR_NOMEM when it cannot,
 * or, with KHOST_FIXTURE_ALLOC_ABORT=1, printing "out of memory" and aborting as libc or C++ would, or, with
 * KHOST_FIXTURE_ALLOC_SPIN=1, trying again every 10 ms for ever, as OpenBLAS does with its buffers.
 * FIXTURE_CODEGEN (fixture_codegen) plays a backend that generates code at compile time through an on-disk
 * cache and implements compile_info (ABI 1.2). KHOST_FIXTURE_CODEGEN picks the cache's answer: "auto" (the
 * default) is a miss that fills the cache (a file per model shape in the folder KHOST_FIXTURE_CODEGEN_CACHE)
 * and a hit once the file is there; "hit" and "miss" force one answer for every compile, "none" reports that
 * nothing was generated. A miss spends KHOST_FIXTURE_CODEGEN_MS (default 200) ms "in the C compiler".
 * KHOST_FIXTURE_COMPILE_LOG names a file that gets one line per compile call ("compile hit|miss|none"), so
 * tests can count the host's compiles. FIXTURE_ABI11 (fixture_abi11) declares itself built against ABI 1.1:
 * minor 1 and a table that ends before compile_info, although the member is filled in the source — the host
 * must neither see nor call it. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "khost/kit/formulas.h"
#include "khost/khost.h"

#ifndef FIXTURE_MODE
#define FIXTURE_MODE 0
#endif
#ifndef FIXTURE_NAME
#define FIXTURE_NAME "fixture"
#endif

struct kh_bsession {
    char err[256];
    int math; /* the kh_device.math it was opened with, -1 when absent */
    uint32_t kind;
};
struct kh_bmodel {
    kh_bsession *s;
    int in, out, max_batch;
    float *w, *b, *aw, *ab; /* weights [in,out], bias [out], RMSprop accumulators */
    float *p;               /* probabilities [max_batch, out] */
    kh_compile_info ci;     /* FIXTURE_CODEGEN: how this model was compiled */
    kh_optimizer_spec opt;
    int64_t iterations;
    kh_metrics m[2];
};

static kh_status caps(uint32_t kind, kh_caps *c) {
    c->available = (kind == KH_DEVICE_CPU || (FIXTURE_MODE == 5 && kind == KH_DEVICE_CUDA)) && FIXTURE_MODE != 4;
    if (!c->available)
        snprintf(c->note, sizeof c->note, "%s", FIXTURE_MODE == 4 ? "fixture_nodev has no device" : "fixture backend is cpu-only");
    c->layer_kinds = 1u << KH_LAYER_DENSE;
    c->activations = (1u << KH_ACT_LINEAR) | (1u << KH_ACT_SOFTMAX);
    c->losses = 1u << KH_LOSS_CATEGORICAL_CROSSENTROPY;
    c->optimizers = (1u << KH_OPT_SGD) | (1u << KH_OPT_RMSPROP);
    c->image_layout = KH_LAYOUT_NHWC;
    c->flags = KH_CAP_PREDICT;
    return KH_OK;
}

static kh_status open_s(const kh_host_api *h, const kh_device *d, kh_bsession **out, char *err, size_t n) {
    *out = calloc(1, sizeof **out);
    if (!*out) {
        snprintf(err, n, "out of memory");
        return KH_ERR_NOMEM;
    }
    (*out)->math = KH_HAS_MEMBER(kh_device, d->struct_size, math) ? (int)d->math : -1;
    (*out)->kind = d->kind;
    return KH_OK;
}
static void close_s(kh_bsession *s) { free(s); }
static const char *last_error(kh_bsession *s) { return s->err; }
static kh_status environment(kh_bsession *s, char *buf, size_t n) {
#if FIXTURE_MODE == 5
    snprintf(buf, n, "fixture=1 math=%d kind=%u", s->math, s->kind);
#else
    snprintf(buf, n, "fixture=1");
#endif
    return KH_OK;
}

static void model_free(kh_bmodel *m) {
    if (!m) return;
    free(m->w);
    free(m->b);
    free(m->aw);
    free(m->ab);
    free(m->p);
    free(m);
}

#ifdef FIXTURE_FAULTS
static long env_long(const char *name) {
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : 0;
}
#endif

#ifdef FIXTURE_CODEGEN
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The fake code generator: decides hit or miss, spends the compiler's time on a miss, logs the call. */
static void codegen(kh_bmodel *m) {
    const char *mode = getenv("KHOST_FIXTURE_CODEGEN"), *dir = getenv("KHOST_FIXTURE_CODEGEN_CACHE");
    const char *ms_env = getenv("KHOST_FIXTURE_CODEGEN_MS");
    long ms = ms_env && *ms_env ? strtol(ms_env, NULL, 10) : 200;
    if (!mode || !*mode) mode = "auto";
    double t0 = now_s();
    char key[4096] = "";
    if (dir && *dir) snprintf(key, sizeof key, "%s/fixture_codegen-%dx%d.o", dir, m->in, m->out);
    int hit = !strcmp(mode, "hit") || (!strcmp(mode, "auto") && key[0] && access(key, R_OK) == 0);
    int none = !strcmp(mode, "none");
    double t1 = now_s(), t2 = t1;
    if (!hit && !none) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        if (!strcmp(mode, "auto") && key[0]) {
            FILE *f = fopen(key, "w");
            if (f) {
                fputs("generated\n", f);
                fclose(f);
            }
        }
        t2 = now_s();
    }
    double t3 = now_s();
    m->ci.cache = none ? KH_COMPILE_NO_CACHE : hit ? KH_COMPILE_HIT : KH_COMPILE_MISS;
    m->ci.units = none ? 0 : 3;
    m->ci.codegen_s = t1 - t0;
    m->ci.compile_s = t2 - t1;
    m->ci.load_s = t3 - t2;
    const char *log = getenv("KHOST_FIXTURE_COMPILE_LOG");
    if (log && *log) {
        FILE *f = fopen(log, "a");
        if (f) {
            fprintf(f, "compile %s\n", none ? "none" : hit ? "hit" : "miss");
            fclose(f);
        }
    }
}

static kh_status compile_info(kh_bmodel *m, kh_compile_info *out) {
    /* write only what the host's struct has room for (ABI rule 7) */
    if (!KH_HAS_MEMBER(kh_compile_info, out->struct_size, load_s)) {
        snprintf(m->s->err, sizeof m->s->err, "fixture: compile_info struct too small (%u)", (unsigned)out->struct_size);
        return KH_ERR_INVALID;
    }
    uint32_t size = out->struct_size;
    *out = m->ci;
    out->struct_size = size;
    return KH_OK;
}
#endif

static kh_status compile(kh_bsession *s, const kh_model_spec *spec, const kh_compile_opts *o, kh_bmodel **out) {
#ifdef FIXTURE_FAULTS
    long mb = env_long("KHOST_FIXTURE_ALLOC_MB");
    if (mb > 0) {
        char *big = malloc((size_t)mb << 20);
        while (!big && env_long("KHOST_FIXTURE_ALLOC_SPIN")) {
            nanosleep(&(struct timespec){0, 10 * 1000000L}, NULL);
            big = malloc((size_t)mb << 20);
        }
        if (!big) {
            if (env_long("KHOST_FIXTURE_ALLOC_ABORT")) {
                fprintf(stderr, "fixture_faults: out of memory allocating %ld MiB\n", mb);
                abort();
            }
            snprintf(s->err, sizeof s->err, "fixture_faults: cannot allocate %ld MiB", mb);
            return KH_ERR_NOMEM;
        }
        memset(big, 1, (size_t)mb << 20);
        free(big);
    }
#endif
    if (spec->n_layers != 1 || spec->layers[0].kind != KH_LAYER_DENSE || spec->input_rank != 1) {
        snprintf(s->err, sizeof s->err, "fixture: only a single Dense layer on flat input");
        return KH_ERR_UNSUPPORTED;
    }
    kh_bmodel *m = calloc(1, sizeof *m);
    if (!m) return KH_ERR_NOMEM;
    m->s = s;
    m->in = spec->input_shape[0];
    m->out = spec->layers[0].units;
    m->max_batch = o->max_batch;
    m->opt = spec->optimizer;
    m->w = calloc((size_t)(m->in * m->out), sizeof(float));
    m->aw = calloc((size_t)(m->in * m->out), sizeof(float));
    m->b = calloc((size_t)m->out, sizeof(float));
    m->ab = calloc((size_t)m->out, sizeof(float));
    m->p = calloc((size_t)(m->max_batch * m->out), sizeof(float));
    if (!m->w || !m->aw || !m->b || !m->ab || !m->p) {
        model_free(m);
        return KH_ERR_NOMEM;
    }
#ifdef FIXTURE_CODEGEN
    codegen(m);
#endif
    *out = m;
    return KH_OK;
}

static kh_status weight_io(kh_bmodel *m, int32_t layer, int32_t slot, kh_tensor *t, int set) {
    if (layer != 0 || slot < 0 || slot > 1) {
        snprintf(m->s->err, sizeof m->s->err, "fixture: no weight (%d, %d)", layer, slot);
        return KH_ERR_INVALID;
    }
    float *dst = slot == 0 ? m->w : m->b;
    size_t n = slot == 0 ? (size_t)(m->in * m->out) : (size_t)m->out;
    if ((size_t)kh_tensor_numel(t) != n) {
        snprintf(m->s->err, sizeof m->s->err, "fixture: weight (%d, %d) has %lld elements, expected %zu", layer,
                 slot, (long long)kh_tensor_numel(t), n);
        return KH_ERR_INVALID;
    }
    if (set) memcpy(dst, t->data, n * sizeof(float));
    else memcpy(t->data, dst, n * sizeof(float));
    return KH_OK;
}
static kh_status set_weight(kh_bmodel *m, int32_t l, int32_t s, const kh_tensor *w) {
    return weight_io(m, l, s, (kh_tensor *)w, 1);
}
static kh_status get_weight(kh_bmodel *m, int32_t l, int32_t s, kh_tensor *w) { return weight_io(m, l, s, w, 0); }

/* probabilities for n rows of x into m->p */
static void forward(kh_bmodel *m, const float *x, int n) {
    for (int i = 0; i < n; i++) {
        float *p = m->p + i * m->out, mx = -INFINITY, sum = 0;
        for (int j = 0; j < m->out; j++) {
            float z = m->b[j];
            for (int k = 0; k < m->in; k++) z += x[i * m->in + k] * m->w[k * m->out + j];
            p[j] = z;
            mx = z > mx ? z : mx;
        }
        for (int j = 0; j < m->out; j++) sum += (p[j] = expf(p[j] - mx));
        for (int j = 0; j < m->out; j++) p[j] /= sum;
    }
}

static void accumulate(kh_bmodel *m, int phase, const int32_t *y, int n) {
    for (int i = 0; i < n; i++) {
        const float *p = m->p + i * m->out;
        int arg = 0;
        for (int j = 1; j < m->out; j++)
            if (p[j] > p[arg]) arg = j;
        m->m[phase].loss_sum += kh_cce_loss(p[y[i]]);
        m->m[phase].correct += arg == y[i];
        m->m[phase].samples++;
    }
}

static void update(kh_bmodel *m, float *w, float *a, float g, float lr) {
    if (m->opt.kind == KH_OPT_RMSPROP) kh_rmsprop_update(w, a, g, lr, m->opt.rho, m->opt.epsilon);
    else *w -= lr * g;
}

/* KHOST_FIXTURE_STEP_US: every training step also spins this many microseconds, so that a test can plant a known
 * slowdown in one "build" (the same binary under another value) and have it measured side by side.
 * KHOST_FIXTURE_STEP_JITTER_PCT: each process draws its own spin from [us, us * (1 + pct/100)), so repetitions
 * differ as on a noisy machine. */
static void step_spin(void) {
    static long us = -1;
    if (us < 0) {
        const char *v = getenv("KHOST_FIXTURE_STEP_US"), *j = getenv("KHOST_FIXTURE_STEP_JITTER_PCT");
        us = v && *v ? strtol(v, NULL, 10) : 0;
        if (j && *j && us > 0) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            srand((unsigned)getpid() ^ (unsigned)ts.tv_nsec);
            us += (long)((double)us * strtod(j, NULL) / 100.0 * ((double)rand() / ((double)RAND_MAX + 1.0)));
        }
    }
    if (us <= 0) return;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < us);
}

static kh_status train_batch(kh_bmodel *m, const kh_tensor *x, const kh_tensor *yt) {
#if FIXTURE_MODE == 1
    if (m->iterations >= 40) raise(SIGSEGV); /* a real crash signal, in epoch 2 */
#elif FIXTURE_MODE == 2
    for (;;) pause();
#endif
#ifdef FIXTURE_FAULTS
    long ms = env_long("KHOST_FIXTURE_SLOW_MS");
    if (ms > 0) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
#endif
    step_spin();
    int n = (int)x->dims[0];
    const float *xs = x->data;
    const int32_t *y = yt->data;
    forward(m, xs, n);
#if FIXTURE_MODE == 3
    m->p[0] = NAN;
#endif
    accumulate(m, KH_PHASE_TRAIN, y, n);
    float lr = m->opt.lr / (1.0f + m->opt.decay * (float)m->iterations);
    float inv_n = 1.0f / (float)n;
    for (int j = 0; j < m->out; j++) {
        float gb = 0;
        for (int i = 0; i < n; i++) gb += kh_softmax_cce_grad(m->p[i * m->out + j], y[i] == j, m->p[i * m->out + y[i]], inv_n);
        for (int k = 0; k < m->in; k++) {
            float g = 0;
            for (int i = 0; i < n; i++)
                g += xs[i * m->in + k] * kh_softmax_cce_grad(m->p[i * m->out + j], y[i] == j, m->p[i * m->out + y[i]], inv_n);
            update(m, &m->w[k * m->out + j], &m->aw[k * m->out + j], g, lr);
        }
        update(m, &m->b[j], &m->ab[j], gb, lr);
    }
    m->iterations++;
    return KH_OK;
}

static kh_status eval_batch(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y) {
    forward(m, x->data, (int)x->dims[0]);
    accumulate(m, KH_PHASE_EVAL, y->data, (int)x->dims[0]);
    return KH_OK;
}

static kh_status predict(kh_bmodel *m, const kh_tensor *x, kh_tensor *out) {
    int n = (int)x->dims[0];
    forward(m, x->data, n);
    memcpy(out->data, m->p, (size_t)(n * m->out) * sizeof(float));
    return KH_OK;
}

static kh_status read_metrics(kh_bmodel *m, uint32_t phase, kh_metrics *out, int32_t reset) {
    if (phase > KH_PHASE_EVAL) return KH_ERR_INVALID;
    *out = m->m[phase];
    if (reset) memset(&m->m[phase], 0, sizeof m->m[phase]);
    return KH_OK;
}
static kh_status sync_m(kh_bmodel *m) { return KH_OK; }

#if FIXTURE_MODE == 5 && !defined(FIXTURE_MINOR_OVERRIDE)
/* ABI 1.4 memory_info: on the (fake) CUDA device, as many "device" bytes as the model's weights and
 * accumulators take, plus 1 MiB, so the test knows the figure; nothing counted on the cpu. */
static kh_status memory_info(kh_bmodel *m, kh_memory_info *out) {
    if (m->s->kind != KH_DEVICE_CUDA) return KH_OK;
    int64_t b = 2 * ((int64_t)m->in * m->out + m->out) * (int64_t)sizeof(float) + (1 << 20);
    out->device_bytes = b;
    out->device_peak_bytes = b;
    snprintf(out->what, sizeof out->what, "fixture: weights, accumulators and 1 MiB of workspace");
    return KH_OK;
}
#define FIXTURE_MEMORY_INFO memory_info
#else
#define FIXTURE_MEMORY_INFO NULL
#endif

#ifdef FIXTURE_ABI11
#define FIXTURE_API_SIZE offsetof(kh_backend_api, compile_info)
#define FIXTURE_MINOR 1
#else
#define FIXTURE_API_SIZE sizeof(kh_backend_api)
#ifdef FIXTURE_MINOR_OVERRIDE
#define FIXTURE_MINOR FIXTURE_MINOR_OVERRIDE
#else
#define FIXTURE_MINOR KH_ABI_MINOR
#endif
#endif

static const kh_backend_api api = {
    .struct_size = FIXTURE_API_SIZE, .get_caps = caps, .open = open_s, .close = close_s,
    .last_error = last_error, .environment = environment, .compile = compile, .model_free = model_free,
    .set_weight = set_weight, .get_weight = get_weight, .train_batch = train_batch, .eval_batch = eval_batch,
    .predict = predict, .read_metrics = read_metrics, .sync = sync_m,
#ifdef FIXTURE_CODEGEN
    .compile_info = compile_info,
#endif
    .memory_info = FIXTURE_MEMORY_INFO,
};

static const kh_module_desc desc = {
    .struct_size = sizeof(kh_module_desc), .abi_major = KH_ABI_MAJOR, .abi_minor = FIXTURE_MINOR,
    .kind = KH_MODULE_BACKEND, .name = FIXTURE_NAME, .version = "test",
    .description = "softmax-regression fixture backend for the host tests", .api = &api,
};

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) { return &desc; }
