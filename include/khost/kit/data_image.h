/* khost/kit/data_image.h — image data readers and augmentation of the helper library (libkhost_kit.a).
 *
 * Readers for the canonical image formats the benchmark's data sets come in: IDX (MNIST, Fashion-MNIST;
 * plain or gzip), CIFAR-10 binary batches, and image-folder trees (root/<class>/<file>.jpg, .jpeg or
 * .png, as the mirror ships CIFAR-10). Every reader streams its input, validates it (magic, dimensions, sizes, label
 * range) and holds no more memory than its output arrays. Errors go into a caller buffer as
 * "<path>: <what is wrong>"; nothing here exits, aborts or prints.
 *
 * Pixels are kept as u8 in HWC order (Keras channels_last); tasks convert to f32 per batch.
 */
#ifndef KHOST_DATA_IMAGE_H
#define KHOST_DATA_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "khost/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A set of equally sized images with one class label each. Zero-initialise before a read; free with
 * kh_images_free (which leaves it zeroed, so it may be reused). */
typedef struct kh_images {
    int64_t n;                  /* number of images */
    int32_t rows, cols, channels; /* per image (H, W, C) */
    uint8_t *pixels;            /* n * rows * cols * channels bytes, image-major, HWC within an image */
    int32_t *labels;            /* n class indices, 0 <= label < n_classes */
    int32_t n_classes;          /* readers that know the classes set it; IDX: max label + 1 */
    char **class_names;         /* image folders: n_classes names in index order; else NULL */
} kh_images;

void kh_images_free(kh_images *im);
/* Bytes of one image (rows * cols * channels). */
static inline size_t kh_images_stride(const kh_images *im) {
    return (size_t)im->rows * (size_t)im->cols * (size_t)im->channels;
}

/* --- IDX (MNIST) ------------------------------------------------------------------------------------------ */
#define KH_IDX_MAGIC_U8_RANK1 0x00000801u /* labels: u8 [n] */
#define KH_IDX_MAGIC_U8_RANK3 0x00000803u /* images: u8 [n, rows, cols] */

/* Find an IDX file: "<dir>/<name>" or "<dir>/<name>.gz" (whichever exists; the plain file first). `name`
 * may itself end in ".gz", in which case the plain name is tried too. Writes the found path into out and
 * returns KH_OK, or KH_ERR_IO with "<dir>/<name>.gz: not found" in out. */
kh_status kh_idx_find(const char *dir, const char *name, char *out, size_t outlen);

/* Read an IDX image file (magic 0x803) and its label file (magic 0x801), plain or gzip (detected from
 * content, not the name). limit > 0 keeps only the first `limit` samples (the rest is not read); 0 keeps
 * all. Checks: magics, dimensions (1..4096 rows/cols), image and label counts equal, no truncation, no
 * trailing bytes (plain files: from the file size; gzip: when reading everything). out->channels = 1,
 * out->n_classes = max label + 1. */
kh_status kh_idx_read(const char *images_path, const char *labels_path, int64_t limit, kh_images *out,
                      char *err, size_t errlen);

/* --- CIFAR-10 binary batches ----------------------------------------------------------------------------- */
#define KH_CIFAR_SIDE 32
#define KH_CIFAR_CLASSES 10
#define KH_CIFAR_RECORD (1 + 3 * 32 * 32) /* label byte + 3072 pixel bytes, channel-major (R, G, B planes) */

/* Read and concatenate CIFAR-10 binary batch files in order. Each file must be a non-empty multiple of
 * 3073 bytes, every label < 10. Output is HWC (32, 32, 3). limit > 0 keeps the first `limit` records. */
kh_status kh_cifar_bin_read(const char *const *paths, int n_paths, int64_t limit, kh_images *out, char *err,
                            size_t errlen);
/* The canonical split of a cifar-10-batches-bin folder: train = data_batch_1..5.bin, else test_batch.bin. */
kh_status kh_cifar_bin_read_dir(const char *dir, int train, int64_t limit, kh_images *out, char *err,
                                size_t errlen);

/* --- image folders --------------------------------------------------------------------------------------- */
typedef struct kh_image_folder_opts {
    int32_t width, height, channels; /* every image must have exactly these (channels 1 or 3) */
    /* limit > 0: keep `limit` images, taken round-robin over the classes (the first file of every class,
     * then the second, ...) so a small subset still has every class; only those files are decoded. */
    int64_t limit;
    int32_t threads; /* decoding threads; 0 = one per online CPU (at most 16) */
    /* Optional progress report, called from the calling thread only: progress(progress_ctx, what, done, total). */
    void (*progress)(void *ctx, const char *what, int64_t done, int64_t total);
    void *progress_ctx;
} kh_image_folder_opts;

/* Read root/<class>/<file> for every sub-folder <class> (hidden entries skipped), classes indexed by their
 * names in byte order, files of a class in byte order of their names; only *.jpg, *.jpeg and *.png
 * (any case) count. Output is class-major in that order, with out->class_names. Errors: missing root,
 * no class folders, a class with no images, an image of another size or channel count (names the file and
 * both shapes), a corrupt or truncated image (libjpeg warnings count as errors, as PIL rejects
 * truncated files). */
kh_status kh_image_folder_read(const char *root, const kh_image_folder_opts *opts, kh_images *out, char *err,
                               size_t errlen);

/* --- augmentation: Keras ImageDataGenerator(width_shift_range, height_shift_range, horizontal_flip,
 *     fill_mode='nearest') ------------------------------------------------------------------------------- *
 * Per image, in Keras 2's draw order: tx ~ U(-hs, hs) * H (rows), ty ~ U(-ws, ws) * W (cols), then a flip
 * with probability 1/2. Keras 2.0 applied the shift with scipy affine_transform(order=0), i.e.
 * nearest-neighbour sampling (scipy rounds a coordinate as floor(v + 0.5)), so a fractional shift acts as
 * the integer floor(t + 0.5) of the drawn t ({-3..3} for 32 px and 0.1; the drawn value is continuous, as in
 * Keras, so the end values -3 and 3 are rarer than the others). Pixel semantics:
 *     shifted(r, c) = x(clamp(r + row_off, 0, H-1), clamp(c + col_off, 0, W-1))
 * (the content moves by -offset; clamping is the 'nearest' fill, replicating edge pixels), then
 *     out(r, c) = shifted(r, W-1-c) when flipped.
 * The random stream is kh_rng seeded with `seed` (the host passes a per-batch seed), so a batch's
 * augmentation is reproducible. */
typedef struct kh_shift_flip {
    double width_shift_range;  /* fraction of W, e.g. 0.1 */
    double height_shift_range; /* fraction of H */
    int32_t horizontal_flip;   /* 1: flip with probability 1/2 */
} kh_shift_flip;

/* Transform one HWC f32 image in place (no allocation): the primitive, exposed for tests. */
void kh_image_shift_flip(float *img, int32_t h, int32_t w, int32_t c, int32_t row_off, int32_t col_off,
                         int flip);
/* Augment n HWC f32 images in place (x is NHWC). KH_ERR_INVALID on bad sizes or ranges. */
kh_status kh_augment_shift_flip(float *x, int64_t n, int32_t h, int32_t w, int32_t c, const kh_shift_flip *o,
                                uint64_t seed, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
