/* tests/backend/backend_testlib.c — see backend_testlib.h. */
#define _POSIX_C_SOURCE 200809L
#include "backend_testlib.h"

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "khost/kit/rng.h"
#include "khost/kit/spec.h"
#include "khost/kit/init.h"

static void host_log(kh_log_level level, const char *module, const char *fmt, ...) {
    if (level > KH_LOG_WARN) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[%s] ", module);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
static void *host_alloc(size_t n) { return aligned_alloc(64, (n + 63) / 64 * 64); }
static void host_free(void *p) { free(p); }
/* Registry values for the module under test come from the environment: KHOST_TEST_CFG_<key>=value. */
static const char *host_config(const char *section, const char *key) {
    (void)section;
    char name[128];
    snprintf(name, sizeof name, "KHOST_TEST_CFG_%s", key);
    return getenv(name);
}
static void host_progress(const char *what, int64_t done, int64_t total) { (void)what, (void)done, (void)total; }

static const kh_host_api g_host = {
    .struct_size = sizeof(kh_host_api),
    .abi_major = KH_ABI_MAJOR,
    .abi_minor = KH_ABI_MINOR,
    .host_version = "test",
    .log = host_log,
    .alloc = host_alloc,
    .free = host_free,
    .config_get = host_config,
    .progress = host_progress,
};

static const kh_host_api *g_use = &g_host; /* the table modules get (a test may count allocations) */
const kh_host_api *kb_host(void) { return g_use; }
void kb_set_host(const kh_host_api *h) { g_use = h ? h : &g_host; }

static kh_caps g_caps; /* of the loaded backend on the session's device kind: how batches are laid out for it */
const kh_caps *kb_caps(void) { return &g_caps; }

const char *kb_plugin_name(void) {
    const char *p = getenv("KHOST_TEST_PLUGIN");
    return p && *p ? p : "cntk";
}

void kb_load_module(kb_backend *b) {
    memset(b, 0, sizeof *b);
    /* KHOST_TEST_PLUGIN_DIR: another build of the module (cntk's im2col CPU path), else $KHOST_BUILD/plugins */
    const char *build = getenv("KHOST_BUILD"), *dir = getenv("KHOST_TEST_PLUGIN_DIR");
    char path[4096];
    if (dir && *dir) snprintf(path, sizeof path, "%s/%s.so", dir, kb_plugin_name());
    else snprintf(path, sizeof path, "%s/plugins/%s.so", build && *build ? build : ".", kb_plugin_name());
    b->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!b->dl) {
        char why[4400];
        snprintf(why, sizeof why, "cannot load %s: %s", path, dlerror());
        kh_test_skip(why);
    }
    kh_entry_fn entry;
    *(void **)(&entry) = dlsym(b->dl, KH_ENTRY_NAME);
    if (!entry) kh_test_skip("no entry point in the plugin");
    b->desc = entry(g_use);
    b->api = b->desc ? b->desc->api : NULL;
    if (!b->api) kh_test_skip("the plugin's entry returned no API");
    memset(&g_caps, 0, sizeof g_caps);
    g_caps.struct_size = sizeof g_caps;
    b->api->get_caps(KH_DEVICE_CPU, &g_caps);
}

float *kb_nan_floats(int64_t n) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; p && i < n; i++) p[i] = NAN;
    return p;
}

/* What differs between the bundled backends beyond their caps: names, switches and messages of their GPU
 * halves. */
static const kb_traits g_traits[] = {
    {"cntk", "cntk_cuda.so", "CNTK_CUDA_CHECK_LAYERS", "CNTK_CUDA_POISON", "out of device memory", {"cudnn="}},
    {"tensorflow", "tensorflow_cuda.so", "TF_CUDA_SYNC_EACH_OP", NULL, "MiB", {"cudnn=", "cublas=", "device="}},
    {"theano", "theano_cuda.so", "TH_CUDA_SYNC_EACH_OP", NULL, "MiB", {"cudnn=", "cublas=", "device="}},
};
const kb_traits *kb_traits_of(const char *plugin) {
    static const kb_traits none = {"?", "?", NULL, NULL, "", {NULL}};
    for (size_t i = 0; i < sizeof g_traits / sizeof g_traits[0]; i++)
        if (!strcmp(g_traits[i].plugin, plugin)) return &g_traits[i];
    return &none;
}

