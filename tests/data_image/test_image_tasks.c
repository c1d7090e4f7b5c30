/* test_image_tasks.c — the mnist_mlp, mnist_cnn and cifar10_cnn task modules, loaded with dlopen through
 * their one exported symbol and driven by a stand-in host: the published figures and hyper-parameters,
 * the model specs (checked by kh_spec_infer against Keras's parameter counts), loading generated data
 * sets (IDX gzip, CIFAR binary, a CIFAR JPEG/PNG folder), limits, batches (/255 values, labels), the
 * augmentation hook, describe(), the fashion-mnist drop-in and the missing-data message.
 * With --real it loads the installed data sets instead ($KHOST_DATA, else $KHOST_SOURCE/data) and prints
 * every task's describe() output (skips with 77 when nothing is installed). */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <png.h>
#include <zlib.h>

#include "khost/kit/data_image.h"
#include "khost/khost.h"
#include "khost/kit/spec.h"
#include "testutil.h"

// --- a stand-in host ------------------------------------------------------------------------------------------
static const char *cfg_dataset; /* [task *] dataset */
static int64_t progress_calls;

static void h_log(kh_log_level level, const char *module, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[%d] %s: ", (int)level, module);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
static void *h_alloc(size_t n) { return aligned_alloc(64, (n + 63) / 64 * 64); }
static void h_free(void *p) { free(p); }
static const char *h_config(const char *section, const char *key) {
    return strncmp(section, "task ", 5) == 0 && strcmp(key, "dataset") == 0 ? cfg_dataset : NULL;
}
static void h_progress(const char *what, int64_t done, int64_t total) { progress_calls++; }
static const kh_host_api host = {.struct_size = sizeof(kh_host_api), .abi_major = KH_ABI_MAJOR, .abi_minor = KH_ABI_MINOR,
                                 .host_version = "test", .log = h_log, .alloc = h_alloc, .free = h_free,
                                 .config_get = h_config, .progress = h_progress};

static char described[16384];
static void collect(void *ctx, const char *line) {
    (void)ctx;
    size_t n = strlen(described);
    snprintf(described + n, sizeof described - n, "%s\n", line);
}

static const kh_task_api *open_task(const char *name) {
    const char *build = getenv("KHOST_BUILD");
    char path[1024];
    snprintf(path, sizeof path, "%s/tasks/%s.so", build && *build ? build : ".", name);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL, "dlopen %s: %s", path, dlerror());
    if (!h) return NULL;
    kh_entry_fn entry;
    *(void **)&entry = dlsym(h, KH_ENTRY_NAME);
    CHECK(entry != NULL, "%s: no %s", path, KH_ENTRY_NAME);
    if (!entry) return NULL;
    const kh_module_desc *d = entry(&host);
    CHECK(d && d->struct_size >= KH_MODULE_DESC_MIN_SIZE && d->abi_major == KH_ABI_MAJOR && d->kind == KH_MODULE_TASK &&
              strcmp(d->name, name) == 0,
          "%s: descriptor", name);
    return d ? d->api : NULL;
}

// --- generated data sets ----------------------------------------------------------------------------------------
static void put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16), p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

/* pixel j of sample i of a split: (i * 31 + j + split * 7) & 255; label (i * 3 + split) % 10 */
static unsigned char gen_pix(int split, int64_t i, int64_t j) { return (unsigned char)((i * 31 + j + split * 7) & 255); }
static int gen_label(int split, int64_t i) { return (int)((i * 3 + split) % 10); }

static void write_gz(const char *path, const unsigned char *b, size_t n) {
    gzFile f = gzopen(path, "wb");
    if (!f || gzwrite(f, b, (unsigned)n) != (int)n || gzclose(f) != Z_OK) {
        fprintf(stderr, "test setup: cannot write %s\n", path);
        exit(2);
    }
}

