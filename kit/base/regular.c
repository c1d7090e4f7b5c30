/* kit/base/regular.c — opening only regular files, never blocking on anything else (khost/kit/regular.h). */
#define _POSIX_C_SOURCE 200809L
#include "khost/kit/regular.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* why from errno, errno kept for the caller. */
static void cannot_open(const char *path, char *why, size_t n) {
    int e = errno;
    snprintf(why, n, "%s: cannot open: %s", path, strerror(e));
    errno = e;
}

static const char *kind_of(mode_t m) {
    return S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
           : S_ISSOCK(m) ? "a socket" : S_ISDIR(m) ? "a directory" : "not a plain file";
}

int kh_open_regular_at(int dir_fd, const char *name, const char *path, struct stat *st_out, char *why, size_t n) {
    int fd = openat(dir_fd, name, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        cannot_open(path, why, n);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        cannot_open(path, why, n);
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, n, "%s: not a regular file (%s)", path, kind_of(st.st_mode));
        close(fd);
        errno = EINVAL;
        return -1;
    }
    if (st_out) *st_out = st;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        cannot_open(path, why, n);
        close(fd);
        return -1;
    }
    return fd;
}

int kh_open_regular(const char *path, char *why, size_t n) { return kh_open_regular_at(AT_FDCWD, path, path, NULL, why, n); }

FILE *kh_fopen_regular(const char *path, char *why, size_t n) {
    int fd = kh_open_regular(path, why, n);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        cannot_open(path, why, n);
        close(fd);
    }
    return f;
}
