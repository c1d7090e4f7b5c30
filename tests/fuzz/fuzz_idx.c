/* fuzz_idx.c — libFuzzer target for the IDX reader (kh_idx_read). The input is split into an image file
 * and a label file (the split point from its first two bytes); a flag bit gzips the images so the parser
 * behind zlib is reached too, another sets a sample limit. Any crash, leak or sanitizer report is a bug;
 * errors are expected and must name the file. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const files[] = {"images", "labels", NULL};

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
    return harness_put(path, b, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *dir = harness_files("idx", files), *img_path = harness_file(0), *lab_path = harness_file(1);
    if (size < 3 || !dir) return 0;
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
        harness_touch(&im);
        if (im.n_classes < 0 || im.n_classes > 256) abort();
    } else if (!strstr(err, img_path) && !strstr(err, lab_path)) {
        abort(); /* every error must name the file */
    }
    kh_images_free(&im);
    return 0;
}