static void make_mnist(const char *dir, uint32_t ntrain, uint32_t ntest) {
    mkdir(dir, 0755);
    const char *pre[2] = {"train", "t10k"};
    uint32_t n[2] = {ntrain, ntest};
    for (int s = 0; s < 2; s++) {
        size_t body = (size_t)n[s] * 784;
        unsigned char *b = malloc(16 + body);
        put_be32(b, 0x803), put_be32(b + 4, n[s]), put_be32(b + 8, 28), put_be32(b + 12, 28);
        for (size_t k = 0; k < body; k++) b[16 + k] = gen_pix(s, (int64_t)(k / 784), (int64_t)(k % 784));
        char p[2048];
        snprintf(p, sizeof p, "%s/%s-images-idx3-ubyte.gz", dir, pre[s]);
        write_gz(p, b, 16 + body);
        put_be32(b, 0x801), put_be32(b + 4, n[s]);
        for (uint32_t i = 0; i < n[s]; i++) b[8 + i] = (unsigned char)gen_label(s, i);
        snprintf(p, sizeof p, "%s/%s-labels-idx1-ubyte.gz", dir, pre[s]);
        write_gz(p, b, 8 + n[s]);
        free(b);
    }
}

static void make_cifar_bin(const char *dir, int per_file) {
    mkdir(dir, 0755);
    unsigned char *rec = malloc((size_t)per_file * KH_CIFAR_RECORD);
    for (int f = 0; f < 6; f++) {
        int s = f == 5;
        for (int r = 0; r < per_file; r++) {
            int64_t i = s ? r : (int64_t)f * per_file + r;
            unsigned char *p = rec + (size_t)r * KH_CIFAR_RECORD;
            p[0] = (unsigned char)gen_label(s, i);
            // CHW planes so that the HWC output is gen_pix(s, i, hwc index)
            for (int y = 0; y < 32; y++)
                for (int x = 0; x < 32; x++)
                    for (int c = 0; c < 3; c++) p[1 + c * 1024 + y * 32 + x] = gen_pix(s, i, (y * 32 + x) * 3 + c);
        }
        char path[2048];
        if (s) snprintf(path, sizeof path, "%s/test_batch.bin", dir);
        else snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir, f + 1);
        kh_test_write_file(path, rec, (size_t)per_file * KH_CIFAR_RECORD);
    }
    free(rec);
}

static void write_png_rgb(const char *path, unsigned char v) {
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION, img.width = 32, img.height = 32, img.format = PNG_FORMAT_RGB;
    unsigned char buf[32 * 32 * 3];
    memset(buf, v, sizeof buf);
    if (!png_image_write_to_file(&img, path, 0, buf, 0, NULL)) {
        fprintf(stderr, "test setup: cannot write %s\n", path);
        exit(2);
    }
}

static const char *const cifar_classes[10] = {"airplane", "automobile", "bird", "cat", "deer",
                                              "dog",      "frog",       "horse", "ship", "truck"};

/* cifar-10-jpg/{train,test}/<class>/ with `per` PNG images each (the folder reader takes PNG too). */
static void make_cifar_folder(const char *dir, int per, const char *wrong_class) {
    char p[2048];
    mkdir(dir, 0755);
    const char *split[2] = {"train", "test"};
    for (int s = 0; s < 2; s++) {
        snprintf(p, sizeof p, "%s/%s", dir, split[s]);
        mkdir(p, 0755);
        for (int k = 0; k < 10; k++) {
            const char *cls = (k == 9 && wrong_class) ? wrong_class : cifar_classes[k];
            snprintf(p, sizeof p, "%s/%s/%s", dir, split[s], cls);
            mkdir(p, 0755);
            for (int j = 0; j < per; j++) {
                snprintf(p, sizeof p, "%s/%s/%s/%04d.png", dir, split[s], cls, j);
                write_png_rgb(p, (unsigned char)(k * 20 + j));
            }
        }
    }
}

