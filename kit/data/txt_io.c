/* kit/data/txt_io.c — whole-file reads and growable arrays for the text readers (see txt_io.h). */
#define _POSIX_C_SOURCE 200809L
#include "txt_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "khost/kit/regular.h"

static int grow_buf(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 4096;
    while (nc < need) {
        if (nc > SIZE_MAX / 2) return ENOMEM;
        nc *= 2;
    }
    char *nb = realloc(*buf, nc);
    if (!nb) return ENOMEM;
    *buf = nb;
    *cap = nc;
    return 0;
}

int txt_read_file(const char *path, char **buf, size_t *cap, size_t *len, char *why, size_t n) {
    struct stat st;
    int fd = kh_open_regular_at(AT_FDCWD, path, path, &st, why, n); /* a FIFO or a device never blocks the read */
    if (fd < 0) return errno ? errno : EINVAL;
    /* Size from fstat plus one byte, so a file that grew meanwhile is still read to its end (loop). */
    size_t want = (st.st_size > 0 ? (size_t)st.st_size : 0) + 2;
    int e = grow_buf(buf, cap, want);
    size_t got = 0;
    while (!e) {
        if (got + 1 >= *cap && (e = grow_buf(buf, cap, *cap + 1)) != 0) break;
        ssize_t r = read(fd, *buf + got, *cap - 1 - got);
        if (r < 0) {
            if (errno == EINTR) continue;
            e = errno;
            break;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (e) {
        snprintf(why, n, "%s: %s", path, e == ENOMEM ? "out of memory" : strerror(e));
        return e;
    }
    (*buf)[got] = 0;
    *len = got;
    return 0;
}

int txt_reserve(void **p, int64_t *cap, int64_t used, int64_t more, size_t elem) {
    if (more < 0 || used < 0 || used > INT64_MAX - more) return -1;
    int64_t need = used + more;
    if (need <= *cap) return 0;
    int64_t nc = *cap > 0 ? *cap : 1024;
    while (nc < need) {
        if (nc > INT64_MAX / 2) return -1;
        nc *= 2;
    }
    if ((uint64_t)nc > SIZE_MAX / elem) return -1;
    void *np = realloc(*p, (size_t)nc * elem);
    if (!np) return -1;
    *p = np;
    *cap = nc;
    return 0;
}
