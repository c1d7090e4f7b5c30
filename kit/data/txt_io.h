/* kit/data/txt_io.h — private helpers of the text readers: whole-file reads into a reusable buffer
 * and growable arrays with overflow checks. Not part of the public kit API. */
#ifndef KHOST_KIT_TXT_IO_H
#define KHOST_KIT_TXT_IO_H

#include <stddef.h>
#include <stdint.h>

/* Read the whole regular file into *buf (grown as needed; *cap is its size; one spare byte is kept for a NUL).
 * Returns 0 and sets *len, or an errno value (ENOENT when missing, ENOMEM; EINVAL for a FIFO, device or
 * folder, never opened in a way that blocks) with why naming the file and the reason. */
int txt_read_file(const char *path, char **buf, size_t *cap, size_t *len, char *why, size_t n);

/* Make room for `more` further elements of size `elem` in the array *p of *cap elements holding `used`.
 * Returns 0, or -1 on overflow/allocation failure (the array is left untouched). */
int txt_reserve(void **p, int64_t *cap, int64_t used, int64_t more, size_t elem);

#endif
