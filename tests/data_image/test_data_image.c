/* test_data_image.c — the image readers and augmentation of khost/kit/data_image.h on small files this test
 * writes in the canonical formats (IDX plain and gzip, CIFAR-10 binary, JPEG and PNG folders): exact
 * round trips, and malformed inputs that must give an error naming the file, never a crash. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>
#include <png.h>
#include <zlib.h>

#include "khost/kit/data_image.h"
#include "testutil.h"

static char err[1024];

#define CHECK_ERR_NAMES(st, want_st, path, what)                                                        \
    do {                                                                                                \
        CHECK((st) == (want_st), "%s: status %d, expected %d (%s)", (what), (int)(st), (int)(want_st), err); \
        CHECK(strstr(err, (path)) != NULL, "%s: error does not name %s: %s", (what), (path), err);    \
    } while (0)

/* Temporary folders, removed at the end (kh_test_tmpdir's strings are reused after 8 calls: keep copies). */
static char *tmpdirs[64];
static int n_tmpdirs;
static const char *tmpdir(const char *tag) {
    const char *d = kh_test_tmpdir(tag);
    if (n_tmpdirs < 64) {
        size_t n = strlen(d) + 1;
        char *c = malloc(n);
        if (c) memcpy(c, d, n), tmpdirs[n_tmpdirs++] = c;
    }
    return d;
}
static void remove_tmpdirs(void) {
    for (int i = 0; i < n_tmpdirs; i++) {
        char cmd[700], out[64];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdirs[i]);
        kh_test_run(cmd, out, sizeof out);
        free(tmpdirs[i]);
    }
}

// --- writers for the canonical formats ---------------------------------------------------------------------
static void put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16), p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

static void write_maybe_gz(const char *path, const void *data, size_t n, int gz) {
    if (!gz) {
        kh_test_write_file(path, data, n);
        return;
    }
    gzFile f = gzopen(path, "wb");
    if (!f || gzwrite(f, data, (unsigned)n) != (int)n || gzclose(f) != Z_OK) {
        fprintf(stderr, "test setup: cannot write %s\n", path);
        exit(2);
    }
}

/* An IDX image file: header (magic, n, rows, cols) then n*rows*cols bytes; pixel i = (i * 7 + 3) & 255. */
static void write_idx_images(const char *path, uint32_t magic, uint32_t n, uint32_t rows, uint32_t cols, int gz) {
    size_t body = (size_t)n * rows * cols;
    unsigned char *b = malloc(16 + body);
    put_be32(b, magic), put_be32(b + 4, n), put_be32(b + 8, rows), put_be32(b + 12, cols);
    for (size_t i = 0; i < body; i++) b[16 + i] = (unsigned char)((i * 7 + 3) & 255);
    write_maybe_gz(path, b, 16 + body, gz);
    free(b);
}

static void write_idx_labels(const char *path, uint32_t n, int gz) {
    unsigned char *b = malloc(8 + n);
    put_be32(b, KH_IDX_MAGIC_U8_RANK1), put_be32(b + 4, n);
    for (uint32_t i = 0; i < n; i++) b[8 + i] = (unsigned char)(i % 10);
    write_maybe_gz(path, b, 8 + n, gz);
    free(b);
}

static size_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (size_t)st.st_size : 0;
}

static void truncate_file(const char *path, size_t keep) {
    if (truncate(path, (off_t)keep) != 0) {
        fprintf(stderr, "test setup: cannot truncate %s\n", path);
        exit(2);
    }
}