/* The device of the session under test: $KHOST_TEST_DEVICE ("cpu", default, or "cuda:N") and its FP32 math,
 * $KHOST_TEST_MATH ("fp32", default, or "tf32"; the cpu has no TF32 and records fp32, as the host does). */
const char *kb_device_id(void) {
    const char *d = getenv("KHOST_TEST_DEVICE");
    return d && *d ? d : "cpu";
}
static int device_of(kh_device *dev, int threads) {
    memset(dev, 0, sizeof *dev);
    dev->struct_size = sizeof *dev;
    const char *id = kb_device_id(), *math = getenv("KHOST_TEST_MATH");
    char *end = NULL;
    if (!strcmp(id, "cpu")) {
        dev->kind = KH_DEVICE_CPU;
        dev->ordinal = -1;
        dev->threads = threads;
        snprintf(dev->name, sizeof dev->name, "test cpu");
    } else if (!strncmp(id, "cuda:", 5) && id[5] && (dev->ordinal = (int32_t)strtol(id + 5, &end, 10)) >= 0 && !*end) {
        dev->kind = KH_DEVICE_CUDA;
        dev->threads = 1;
        snprintf(dev->name, sizeof dev->name, "test gpu");
    } else {
        return -1;
    }
    snprintf(dev->id, sizeof dev->id, "%s", id);
    if (math && !strcmp(math, "tf32")) dev->math = dev->kind == KH_DEVICE_CUDA ? KH_MATH_TF32 : KH_MATH_FP32;
    else if (math && *math && strcmp(math, "fp32")) return -1;
    return 0;
}
int kb_device_is_cuda(void) { return !strncmp(kb_device_id(), "cuda:", 5); }
uint32_t kb_device_math(void) {
    kh_device d;
    return device_of(&d, 1) == 0 ? d.math : KH_MATH_FP32;
}

/* Open dev on b's module: 0, 1 (unavailable here, why filled), exit 1 on a failure (see the header). */
static int open_on(kb_backend *b, kh_device *dev, char *why, size_t n) {
    kh_caps c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    if (b->api->get_caps(dev->kind, &c) != KH_OK || !c.available) {
        snprintf(why, n, "%s cannot use %s: %s", kb_plugin_name(), dev->id, c.note[0] ? c.note : "no reason given");
        return 1;
    }
    g_caps = c;
    char err[512];
    if (b->api->open(g_use, dev, &b->s, err, sizeof err) != KH_OK) {
        /* an available device that does not open is a failure, never a skip */
        fprintf(stderr, "FAIL: %s caps say %s is available (%s) but open failed: %s\n", kb_plugin_name(), dev->id,
                c.note, err);
        exit(1);
    }
    /* KHOST_TEST_EXPECT_ENV: the session's environment string must contain it (which path ran: never a
     * silent fallback counted as the path under test) */
    const char *want = getenv("KHOST_TEST_EXPECT_ENV");
    char env[512] = "";
    if (b->api->environment && b->api->environment(b->s, env, sizeof env) == KH_OK)
        printf("%s on %s (math %s): %s\n", kb_plugin_name(), dev->id, dev->math == KH_MATH_TF32 ? "tf32" : "fp32", env);
    if (want && *want && !strstr(env, want)) {
        fprintf(stderr, "FAIL: %s environment '%s' does not contain '%s'\n", kb_plugin_name(), env, want);
        exit(1);
    }
    return 0;
}

