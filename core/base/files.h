/* core/base/files.h — a folder made with its parents, a file replaced atomically (base/files.c). */
#ifndef KHOST_CORE_FILES_H
#define KHOST_CORE_FILES_H

#include <stddef.h>
#include <stdio.h>

/* Atomically replace path with data (temp + fsync + rename). 0 ok; else err names path and why. */
int kh_write_atomic(const char *path, const void *data, size_t n, char *err, size_t errlen);
/* A text file composed in memory and then put in place by kh_write_atomic, so that a reader never sees half of
 * it and a failure leaves the previous version. */
typedef struct kh_memfile {
    char *text;
    size_t len;
} kh_memfile;
/* The stream to compose m in; NULL when out of memory, err then "<name>: out of memory". */
FILE *kh_memfile_open(kh_memfile *m, const char *name, char *err, size_t errlen);
/* Closes f (from kh_memfile_open) and replaces path with what it holds; frees the text either way. 0 ok, else
 * err says why ("<path>: out of memory" when the stream could not hold it all). */
int kh_memfile_write(kh_memfile *m, FILE *f, const char *path, char *err, size_t errlen);
/* Open path to write, made when absent (flags: the access mode and O_TRUNC / O_APPEND / O_CLOEXEC as the caller
 * needs), never through a symbolic link and never waiting on a FIFO: anything but a regular file there is
 * refused. The descriptor, or -1 with why (no path: "it is a symbolic link (not followed)", "not a regular
 * file", or the system's reason). */
int kh_create_regular(const char *path, int flags, unsigned mode, char *why, size_t whylen);
/* Remove path (below the pinned folder: from its handle, never through a link on the way). 0 ok or absent, -1
 * with errno. */
int kh_unlink(const char *path);
/* mkdir -p; 0 ok. */
int kh_mkdirs(const char *path);
/* path made absolute against the working directory now, into buf: so a module that calls chdir() later cannot
 * move where khost writes. 0 ok; -1 (errno) when the working directory is unknown or the result does not fit. */
int kh_abs_path(const char *path, char *buf, size_t n);
#endif
