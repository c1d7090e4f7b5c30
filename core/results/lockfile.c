/* core/results/lockfile.c — results-directory and cell locks (lockfile.h). */
#define _GNU_SOURCE
#include "results/lockfile.h"
#include "base/files.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "base/log.h"

static long read_pid(int fd) {
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = 0;
    char *end;
    long pid = strtol(buf, &end, 10);
    return pid > 0 && (*end == '\n' || *end == 0) ? pid : 0;
}

static int pid_alive(long pid) { return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM); }

int kh_lock_acquire(kh_lock *l, const char *path, int exclusive, const char *what, char *err, size_t errlen) {
    l->fd = -1;
    if (!(l->path = strdup(path))) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    /* No O_CLOEXEC: cells inherit the lock (see lockfile.h). A link planted in the lock file's place is never
     * followed (khost would write its pid into whatever it names), nor is anything but a regular file used. */
    char why[128];
    int fd = kh_create_regular(path, O_RDWR, 0644, why, sizeof why);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot create the lock file: %s", path, why);
        goto fail;
    }
    while (flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
        if (errno == EINTR) continue;
        if (errno == EWOULDBLOCK) {
            /* The pid in the file is the last exclusive holder's; shared holders (runs) leave none. */
            long pid = read_pid(fd);
            if (pid_alive(pid))
                snprintf(err, errlen, "%s: in use by khost pid %ld (lock file %s); wait for it to end or stop it",
                         what, pid, path);
            else
                snprintf(err, errlen, "%s: in use by running khost run processes (shared lock on %s); wait for "
                         "them to end", what, path);
        } else {
            snprintf(err, errlen, "%s: cannot lock: %s", path, strerror(errno));
        }
        close(fd);
        goto fail;
    }
    if (exclusive) {
        long old = read_pid(fd);
        if (old && old != (long)getpid())
            kh_logf(KH_LOG_INFO, "%s: taking over the lock of pid %ld, which is no longer running", path, old);
        char buf[32];
        int len = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
        /* The pid is for messages only; the flock is the lock. A full disk must not stop the run here. */
        if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)len, 0) != len)
            kh_logf(KH_LOG_WARN, "%s: cannot record pid %ld: %s", path, (long)getpid(), strerror(errno));
    }
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
