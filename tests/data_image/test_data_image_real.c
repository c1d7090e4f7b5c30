/* test_data_image_real.c — the image readers on the real data sets, when tools/fetch-datasets installed
 * them: MNIST 60000/10000 with 10 classes, CIFAR-10 50000/10000 with 5000/1000 per class in the canonical
 * class order. The data directory is $KHOST_DATA, else $KHOST_SOURCE/data (the registry's default); with
 * neither data set there the test exits 77 (skipped, visibly). Prints load times. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "khost/kit/data_image.h"
#include "testutil.h"

static char err[1024];

static void check_balance(const kh_images *im, int64_t n, int32_t classes, int64_t per_class, const char *what) {
    CHECK(im->n == n, "%s: %lld samples, expected %lld", what, (long long)im->n, (long long)n);
    CHECK(im->n_classes == classes, "%s: %d classes, expected %d", what, im->n_classes, classes);
    int64_t count[256] = {0};
    int bad = 0;
    for (int64_t i = 0; i < im->n; i++) {
        if (im->labels[i] < 0 || im->labels[i] >= 256) bad++;
        else count[im->labels[i]]++;
    }
    CHECK(bad == 0, "%s: labels out of range", what);
    if (per_class > 0)
        for (int k = 0; k < classes; k++)
            CHECK(count[k] == per_class, "%s: class %d has %lld samples, expected %lld", what, k, (long long)count[k],
                  (long long)per_class);
    printf("%s: %lld samples, %d classes", what, (long long)im->n, im->n_classes);
    for (int k = 0; k < classes && k < 10; k++) printf(" %lld", (long long)count[k]);
    printf("\n");
}

static int test_idx_set(const char *data, const char *name) {
    char dir[1100], ip[1300], lp[1300];
    snprintf(dir, sizeof dir, "%s/%s", data, name);
    if (kh_idx_find(dir, "train-images-idx3-ubyte.gz", ip, sizeof ip) != KH_OK) {
        printf("%s: not installed (%s)\n", name, ip);
        return 0;
    }
    const char *split[2] = {"train", "t10k"};
    const int64_t want[2] = {60000, 10000};
    for (int s = 0; s < 2; s++) {
        char base[64];
        snprintf(base, sizeof base, "%s-images-idx3-ubyte.gz", split[s]);
        CHECK(kh_idx_find(dir, base, ip, sizeof ip) == KH_OK, "%s", ip);
        snprintf(base, sizeof base, "%s-labels-idx1-ubyte.gz", split[s]);
        CHECK(kh_idx_find(dir, base, lp, sizeof lp) == KH_OK, "%s", lp);
        kh_images im = {0};
        double t0 = kh_test_now();
        kh_status st = kh_idx_read(ip, lp, 0, &im, err, sizeof err);
        double t1 = kh_test_now();
        CHECK(st == KH_OK, "%s", err);
        if (st != KH_OK) continue;
        char what[64];
        snprintf(what, sizeof what, "%s %s", name, split[s]);
        CHECK(im.rows == 28 && im.cols == 28 && im.channels == 1, "%s: 28x28x1", what);
        check_balance(&im, want[s], 10, 0, what);
        printf("%s: read in %.3f s\n", what, t1 - t0);
        kh_images_free(&im);
    }
    return 1;
}

static void progress(void *ctx, const char *what, int64_t done, int64_t total) {
    (void)what;
    int64_t *last = ctx;
    CHECK(done >= *last && done <= total, "progress %lld after %lld of %lld", (long long)done, (long long)*last,
          (long long)total);
    *last = done;
}

static int test_cifar(const char *data) {
    static const char *canonical[10] = {"airplane", "automobile", "bird", "cat", "deer",
                                        "dog",      "frog",       "horse", "ship", "truck"};
    char bin[1100], jpg[1100];
    snprintf(bin, sizeof bin, "%s/cifar10/cifar-10-batches-bin", data);
    snprintf(jpg, sizeof jpg, "%s/cifar10/cifar-10-jpg", data);
    int found = 0;
    if (kh_test_exists(bin)) {
        found = 1;
        for (int train = 1; train >= 0; train--) {
            kh_images im = {0};
            double t0 = kh_test_now();
            kh_status st = kh_cifar_bin_read_dir(bin, train, 0, &im, err, sizeof err);
            double t1 = kh_test_now();
            CHECK(st == KH_OK, "%s", err);
            if (st != KH_OK) continue;
            check_balance(&im, train ? 50000 : 10000, 10, train ? 5000 : 1000, train ? "cifar10 bin train" : "cifar10 bin test");
            printf("cifar10 binary %s: read in %.3f s\n", train ? "train" : "test", t1 - t0);
            kh_images_free(&im);
        }
    }
    if (kh_test_exists(jpg)) {
        found = 1;
        const char *split[2] = {"train", "test"};
        for (int s = 0; s < 2; s++) {
            char root[1200];
            snprintf(root, sizeof root, "%s/%s", jpg, split[s]);
            int64_t last = 0;
            kh_image_folder_opts o = {.width = 32, .height = 32, .channels = 3, .progress = progress, .progress_ctx = &last};
            kh_images im = {0};
            double t0 = kh_test_now();
            kh_status st = kh_image_folder_read(root, &o, &im, err, sizeof err);
            double t1 = kh_test_now();
            CHECK(st == KH_OK, "%s", err);
            if (st != KH_OK) continue;
            char what[64];
            snprintf(what, sizeof what, "cifar10 jpg %s", split[s]);
            check_balance(&im, s == 0 ? 50000 : 10000, 10, s == 0 ? 5000 : 1000, what);
            CHECK(last == im.n, "%s: progress ended at %lld", what, (long long)last);
            // sorted class names must be the canonical label order (airplane .. truck)
            for (int k = 0; k < 10 && k < im.n_classes; k++)
                CHECK(strcmp(im.class_names[k], canonical[k]) == 0, "class %d is %s, expected %s", k, im.class_names[k],
                      canonical[k]);
            printf("%s: decoded in %.3f s (default threads)\n", what, t1 - t0);
            kh_images_free(&im);
        }
        // single-threaded, for the record
        char root[1200];
        snprintf(root, sizeof root, "%s/train", jpg);
        kh_image_folder_opts o1 = {.width = 32, .height = 32, .channels = 3, .threads = 1};
        kh_images im = {0};
        double t0 = kh_test_now();
        kh_status st = kh_image_folder_read(root, &o1, &im, err, sizeof err);
        printf("cifar10 jpg train, 1 thread: %.3f s\n", kh_test_now() - t0);
        CHECK(st == KH_OK && im.n == 50000, "%s", err);
        kh_images_free(&im);
    }
    if (!found) printf("cifar10: not installed (%s or %s)\n", bin, jpg);
    return found;
}

int main(void) {
    const char *data = getenv("KHOST_DATA");
    char def[1024];
    if (!data || !*data) {
        const char *src = getenv("KHOST_SOURCE");
        snprintf(def, sizeof def, "%s/data", src && *src ? src : ".");
        data = def;
    }
    printf("data directory: %s\n", data);
    int any = test_idx_set(data, "mnist");
    any |= test_idx_set(data, "fashion-mnist");
    any |= test_cifar(data);
    if (!any) kh_test_skip("no image data sets installed; run: tools/fetch-datasets mnist cifar10");
    return kh_test_finish("test_data_image_real");
}