// --- IDX -------------------------------------------------------------------------------------------------------
static void test_idx_roundtrip(int gz_images, int gz_labels) {
    const char *dir = tmpdir("idx");
    char ip[600], lp[600];
    snprintf(ip, sizeof ip, "%s/img", dir);
    snprintf(lp, sizeof lp, "%s/lab", dir);
    write_idx_images(ip, KH_IDX_MAGIC_U8_RANK3, 23, 5, 4, gz_images);
    write_idx_labels(lp, 23, gz_labels);
    kh_images im = {0};
    kh_status st = kh_idx_read(ip, lp, 0, &im, err, sizeof err);
    CHECK(st == KH_OK, "idx read (gz %d/%d): %s", gz_images, gz_labels, err);
    if (st != KH_OK) return;
    CHECK(im.n == 23 && im.rows == 5 && im.cols == 4 && im.channels == 1, "idx shape %lld %d %d %d", (long long)im.n,
          im.rows, im.cols, im.channels);
    CHECK(im.n_classes == 10, "idx classes %d", im.n_classes);
    int bad = 0;
    for (size_t i = 0; i < 23u * 20u; i++) bad += im.pixels[i] != (unsigned char)((i * 7 + 3) & 255);
    for (int i = 0; i < 23; i++) bad += im.labels[i] != i % 10;
    CHECK(bad == 0, "idx values differ in %d places (gz %d/%d)", bad, gz_images, gz_labels);
    kh_images_free(&im);
    CHECK(im.pixels == NULL && im.n == 0, "kh_images_free leaves the set zeroed");

    // limit keeps the first N samples
    st = kh_idx_read(ip, lp, 7, &im, err, sizeof err);
    CHECK(st == KH_OK && im.n == 7, "idx limit 7: n=%lld %s", (long long)im.n, err);
    if (st == KH_OK) {
        CHECK(im.pixels[6 * 20 + 19] == (unsigned char)(((6 * 20 + 19) * 7 + 3) & 255) && im.labels[6] == 6,
              "idx limit values");
        CHECK(im.n_classes == 7, "idx limit: classes from the kept labels, got %d", im.n_classes);
    }
    kh_images_free(&im);
}

static void test_idx_find(void) {
    const char *dir = tmpdir("idxfind");
    char p[600], out[700];
    snprintf(p, sizeof p, "%s/a-ubyte.gz", dir);
    write_idx_labels(p, 3, 1);
    CHECK(kh_idx_find(dir, "a-ubyte", out, sizeof out) == KH_OK && strcmp(out, p) == 0, "find gz by plain name: %s", out);
    CHECK(kh_idx_find(dir, "a-ubyte.gz", out, sizeof out) == KH_OK && strcmp(out, p) == 0, "find gz: %s", out);
    snprintf(p, sizeof p, "%s/a-ubyte", dir);
    write_idx_labels(p, 3, 0);
    CHECK(kh_idx_find(dir, "a-ubyte.gz", out, sizeof out) == KH_OK && strcmp(out, p) == 0, "plain preferred: %s", out);
    kh_status st = kh_idx_find(dir, "missing-ubyte", out, sizeof out);
    CHECK(st == KH_ERR_IO && strstr(out, "missing-ubyte.gz") && strstr(out, "not found"), "find missing: %s", out);
}

