/* img_common.c — kh_images lifetime and small helpers shared by the image readers. */
#define _POSIX_C_SOURCE 200809L
#include "img_common.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

void kh_images_free(kh_images *im) {
    if (!im) return;
    free(im->pixels);
    free(im->labels);
    if (im->class_names) {
        for (int32_t i = 0; i < im->n_classes; i++) free(im->class_names[i]);
        free(im->class_names);
    }
    memset(im, 0, sizeof *im);
}

kh_status img_grow(void **buf, size_t *cap, size_t need, size_t max, size_t elem) {
    if (need <= *cap) return KH_OK;
    if (need > max) return KH_ERR_INVALID;
    size_t ncap = *cap ? *cap : 4096;
    while (ncap < need) ncap = ncap > max / 2 ? max : ncap * 2;
    if (ncap > max) ncap = max;
    if (ncap > SIZE_MAX / elem) return KH_ERR_NOMEM;
    void *p = realloc(*buf, ncap * elem);
    if (!p) return KH_ERR_NOMEM;
    *buf = p;
    *cap = ncap;
    return KH_OK;
}

int img_has_suffix_ci(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

int img_is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int img_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}
