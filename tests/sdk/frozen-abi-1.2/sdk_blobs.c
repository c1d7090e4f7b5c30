/* examples/sdk_task/sdk_blobs.c — a complete third-party task module, built outside the khost tree
 * against the installed SDK (docs/WRITING_MODULES.md). Three Gaussian blobs in 4 dimensions, a
 * Dense(3, softmax) model, RMSprop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <khost/khost.h>
#include <khost/kit.h>

#define DIM 4
#define CLASSES 3

struct kh_tdata {
    int64_t n[2];
    float *x[2];
    int32_t *y[2];
    kh_layer_spec layer;
    char err[128];
};

static const kh_task_info info = {.struct_size = sizeof info, .dataset = "generated", .epochs = 3,
                                  .batch_size = 32, .has_validation = 1, .metric = "val_acc"};

static const kh_task_info *get_info(void) { return &info; }

static void unload(kh_tdata *d) {
    if (!d) return;
    for (int s = 0; s < 2; s++) free(d->x[s]), free(d->y[s]);
    free(d);
}

static kh_status load(const kh_host_api *h, const kh_load_opts *o, kh_tdata **out, char *err, size_t n) {
    kh_tdata *d = calloc(1, sizeof *d);
    if (!d) return kh_errf(err, n, KH_ERR_NOMEM, "sdk_blobs: out of memory");
    d->n[0] = 600;
    d->n[1] = 150;
    kh_rng r;
    kh_rng_seed(&r, 99);
    for (int s = 0; s < 2; s++) {
        d->x[s] = malloc((size_t)(d->n[s] * DIM) * sizeof(float));
        d->y[s] = malloc((size_t)d->n[s] * sizeof(int32_t));
        if (!d->x[s] || !d->y[s]) {
            unload(d);
            return kh_errf(err, n, KH_ERR_NOMEM, "sdk_blobs: out of memory");
        }
        for (int64_t i = 0; i < d->n[s]; i++) {
            d->y[s][i] = (int32_t)(i % CLASSES);
            for (int k = 0; k < DIM; k++)
                d->x[s][i * DIM + k] = (float)kh_rng_normal(&r) + (k == d->y[s][i] ? 4.0f : 0.0f);
        }
    }
    *out = d;
    return KH_OK;
}

static const char *last_error(kh_tdata *d) { return d->err; }

static kh_status model(kh_tdata *d, kh_model_spec *m) {
    d->layer = (kh_layer_spec){.kind = KH_LAYER_DENSE, .units = CLASSES, .activation = KH_ACT_SOFTMAX};
    m->name = "sdk_blobs";
    m->input_dtype = KH_F32;
    m->input_rank = 1;
    m->input_shape[0] = DIM;
    m->n_layers = 1;
    m->layers = &d->layer;
    m->loss = KH_LOSS_CATEGORICAL_CROSSENTROPY;
    m->n_classes = CLASSES;
    m->optimizer = (kh_optimizer_spec){.kind = KH_OPT_RMSPROP, .lr = 0.01f, .rho = 0.9f, .epsilon = 1e-7f};
    return KH_OK;
}

static int64_t count(kh_tdata *d, uint32_t split) { return split < 2 ? d->n[split] : 0; }

static kh_status get_batch(kh_tdata *d, uint32_t split, const int64_t *idx, int32_t n, kh_tensor *x, kh_tensor *y) {
    for (int i = 0; i < n; i++) {
        memcpy((float *)x->data + i * DIM, d->x[split] + idx[i] * DIM, DIM * sizeof(float));
        ((int32_t *)y->data)[i] = d->y[split][idx[i]];
    }
    return KH_OK;
}

static kh_status describe(kh_tdata *d, kh_print_fn print, void *ctx) {
    print(ctx, "three generated Gaussian blobs in 4 dimensions");
    return KH_OK;
}

static const kh_task_api api = {.struct_size = sizeof api, .info = get_info, .load = load, .unload = unload,
                                .last_error = last_error, .model = model, .count = count,
                                .get_batch = get_batch, .describe = describe};

static const kh_module_desc desc = {.struct_size = sizeof desc, .abi_major = KH_ABI_MAJOR,
                                    .abi_minor = KH_ABI_MINOR, .kind = KH_MODULE_TASK, .name = "sdk_blobs",
                                    .version = "1.0", .description = "out-of-tree example task", .api = &api};

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) { return &desc; }