// --- checks -------------------------------------------------------------------------------------------------------
static void check_info(const kh_task_api *t, const char *dataset, int epochs, int batch, int64_t per_epoch, double target) {
    const kh_task_info *in = t->info();
    CHECK(in && in->struct_size == sizeof(kh_task_info), "info");
    if (!in) return;
    CHECK(!strcmp(in->dataset, dataset) && in->epochs == epochs && in->batch_size == batch &&
              in->train_samples_per_epoch == per_epoch && in->has_validation == 1 && !strcmp(in->metric, "val_acc") &&
              in->target == target && in->target_is_max == 0,
          "%s info: %d epochs, batch %d, %lld per epoch, target %g", dataset, in->epochs, in->batch_size,
          (long long)in->train_samples_per_epoch, in->target);
    CHECK(in->n_published == 12, "12 published cells, got %d", in->n_published);
    int blank = 0;
    for (int i = 0; i < in->n_published; i++) {
        const kh_published *p = &in->published[i];
        CHECK(p->backend && p->device, "published %d names", i);
        if (p->metric < 0) {
            blank++;
            CHECK(!strcmp(p->backend, "theano") && !strcmp(p->device, "K80") && p->s_per_epoch < 0, "blank is theano/K80");
        } else {
            CHECK(p->metric > 0.7 && p->metric < 1 && p->s_per_epoch > 1, "published %s/%s: %g %g", p->backend, p->device,
                  p->metric, p->s_per_epoch);
        }
    }
    CHECK(blank == 1, "one blank cell (theano K80), got %d", blank);
}

static void check_model(const kh_task_api *t, kh_tdata *d, int64_t want_params, uint32_t opt, float lr, float rho,
                        float decay, int rank) {
    kh_model_spec m;
    memset(&m, 0, sizeof m);
    m.struct_size = sizeof m;
    CHECK(t->model(d, &m) == KH_OK, "model");
    CHECK(m.input_dtype == KH_F32 && m.input_rank == rank && m.loss == KH_LOSS_CATEGORICAL_CROSSENTROPY &&
              m.n_classes == 10,
          "model input/loss");
    CHECK(m.optimizer.kind == opt && m.optimizer.lr == lr && m.optimizer.rho == rho && m.optimizer.epsilon == 1e-7f &&
              m.optimizer.decay == decay,
          "optimizer %u lr %g rho %g eps %g decay %g", m.optimizer.kind, m.optimizer.lr, m.optimizer.rho,
          m.optimizer.epsilon, m.optimizer.decay);
    kh_model_shapes sh;
    char err[512] = "";
    kh_status st = kh_spec_infer(&m, &sh, err, sizeof err);
    CHECK(st == KH_OK, "spec_infer: %s", err);
    if (st == KH_OK) {
        CHECK(sh.total_params == want_params, "%s: %lld parameters, Keras has %lld", m.name, (long long)sh.total_params,
              (long long)want_params);
        kh_model_shapes_free(&sh);
    }
}

/* Fetch samples idx of a split and compare with the generator (values /255 as f32 division). */
static void check_batch(const kh_task_api *t, kh_tdata *d, uint32_t split, int64_t stride, int rank, const int64_t *idx,
                        int n, int generated) {
    float *x = malloc(sizeof(float) * (size_t)(n * stride));
    int32_t *y = malloc(sizeof(int32_t) * (size_t)n);
    kh_tensor tx = {.dtype = KH_F32, .layout = rank == 2 ? KH_LAYOUT_NC : KH_LAYOUT_NHWC, .rank = rank, .data = x};
    tx.dims[0] = n;
    if (rank == 2) tx.dims[1] = stride;
    else tx.dims[1] = tx.dims[2] = stride == 784 ? 28 : 32, tx.dims[3] = stride == 784 ? 1 : 3;
    kh_tensor ty = {.dtype = KH_I32, .layout = KH_LAYOUT_NC, .rank = 1, .dims = {n}, .data = y};
    kh_status st = t->get_batch(d, split, idx, n, &tx, &ty);
    CHECK(st == KH_OK, "get_batch: %s", t->last_error(d));
    if (st == KH_OK && generated) {
        int bad = 0;
        for (int i = 0; i < n; i++) {
            bad += y[i] != gen_label((int)split, idx[i]);
            for (int64_t j = 0; j < stride; j++) bad += x[i * stride + j] != (float)gen_pix((int)split, idx[i], j) / 255.0f;
        }
        CHECK(bad == 0, "batch values: %d wrong", bad);
    }
    for (int i = 0; i < n && st == KH_OK; i++) CHECK(y[i] >= 0 && y[i] < 10, "label range");
    int64_t bad_idx[1] = {t->count(d, split)};
    tx.dims[0] = 1, ty.dims[0] = 1;
    CHECK(t->get_batch(d, split, bad_idx, 1, &tx, &ty) == KH_ERR_INVALID && strstr(t->last_error(d), "out of range"),
          "index out of range refused: %s", t->last_error(d));
    tx.dtype = KH_U8;
    CHECK(t->get_batch(d, split, idx, n, &tx, &ty) == KH_ERR_INVALID, "u8 x refused");
    free(x);
    free(y);
}

