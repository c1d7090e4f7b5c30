/* img_common.h — internal helpers shared by the image readers (not part of the public kit API). */
#ifndef KHOST_IMG_COMMON_H
#define KHOST_IMG_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "khost/kit/data_image.h"

/* Grow *buf (elements of `elem` bytes) to hold at least `need` elements, geometrically but never beyond
 * `max` elements. Readers whose input size is unknown up front (gzip) grow as data actually arrives, so a
 * header that lies about its counts cannot make them allocate more than twice the real data. */
kh_status img_grow(void **buf, size_t *cap, size_t need, size_t max, size_t elem);
/* 1 when s ends with suffix, ASCII case-insensitively. */
int img_has_suffix_ci(const char *s, const char *suffix);
/* 1 when path exists and is a regular file / a directory. */
int img_is_file(const char *path);
int img_is_dir(const char *path);

#endif
