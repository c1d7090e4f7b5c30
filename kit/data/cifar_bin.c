/* cifar_bin.c — CIFAR-10 binary batches (cifar-10-batches-bin): records of one label byte and 3072 pixel
 * bytes stored as three 32x32 planes (R, G, B). Output is HWC, Keras's channels_last. The file sizes are
 * checked before anything is allocated, and each file is streamed record by record. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "img_common.h"
#include "khost/kit/regular.h"
#include "khost/kit/status.h"

#define CIFAR_PLANE (KH_CIFAR_SIDE * KH_CIFAR_SIDE)
#define CIFAR_PIXELS (3 * CIFAR_PLANE)
#define CIFAR_MAX_FILES 64

static kh_status cifar_size(const char *path, int64_t *records, char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st) != 0)
        return kh_errf(err, errlen, KH_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return kh_errf(err, errlen, KH_ERR_IO, "%s: not a regular file", path);
    int64_t size = (int64_t)st.st_size;
    if (size == 0)
        return kh_errf(err, errlen, KH_ERR_DATA, "%s: empty file (expected records of %d bytes)", path,
                       KH_CIFAR_RECORD);
    if (size % KH_CIFAR_RECORD != 0)
        return kh_errf(err, errlen, KH_ERR_DATA,
                       "%s: truncated: size %lld is not a multiple of the %d-byte record (expected %lld bytes)",
                       path, (long long)size, KH_CIFAR_RECORD,
                       (long long)((size / KH_CIFAR_RECORD + 1) * KH_CIFAR_RECORD));
    *records = size / KH_CIFAR_RECORD;
    return KH_OK;
}

/* Stream `n` records of one file into pix/labels (already sized), transposing CHW to HWC. */
static kh_status cifar_read_file(const char *path, int64_t n, uint8_t *pix, int32_t *labels, char *err,
                                 size_t errlen) {
    char why[4500];
    FILE *f = kh_fopen_regular(path, why, sizeof why); /* checked again: it may have changed since cifar_size */
    if (!f) return kh_errf(err, errlen, KH_ERR_IO, "%s", why);
    kh_status st = KH_OK;
    unsigned char rec[KH_CIFAR_RECORD];
    for (int64_t i = 0; i < n; i++) {
        size_t got = fread(rec, 1, sizeof rec, f);
        if (got != sizeof rec) {
            st = ferror(f) ? kh_errf(err, errlen, KH_ERR_IO, "%s: read error at record %lld", path, (long long)i)
                           : kh_errf(err, errlen, KH_ERR_DATA, "%s: truncated at record %lld (file shrank?)", path,
                                     (long long)i);
            break;
        }
        if (rec[0] >= KH_CIFAR_CLASSES) {
            st = kh_errf(err, errlen, KH_ERR_DATA, "%s: record %lld: label %u out of range 0..%d", path,
                         (long long)i, rec[0], KH_CIFAR_CLASSES - 1);
            break;
        }
        labels[i] = rec[0];
        const unsigned char *r = rec + 1, *g = r + CIFAR_PLANE, *b = g + CIFAR_PLANE;
        uint8_t *o = pix + (size_t)i * CIFAR_PIXELS;
        for (int p = 0; p < CIFAR_PLANE; p++) {
            o[3 * p + 0] = r[p];
            o[3 * p + 1] = g[p];
            o[3 * p + 2] = b[p];
        }
    }
    fclose(f);
    return st;
}

kh_status kh_cifar_bin_read(const char *const *paths, int n_paths, int64_t limit, kh_images *out, char *err,
                            size_t errlen) {
    if (!paths || n_paths <= 0 || n_paths > CIFAR_MAX_FILES || !out || limit < 0)
        return kh_errf(err, errlen, KH_ERR_INVALID, "kh_cifar_bin_read: bad arguments");
    memset(out, 0, sizeof *out);
    int64_t counts[CIFAR_MAX_FILES], total = 0;
    for (int i = 0; i < n_paths; i++) {
        kh_status st = cifar_size(paths[i], &counts[i], err, errlen);
        if (st != KH_OK) return st;
        total += counts[i];
    }
    if (limit > 0 && limit < total) total = limit;
    uint8_t *pix = malloc((size_t)total * CIFAR_PIXELS);
    int32_t *labels = malloc((size_t)total * sizeof *labels);
    if (!pix || !labels) {
        free(pix);
        free(labels);
        return kh_errf(err, errlen, KH_ERR_NOMEM, "%s: out of memory for %lld images", paths[0], (long long)total);
    }
    int64_t at = 0;
    for (int i = 0; i < n_paths && at < total; i++) {
        int64_t take = counts[i] < total - at ? counts[i] : total - at;
        kh_status st = cifar_read_file(paths[i], take, pix + (size_t)at * CIFAR_PIXELS, labels + at, err, errlen);
        if (st != KH_OK) {
            free(pix);
            free(labels);
            return st;
        }
        at += take;
    }
    out->n = total;
    out->rows = out->cols = KH_CIFAR_SIDE;
    out->channels = 3;
    out->pixels = pix;
    out->labels = labels;
    out->n_classes = KH_CIFAR_CLASSES;
    return KH_OK;
}

kh_status kh_cifar_bin_read_dir(const char *dir, int train, int64_t limit, kh_images *out, char *err,
                                size_t errlen) {
    char buf[6][4096];
    const char *paths[6];
    int n = 0;
    if (train) {
        for (int i = 1; i <= 5; i++, n++) {
            snprintf(buf[n], sizeof buf[n], "%s/data_batch_%d.bin", dir, i);
            paths[n] = buf[n];
        }
    } else {
        snprintf(buf[0], sizeof buf[0], "%s/test_batch.bin", dir);
        paths[n++] = buf[0];
    }
    return kh_cifar_bin_read(paths, n, limit, out, err, errlen);
}
