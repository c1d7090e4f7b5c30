/* plugins/theano/cache/th_spawn.c — fork and exec with captured output and a deadline (th_spawn.h). */
#define _GNU_SOURCE /* pipe2, environ, strsignal */
#include "th_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <time.h>
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

static double g_timeout_s; /* 0: no deadline */

void th_spawn_set_timeout(double seconds) { g_timeout_s = seconds > 0 ? seconds : 0; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Milliseconds left before the deadline (-1: none, 0: passed). */
static int left_ms(double deadline) {
    if (deadline <= 0) return -1;
    double l = deadline - now_s();
    return l <= 0 ? 0 : l > 1e6 ? 1000000000 : (int)(l * 1000) + 1;
}

/* The child's side, between fork and exec: only async-signal-safe calls. Its own process group (so the
 * deadline kills the compiler with everything it started), SIGKILL when the thread that forked it ends
 * (khost killed or exiting: no compiler left under init), then the descriptors and the program. */
static void child(const char *path, char *const argv[], char **env, int target, pid_t parent) {
    if (setpgid(0, 0) != 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
    int nul = open("/dev/null", O_RDONLY);
    if (nul < 0 || dup2(nul, 0) < 0) _exit(127);
    if (target < 0 && (target = open("/dev/null", O_WRONLY)) < 0) _exit(127);
    if (dup2(target, 1) < 0 || dup2(target, 2) < 0) _exit(127);
    execve(path, argv, env);
    _exit(errno == ENOENT ? 126 : 127);
}

int th_spawn(const char *path, char *const argv[], char **out, const char *log_path, int *wstatus, char *err,
             size_t errlen) {
    int rc = -1, saved = 0, timed_out = 0, stopped = 0;
    int pipefd[2] = {-1, -1}, logfd = -1;
    char **env = NULL;
    char *buf = NULL;
    size_t len = 0;
    pid_t pid = -1;
    double deadline = g_timeout_s > 0 ? now_s() + g_timeout_s : 0;

    if (out) *out = NULL;
    if (access(path, X_OK) != 0) { /* what posix_spawn reported before the fork: ENOENT means no program */
        saved = errno;
        snprintf(err, errlen, "cannot run %s: %s", path, strerror(errno));
        goto done;
    }
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
    int target = out ? pipefd[1] : logfd;
    pid_t parent = getpid();
    pid = fork();
    if (pid < 0) {
        saved = errno;
        snprintf(err, errlen, "cannot run %s: fork: %s", path, strerror(errno));
        goto done;
    }
    if (pid == 0) child(path, argv, env, target, parent);
    setpgid(pid, pid); /* also from this side, so a kill of the group cannot miss a child not yet there */
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
            struct pollfd pf = {.fd = pipefd[0], .events = POLLIN};
            int pr = poll(&pf, 1, left_ms(deadline));
            if (pr < 0 && errno == EINTR) { /* a signal the host handles (SIGTERM, SIGINT): stop compiling */
                stopped = 1;
                goto done;
            }
            if (pr == 0) {
                timed_out = 1;
                goto done;
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
        for (;;) {
            if (!timed_out && !stopped && left_ms(deadline) == 0) timed_out = 1;
            int kill_now = timed_out || stopped || rc != 0;
            if (kill_now) kill(-pid, SIGKILL); /* the compiler and whatever it started */
            w = waitpid(pid, &st, kill_now ? 0 : WNOHANG);
            if (w < 0 && errno == EINTR) continue;
            if (w != 0) break;
            struct timespec nap = {0, 20 * 1000000L};
            if (nanosleep(&nap, NULL) != 0 && errno == EINTR) stopped = 1;
        }
        kill(-pid, SIGKILL); /* grandchildren that outlived the driver */
        if (stopped) {
            rc = -1;
            saved = EINTR;
            snprintf(err, errlen, "%s: interrupted by a signal: killed", path);
        } else if (timed_out) {
            rc = -1;
            saved = ETIMEDOUT;
            snprintf(err, errlen, "%s did not finish within %g s ([plugin theano] cc_timeout): killed", path, g_timeout_s);
        } else if (w < 0 && rc == 0) {
            rc = -1;
            saved = errno;
            snprintf(err, errlen, "cannot wait for %s: %s", path, strerror(errno));
        }
        if (wstatus) *wstatus = st;
    }
    free(env);
    if (rc == 0 && out) {
        *out = buf;
        buf = NULL;
    }
    free(buf);
    if (rc != 0) errno = saved;
    return rc;
}