static void test_mnist_tasks(const char *data) {
    char dir[1024], err[1024];
    snprintf(dir, sizeof dir, "%s/mnist", data);
    make_mnist(dir, 50, 20);
    const char *names[2] = {"mnist_mlp", "mnist_cnn"};
    for (int k = 0; k < 2; k++) {
        const kh_task_api *t = open_task(names[k]);
        if (!t) continue;
        if (k == 0) check_info(t, "mnist", 20, 128, 0, 0.98);
        else check_info(t, "mnist", 12, 128, 0, 0.988);
        kh_load_opts o = {.struct_size = sizeof o, .data_dir = data, .limit_train = 30};
        kh_tdata *d = NULL;
        kh_status st = t->load(&host, &o, &d, err, sizeof err);
        CHECK(st == KH_OK, "%s load: %s", names[k], err);
        if (st != KH_OK) continue;
        CHECK(t->count(d, KH_SPLIT_TRAIN) == 30 && t->count(d, KH_SPLIT_VAL) == 20, "%s counts with limit", names[k]);
        if (k == 0) check_model(t, d, 669706, KH_OPT_RMSPROP, 0.001f, 0.9f, 0.0f, 1);
        else check_model(t, d, 1199882, KH_OPT_ADADELTA, 1.0f, 0.95f, 0.0f, 3);
        int64_t idx[4] = {29, 0, 7, 7};
        check_batch(t, d, KH_SPLIT_TRAIN, 784, k == 0 ? 2 : 4, idx, 4, 1);
        check_batch(t, d, KH_SPLIT_VAL, 784, k == 0 ? 2 : 4, idx + 1, 3, 1);
        described[0] = 0;
        CHECK(t->describe(d, collect, NULL) == KH_OK, "describe");
        CHECK(strstr(described, "train 30, validation 20") && strstr(described, dir) &&
                  strstr(described, k == 0 ? "(784) f32 NC" : "(28, 28, 1) f32 NHWC") && strstr(described, "per class"),
              "describe output:\n%s", described);
        if (k == 0) printf("%s", described);
        CHECK(t->augment == NULL, "no augmentation for MNIST");
        t->unload(d);

        // the drop-in: [task mnist_*] dataset = fashion-mnist reads <data>/fashion-mnist
        cfg_dataset = "fashion-mnist";
        char fdir[1100];
        snprintf(fdir, sizeof fdir, "%s/fashion-mnist", data);
        if (k == 0) {
            st = t->load(&host, &o, &d, err, sizeof err);
            CHECK(st == KH_ERR_IO && strstr(err, "fashion-mnist/train-images-idx3-ubyte.gz") &&
                      strstr(err, "run: tools/fetch-datasets fashion-mnist"),
                  "fashion-mnist missing: %s", err);
            make_mnist(fdir, 12, 10);
        }
        st = t->load(&host, &o, &d, err, sizeof err);
        CHECK(st == KH_OK && t->count(d, KH_SPLIT_TRAIN) == 12, "fashion-mnist load: %s", err);
        if (st == KH_OK) {
            described[0] = 0;
            t->describe(d, collect, NULL);
            CHECK(strstr(described, "data set fashion-mnist") && strstr(described, "Ankle boot"), "fashion describe:\n%s",
                  described);
            t->unload(d);
        }
        cfg_dataset = "cifar10";
        st = t->load(&host, &o, &d, err, sizeof err);
        CHECK(st == KH_ERR_INVALID && strstr(err, "cifar10"), "wrong data set refused: %s", err);
        cfg_dataset = NULL;

        // missing data: KH_ERR_IO naming the file and the command
        kh_load_opts none = {.struct_size = sizeof none, .data_dir = "/nonexistent/khost-data"};
        st = t->load(&host, &none, &d, err, sizeof err);
        CHECK(st == KH_ERR_IO && strstr(err, "/nonexistent/khost-data/mnist/train-images-idx3-ubyte") &&
                  strstr(err, "run: tools/fetch-datasets mnist"),
              "missing data message: %s", err);
    }
}

