/* core/base/files.c — the file operations every part of the host shares: a folder made with its parents, a file
 * replaced atomically (records, caches, reports, Slurm plans), a text file composed in memory first. Below the
 * results folder a command pinned (base/pinned.h) each is made through that folder's handle. */
#define _POSIX_C_SOURCE 200809L /* O_CLOEXEC */
#include "base/files.h"
#include "base/pinned.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The reason a file below the pinned folder could not be made: that the folder is gone, when it is. */
static const char *why_not(int e) {
    return kh_pinned_gone() ? "the results folder it belongs to was removed"
           : e == ELOOP || e == ENOTDIR ? "a folder on its way is a symbolic link or not a folder (not followed)"
                                        : strerror(e);
}

int kh_create_regular(const char *path, int flags, unsigned mode, char *why, size_t whylen) {
    const char *leaf;
    int pfd = kh_pinned_parent(path, 0, &leaf);
    if (pfd == -1) {
        snprintf(why, whylen, "%s", why_not(errno));
        return -1;
    }
    int fd = openat(pfd, leaf, flags | O_CREAT | O_NOFOLLOW | O_NONBLOCK, (mode_t)mode);
    int e = errno;
    if (pfd >= 0) close(pfd);
    errno = e;
    struct stat st;
    if (fd < 0) {
        snprintf(why, whylen, "%s", errno == ELOOP ? "it is a symbolic link (not followed)"
                                    : errno == ENXIO ? "not a regular file" : why_not(errno)); /* ENXIO: a FIFO */
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, whylen, "not a regular file");
        close(fd);
        return -1;
    }
    return fd;
}

int kh_unlink(const char *path) {
    const char *leaf;
    int pfd = kh_pinned_parent(path, 0, &leaf);
    if (pfd == -1) return errno == ENOENT ? 0 : -1;
    int rc = unlinkat(pfd, leaf, 0) != 0 && errno != ENOENT ? -1 : 0, e = errno;
    if (pfd >= 0) close(pfd);
    errno = e;
    return rc;
}

int kh_abs_path(const char *path, char *buf, size_t n) {
    char cwd[4096];
    if (path[0] != '/' && !getcwd(cwd, sizeof cwd)) return -1;
    int len = path[0] == '/' ? snprintf(buf, n, "%s", path) : snprintf(buf, n, "%s/%s", cwd, path);
    if (len < 0 || (size_t)len >= n) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

int kh_mkdirs(const char *path) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (size_t l = strlen(tmp); l > 1 && tmp[l - 1] == '/';) tmp[--l] = 0;
    const char *leaf;
    int pfd = kh_pinned_parent(tmp, 1, &leaf);
    if (pfd == -1) return -1;
    if (pfd >= 0) { /* below the pinned folder: made from its handle */
        int rc = mkdirat(pfd, leaf, 0777) != 0 && errno != EEXIST ? -1 : 0, e = errno;
        close(pfd);
        errno = e;
        return rc;
    }
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return -1;
    return 0;
}

int kh_write_atomic(const char *path, const void *data, size_t n, char *err, size_t errlen) {
    /* Messages name the file being replaced first (the temporary one second): on a full or read-only
     * disk that is the file the user knows, and its previous version is untouched. */
    const char *leaf;
    int dir = kh_pinned_parent(path, 0, &leaf);
    if (dir == -1) {
        snprintf(err, errlen, "%s: cannot write: %s", path, why_not(errno));
        return -1;
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", leaf, (long)getpid());
    int rc = -1;
    /* made new: a stale temporary (or a link planted in its place) is removed, never followed or reused */
    if (unlinkat(dir, tmp, 0) != 0 && errno != ENOENT) {
        snprintf(err, errlen, "%s: cannot write: %s (removing the stale %s)", path, why_not(errno), tmp);
        goto out;
    }
    int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot write: %s (creating %s)", path, why_not(errno), tmp);
        goto out;
    }
    const char *p = data;
    size_t left = n;
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR) continue;
            snprintf(err, errlen, "%s: cannot write: %s (writing %s)", path, strerror(errno), tmp);
            close(fd);
            unlinkat(dir, tmp, 0);
            goto out;
        }
        p += w;
        left -= (size_t)w;
    }
    int sync_rc = fsync(fd), sync_errno = errno;
    int close_rc = close(fd), close_errno = errno;
    if (sync_rc != 0 || close_rc != 0) {
        snprintf(err, errlen, "%s: cannot write: %s (%s %s)", path, strerror(sync_rc ? sync_errno : close_errno),
                 sync_rc ? "fsync of" : "closing", tmp);
        unlinkat(dir, tmp, 0);
        goto out;
    }
    if (renameat(dir, tmp, dir, leaf) != 0) {
        snprintf(err, errlen, "%s: cannot write: %s (renaming %s over it)", path, why_not(errno), tmp);
        unlinkat(dir, tmp, 0);
        goto out;
    }
    rc = 0;
out:
    if (dir >= 0) close(dir);
    return rc;
}

FILE *kh_memfile_open(kh_memfile *m, const char *name, char *err, size_t errlen) {
    m->text = NULL;
    m->len = 0;
    FILE *f = open_memstream(&m->text, &m->len);
    if (!f) snprintf(err, errlen, "%s: out of memory", name);
    return f;
}

int kh_memfile_write(kh_memfile *m, FILE *f, const char *path, char *err, size_t errlen) {
    int rc = -1;
    if (fclose(f) != 0 || !m->text) snprintf(err, errlen, "%s: out of memory", path);
    else rc = kh_write_atomic(path, m->text, m->len, err, errlen);
    free(m->text);
    m->text = NULL;
    return rc;
}
