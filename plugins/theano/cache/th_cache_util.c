/* plugins/theano/cache/th_cache_util.c — file helpers (th_cache_util.h). */
#define _GNU_SOURCE
#include "th_cache_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int th_path(char *buf, size_t buflen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, buflen, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= buflen) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

char *th_read_file(const char *path, size_t max, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return NULL;
    struct stat st;
    char *buf = NULL;
    int e = 0;
    if (fstat(fd, &st) != 0) {
        e = errno;
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        e = EINVAL;
        goto done;
    }
    if ((uint64_t)st.st_size > max) {
        e = EFBIG;
        goto done;
    }
    size_t want = (size_t)st.st_size, got = 0;
    if (!(buf = malloc(want + 1))) {
        e = ENOMEM;
        goto done;
    }
    while (got < want) {
        ssize_t r = pread(fd, buf + got, want - got, (off_t)got);
        if (r < 0) {
            if (errno == EINTR) continue;
            e = errno;
            free(buf);
            buf = NULL;
            goto done;
        }
        if (r == 0) break; /* shrank meanwhile: what was read */
        got += (size_t)r;
    }
    buf[got] = 0;
    if (len) *len = got;
done:
    close(fd);
    if (!buf) errno = e;
    return buf;
}

int th_fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

int th_is_hex(const char *name, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f'))) return 0;
    return name[n] == 0;
}