static void test_cifar_task(const char *data) {
    char err[1024], dir[1024];
    const kh_task_api *t = open_task("cifar10_cnn");
    if (!t) return;
    check_info(t, "cifar10", 20, 32, 49984, 0.70);
    kh_load_opts o = {.struct_size = sizeof o, .data_dir = data};
    kh_tdata *d = NULL;
    kh_status st = t->load(&host, &o, &d, err, sizeof err);
    CHECK(st == KH_ERR_IO && strstr(err, "cifar-10-batches-bin/data_batch_1.bin") && strstr(err, "cifar-10-jpg/train") &&
              strstr(err, "run: tools/fetch-datasets cifar10"),
          "cifar missing: %s", err);

    // an image-folder tree (the mirror's form)
    snprintf(dir, sizeof dir, "%s/cifar10", data);
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/cifar10/cifar-10-jpg", data);
    make_cifar_folder(dir, 3, NULL);
    o.limit_train = 15;
    progress_calls = 0;
    st = t->load(&host, &o, &d, err, sizeof err);
    CHECK(st == KH_OK, "cifar folder load: %s", err);
    if (st == KH_OK) {
        CHECK(t->count(d, 0) == 15 && t->count(d, 1) == 30, "folder counts %lld %lld", (long long)t->count(d, 0),
              (long long)t->count(d, 1));
        CHECK(progress_calls > 0, "progress reported to the host");
        check_model(t, d, 1250858, KH_OPT_RMSPROP, 1e-4f, 0.9f, 1e-6f, 3);
        described[0] = 0;
        t->describe(d, collect, NULL);
        CHECK(strstr(described, "JPEG image folders") && strstr(described, "airplane=2") && strstr(described, "truck=1") &&
                  strstr(described, "augmentation"),
              "cifar folder describe (limit round-robin):\n%s", described);
        int64_t idx[2] = {0, 29};
        check_batch(t, d, KH_SPLIT_VAL, 3072, 4, idx, 2, 0);
        t->unload(d);
    }
    // the canonical binary batches win when both are present
    snprintf(dir, sizeof dir, "%s/cifar10/cifar-10-batches-bin", data);
    make_cifar_bin(dir, 4);
    o.limit_train = 0;
    st = t->load(&host, &o, &d, err, sizeof err);
    CHECK(st == KH_OK, "cifar bin load: %s", err);
    if (st != KH_OK) return;
    CHECK(t->count(d, 0) == 20 && t->count(d, 1) == 4, "bin counts");
    described[0] = 0;
    t->describe(d, collect, NULL);
    CHECK(strstr(described, "binary batches"), "binary preferred:\n%s", described);
    printf("%s", described);
    int64_t idx[3] = {19, 4, 0};
    check_batch(t, d, KH_SPLIT_TRAIN, 3072, 4, idx, 3, 1);

    // the augmentation hook: deterministic per seed, changes the batch, refuses a wrong shape
    enum { N = 16 };
    float *a = malloc(sizeof(float) * N * 3072), *b = malloc(sizeof(float) * N * 3072), *c = malloc(sizeof(float) * N * 3072);
    for (int i = 0; i < N * 3072; i++) a[i] = (float)(i % 977);
    memcpy(b, a, sizeof(float) * N * 3072);
    memcpy(c, a, sizeof(float) * N * 3072);
    kh_tensor ta = {.dtype = KH_F32, .layout = KH_LAYOUT_NHWC, .rank = 4, .dims = {N, 32, 32, 3}, .data = a};
    kh_tensor tb = ta, tc = ta;
    tb.data = b, tc.data = c;
    CHECK(t->augment(d, &ta, 5) == KH_OK && t->augment(d, &tb, 5) == KH_OK, "augment");
    CHECK(memcmp(a, b, sizeof(float) * N * 3072) == 0, "augment deterministic");
    CHECK(memcmp(a, c, sizeof(float) * N * 3072) != 0, "augment changes the batch");
    tc.dims[1] = 31;
    CHECK(t->augment(d, &tc, 5) == KH_ERR_INVALID, "augment refuses a wrong shape");
    free(a), free(b), free(c);
    t->unload(d);
}