static void test_idx_errors(void) {
    const char *dir = tmpdir("idxbad");
    char ip[600], lp[600], gp[600];
    snprintf(ip, sizeof ip, "%s/img", dir);
    snprintf(lp, sizeof lp, "%s/lab", dir);
    snprintf(gp, sizeof gp, "%s/img.gz", dir);
    kh_images im = {0};
    kh_status st;

    // wrong magic: a label file where images belong, and images with a 16-bit type
    write_idx_labels(lp, 10, 0);
    st = kh_idx_read(lp, lp, 0, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, lp, "labels as images");
    CHECK(strstr(err, "bad magic 0x00000801") != NULL, "magic in message: %s", err);
    write_idx_images(ip, 0x00000B03u, 10, 4, 4, 0);
    st = kh_idx_read(ip, lp, 0, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, ip, "16-bit images");

    // count mismatch between images and labels
    write_idx_images(ip, KH_IDX_MAGIC_U8_RANK3, 12, 4, 4, 0);
    st = kh_idx_read(ip, lp, 0, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, lp, "count mismatch");
    CHECK(strstr(err, "10 labels") && strstr(err, "12 images"), "mismatch counts in message: %s", err);

    // truncated plain file: size checked against the header
    write_idx_images(ip, KH_IDX_MAGIC_U8_RANK3, 10, 4, 4, 0);
    truncate_file(ip, 16 + 10 * 16 - 5);
    st = kh_idx_read(ip, lp, 0, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, ip, "truncated plain");
    CHECK(strstr(err, "truncated: expected 176 bytes, got 171") != NULL, "truncated sizes: %s", err);

    // trailing bytes in a plain file
    write_idx_images(ip, KH_IDX_MAGIC_U8_RANK3, 10, 4, 4, 0);
    FILE *f = fopen(ip, "ab");
    fputs("xx", f);
    fclose(f);
    st = kh_idx_read(ip, lp, 0, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, ip, "trailing bytes");

    // truncated gzip content (a complete stream that holds fewer records than its header says)
    {
        unsigned char b[16 + 100];
        put_be32(b, KH_IDX_MAGIC_U8_RANK3), put_be32(b + 4, 10), put_be32(b + 8, 4), put_be32(b + 12, 4);
        memset(b + 16, 9, 100);
        write_maybe_gz(gp, b, sizeof b, 1);
        st = kh_idx_read(gp, lp, 0, &im, err, sizeof err);
        CHECK_ERR_NAMES(st, KH_ERR_DATA, gp, "truncated gz content");
        CHECK(strstr(err, "expected 160 bytes of pixels, got 100") != NULL, "gz truncation sizes: %s", err);
    }
    // a gzip file cut in the middle of its stream
    write_idx_images(gp, KH_IDX_MAGIC_U8_RANK3, 10, 4, 4, 1);
    truncate_file(gp, file_size(gp) - 12);
    st = kh_idx_read(gp, lp, 0, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, gp, "cut gz stream");
    // a gzip header followed by garbage
    {
        unsigned char g[64] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
        for (int i = 10; i < 64; i++) g[i] = (unsigned char)(i * 37);
        kh_test_write_file(gp, g, sizeof g);
        st = kh_idx_read(gp, lp, 0, &im, err, sizeof err);
        CHECK(st == KH_ERR_DATA && strstr(err, gp), "garbage gz: %d %s", (int)st, err);
    }

    // bad dimensions, empty file, header cut short, missing file
    write_idx_images(ip, KH_IDX_MAGIC_U8_RANK3, 10, 0, 4, 0);
    st = kh_idx_read(ip, lp, 0, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, ip, "zero rows");
    kh_test_write_file(ip, "", 0);
    st = kh_idx_read(ip, lp, 0, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, ip, "empty file");
    kh_test_write_file(ip, "\0\0\x08\x03\0\0", 6);
    st = kh_idx_read(ip, lp, 0, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, ip, "short header");
    char mp[600];
    snprintf(mp, sizeof mp, "%s/nope", dir);
    st = kh_idx_read(mp, lp, 0, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_IO, mp, "missing file");
    CHECK(im.pixels == NULL && im.labels == NULL, "nothing allocated after errors");
}

// --- CIFAR-10 binary -----------------------------------------------------------------------------------------
/* Record r of batch b: label (r + b) % 10, pixel byte k of the CHW planes = (k * 3 + r * 11 + b) & 255. */
static void write_cifar(const char *path, int b, int n, int bad_label_at) {
    unsigned char *buf = malloc((size_t)n * KH_CIFAR_RECORD);
    for (int r = 0; r < n; r++) {
        unsigned char *rec = buf + (size_t)r * KH_CIFAR_RECORD;
        rec[0] = (unsigned char)(r == bad_label_at ? 10 : (r + b) % 10);
        for (int k = 0; k < 3072; k++) rec[1 + k] = (unsigned char)((k * 3 + r * 11 + b) & 255);
    }
    kh_test_write_file(path, buf, (size_t)n * KH_CIFAR_RECORD);
    free(buf);
}

