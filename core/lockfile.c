/* core/lockfile.c — the results directory lock (lockfile.h). */
#define _GNU_SOURCE
#include "lockfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "host_api.h"

static long read_pid(int fd) {
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = 0;
    char *end;
    long pid = strtol(buf, &end, 10);
    return pid > 0 && (*end == '\n' || *end == 0) ? pid : 0;
}

int kh_lock_acquire(kh_lock *l, const char *dir, char *err, size_t errlen) {
    l->fd = -1;
    size_t n = strlen(dir) + sizeof KH_LOCK_NAME + 1;
    if (!(l->path = malloc(n))) {
        snprintf(err, errlen, "%s: out of memory", dir);
        return -1;
    }
    snprintf(l->path, n, "%s/%s", dir, KH_LOCK_NAME);
    /* No O_CLOEXEC: cells inherit the lock (see lockfile.h). */
    int fd = open(l->path, O_RDWR | O_CREAT, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot create the results lock: %s", l->path, strerror(errno));
        goto fail;
    }
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EINTR) continue;
        if (errno == EWOULDBLOCK) {
            long pid = read_pid(fd);
            char who[48] = "another khost";
            if (pid) snprintf(who, sizeof who, "khost pid %ld", pid);
            snprintf(err, errlen, "%s: results directory in use by %s (lock file %s); wait for it to end or stop it",
                     dir, who, l->path);
        } else {
            snprintf(err, errlen, "%s: cannot lock: %s", l->path, strerror(errno));
        }
        close(fd);
        goto fail;
    }
    long old = read_pid(fd);
    if (old && old != (long)getpid())
        kh_logf(KH_LOG_INFO, "%s: taking over the lock of pid %ld, which is no longer running", l->path, old);
    char buf[32];
    int len = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
    /* The pid is for messages only; the flock is the lock. A full disk must not stop the run here. */
    if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)len, 0) != len)
        kh_logf(KH_LOG_WARN, "%s: cannot record pid %ld: %s", l->path, (long)getpid(), strerror(errno));
    l->fd = fd;
    return 0;
fail:
    free(l->path);
    l->path = NULL;
    return -1;
}

void kh_lock_release(kh_lock *l) {
    if (!l) return;
    if (l->fd >= 0) close(l->fd);
    free(l->path);
    l->fd = -1;
    l->path = NULL;
}
