/* plugins/theano/cache/th_cache_util.h — file helpers shared by th_cache.c and th_cache_admin.c (internal). */
#ifndef TH_CACHE_UTIL_H
#define TH_CACHE_UTIL_H

#include <stddef.h>

/* snprintf into buf; -1 with errno ENAMETOOLONG when it does not fit. */
int th_path(char *buf, size_t buflen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Reads a whole regular file (opened O_NOFOLLOW) of at most max bytes into a malloc'ed NUL-terminated
 * buffer. NULL with errno set (EFBIG when larger than max, EINVAL when not a regular file). */
char *th_read_file(const char *path, size_t max, size_t *len);

/* fsync of a folder (the renames in it). 0 or -1 with errno. */
int th_fsync_dir(const char *dir);

/* Is name n hex digits (lowercase)? */
int th_is_hex(const char *name, size_t n);

/* The meta file's trailer after the key text. */
#define TH_META_TRAILER_FMT "artifact-size %llu\nartifact-sha256 %s\nend\n"
#define TH_META_TRAILER_MAX 128
#define TH_KEY_MAGIC "khost-theano-cache-key 1\n"

#endif
