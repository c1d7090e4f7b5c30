/* plugins/theano/cache/th_spawn.c — posix_spawn with captured output (th_spawn.h). */
#define _GNU_SOURCE /* pipe2, environ, strsignal */
#include "th_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define TH_SPAWN_CAPTURE_MAX (1u << 20)

/* environ without LC_ALL, plus LC_ALL=C first. The strings are environ's own (not copied). */
static char **child_env(void) {
    size_t n = 0;
    for (char **e = environ; e && *e; e++) n++;
    char **env = malloc((n + 2) * sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    env[k++] = (char *)"LC_ALL=C";
    for (char **e = environ; e && *e; e++)
        if (strncmp(*e, "LC_ALL=", 7) != 0) env[k++] = *e;
    env[k] = NULL;
    return env;
}

void th_spawn_describe(int wstatus, char *buf, size_t buflen) {
    if (WIFEXITED(wstatus))
        snprintf(buf, buflen, "exit status %d", WEXITSTATUS(wstatus));
    else if (WIFSIGNALED(wstatus))
        snprintf(buf, buflen, "killed by signal %d (%s)", WTERMSIG(wstatus), strsignal(WTERMSIG(wstatus)));
    else
        snprintf(buf, buflen, "wait status 0x%x", (unsigned)wstatus);
}

int th_spawn(const char *path, char *const argv[], char **out, const char *log_path, int *wstatus, char *err,
             size_t errlen) {
    int rc = -1, saved = 0;
    int pipefd[2] = {-1, -1}, logfd = -1;
    char **env = NULL;
    char *buf = NULL;
    size_t len = 0;
    posix_spawn_file_actions_t fa;
    int fa_ok = 0;
    pid_t pid = -1;

    if (out) *out = NULL;
    if (!(env = child_env())) {
        saved = errno;
        snprintf(err, errlen, "cannot run %s: out of memory", path);
        goto done;
    }
    if (out) {
        if (pipe2(pipefd, O_CLOEXEC) != 0) {
            saved = errno;
            snprintf(err, errlen, "cannot run %s: pipe: %s", path, strerror(errno));
            goto done;
        }
        if (!(buf = malloc(4096))) {
            saved = ENOMEM;
            snprintf(err, errlen, "cannot run %s: out of memory", path);
            goto done;
        }
    } else if (log_path) {
        logfd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (logfd < 0) {
            saved = errno;
            snprintf(err, errlen, "cannot create %s: %s", log_path, strerror(errno));
            goto done;
        }
    }
    int e = posix_spawn_file_actions_init(&fa);
    if (e) {
        saved = e;
        snprintf(err, errlen, "cannot run %s: %s", path, strerror(e));
        goto done;
    }
    fa_ok = 1;
    int target = out ? pipefd[1] : logfd;
    if ((e = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)) != 0 ||
        (target >= 0 && ((e = posix_spawn_file_actions_adddup2(&fa, target, 1)) != 0 ||
                         (e = posix_spawn_file_actions_adddup2(&fa, target, 2)) != 0)) ||
        (target < 0 && ((e = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0)) != 0 ||
                        (e = posix_spawn_file_actions_adddup2(&fa, 1, 2)) != 0))) {
        saved = e;
        snprintf(err, errlen, "cannot run %s: %s", path, strerror(e));
        goto done;
    }
    e = posix_spawn(&pid, path, &fa, NULL, argv, env);
    if (e) {
        pid = -1;
        saved = e;
        snprintf(err, errlen, "cannot run %s: %s", path, strerror(e));
        goto done;
    }
    if (out) {
        close(pipefd[1]);
        pipefd[1] = -1;
        size_t cap = 4096;
        for (;;) {
            if (len + 1 >= cap && cap < TH_SPAWN_CAPTURE_MAX + 1) {
                size_t ncap = cap * 2 > TH_SPAWN_CAPTURE_MAX + 1 ? TH_SPAWN_CAPTURE_MAX + 1 : cap * 2;
                char *nb = realloc(buf, ncap);
                if (!nb) {
                    saved = ENOMEM;
                    snprintf(err, errlen, "cannot run %s: out of memory", path);
                    goto done; /* the child is reaped below */
                }
                buf = nb;
                cap = ncap;
            }
            char sink[4096];
            int full = len + 1 >= cap;
            ssize_t got = full ? read(pipefd[0], sink, sizeof sink) : read(pipefd[0], buf + len, cap - 1 - len);
            if (got < 0) {
                if (errno == EINTR) continue;
                saved = errno;
                snprintf(err, errlen, "cannot read the output of %s: %s", path, strerror(errno));
                goto done;
            }
            if (got == 0) break;
            if (!full) len += (size_t)got;
        }
        buf[len] = 0;
    }
    rc = 0;
done:
    if (pipefd[0] >= 0) close(pipefd[0]);
    if (pipefd[1] >= 0) close(pipefd[1]);
    if (logfd >= 0) close(logfd);
    if (pid > 0) {
        int st = 0;
        pid_t w;
        while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR) {
        }
        if (w < 0 && rc == 0) {
            rc = -1;
            saved = errno;
            snprintf(err, errlen, "cannot wait for %s: %s", path, strerror(errno));
        }
        if (wstatus) *wstatus = st;
    }
    if (fa_ok) posix_spawn_file_actions_destroy(&fa);
    free(env);
    if (rc == 0 && out) {
        *out = buf;
        buf = NULL;
    }
    free(buf);
    if (rc != 0) errno = saved;
    return rc;
}