static void test_cifar(void) {
    const char *dir = tmpdir("cifar");
    char p[6][600];
    for (int b = 1; b <= 5; b++) {
        snprintf(p[b - 1], sizeof p[b - 1], "%s/data_batch_%d.bin", dir, b);
        write_cifar(p[b - 1], b, 3 + b, -1);
    }
    snprintf(p[5], sizeof p[5], "%s/test_batch.bin", dir);
    write_cifar(p[5], 0, 4, -1);

    kh_images im = {0};
    kh_status st = kh_cifar_bin_read_dir(dir, 1, 0, &im, err, sizeof err);
    CHECK(st == KH_OK && im.n == 4 + 5 + 6 + 7 + 8, "cifar train: %lld %s", (long long)im.n, err);
    if (st == KH_OK) {
        CHECK(im.rows == 32 && im.cols == 32 && im.channels == 3 && im.n_classes == 10, "cifar shape");
        int bad = 0;
        int64_t i = 0;
        for (int b = 1; b <= 5; b++)
            for (int r = 0; r < 3 + b; r++, i++) {
                bad += im.labels[i] != (r + b) % 10;
                // HWC out(y, x, ch) = CHW in(ch, y, x)
                for (int y = 0; y < 32; y++)
                    for (int x = 0; x < 32; x++)
                        for (int ch = 0; ch < 3; ch++) {
                            int k = ch * 1024 + y * 32 + x;
                            bad += im.pixels[(size_t)i * 3072 + (size_t)(y * 32 + x) * 3 + (size_t)ch] !=
                                   (unsigned char)((k * 3 + r * 11 + b) & 255);
                        }
            }
        CHECK(bad == 0, "cifar values differ in %d places", bad);
    }
    kh_images_free(&im);
    st = kh_cifar_bin_read_dir(dir, 0, 0, &im, err, sizeof err);
    CHECK(st == KH_OK && im.n == 4 && im.labels[3] == 3, "cifar test split: %s", err);
    kh_images_free(&im);
    st = kh_cifar_bin_read_dir(dir, 1, 6, &im, err, sizeof err);
    CHECK(st == KH_OK && im.n == 6 && im.labels[5] == 3, "cifar limit crosses files: %s", err);
    kh_images_free(&im);

    // truncated record, bad label, empty file, missing batch
    write_cifar(p[2], 3, 6, -1);
    truncate_file(p[2], 6 * KH_CIFAR_RECORD - 1);
    st = kh_cifar_bin_read_dir(dir, 1, 0, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, p[2], "cifar truncated");
    CHECK(strstr(err, "truncated") != NULL, "cifar truncated message: %s", err);
    write_cifar(p[2], 3, 6, 4);
    st = kh_cifar_bin_read_dir(dir, 1, 0, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, p[2], "cifar bad label");
    CHECK(strstr(err, "record 4") && strstr(err, "label 10"), "bad label message: %s", err);
    kh_test_write_file(p[2], "", 0);
    st = kh_cifar_bin_read_dir(dir, 1, 0, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, p[2], "cifar empty");
    unlink(p[4]);
    write_cifar(p[2], 3, 6, -1);
    st = kh_cifar_bin_read_dir(dir, 1, 0, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_IO, p[4], "cifar missing batch");
    CHECK(im.pixels == NULL, "cifar: nothing allocated after errors");
}

// --- image folders ---------------------------------------------------------------------------------------------
/* Pixel (y, x, ch) of test image `id`: smooth so JPEG keeps it close. */
static unsigned char pix_val(int id, int y, int x, int ch, int w, int h) {
    return (unsigned char)(20 + id * 8 + ch * 30 + (y * 40) / h + (x * 30) / w); /* <= 214: no wrap */
}

static void write_png(const char *path, int id, int w, int h, int ch, int bit16) {
    FILE *f = fopen(path, "wb");
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (!f || !png || !info || setjmp(png_jmpbuf(png))) {
        fprintf(stderr, "test setup: cannot write %s\n", path);
        exit(2);
    }
    png_init_io(png, f);
    int type = ch == 1 ? PNG_COLOR_TYPE_GRAY : ch == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_RGBA;
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, bit16 ? 16 : 8, type, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    unsigned char row[2 * 64 * 4];
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++)
            for (int c = 0; c < ch; c++) {
                unsigned char v = pix_val(id, y, x, c, w, h);
                if (bit16) row[(x * ch + c) * 2] = v, row[(x * ch + c) * 2 + 1] = 0x5a;
                else row[x * ch + c] = v;
            }
        png_write_row(png, row);
    }
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    fclose(f);
}

static void write_jpeg(const char *path, int id, int w, int h, int ch) {
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr jerr;
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "test setup: cannot write %s\n", path);
        exit(2);
    }
    c.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&c);
    jpeg_stdio_dest(&c, f);
    c.image_width = (JDIMENSION)w, c.image_height = (JDIMENSION)h, c.input_components = ch;
    c.in_color_space = ch == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 95, TRUE);
    jpeg_start_compress(&c, TRUE);
    unsigned char row[64 * 3];
    while (c.next_scanline < c.image_height) {
        int y = (int)c.next_scanline;
        for (int x = 0; x < w; x++)
            for (int k = 0; k < ch; k++) row[x * ch + k] = pix_val(id, y, x, k, w, h);
        JSAMPROW r = row;
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    fclose(f);
}

