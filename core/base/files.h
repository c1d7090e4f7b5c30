/* core/base/files.h — a folder made with its parents, a file replaced atomically (base/files.c). */
#ifndef KHOST_CORE_FILES_H
#define KHOST_CORE_FILES_H

#include <stddef.h>

/* Atomically replace path with data (temp + fsync + rename). 0 ok; else err names path and why. */
int kh_write_atomic(const char *path, const void *data, size_t n, char *err, size_t errlen);
/* mkdir -p; 0 ok. */
int kh_mkdirs(const char *path);
#endif