int kb_open_device(kb_backend *b, int threads, char *why, size_t n) {
    kh_device dev;
    if (device_of(&dev, threads) != 0) {
        const char *m = getenv("KHOST_TEST_MATH");
        fprintf(stderr, "FAIL: KHOST_TEST_DEVICE '%s' / KHOST_TEST_MATH '%s': cpu or cuda:N, fp32 or tf32\n",
                kb_device_id(), m ? m : "");
        exit(1);
    }
    return open_on(b, &dev, why, n);
}

void kb_load(kb_backend *b, int threads) {
    kb_load_module(b);
    kh_device dev;
    memset(&dev, 0, sizeof dev);
    dev.struct_size = sizeof dev;
    dev.kind = KH_DEVICE_CPU;
    dev.ordinal = -1;
    snprintf(dev.id, sizeof dev.id, "cpu");
    snprintf(dev.name, sizeof dev.name, "test cpu");
    dev.threads = threads;
    char why[600];
    if (open_on(b, &dev, why, sizeof why) != 0) kh_test_skip(why);
}

void kb_unload(kb_backend *b) {
    if (b->s) b->api->close(b->s);
    if (b->dl) dlclose(b->dl);
    memset(b, 0, sizeof *b);
}

kh_bmodel *kb_compile(kb_backend *b, const kh_model_spec *spec, int max_batch, int deterministic) {
    kh_compile_opts o = {.struct_size = sizeof o, .max_batch = max_batch, .seed = 7, .deterministic = deterministic};
    kh_bmodel *m = NULL;
    if (b->api->compile(b->s, spec, &o, &m) != KH_OK) {
        fprintf(stderr, "compile %s: %s\n", spec->name ? spec->name : "?", b->api->last_error(b->s));
        return NULL;
    }
    return m;
}

kh_tensor kb_tensor(uint32_t dtype, uint32_t layout, int rank, const int64_t *dims, void *data) {
    kh_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dtype;
    t.layout = layout;
    t.rank = rank;
    for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
    t.data = data;
    return t;
}

void kb_fill_uniform(float *x, int64_t n, float lo, float hi, kh_rng *r) {
    for (int64_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)kh_rng_uniform(r);
}

int kb_init_weights(kb_backend *b, kh_bmodel *m, const kh_model_spec *spec, uint64_t seed, float ***keep) {
    kh_model_shapes sh;
    char err[256];
    if (kh_spec_infer(spec, &sh, err, sizeof err) != KH_OK) {
        fprintf(stderr, "spec: %s\n", err);
        return -1;
    }
    kh_rng r;
    kh_rng_seed(&r, seed);
    float **all = keep ? calloc((size_t)sh.n_layers * KH_MAX_SLOTS, sizeof *all) : NULL;
    int rc = keep && !all ? -1 : 0;
    for (int l = 0; l < sh.n_layers && rc == 0; l++)
        for (int s = 0; s < sh.layers[l].n_params && rc == 0; s++) {
            const kh_param_shape *p = &sh.layers[l].params[s];
            float *w = malloc((size_t)p->numel * sizeof(float));
            if (!w || kh_init_param(&r, p, w) != KH_OK) {
                free(w);
                rc = -1;
                break;
            }
            kh_tensor t = kb_tensor(KH_F32, KH_LAYOUT_ANY, p->rank, p->dims, w);
            if (b->api->set_weight(m, l, s, &t) != KH_OK) {
                fprintf(stderr, "set_weight %d/%d: %s\n", l, s, b->api->last_error(b->s));
                rc = -1;
            }
            if (all)
                all[l * KH_MAX_SLOTS + s] = w;
            else
                free(w);
        }
    kh_model_shapes_free(&sh);
    if (keep) *keep = all;
    return rc;
}

void kb_free_weights(const kh_model_spec *spec, float **keep) {
    if (!keep) return;
    for (int i = 0; i < spec->n_layers * KH_MAX_SLOTS; i++) free(keep[i]);
    free(keep);
}