static void mkdir_or_die(const char *p) {
    if (mkdir(p, 0755) != 0) {
        fprintf(stderr, "test setup: mkdir %s failed\n", p);
        exit(2);
    }
}

/* root/{cat,ant}/ with PNGs ("10.png" sorts before "2.png") and root/bee/ with JPEGs, plus files that must be
 * ignored. Class order must be ant, bee, cat. */
static const char *make_folder(int w, int h) {
    const char *root = tmpdir("imgdir");
    char p[700];
    snprintf(p, sizeof p, "%s/cat", root), mkdir_or_die(p);
    snprintf(p, sizeof p, "%s/ant", root), mkdir_or_die(p);
    snprintf(p, sizeof p, "%s/bee", root), mkdir_or_die(p);
    snprintf(p, sizeof p, "%s/.hidden", root), mkdir_or_die(p);
    snprintf(p, sizeof p, "%s/cat/2.png", root), write_png(p, 0, w, h, 3, 0);
    snprintf(p, sizeof p, "%s/cat/10.PNG", root), write_png(p, 1, w, h, 3, 1);
    snprintf(p, sizeof p, "%s/cat/notes.txt", root), kh_test_write_file(p, "x", 1);
    snprintf(p, sizeof p, "%s/cat/.5.png", root), kh_test_write_file(p, "x", 1);
    snprintf(p, sizeof p, "%s/ant/a.png", root), write_png(p, 2, w, h, 3, 0);
    snprintf(p, sizeof p, "%s/bee/x.jpg", root), write_jpeg(p, 3, w, h, 3);
    snprintf(p, sizeof p, "%s/bee/y.jpeg", root), write_jpeg(p, 4, w, h, 3);
    snprintf(p, sizeof p, "%s/bee/z.jpg", root), write_jpeg(p, 5, w, h, 3);
    snprintf(p, sizeof p, "%s/README", root), kh_test_write_file(p, "x", 1);
    return root;
}

static int max_diff(const uint8_t *got, int id, int w, int h, int ch) {
    int worst = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < ch; c++) {
                int d = abs((int)got[(y * w + x) * ch + c] - (int)pix_val(id, y, x, c, w, h));
                if (d > worst) worst = d;
            }
    return worst;
}

