/* idx.c — IDX reader (MNIST, Fashion-MNIST): u8 images [n, rows, cols] (magic 0x803) and labels [n]
 * (magic 0x801), plain or gzip. zlib's gzread reads both transparently, so the format is recognised by
 * content rather than by name. Streams in chunks; holds only the output arrays. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "img_common.h"
#include "khost/kit/regular.h"
#include "khost/kit/status.h"

#define IDX_MAX_SIDE 4096
#define IDX_MAX_COUNT ((uint32_t)INT32_MAX)
#define IDX_CHUNK (1u << 20)

// --- a gz/plain stream with the context errors need ----------------------------------------------------
typedef struct idx_file {
    const char *path;
    gzFile gz;
    int plain;          /* 1 when the file is not gzip: its size is known from stat */
    int64_t file_size;  /* plain files only */
} idx_file;

static kh_status idx_open(idx_file *f, const char *path, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    f->path = path;
    char why[4500];
    struct stat st;
    int fd = kh_open_regular_at(AT_FDCWD, path, path, &st, why, sizeof why);
    if (fd < 0) return kh_errf(err, errlen, KH_ERR_IO, "%s", why);
    errno = 0;
    f->gz = gzdopen(fd, "rb"); /* owns fd from here, closed by gzclose_r */
    if (!f->gz) {
        int e = errno;
        close(fd);
        return kh_errf(err, errlen, e ? KH_ERR_IO : KH_ERR_NOMEM, "%s: cannot open: %s", path,
                       e ? strerror(e) : "out of memory");
    }
    gzbuffer(f->gz, 256u * 1024u);
    /* Called right after gzopen, gzdirect peeks at the first bytes to tell gzip from plain data. */
    f->plain = gzdirect(f->gz);
    f->file_size = (int64_t)st.st_size;
    return KH_OK;
}

static void idx_close(idx_file *f) {
    if (f->gz) gzclose_r(f->gz);
    f->gz = NULL;
}

/* Read exactly n bytes; *got says how many arrived. Returns KH_ERR_DATA (with the zlib message) on a
 * corrupt stream, KH_OK otherwise (the caller judges a short count). */
static kh_status idx_read(idx_file *f, void *buf, size_t n, size_t *got, char *err, size_t errlen) {
    unsigned char *p = buf;
    *got = 0;
    while (*got < n) {
        size_t want = n - *got;
        if (want > (1u << 30)) want = 1u << 30;
        int r = gzread(f->gz, p + *got, (unsigned)want);
        if (r < 0) {
            int zerr = 0;
            const char *msg = gzerror(f->gz, &zerr);
            return kh_errf(err, errlen, zerr == Z_MEM_ERROR ? KH_ERR_NOMEM : KH_ERR_DATA,
                           "%s: corrupt gzip stream: %s", f->path, msg ? msg : "unknown zlib error");
        }
        if (r == 0) break;
        *got += (size_t)r;
    }
    return KH_OK;
}

