/* image_task.c — the shared body of the image-classification tasks (see image_task.h). Data stay u8 as
 * read (60000 MNIST images: 47 MB; CIFAR-10: 184 MB) and become f32 /255 only for the batch asked for,
 * exactly Keras's x.astype('float32') / 255 (a correctly rounded f32 division per value). */
#define _POSIX_C_SOURCE 200809L
#include "image_task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "khost/kit/status.h"
#include "../common_models/bench_models.h"
#include "../common_models/bench_tasks.h"

static const char *const cifar_names[10] = {"airplane", "automobile", "bird",  "cat",  "deer",
                                            "dog",      "frog",       "horse", "ship", "truck"};
static const char *const mnist_names[10] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
static const char *const fashion_names[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                              "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

struct kh_tdata {
    const img_task_def *def;
    kh_bench_model model; /* the spec model() returns points into it */
    const kh_host_api *host;
    char dataset[32];    /* mnist, fashion-mnist, cifar10 */
    char format[48];     /* what was read: "IDX", "CIFAR-10 binary batches", "JPEG image folders" */
    char path[1024];     /* the data set's folder */
    kh_images split[2];  /* train, validation */
    const char *const *class_names;
    float lut[256];      /* u8 -> f32 /255 */
    char err[1024];
};

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

// --- loading -------------------------------------------------------------------------------------------------
static kh_status load_idx(kh_tdata *d, const kh_load_opts *o, char *err, size_t errlen) {
    static const char *const base[2][2] = {{"train-images-idx3-ubyte", "train-labels-idx1-ubyte"},
                                           {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}};
    snprintf(d->format, sizeof d->format, "IDX");
    d->class_names = strcmp(d->dataset, "fashion-mnist") == 0 ? fashion_names : mnist_names;
    for (int s = 0; s < 2; s++) {
        char ip[1200], lp[1200];
        for (int k = 0; k < 2; k++) {
            char *dst = k ? lp : ip;
            kh_status st = kh_idx_find(d->path, base[s][k], dst, sizeof ip);
            if (st != KH_OK)
                return kh_errf(err, errlen, st, "%s (run: tools/fetch-datasets %s)", dst, d->dataset);
        }
        kh_status st = kh_idx_read(ip, lp, s ? o->limit_val : o->limit_train, &d->split[s], err, errlen);
        if (st != KH_OK) return st;
    }
    return KH_OK;
}

static void host_progress(void *ctx, const char *what, int64_t done, int64_t total) {
    const kh_host_api *host = ctx;
    if (host && host->progress) host->progress(what, done, total);
}

static kh_status load_cifar(kh_tdata *d, const kh_load_opts *o, char *err, size_t errlen) {
    char bin[1100], jpg[1100], probe[1200];
    snprintf(bin, sizeof bin, "%s/cifar-10-batches-bin", d->path);
    snprintf(jpg, sizeof jpg, "%s/cifar-10-jpg", d->path);
    snprintf(probe, sizeof probe, "%s/data_batch_1.bin", bin);
    d->class_names = cifar_names;
    if (is_file(probe)) { /* the canonical binary batches are preferred when both are installed */
        snprintf(d->format, sizeof d->format, "CIFAR-10 binary batches");
        snprintf(d->path, sizeof d->path, "%s", bin);
        for (int s = 0; s < 2; s++) {
            kh_status st = kh_cifar_bin_read_dir(bin, !s, s ? o->limit_val : o->limit_train, &d->split[s], err, errlen);
            if (st != KH_OK) return st;
        }
        return KH_OK;
    }
    snprintf(probe, sizeof probe, "%s/train", jpg);
    if (!is_dir(probe))
        return kh_errf(err, errlen, KH_ERR_IO,
                       "%s/data_batch_1.bin: not found, nor %s (run: tools/fetch-datasets cifar10)", bin, probe);
    snprintf(d->format, sizeof d->format, "JPEG image folders");
    snprintf(d->path, sizeof d->path, "%s", jpg);
    static const char *const split_dir[2] = {"train", "test"};
    for (int s = 0; s < 2; s++) {
        char root[1200];
        snprintf(root, sizeof root, "%s/%s", jpg, split_dir[s]);
        kh_image_folder_opts fo = {.width = d->def->cols, .height = d->def->rows, .channels = d->def->channels,
                                   .limit = s ? o->limit_val : o->limit_train, .progress = host_progress,
                                   .progress_ctx = (void *)d->host};
        kh_status st = kh_image_folder_read(root, &fo, &d->split[s], err, errlen);
        if (st != KH_OK) return st;
        /* class index = sorted folder name; for CIFAR-10 that must be the canonical label order */
        kh_images *im = &d->split[s];
        if (im->n_classes != 10)
            return kh_errf(err, errlen, KH_ERR_DATA, "%s: %d class folders, expected the 10 CIFAR-10 classes", root,
                           im->n_classes);
        for (int k = 0; k < 10; k++)
            if (strcmp(im->class_names[k], cifar_names[k]) != 0)
                return kh_errf(err, errlen, KH_ERR_DATA, "%s: class %d is '%s', expected '%s' (canonical order)", root,
                               k, im->class_names[k], cifar_names[k]);
    }
    return KH_OK;
}

static void img_task_unload(kh_tdata *d) {
    if (!d) return;
    kh_images_free(&d->split[0]);
    kh_images_free(&d->split[1]);
    free(d);
}

/* The module's one task: img_task_module sets it, before the host can call a member. */
static const img_task_def *task;

static kh_status img_task_load(const kh_host_api *host, const kh_load_opts *o, kh_tdata **out, char *err,
                               size_t errlen) {
    const img_task_def *def = task;
    if (!def || !o || !out)
        return kh_errf(err, errlen, KH_ERR_INVALID, "%s: load: bad arguments", def ? def->name : "?");
    if (o->limit_train < 0 || o->limit_val < 0)
        return kh_errf(err, errlen, KH_ERR_INVALID, "%s: negative sample limit", def->name);
    kh_tdata *d = calloc(1, sizeof *d);
    if (!d) return kh_errf(err, errlen, KH_ERR_NOMEM, "%s: out of memory", def->name);
    d->def = def;
    d->host = host;
    for (int i = 0; i < 256; i++) d->lut[i] = (float)i / 255.0f;

    // which data set: the info's, or (MNIST tasks) a drop-in from the registry: [task NAME] dataset = ...
    const char *ds = kh_bench_task_info()->dataset;
    if (host && host->config_get) {
        char section[96];
        snprintf(section, sizeof section, "task %s", def->name);
        const char *v = host->config_get(section, "dataset");
        if (v && *v) ds = v;
    }
    int ok = def->source == IMG_SOURCE_IDX ? (!strcmp(ds, "mnist") || !strcmp(ds, "fashion-mnist"))
                                           : !strcmp(ds, "cifar10");
    if (!ok) {
        kh_status st = kh_errf(err, errlen, KH_ERR_INVALID, "%s: data set '%s' is not supported (%s)", def->name, ds,
                               def->source == IMG_SOURCE_IDX ? "mnist or fashion-mnist" : "cifar10");
        free(d);
        return st;
    }
    snprintf(d->dataset, sizeof d->dataset, "%s", ds);
    const char *data_dir = o->data_dir && *o->data_dir ? o->data_dir : ".";
    snprintf(d->path, sizeof d->path, "%s/%s", data_dir, ds);

    kh_status st = def->source == IMG_SOURCE_IDX ? load_idx(d, o, err, errlen) : load_cifar(d, o, err, errlen);
    // every split must have the task's image shape and labels inside its classes
    for (int s = 0; st == KH_OK && s < 2; s++) {
        const kh_images *im = &d->split[s];
        if (im->rows != def->rows || im->cols != def->cols || im->channels != def->channels)
            st = kh_errf(err, errlen, KH_ERR_DATA, "%s: %s images are %dx%dx%d, %s needs %dx%dx%d", d->path,
                         s ? "validation" : "train", im->rows, im->cols, im->channels, def->name, def->rows, def->cols,
                         def->channels);
        else if (im->n_classes > def->classes)
            st = kh_errf(err, errlen, KH_ERR_DATA, "%s: %s labels reach %d, %s has %d classes", d->path,
                         s ? "validation" : "train", im->n_classes - 1, def->name, def->classes);
        else if (im->n == 0)
            st = kh_errf(err, errlen, KH_ERR_DATA, "%s: no %s samples", d->path, s ? "validation" : "train");
    }
    if (st != KH_OK) {
        img_task_unload(d);
        return st;
    }
    *out = d;
    return KH_OK;
}

static const char *img_task_last_error(kh_tdata *d) { return d ? d->err : "no task data"; }

static kh_status img_task_model(kh_tdata *d, kh_model_spec *m) {
    kh_status st = kh_bench_model_get(d->def->name, 0, &d->model);
    if (st != KH_OK) return st;
    kh_bench_model_fill(&d->model, m);
    return KH_OK;
}

static int64_t img_task_count(kh_tdata *d, uint32_t split) { return d && split <= KH_SPLIT_VAL ? d->split[split].n : 0; }

static kh_status img_task_get_batch(kh_tdata *d, uint32_t split, const int64_t *idx, int32_t n, kh_tensor *x, kh_tensor *y) {
    if (split > KH_SPLIT_VAL)
        return KH_ERRF_TO(d, KH_ERR_INVALID, "%s: get_batch: unknown split %u", d->def->name, split);
    const kh_images *im = &d->split[split];
    size_t stride = kh_images_stride(im);
    if (n < 0 || !idx || !x || !y || !x->data || !y->data)
        return KH_ERRF_TO(d, KH_ERR_INVALID, "%s: get_batch: bad arguments", d->def->name);
    if (x->dtype != KH_F32 || x->rank < 1 || x->dims[0] != n || kh_tensor_numel(x) != (int64_t)n * (int64_t)stride)
        return KH_ERRF_TO(d, KH_ERR_INVALID, "%s: get_batch: x must be f32 with %d x %zu values (dtype %u, rank %d)",
                          d->def->name, n, stride, x->dtype, x->rank);
    if (y->dtype != KH_I32 || kh_tensor_numel(y) != n)
        return KH_ERRF_TO(d, KH_ERR_INVALID, "%s: get_batch: y must be i32 with %d values", d->def->name, n);
    float *xs = x->data;
    int32_t *ys = y->data;
    for (int32_t i = 0; i < n; i++) {
        int64_t k = idx[i];
        if (k < 0 || k >= im->n)
            return KH_ERRF_TO(d, KH_ERR_INVALID, "%s: get_batch: sample %lld out of range 0..%lld", d->def->name,
                              (long long)k, (long long)im->n - 1);
        const uint8_t *src = im->pixels + (size_t)k * stride;
        float *dst = xs + (size_t)i * stride;
        for (size_t j = 0; j < stride; j++) dst[j] = d->lut[src[j]];
        ys[i] = im->labels[k];
    }
    return KH_OK;
}

static kh_status img_task_augment(kh_tdata *d, kh_tensor *x, uint64_t seed) {
    const img_task_def *def = d->def;
    if (!def->augment) return KH_OK;
    if (!x || x->dtype != KH_F32 || x->rank != 4 || x->dims[1] != def->rows || x->dims[2] != def->cols ||
        x->dims[3] != def->channels)
        return KH_ERRF_TO(d, KH_ERR_INVALID, "%s: augment: expected an f32 NHWC batch of %dx%dx%d images", def->name,
                          def->rows, def->cols, def->channels);
    return kh_augment_shift_flip(x->data, x->dims[0], def->rows, def->cols, def->channels, def->augment, seed, d->err,
                                 sizeof d->err);
}

// --- describe ------------------------------------------------------------------------------------------------
static void print_counts(kh_tdata *d, int s, kh_print_fn print, void *ctx) {
    const kh_images *im = &d->split[s];
    int64_t count[256] = {0};
    for (int64_t i = 0; i < im->n; i++)
        if (im->labels[i] >= 0 && im->labels[i] < 256) count[im->labels[i]]++;
    int64_t lo = -1, hi = 0;
    char line[1024];
    int at = snprintf(line, sizeof line, "  %s per class:", s ? "validation" : "train");
    for (int k = 0; k < d->def->classes && k < 256; k++) {
        if (at > 0 && (size_t)at < sizeof line)
            at += snprintf(line + at, sizeof line - (size_t)at, " %s=%lld", d->class_names[k], (long long)count[k]);
        if (lo < 0 || count[k] < lo) lo = count[k];
        if (count[k] > hi) hi = count[k];
    }
    print(ctx, line);
    snprintf(line, sizeof line, "  %s balance: smallest class %lld, largest %lld (ratio %.3f)",
             s ? "validation" : "train", (long long)lo, (long long)hi, hi ? (double)lo / (double)hi : 0.0);
    print(ctx, line);
}

static kh_status img_task_describe(kh_tdata *d, kh_print_fn print, void *ctx) {
    const img_task_def *def = d->def;
    const kh_task_info *in = kh_bench_task_info();
    char line[1400];
    snprintf(line, sizeof line, "task %s: data set %s (%s) at %s", def->name, d->dataset, d->format, d->path);
    print(ctx, line);
    snprintf(line, sizeof line, "  samples: train %lld, validation %lld", (long long)d->split[0].n,
             (long long)d->split[1].n);
    print(ctx, line);
    if (def->flat)
        snprintf(line, sizeof line, "  input: (%d) f32 NC, %dx%dx%d pixels flattened, /255",
                 def->rows * def->cols * def->channels, def->rows, def->cols, def->channels);
    else
        snprintf(line, sizeof line, "  input: (%d, %d, %d) f32 NHWC, pixels /255", def->rows, def->cols, def->channels);
    print(ctx, line);
    snprintf(line, sizeof line, "  classes: %d, labels i32 class index", def->classes);
    print(ctx, line);
    print_counts(d, 0, print, ctx);
    print_counts(d, 1, print, ctx);
    int64_t per_epoch = in->train_samples_per_epoch > 0 && in->train_samples_per_epoch < d->split[0].n
                            ? in->train_samples_per_epoch
                            : d->split[0].n;
    snprintf(line, sizeof line, "  training: %d epochs, batch %d, %lld samples (%lld steps) per epoch", in->epochs,
             in->batch_size, (long long)per_epoch, (long long)((per_epoch + in->batch_size - 1) / in->batch_size));
    print(ctx, line);
    if (def->augment) {
        snprintf(line, sizeof line,
                 "  augmentation: shifts up to %.0f%% of height/width (integer, nearest fill)%s, seeded per batch",
                 100.0 * def->augment->height_shift_range, def->augment->horizontal_flip ? ", horizontal flips" : "");
        print(ctx, line);
    }
    return KH_OK;
}

const kh_module_desc *img_task_module(const img_task_def *def) {
    const kh_task_api members = {.load = img_task_load, .unload = img_task_unload, .last_error = img_task_last_error,
                                 .model = img_task_model, .count = img_task_count, .get_batch = img_task_get_batch,
                                 .augment = def->augment ? img_task_augment : NULL, .describe = img_task_describe};
    task = def;
    return kh_bench_task_module(def->name, def->description, &members);
}
