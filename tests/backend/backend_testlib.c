/* tests/backend/backend_testlib.c — see backend_testlib.h. */
#define _POSIX_C_SOURCE 200809L
#include "backend_testlib.h"

#include <dlfcn.h>
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

static kh_caps g_cpu_caps; /* of the loaded backend: how batches must be laid out for it */
const kh_caps *kb_cpu_caps(void) { return &g_cpu_caps; }

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
    memset(&g_cpu_caps, 0, sizeof g_cpu_caps);
    g_cpu_caps.struct_size = sizeof g_cpu_caps;
    b->api->get_caps(KH_DEVICE_CPU, &g_cpu_caps);
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
    char err[512];
    if (b->api->open(g_use, &dev, &b->s, err, sizeof err) != KH_OK) {
        char why[600];
        snprintf(why, sizeof why, "%s open cpu: %s", kb_plugin_name(), err);
        kh_test_skip(why);
    }
    /* KHOST_TEST_EXPECT_ENV: the session's environment string must contain it (which path ran: never a
     * silent fallback counted as the path under test) */
    const char *want = getenv("KHOST_TEST_EXPECT_ENV");
    if (want && *want) {
        char env[512] = "";
        if (!b->api->environment || b->api->environment(b->s, env, sizeof env) != KH_OK || !strstr(env, want)) {
            fprintf(stderr, "FAIL: %s environment '%s' does not contain '%s'\n", kb_plugin_name(), env, want);
            exit(1);
        }
        printf("%s environment: %s\n", kb_plugin_name(), env);
    }
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
    int rc = 0;
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