static uint32_t be32(const unsigned char *b) {
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

/* Read the magic and the dims of an IDX header, checking the magic against `want_magic`. */
static kh_status idx_header(idx_file *f, uint32_t want_magic, uint32_t *dims, int rank, char *err,
                            size_t errlen) {
    unsigned char h[16];
    size_t need = 4u * (size_t)(rank + 1), got;
    kh_status st = idx_read(f, h, need, &got, err, errlen);
    if (st != KH_OK) return st;
    if (got < 4)
        return kh_errf(err, errlen, KH_ERR_DATA, "%s: truncated: %zu-byte file has no IDX header", f->path, got);
    uint32_t magic = be32(h);
    if (magic != want_magic) {
        const char *what = want_magic == KH_IDX_MAGIC_U8_RANK3 ? "u8 images [n, rows, cols]" : "u8 labels [n]";
        return kh_errf(err, errlen, KH_ERR_DATA, "%s: bad magic 0x%08x, expected 0x%08x (IDX %s)", f->path,
                       magic, want_magic, what);
    }
    if (got < need)
        return kh_errf(err, errlen, KH_ERR_DATA, "%s: truncated: header needs %zu bytes, got %zu", f->path, need,
                       got);
    for (int i = 0; i < rank; i++) dims[i] = be32(h + 4 + 4 * i);
    if (dims[0] > IDX_MAX_COUNT)
        return kh_errf(err, errlen, KH_ERR_DATA, "%s: implausible item count %u", f->path, dims[0]);
    for (int i = 1; i < rank; i++)
        if (dims[i] == 0 || dims[i] > IDX_MAX_SIDE)
            return kh_errf(err, errlen, KH_ERR_DATA, "%s: bad dimension %d: %u (expected 1..%d)", f->path, i,
                           dims[i], IDX_MAX_SIDE);
    return KH_OK;
}

/* For plain files the size must match the header exactly; gzip sizes are checked while reading. */
static kh_status idx_check_size(const idx_file *f, int64_t header_bytes, int64_t body_bytes, char *err,
                                size_t errlen) {
    if (!f->plain) return KH_OK;
    int64_t want = header_bytes + body_bytes;
    if (f->file_size < want)
        return kh_errf(err, errlen, KH_ERR_DATA, "%s: truncated: expected %lld bytes, got %lld", f->path,
                       (long long)want, (long long)f->file_size);
    if (f->file_size > want)
        return kh_errf(err, errlen, KH_ERR_DATA, "%s: %lld trailing bytes after the %lld the header describes",
                       f->path, (long long)(f->file_size - want), (long long)want);
    return KH_OK;
}

/* After reading every record of a gzip file: no more data may follow. */
static kh_status idx_check_end(idx_file *f, char *err, size_t errlen) {
    unsigned char extra;
    size_t got;
    kh_status st = idx_read(f, &extra, 1, &got, err, errlen);
    if (st != KH_OK) return st;
    if (got)
        return kh_errf(err, errlen, KH_ERR_DATA, "%s: trailing bytes after the records the header describes",
                       f->path);
    return KH_OK;
}

// --- public --------------------------------------------------------------------------------------------
kh_status kh_idx_find(const char *dir, const char *name, char *out, size_t outlen) {
    char base[4096];
    int n = snprintf(base, sizeof base, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof base)
        return kh_errf(out, outlen, KH_ERR_INVALID, "%s/%s: path too long", dir, name);
    if (img_has_suffix_ci(base, ".gz")) base[n - 3] = 0;
    char gz[4100];
    snprintf(gz, sizeof gz, "%s.gz", base);
    const char *found = img_is_file(base) ? base : img_is_file(gz) ? gz : NULL;
    if (found) {
        if (strlen(found) >= outlen) return kh_errf(out, outlen, KH_ERR_INVALID, "%s: path too long", found);
        snprintf(out, outlen, "%s", found);
        return KH_OK;
    }
    return kh_errf(out, outlen, KH_ERR_IO, "%s: not found (nor %s)", gz, base);
}

kh_status kh_idx_read(const char *images_path, const char *labels_path, int64_t limit, kh_images *out,
                      char *err, size_t errlen) {
    if (!images_path || !labels_path || !out || limit < 0)
        return kh_errf(err, errlen, KH_ERR_INVALID, "kh_idx_read: bad arguments");
    memset(out, 0, sizeof *out);
    idx_file fi, fl;
    memset(&fl, 0, sizeof fl);
    kh_status st = idx_open(&fi, images_path, err, errlen);
    if (st != KH_OK) return st;
    uint32_t idims[3] = {0, 0, 0}, ldims[1] = {0};
    unsigned char *pix = NULL;
    int32_t *labels = NULL;
    size_t cap = 0;

    if ((st = idx_header(&fi, KH_IDX_MAGIC_U8_RANK3, idims, 3, err, errlen)) != KH_OK) goto fail;
    size_t stride = (size_t)idims[1] * idims[2];
    if ((st = idx_check_size(&fi, 16, (int64_t)idims[0] * (int64_t)stride, err, errlen)) != KH_OK) goto fail;
    if ((st = idx_open(&fl, labels_path, err, errlen)) != KH_OK) goto fail;
    if ((st = idx_header(&fl, KH_IDX_MAGIC_U8_RANK1, ldims, 1, err, errlen)) != KH_OK) goto fail;
    if ((st = idx_check_size(&fl, 8, (int64_t)ldims[0], err, errlen)) != KH_OK) goto fail;
    if (idims[0] != ldims[0]) {
        st = kh_errf(err, errlen, KH_ERR_DATA, "%s: %u labels, but %s has %u images", labels_path, ldims[0],
                     images_path, idims[0]);
        goto fail;
    }
    int64_t n = idims[0];
    if (limit > 0 && limit < n) n = limit;

    // images: plain files were size-checked, so allocate at once; gzip grows with the data that arrives
    size_t total = (size_t)n * stride, have = 0;
    if (fi.plain) {
        if ((st = img_grow((void **)&pix, &cap, total ? total : 1, total ? total : 1, 1)) != KH_OK) goto nomem;
    }
    while (have < total) {
        size_t want = total - have < IDX_CHUNK ? total - have : IDX_CHUNK;
        if ((st = img_grow((void **)&pix, &cap, have + want, total, 1)) != KH_OK) goto nomem;
        size_t got;
        if ((st = idx_read(&fi, pix + have, want, &got, err, errlen)) != KH_OK) goto fail;
        have += got;
        if (got < want) {
            st = kh_errf(err, errlen, KH_ERR_DATA, "%s: truncated: expected %zu bytes of pixels, got %zu",
                         images_path, total, have);
            goto fail;
        }
    }
    if (n == (int64_t)idims[0] && !fi.plain && (st = idx_check_end(&fi, err, errlen)) != KH_OK) goto fail;

    // labels: converted to i32 through a small bounce buffer
    labels = malloc((size_t)(n ? n : 1) * sizeof *labels);
    if (!labels) goto nomem;
    int32_t max_label = -1;
    unsigned char chunk[65536];
    for (int64_t i = 0; i < n;) {
        size_t want = (size_t)(n - i) < sizeof chunk ? (size_t)(n - i) : sizeof chunk, got;
        if ((st = idx_read(&fl, chunk, want, &got, err, errlen)) != KH_OK) goto fail;
        for (size_t k = 0; k < got; k++) {
            labels[i + (int64_t)k] = chunk[k];
            if (chunk[k] > max_label) max_label = chunk[k];
        }
        i += (int64_t)got;
        if (got < want) {
            st = kh_errf(err, errlen, KH_ERR_DATA, "%s: truncated: expected %lld label bytes, got %lld", labels_path,
                         (long long)n, (long long)i);
            goto fail;
        }
    }
    if (n == (int64_t)ldims[0] && !fl.plain && (st = idx_check_end(&fl, err, errlen)) != KH_OK) goto fail;

    idx_close(&fi);
    idx_close(&fl);
    out->n = n;
    out->rows = (int32_t)idims[1];
    out->cols = (int32_t)idims[2];
    out->channels = 1;
    out->pixels = pix;
    out->labels = labels;
    out->n_classes = max_label + 1;
    return KH_OK;

nomem:
    st = kh_errf(err, errlen, KH_ERR_NOMEM, "%s: out of memory for %lld images", images_path, (long long)idims[0]);
fail:
    idx_close(&fi);
    idx_close(&fl);
    free(pix);
    free(labels);
    return st;
}
