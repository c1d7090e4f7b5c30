/* khost/kit/regular.h — opening a file khost reads (a data set, a corpus, a record, a plan, a cache) without
 * ever blocking on what is not a regular file: a FIFO would wait for a writer, a device such as /dev/zero would
 * never end. The file is opened non-blocking, checked with fstat (so a link to one is caught too, and nothing
 * can be swapped in between), and only a regular file is handed back, in blocking mode. (kit/base/regular.c) */
#ifndef KHOST_KIT_REGULAR_H
#define KHOST_KIT_REGULAR_H

#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>

/* A read-only descriptor (O_CLOEXEC) of dir_fd/name (dir_fd AT_FDCWD: name is a path), or -1 with why: "<path>:
 * cannot open: <reason>" or "<path>: not a regular file (a FIFO)". path names the file in why; st (may be NULL)
 * gets the open file's fstat, which the check made anyway. */
int kh_open_regular_at(int dir_fd, const char *name, const char *path, struct stat *st, char *why, size_t n);
int kh_open_regular(const char *path, char *why, size_t n);
/* The same as a stdio stream ("rb"). */
FILE *kh_fopen_regular(const char *path, char *why, size_t n);

#endif
