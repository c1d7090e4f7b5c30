/* examples/sdk_idx_task/sdk_idx.c — a third-party task that reads IDX files (MNIST's format, plain or gzip)
 * with the helper library's reader, built out of tree against the installed SDK (docs/WRITING_MODULES.md).
 * Data: <data_dir>/<dataset>/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz], where dataset is "mnist"
 * unless the registry says otherwise ([task sdk_idx] dataset = fashion-mnist). Model: Flatten -> Dense(128,
 * relu) -> Dense(classes, softmax), RMSprop with Keras's defaults (zero fields mean "Keras default"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <khost/data_image.h>
#include <khost/khost.h>
#include <khost/kit.h>

struct kh_tdata {
    kh_images split[2];
    kh_layer_spec layers[3];
    char err[512];
};

static const kh_task_info info = {.struct_size = sizeof info, .dataset = "mnist", .epochs = 2, .batch_size = 64,
                                  .has_validation = 1, .metric = "val_acc"};
static const kh_task_info *get_info(void) { return &info; }

static void unload(kh_tdata *d) {
    if (!d) return;
    kh_images_free(&d->split[0]);
    kh_images_free(&d->split[1]);
    free(d);
}

static kh_status read_split(const char *dir, const char *prefix, int64_t limit, kh_images *out, char *err, size_t n) {
    char images[4096], labels[4096], name[64];
    snprintf(name, sizeof name, "%s-images-idx3-ubyte", prefix);
    kh_status st = kh_idx_find(dir, name, images, sizeof images);
    if (st != KH_OK) return kh_errf(err, n, st, "%s", images); /* kh_idx_find wrote "<path>: not found" */
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", prefix);
    if ((st = kh_idx_find(dir, name, labels, sizeof labels)) != KH_OK) return kh_errf(err, n, st, "%s", labels);
    return kh_idx_read(images, labels, limit, out, err, n);
}

static kh_status load(const kh_host_api *h, const kh_load_opts *o, kh_tdata **out, char *err, size_t n) {
    *out = NULL;
    const char *dataset = h->config_get("task sdk_idx", "dataset");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", o->data_dir, dataset ? dataset : info.dataset);
    kh_tdata *d = calloc(1, sizeof *d);
    if (!d) return kh_errf(err, n, KH_ERR_NOMEM, "sdk_idx: out of memory");
    kh_status st = read_split(dir, "train", o->limit_train, &d->split[KH_SPLIT_TRAIN], err, n);
    if (st == KH_OK) st = read_split(dir, "t10k", o->limit_val, &d->split[KH_SPLIT_VAL], err, n);
    if (st != KH_OK) {
        unload(d);
        return st;
    }
    *out = d;
    return KH_OK;
}

static const char *last_error(kh_tdata *d) { return d->err; }

static kh_status model(kh_tdata *d, kh_model_spec *m) {
    const kh_images *im = &d->split[KH_SPLIT_TRAIN];
    int32_t classes = im->n_classes > d->split[1].n_classes ? im->n_classes : d->split[1].n_classes;
    d->layers[0] = (kh_layer_spec){.kind = KH_LAYER_FLATTEN};
    d->layers[1] = (kh_layer_spec){.kind = KH_LAYER_DENSE, .units = 128, .activation = KH_ACT_RELU};
    d->layers[2] = (kh_layer_spec){.kind = KH_LAYER_DENSE, .units = classes, .activation = KH_ACT_SOFTMAX};
    m->name = "sdk_idx";
    m->input_dtype = KH_F32;
    m->input_rank = 3;
    m->input_shape[0] = im->rows, m->input_shape[1] = im->cols, m->input_shape[2] = 1;
    m->n_layers = 3;
    m->layers = d->layers;
    m->loss = KH_LOSS_CATEGORICAL_CROSSENTROPY;
    m->n_classes = classes;
    m->optimizer = (kh_optimizer_spec){.kind = KH_OPT_RMSPROP, .lr = 0.001f, .rho = 0.9f, .epsilon = 1e-7f};
    return KH_OK;
}

static int64_t count(kh_tdata *d, uint32_t split) { return split < 2 ? d->split[split].n : 0; }

static kh_status get_batch(kh_tdata *d, uint32_t split, const int64_t *idx, int32_t n, kh_tensor *x, kh_tensor *y) {
    const kh_images *im = &d->split[split];
    size_t stride = kh_images_stride(im);
    float *xf = x->data;
    for (int32_t i = 0; i < n; i++) {
        if (idx[i] < 0 || idx[i] >= im->n) {
            snprintf(d->err, sizeof d->err, "sdk_idx: sample %lld out of range", (long long)idx[i]);
            return KH_ERR_INVALID;
        }
        const uint8_t *px = im->pixels + (size_t)idx[i] * stride;
        for (size_t k = 0; k < stride; k++) xf[(size_t)i * stride + k] = px[k] / 255.0f;
        ((int32_t *)y->data)[i] = im->labels[idx[i]];
    }
    return KH_OK;
}

static kh_status describe(kh_tdata *d, kh_print_fn print, void *ctx) {
    char line[160];
    snprintf(line, sizeof line, "IDX images %dx%d, %lld train / %lld validation, %d classes", d->split[0].rows,
             d->split[0].cols, (long long)d->split[0].n, (long long)d->split[1].n, d->split[0].n_classes);
    print(ctx, line);
    return KH_OK;
}

static const kh_task_api api = {.struct_size = sizeof api, .info = get_info, .load = load, .unload = unload,
                                .last_error = last_error, .model = model, .count = count,
                                .get_batch = get_batch, .describe = describe};

static const kh_module_desc desc = {.struct_size = sizeof desc, .abi_major = KH_ABI_MAJOR,
                                    .abi_minor = KH_ABI_MINOR, .kind = KH_MODULE_TASK, .name = "sdk_idx",
                                    .version = "1.0", .description = "out-of-tree example task: IDX images",
                                    .api = &api};

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) { return &desc; }