static void test_bad_classes(const char *data) {
    // a folder tree whose sorted classes are not CIFAR-10's: refused with the folder named
    char err[1024], dir[1100];
    const kh_task_api *t = open_task("cifar10_cnn");
    if (!t) return;
    snprintf(dir, sizeof dir, "%s/cifar10", data);
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/cifar10/cifar-10-jpg", data);
    make_cifar_folder(dir, 1, "zebra");
    kh_load_opts o = {.struct_size = sizeof o, .data_dir = data};
    kh_tdata *d = NULL;
    kh_status st = t->load(&host, &o, &d, err, sizeof err);
    CHECK(st == KH_ERR_DATA && strstr(err, "cifar-10-jpg/train") && strstr(err, "zebra"), "wrong classes: %s", err);
}

// --- real data: print what each task will train on -----------------------------------------------------------
static void print_line(void *ctx, const char *line) { printf("%s\n", line); }

static int run_real(void) {
    const char *data = getenv("KHOST_DATA");
    char def[1024];
    if (!data || !*data) {
        const char *src = getenv("KHOST_SOURCE");
        snprintf(def, sizeof def, "%s/data", src && *src ? src : ".");
        data = def;
    }
    const char *names[3] = {"mnist_mlp", "mnist_cnn", "cifar10_cnn"};
    int any = 0;
    for (int k = 0; k < 3; k++) {
        const kh_task_api *t = open_task(names[k]);
        if (!t) continue;
        kh_load_opts o = {.struct_size = sizeof o, .data_dir = data};
        kh_tdata *d = NULL;
        char err[1024];
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        kh_status st = t->load(&host, &o, &d, err, sizeof err);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (st == KH_ERR_IO) {
            printf("%s: %s\n", names[k], err);
            continue;
        }
        CHECK(st == KH_OK, "%s: %s", names[k], err);
        if (st != KH_OK) continue;
        any = 1;
        printf("--- describe --task %s (loaded in %.2f s)\n", names[k],
               (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
        CHECK(t->describe(d, print_line, NULL) == KH_OK, "describe");
        int64_t want_train = k < 2 ? 60000 : 50000, want_val = 10000;
        CHECK(t->count(d, 0) == want_train && t->count(d, 1) == want_val, "%s counts %lld/%lld", names[k],
              (long long)t->count(d, 0), (long long)t->count(d, 1));
        t->unload(d);
    }
    if (!any) kh_test_skip("no image data sets installed; run: tools/fetch-datasets mnist cifar10");
    return kh_test_finish("test_image_tasks --real");
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--real") == 0) return run_real();
    const char *data = kh_test_tmpdir("tasks");
    test_mnist_tasks(data);
    test_cifar_task(data);
    const char *data2 = kh_test_tmpdir("tasks2");
    test_bad_classes(data2);
    char cmd[1200], out[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", data, data2);
    kh_test_run(cmd, out, sizeof out);
    return kh_test_finish("test_image_tasks");
}
