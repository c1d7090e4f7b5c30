/* tests/fixtures_e2e/fixture_task.c — generated, linearly separable data for the host's end-to-end tests:
 * 4 Gaussian blobs in 8 dimensions (centres +-3 on distinct axes, unit noise), 2048 train / 512 validation,
 * Dense(4, softmax) with RMSprop, target val_acc 0.95 (KHOST_FIXTURE_TARGET sets another). FIXTURE_CONV builds
 * "fixture_conv", whose model needs Conv2D (which the fixture backend lacks) to test the "unsupported" path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/khost.h"
#include "khost/kit/status.h"
#include "khost/kit/rng.h"

#define DIM 8
#define CLASSES 4

struct kh_tdata {
    int64_t n[2];
    float *x[2];
    int32_t *y[2];
    kh_layer_spec layers[3];
    char err[256];
};

static const kh_published published[] = {{"cntk", "1080 Ti", 0.99, 1.5}, {"tensorflow", "1080 Ti", 0.98, -1}};
static kh_task_info info = {
    .struct_size = sizeof(kh_task_info), .dataset = "blobs", .epochs = 5, .batch_size = 64,
    .has_validation = 1, .metric = "val_acc", .target = 0.95, .n_published = 2, .published = published,
};
/* KHOST_FIXTURE_TARGET: the val_acc target instead of 0.95 (0: none), so a test can place it where its short
 * runs reach it on some seeds and not on others. */
static const kh_task_info *get_info(void) {
    const char *t = getenv("KHOST_FIXTURE_TARGET");
    if (t && *t) info.target = strtod(t, NULL);
    return &info;
}

static void unload(kh_tdata *d) {
    if (!d) return;
    for (int s = 0; s < 2; s++) {
        free(d->x[s]);
        free(d->y[s]);
    }
    free(d);
}

static kh_status load(const kh_host_api *h, const kh_load_opts *o, kh_tdata **out, char *err, size_t n) {
    const char *mark = getenv("FIXTURE_LOAD_MARK"); /* tests: proves whether the host loaded the data */
    if (mark) {
        FILE *f = fopen(mark, "a");
        if (f) fclose(f);
    }
    kh_tdata *d = calloc(1, sizeof *d);
    if (!d) return kh_errf(err, n, KH_ERR_NOMEM, "blobs: out of memory");
    d->n[0] = 2048;
    d->n[1] = 512;
    if (o->limit_train > 0 && o->limit_train < d->n[0]) d->n[0] = o->limit_train;
    if (o->limit_val > 0 && o->limit_val < d->n[1]) d->n[1] = o->limit_val;
    kh_rng r;
    kh_rng_seed(&r, 12345); /* the data set is fixed; the run's seed only drives training */
    for (int s = 0; s < 2; s++) {
        d->x[s] = malloc((size_t)(d->n[s] * DIM) * sizeof(float));
        d->y[s] = malloc((size_t)d->n[s] * sizeof(int32_t));
        if (!d->x[s] || !d->y[s]) {
            unload(d);
            return kh_errf(err, n, KH_ERR_NOMEM, "blobs: out of memory");
        }
        for (int64_t i = 0; i < d->n[s]; i++) {
            int c = (int)(i % CLASSES);
            d->y[s][i] = c;
            for (int k = 0; k < DIM; k++)
                d->x[s][i * DIM + k] = (float)kh_rng_normal(&r) + (k == c ? 3.0f : (k == c + CLASSES ? -3.0f : 0.0f));
        }
    }
    *out = d;
    return KH_OK;
}

static const char *last_error(kh_tdata *d) { return d->err; }

static kh_status model(kh_tdata *d, kh_model_spec *m) {
    memset(d->layers, 0, sizeof d->layers);
    m->name = "blobs_softmax";
    m->input_dtype = KH_F32;
    m->loss = KH_LOSS_CATEGORICAL_CROSSENTROPY;
    m->n_classes = CLASSES;
    m->optimizer = (kh_optimizer_spec){.kind = KH_OPT_RMSPROP, .lr = 0.01f, .rho = 0.9f, .epsilon = 1e-7f};
#ifdef FIXTURE_CONV
    m->input_rank = 3;
    m->input_shape[0] = 2;
    m->input_shape[1] = 2;
    m->input_shape[2] = 2;
    d->layers[0] = (kh_layer_spec){.kind = KH_LAYER_CONV2D, .units = 4, .kernel = {1, 1}};
    d->layers[1] = (kh_layer_spec){.kind = KH_LAYER_FLATTEN};
    d->layers[2] = (kh_layer_spec){.kind = KH_LAYER_DENSE, .units = CLASSES, .activation = KH_ACT_SOFTMAX};
    m->n_layers = 3;
    /* a valid model whose Conv2D the fixture backend lacks: the cell must stop at the capability check */
#else
    m->input_rank = 1;
    m->input_shape[0] = DIM;
    d->layers[0] = (kh_layer_spec){.kind = KH_LAYER_DENSE, .units = CLASSES, .activation = KH_ACT_SOFTMAX};
    m->n_layers = 1;
#endif
    m->layers = d->layers;
    return KH_OK;
}

static int64_t count(kh_tdata *d, uint32_t split) { return split <= KH_SPLIT_VAL ? d->n[split] : 0; }

static kh_status get_batch(kh_tdata *d, uint32_t split, const int64_t *idx, int32_t n, kh_tensor *x, kh_tensor *y) {
    float *xs = x->data;
    int32_t *ys = y->data;
    for (int i = 0; i < n; i++) {
        if (idx[i] < 0 || idx[i] >= d->n[split]) {
            snprintf(d->err, sizeof d->err, "blobs: index %lld out of range", (long long)idx[i]);
            return KH_ERR_INVALID;
        }
        memcpy(xs + (size_t)i * DIM, d->x[split] + idx[i] * DIM, DIM * sizeof(float));
        ys[i] = d->y[split][idx[i]];
    }
    return KH_OK;
}

static kh_status describe(kh_tdata *d, kh_print_fn print, void *ctx) {
    char line[128];
    snprintf(line, sizeof line, "blobs: %d classes in %d dimensions, %lld train / %lld validation", CLASSES, DIM,
             (long long)d->n[0], (long long)d->n[1]);
    print(ctx, line);
    return KH_OK;
}

static const kh_task_api api = {
    .struct_size = sizeof(kh_task_api), .info = get_info, .load = load, .unload = unload,
    .last_error = last_error, .model = model, .count = count, .get_batch = get_batch, .describe = describe,
};

static const kh_module_desc desc = {
    KH_MODULE_DESC_HEAD,
    .kind = KH_MODULE_TASK,
#ifdef FIXTURE_CONV
    .name = "fixture_conv",
#else
    .name = "fixture_blobs",
#endif
    .version = "test", .description = "generated separable blobs for the host tests", .api = &api,
};

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) { return &desc; }
