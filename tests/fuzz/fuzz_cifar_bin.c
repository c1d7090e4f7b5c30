/* fuzz_cifar_bin.c — libFuzzer target for the CIFAR-10 binary reader (kh_cifar_bin_read). The input
 * describes one or two batch files (raw, or its bytes repeated to a length it chooses, so record-sized
 * files are reachable from small inputs), read with an optional limit.
 * Errors are expected and must name a file; success must give in-range labels and HWC pixels. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const files[] = {"data_batch_1.bin", "data_batch_2.bin", NULL};

/* Record files are thousands of bytes; a small input describes one: its bytes repeated up to `len`. */
static int put_cyclic(const char *path, const uint8_t *b, size_t n, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = 1;
    for (size_t k = 0; k < len && ok; k++) ok = fputc(n ? b[k % n] : 0, f) != EOF;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *dir = harness_files("cifar", files), *p1 = harness_file(0), *p2 = harness_file(1);
    if (size < 5 || !dir) return 0;
    uint8_t flags = data[0];
    size_t len1 = ((size_t)data[1] << 8 | data[2]) % (3 * KH_CIFAR_RECORD + 8);
    size_t len2 = ((size_t)data[3] << 8 | data[4]) % (2 * KH_CIFAR_RECORD + 8);
    data += 5, size -= 5;
    int two = flags & 1;
    if (flags & 8) { /* raw: the input itself is the file */
        if (harness_put(p1, data, size) != 0) return 0;
    } else if (put_cyclic(p1, data, size, len1) != 0) {
        return 0;
    }
    if (two && put_cyclic(p2, data + size / 2, size - size / 2, len2) != 0) return 0;
    const char *paths[2] = {p1, p2};
    kh_images im = {0};
    char err[512];
    kh_status st = kh_cifar_bin_read(paths, two ? 2 : 1, (flags >> 1) & 3, &im, err, sizeof err);
    if (st == KH_OK) {
        harness_touch(&im);
        for (int64_t i = 0; i < im.n; i++)
            if (im.labels[i] < 0 || im.labels[i] >= KH_CIFAR_CLASSES) abort();
        if (im.rows != 32 || im.cols != 32 || im.channels != 3) abort();
    } else if (!strstr(err, dir)) {
        abort();
    }
    kh_images_free(&im);
    return 0;
}