static void test_folder_roundtrip(void) {
    const int W = 12, H = 9;
    const char *root = make_folder(W, H);
    kh_image_folder_opts o = {.width = W, .height = H, .channels = 3, .threads = 1};
    kh_images im = {0};
    kh_status st = kh_image_folder_read(root, &o, &im, err, sizeof err);
    CHECK(st == KH_OK, "folder read: %s", err);
    if (st != KH_OK) return;
    CHECK(im.n == 6 && im.n_classes == 3 && im.rows == H && im.cols == W && im.channels == 3, "folder shape n=%lld c=%d",
          (long long)im.n, im.n_classes);
    CHECK(im.class_names && !strcmp(im.class_names[0], "ant") && !strcmp(im.class_names[1], "bee") &&
              !strcmp(im.class_names[2], "cat"),
          "class names sorted");
    const int want_label[6] = {0, 1, 1, 1, 2, 2};
    const int want_id[6] = {2, 3, 4, 5, 1, 0}; /* cat: "10.PNG" < "2.png" bytewise */
    size_t stride = kh_images_stride(&im);
    for (int i = 0; i < 6; i++) {
        CHECK(im.labels[i] == want_label[i], "label %d: %d", i, im.labels[i]);
        int d = max_diff(im.pixels + (size_t)i * stride, want_id[i], W, H, 3);
        int tol = want_label[i] == 1 ? 6 : 0; /* PNG exact (16-bit reduced to the high byte), JPEG q95 close */
        CHECK(d <= tol, "image %d differs by %d (tolerance %d)", i, d, tol);
    }
    // more threads: identical result
    kh_images im2 = {0};
    o.threads = 3;
    st = kh_image_folder_read(root, &o, &im2, err, sizeof err);
    CHECK(st == KH_OK && im2.n == im.n && memcmp(im.pixels, im2.pixels, (size_t)im.n * stride) == 0,
          "threads=3 gives the same pixels: %s", err);
    kh_images_free(&im2);
    // limit: round-robin over classes (ant a, bee x, cat 10, bee y), output class-major
    o.limit = 4;
    st = kh_image_folder_read(root, &o, &im2, err, sizeof err);
    CHECK(st == KH_OK && im2.n == 4, "limit 4: %s", err);
    if (st == KH_OK) {
        CHECK(im2.labels[0] == 0 && im2.labels[1] == 1 && im2.labels[2] == 1 && im2.labels[3] == 2, "limit labels");
        CHECK(memcmp(im2.pixels + 2 * stride, im.pixels + 2 * stride, stride) == 0 &&
                  memcmp(im2.pixels + 3 * stride, im.pixels + 4 * stride, stride) == 0,
              "limit picks the first files of each class");
    }
    kh_images_free(&im2);
    kh_images_free(&im);

    // grayscale PNG folder with 1 channel
    const char *g = tmpdir("imggray");
    char p[700];
    snprintf(p, sizeof p, "%s/only", g), mkdir_or_die(p);
    snprintf(p, sizeof p, "%s/only/0.png", g), write_png(p, 7, 5, 4, 1, 0);
    snprintf(p, sizeof p, "%s/only/1.jpg", g), write_jpeg(p, 8, 5, 4, 1);
    kh_image_folder_opts og = {.width = 5, .height = 4, .channels = 1};
    st = kh_image_folder_read(g, &og, &im, err, sizeof err);
    CHECK(st == KH_OK && im.n == 2 && max_diff(im.pixels, 7, 5, 4, 1) == 0 && max_diff(im.pixels + 20, 8, 5, 4, 1) <= 6,
          "grayscale folder: %s", err);
    kh_images_free(&im);
}

static void test_folder_errors(void) {
    kh_image_folder_opts o = {.width = 12, .height = 9, .channels = 3};
    kh_images im = {0};
    kh_status st;
    char p[700];

    const char *missing = "/nonexistent/khost-test-folder";
    st = kh_image_folder_read(missing, &o, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_IO, missing, "missing folder");

    const char *empty = tmpdir("imgempty");
    st = kh_image_folder_read(empty, &o, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, empty, "empty folder");
    CHECK(strstr(err, "no class folders") != NULL, "empty folder message: %s", err);
    snprintf(p, sizeof p, "%s/dog", empty), mkdir_or_die(p);
    snprintf(p, sizeof p, "%s/dog/readme.txt", empty), kh_test_write_file(p, "x", 1);
    snprintf(p, sizeof p, "%s/dog", empty);
    st = kh_image_folder_read(empty, &o, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, p, "class folder without images");

    // wrong size: the message names the file and both shapes
    const char *root = make_folder(12, 9);
    snprintf(p, sizeof p, "%s/bee/y.jpeg", root);
    write_jpeg(p, 4, 12, 10, 3);
    st = kh_image_folder_read(root, &o, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, p, "wrong jpeg size");
    CHECK(strstr(err, "12x10x3") && strstr(err, "12x9x3"), "both shapes named: %s", err);
    write_jpeg(p, 4, 12, 9, 1);
    st = kh_image_folder_read(root, &o, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, p, "grayscale jpeg where RGB expected");
    write_jpeg(p, 4, 12, 9, 3);
    snprintf(p, sizeof p, "%s/ant/a.png", root);
    write_png(p, 2, 11, 9, 3, 0);
    st = kh_image_folder_read(root, &o, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, p, "wrong png size");
    CHECK(strstr(err, "11x9x3") && strstr(err, "12x9x3"), "both png shapes named: %s", err);
    write_png(p, 2, 12, 9, 4, 0);
    st = kh_image_folder_read(root, &o, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, p, "RGBA png where RGB expected");
    write_png(p, 2, 12, 9, 3, 0);

    // corrupt JPEG: cut in half (libjpeg would pad it with grey and warn), then garbage
    snprintf(p, sizeof p, "%s/bee/z.jpg", root);
    truncate_file(p, file_size(p) / 2);
    st = kh_image_folder_read(root, &o, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, p, "truncated jpeg");
    CHECK(strstr(err, "corrupt JPEG") != NULL, "truncated jpeg message: %s", err);
    kh_test_write_file(p, "not a jpeg at all, just text", 28);
    st = kh_image_folder_read(root, &o, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, p, "garbage jpeg");
    kh_test_write_file(p, "", 0);
    st = kh_image_folder_read(root, &o, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, p, "empty jpeg");
    write_jpeg(p, 5, 12, 9, 3);
    // corrupt PNG: cut short
    snprintf(p, sizeof p, "%s/cat/2.png", root);
    truncate_file(p, file_size(p) - 20);
    st = kh_image_folder_read(root, &o, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, p, "truncated png");
    // with several threads the first bad file (in sorted order) is the one reported
    char p2[700];
    snprintf(p2, sizeof p2, "%s/ant/a.png", root);
    kh_test_write_file(p2, "\x89PNG garbage", 12);
    o.threads = 4;
    st = kh_image_folder_read(root, &o, &im, err, sizeof err);
    CHECK_ERR_NAMES(st, KH_ERR_DATA, p2, "first failure reported");
    CHECK(im.pixels == NULL && im.class_names == NULL, "folder: nothing allocated after errors");
    kh_image_folder_opts bad = {.width = 12, .height = 9, .channels = 2};
    st = kh_image_folder_read(root, &bad, &im, err, sizeof err);
    CHECK(st == KH_ERR_INVALID, "channels 2 refused: %s", err);
}

