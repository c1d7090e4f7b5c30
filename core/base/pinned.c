/* core/base/pinned.c — the results folder held open from a command's start (pinned.h). */
#define _GNU_SOURCE /* O_DIRECTORY, O_NOFOLLOW, F_DUPFD_CLOEXEC */
#include "base/pinned.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int g_fd = -1;
static char g_path[4096];
static size_t g_len;

int kh_pin_dir(const char *path, int nofollow) {
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    if (path[0] != '/' || len >= sizeof g_path) {
        errno = path[0] != '/' ? EINVAL : ENAMETOOLONG;
        return -1;
    }
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
    if (fd < 0) return -1;
    kh_unpin_dir();
    g_fd = fd;
    memcpy(g_path, path, len);
    g_path[len] = 0;
    g_len = len == 1 ? 0 : len; /* "/": every absolute path is below it */
    return 0;
}

void kh_unpin_dir(void) {
    if (g_fd >= 0) close(g_fd);
    g_fd = -1;
    g_path[0] = 0;
    g_len = 0;
}

int kh_pinned_stat(struct stat *st) { return g_fd >= 0 ? fstat(g_fd, st) : -1; }

int kh_pinned_gone(void) {
    struct stat st;
    return g_fd >= 0 && fstat(g_fd, &st) == 0 && st.st_nlink == 0;
}

/* The part of path below the pinned folder, or NULL when path is not below it. */
static const char *below(const char *path) {
    if (g_fd < 0 || strncmp(path, g_path, g_len) || path[g_len] != '/') return NULL;
    const char *r = path + g_len;
    while (*r == '/') r++;
    return *r ? r : NULL;
}

int kh_pinned_parent(const char *path, int make, const char **leaf) {
    const char *rel = below(path);
    if (!rel) {
        *leaf = path;
        return AT_FDCWD;
    }
    int fd = fcntl(g_fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return -1;
    for (const char *slash; (slash = strchr(rel, '/'));) {
        char comp[256];
        size_t l = (size_t)(slash - rel);
        if (l >= sizeof comp || (l == 2 && rel[0] == '.' && rel[1] == '.')) { /* never above the pinned folder */
            close(fd);
            errno = l >= sizeof comp ? ENAMETOOLONG : EINVAL;
            return -1;
        }
        memcpy(comp, rel, l);
        comp[l] = 0;
        for (rel = slash; *rel == '/';) rel++;
        if (!strcmp(comp, ".")) continue;
        if (make && mkdirat(fd, comp, 0777) != 0 && errno != EEXIST) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        int next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        close(fd);
        if (next < 0) {
            errno = e;
            return -1;
        }
        fd = next;
    }
    if (!*rel || !strcmp(rel, "..")) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    *leaf = rel;
    return fd;
}
