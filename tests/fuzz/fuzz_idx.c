/* fuzz_idx.c — libFuzzer target for the IDX reader (kh_idx_read). The input is split into an image file
 * and a label file (the split point from its first two bytes); a flag bit gzips the images so the parser
 * behind zlib is reached too, another sets a sample limit. Any crash, leak or sanitizer report is a bug;
 * errors are expected and must name the file. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "khost/kit/data_image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[256], img_path[300], lab_path[300];

/* The temporary folder goes away when the fuzzer exits. */
static void teardown(void) {
    unlink(img_path);
    unlink(lab_path);
    rmdir(dir);
}

static int setup(void) {
    if (dir[0]) return 0;
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/khost-fuzz-idx-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir)) return -1;
    atexit(teardown);
    snprintf(img_path, sizeof img_path, "%s/images", dir);
    snprintf(lab_path, sizeof lab_path, "%s/labels", dir);
    return 0;
}

static int put(const char *path, const uint8_t *b, size_t n, int gz) {
    if (gz) {
        gzFile f = gzopen(path, "wb1");
        if (!f) return -1;
        if (n && gzwrite(f, b, (unsigned)n) != (int)n) {
            gzclose(f);
            return -1;
        }
        return gzclose(f) == Z_OK ? 0 : -1;
    }
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = n ? fwrite(b, 1, n, f) : 0;
    return (fclose(f) == 0 && w == n) ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3 || setup() != 0) return 0;
    uint8_t flags = data[0];
    size_t split = ((size_t)data[1] << 8 | data[2]);
    data += 3, size -= 3;
    if (split > size) split = size;
    if (put(img_path, data, split, flags & 1) != 0 || put(lab_path, data + split, size - split, (flags >> 1) & 1) != 0)
        return 0;
    kh_images im = {0};
    char err[512];
    int64_t limit = (flags >> 2) & 3;
    kh_status st = kh_idx_read(img_path, lab_path, limit, &im, err, sizeof err);
    if (st == KH_OK) {
        /* touch every byte so the sanitizers see any overrun of the output arrays */
        size_t sum = 0, n = (size_t)im.n * kh_images_stride(&im);
        for (size_t i = 0; i < n; i++) sum += im.pixels[i];
        for (int64_t i = 0; i < im.n; i++) sum += (size_t)im.labels[i];
        if (im.n_classes < 0 || im.n_classes > 256 || (sum == 1 && n == 0)) abort();
    } else if (!strstr(err, img_path) && !strstr(err, lab_path)) {
        abort(); /* every error must name the file */
    }
    kh_images_free(&im);
    return 0;
}