// --- augmentation ------------------------------------------------------------------------------------------------
#define AH 4
#define AW 5
#define AC 2
static float aval(int y, int x, int c) { return (float)(100 * y + 10 * x + c); }

static void fill_img(float *img) {
    for (int y = 0; y < AH; y++)
        for (int x = 0; x < AW; x++)
            for (int c = 0; c < AC; c++) img[(y * AW + x) * AC + c] = aval(y, x, c);
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Check kh_image_shift_flip against the documented formula. */
static void check_shift(int ro, int co, int flip) {
    float img[AH * AW * AC];
    fill_img(img);
    kh_image_shift_flip(img, AH, AW, AC, ro, co, flip);
    int bad = 0;
    for (int y = 0; y < AH; y++)
        for (int x = 0; x < AW; x++) {
            int sx = flip ? AW - 1 - x : x;
            for (int c = 0; c < AC; c++)
                bad += img[(y * AW + x) * AC + c] != aval(clampi(y + ro, 0, AH - 1), clampi(sx + co, 0, AW - 1), c);
        }
    CHECK(bad == 0, "shift (%d, %d) flip %d: %d wrong values", ro, co, flip, bad);
}

static void test_augment(void) {
    // the primitive, for every offset including ones beyond the image (all edge)
    for (int ro = -5; ro <= 5; ro++)
        for (int co = -6; co <= 6; co++)
            for (int fl = 0; fl < 2; fl++) check_shift(ro, co, fl);
    // concrete: row_off 1 moves content up one row, the last row replicated (nearest fill)
    float img[AH * AW * AC];
    fill_img(img);
    kh_image_shift_flip(img, AH, AW, AC, 1, 0, 0);
    CHECK(img[0] == aval(1, 0, 0) && img[(3 * AW) * AC] == aval(3, 0, 0) && img[(2 * AW) * AC] == aval(3, 0, 0),
          "row shift moves content up, edge replicated");
    fill_img(img);
    kh_image_shift_flip(img, AH, AW, AC, 0, 0, 1);
    CHECK(img[0] == aval(0, 4, 0) && img[1] == aval(0, 4, 1) && img[(AW - 1) * AC] == aval(0, 0, 0), "flip mirrors columns");

    // determinism and distribution on 32x32x3 batches: recover each image's offsets from its pixels
    enum { N = 2000, S = 32, C = 3 };
    float *x = malloc(sizeof(float) * N * S * S * C), *y = malloc(sizeof(float) * N * S * S * C);
    for (int i = 0; i < N; i++)
        for (int r = 0; r < S; r++)
            for (int c = 0; c < S; c++)
                for (int k = 0; k < C; k++) x[(((size_t)i * S + r) * S + c) * C + k] = (float)(r * 1000 + c * 10 + k);
    memcpy(y, x, sizeof(float) * N * S * S * C);
    kh_shift_flip o = {.width_shift_range = 0.1, .height_shift_range = 0.1, .horizontal_flip = 1};
    CHECK(kh_augment_shift_flip(x, N, S, S, C, &o, 42, err, sizeof err) == KH_OK, "augment: %s", err);
    CHECK(kh_augment_shift_flip(y, N, S, S, C, &o, 42, err, sizeof err) == KH_OK, "augment: %s", err);
    CHECK(memcmp(x, y, sizeof(float) * N * S * S * C) == 0, "same seed, same augmentation");
    int hist_r[7] = {0}, hist_c[7] = {0}, flips = 0, bad = 0;
    for (int i = 0; i < N; i++) {
        const float *im = x + (size_t)i * S * S * C;
        // the centre pixel (16, 16) holds source (16 + ro, 16 + co) or, flipped, source column 15 - ... ;
        // the centre columns 15 and 16 decide the flip: unflipped, col 16 reads source col 16 + co > col 15's
        float v16 = im[(16 * S + 16) * C], v15 = im[(16 * S + 15) * C];
        int fl = v16 < v15;
        int sr = (int)v16 / 1000, sc = ((int)v16 % 1000) / 10;
        int ro = sr - 16, co = fl ? sc - (S - 1 - 16) : sc - 16;
        if (ro < -3 || ro > 3 || co < -3 || co > 3) {
            bad++;
            continue;
        }
        hist_r[ro + 3]++, hist_c[co + 3]++, flips += fl;
        // and the whole image matches the formula for those offsets
        for (int r = 0; r < S && !bad; r++)
            for (int c = 0; c < S; c++) {
                int sx = fl ? S - 1 - c : c;
                float want = (float)(clampi(r + ro, 0, S - 1) * 1000 + clampi(sx + co, 0, S - 1) * 10 + 1);
                if (im[(r * S + c) * C + 1] != want) {
                    bad++;
                    break;
                }
            }
    }
    CHECK(bad == 0, "augmented images that do not match the formula: %d", bad);
    CHECK(flips > N * 4 / 10 && flips < N * 6 / 10, "about half flipped: %d of %d", flips, N);
    // U(-3.2, 3.2) rounded: P(+-3) = 0.7/6.4 ~ 0.109, P(k) = 1/6.4 ~ 0.156 for |k| <= 2
    for (int k = 0; k < 7; k++) {
        double want = (k == 0 || k == 6 ? 0.7 : 1.0) / 6.4 * N;
        CHECK(hist_r[k] > want * 0.75 && hist_r[k] < want * 1.25, "row offset %d: %d, expected ~%.0f", k - 3, hist_r[k], want);
        CHECK(hist_c[k] > want * 0.75 && hist_c[k] < want * 1.25, "col offset %d: %d, expected ~%.0f", k - 3, hist_c[k], want);
    }
    // another seed gives another augmentation
    memcpy(x, y, sizeof(float) * N * S * S * C);
    kh_augment_shift_flip(x, 8, S, S, C, &o, 42, err, sizeof err);
    kh_augment_shift_flip(y, 8, S, S, C, &o, 43, err, sizeof err);
    CHECK(memcmp(x, y, sizeof(float) * 8 * S * S * C) != 0, "different seeds differ");
    // zero ranges and no flip: the identity
    memcpy(y, x, sizeof(float) * 8 * S * S * C);
    kh_shift_flip none = {0};
    kh_augment_shift_flip(x, 8, S, S, C, &none, 7, err, sizeof err);
    CHECK(memcmp(x, y, sizeof(float) * 8 * S * S * C) == 0, "no ranges: identity");
    kh_shift_flip wrong = {.width_shift_range = 1.5};
    CHECK(kh_augment_shift_flip(x, 8, S, S, C, &wrong, 7, err, sizeof err) == KH_ERR_INVALID, "range 1.5 refused");
    free(x);
    free(y);
}

int main(void) {
    test_idx_roundtrip(0, 0);
    test_idx_roundtrip(1, 1);
    test_idx_roundtrip(1, 0);
    test_idx_find();
    test_idx_errors();
    test_cifar();
    test_folder_roundtrip();
    test_folder_errors();
    test_augment();
    remove_tmpdirs();
    return kh_test_finish("test_data_image");
}
