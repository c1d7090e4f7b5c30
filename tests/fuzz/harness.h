/* tests/fuzz/harness.h — what the file-reader fuzz targets share (harness.c): a temporary folder for the files
 * each input becomes, removed when the fuzzer exits; writing a file; reading a reader's images in full. */
#ifndef KHOST_FUZZ_HARNESS_H
#define KHOST_FUZZ_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "khost/kit/data_image.h"

/* The target's files. The first call makes the folder TMPDIR (or /tmp)/khost-fuzz-<name>-XXXXXX and in it the
 * folders of rel (NULL-terminated names; one ending in '/' is a folder); all of it goes away at exit. Returns
 * the folder (the same on every call), NULL when it cannot be made; harness_file(i) is the path of rel[i]. */
const char *harness_files(const char *name, const char *const rel[]);
const char *harness_file(int i);
/* b[0..n) as the file path; 0 ok. */
int harness_put(const char *path, const uint8_t *b, size_t n);
/* Reads every pixel and label of a reader's output so the sanitizers see any overrun of its arrays. */
void harness_touch(const kh_images *im);
#endif
