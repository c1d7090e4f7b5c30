/* augment.c — CIFAR-style real-time augmentation, as Keras 2.0's ImageDataGenerator(width_shift_range,
 * height_shift_range, horizontal_flip=True, fill_mode='nearest') did it: see khost/kit/data_image.h for the
 * exact semantics. Works in place on f32 NHWC without allocating: a shift by a non-negative offset reads
 * only positions at or after the one it writes (ascending order is safe), a negative one only positions at
 * or before (descending order is safe), and clamping is the 'nearest' fill. */
#include <math.h>
#include <string.h>

#include "img_common.h"
#include "khost/kit/status.h"
#include "khost/kit/rng.h"

static inline int32_t clampi(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Shift the `count` cells (each `cell` floats, `step` floats apart) of one line in place. */
static void shift_line(float *base, int32_t count, size_t step, size_t cell, int32_t off) {
    if (off == 0) return;
    if (off > 0) {
        for (int32_t i = 0; i < count; i++)
            memmove(base + (size_t)i * step, base + (size_t)clampi(i + off, 0, count - 1) * step, cell * sizeof(float));
    } else {
        for (int32_t i = count - 1; i >= 0; i--)
            memmove(base + (size_t)i * step, base + (size_t)clampi(i + off, 0, count - 1) * step, cell * sizeof(float));
    }
}

void kh_image_shift_flip(float *img, int32_t h, int32_t w, int32_t c, int32_t row_off, int32_t col_off, int flip) {
    size_t row = (size_t)w * (size_t)c;
    shift_line(img, h, row, row, row_off);                  /* whole rows move */
    if (col_off != 0)
        for (int32_t r = 0; r < h; r++) shift_line(img + (size_t)r * row, w, (size_t)c, (size_t)c, col_off);
    if (flip)
        for (int32_t r = 0; r < h; r++) {
            float *p = img + (size_t)r * row;
            for (int32_t a = 0, b = w - 1; a < b; a++, b--)
                for (int32_t k = 0; k < c; k++) {
                    float t = p[(size_t)a * c + k];
                    p[(size_t)a * c + k] = p[(size_t)b * c + k];
                    p[(size_t)b * c + k] = t;
                }
        }
}

/* np.random.uniform(-range, range) * size, applied with order-0 interpolation: floor(t + 0.5). */
static int32_t draw_shift(kh_rng *r, double range, int32_t size) {
    if (range <= 0) return 0; /* Keras draws nothing for a zero range */
    double t = (-range + 2.0 * range * kh_rng_uniform(r)) * (double)size;
    return (int32_t)floor(t + 0.5);
}

kh_status kh_augment_shift_flip(float *x, int64_t n, int32_t h, int32_t w, int32_t c, const kh_shift_flip *o,
                                uint64_t seed, char *err, size_t errlen) {
    if (!x || !o || n < 0 || h <= 0 || w <= 0 || c <= 0)
        return kh_errf(err, errlen, KH_ERR_INVALID, "augment: bad batch shape %lldx%dx%dx%d", (long long)n, h, w, c);
    if (!(o->width_shift_range >= 0 && o->width_shift_range < 1) ||
        !(o->height_shift_range >= 0 && o->height_shift_range < 1))
        return kh_errf(err, errlen, KH_ERR_INVALID, "augment: shift ranges must be fractions in [0, 1), got %g, %g",
                       o->width_shift_range, o->height_shift_range);
    kh_rng r;
    kh_rng_seed(&r, seed);
    size_t stride = (size_t)h * (size_t)w * (size_t)c;
    for (int64_t i = 0; i < n; i++) {
        /* Keras 2's draw order: height shift (tx, rows), width shift (ty, cols), then the flip. */
        int32_t row_off = draw_shift(&r, o->height_shift_range, h);
        int32_t col_off = draw_shift(&r, o->width_shift_range, w);
        int flip = o->horizontal_flip && kh_rng_uniform(&r) < 0.5;
        kh_image_shift_flip(x + (size_t)i * stride, h, w, c, row_off, col_off, flip);
    }
    return KH_OK;
}
