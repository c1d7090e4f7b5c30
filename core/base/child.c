/* core/base/child.c — a child process run to its end: its own process group, output into a log, a timeout
 * with a grace period, the interrupt handlers that end it with us (base/child.h). The matrix's cells and the
 * Slurm array tasks run through it. */
#define _GNU_SOURCE /* environ */
#include "base/child.h"
#include "base/files.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "khost/kit/clock.h"

extern char **environ;

// --- signals --------------------------------------------------------------------------------------------
static volatile sig_atomic_t g_interrupted;
static struct sigaction g_old_int, g_old_term, g_old_hup;
static int g_signals_on;

static void on_signal(int sig) {
    (void)sig;
    g_interrupted = 1;
}

void kh_child_signals(int on) {
    if (on && !g_signals_on) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        g_interrupted = 0;
        /* A signal that was ignored stays ignored: `nohup khost matrix &` must survive the hangup, and a
         * shell's background job ignores SIGINT. */
        static const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
        struct sigaction *old[3] = {&g_old_int, &g_old_term, &g_old_hup};
        for (int i = 0; i < 3; i++) {
            sigaction(sigs[i], &sa, old[i]);
            if (old[i]->sa_handler == SIG_IGN) sigaction(sigs[i], old[i], NULL);
        }
        g_signals_on = 1;
    } else if (!on && g_signals_on) {
        sigaction(SIGINT, &g_old_int, NULL);
        sigaction(SIGTERM, &g_old_term, NULL);
        sigaction(SIGHUP, &g_old_hup, NULL);
        g_signals_on = 0;
    }
}

int kh_child_interrupted(void) { return g_interrupted != 0; }

// --- one child ------------------------------------------------------------------------------------------
static struct rusage g_child_ru; /* of the last child reaped: its peak resident set */

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL); /* EINTR is fine: the caller re-checks */
}

/* Wait up to `limit` seconds (< 0: forever) for pid; 1 when it ended (status filled), 0 when not. */
static int wait_for(pid_t pid, int *status, double limit) {
    double start = kh_now(), nap = 0.01;
    for (;;) {
        pid_t r = wait4(pid, status, WNOHANG, &g_child_ru);
        if (r == pid) return 1;
        if (r < 0 && errno != EINTR) { /* ECHILD: reaped elsewhere; nothing more to learn */
            *status = 0;
            return 1;
        }
        if (limit >= 0 && kh_now() - start >= limit) return 0;
        if (g_interrupted && limit < 0) return 0;
        sleep_s(nap);
        if (nap < 0.1) nap *= 2; /* short cells answer fast; long ones cost ~10 wakeups a second */
    }
}

/* The address space process pid uses (VmSize) and may use (its "Max address space"), in bytes; -1 unknown or
 * unlimited. */
static void address_space(pid_t pid, int64_t *size, int64_t *limit) {
    char path[64], line[256];
    *size = *limit = -1;
    snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f)) {
        long long kb;
        if (sscanf(line, "VmSize: %lld kB", &kb) == 1) *size = kb * 1024;
    }
    if (f) fclose(f);
    snprintf(path, sizeof path, "/proc/%ld/limits", (long)pid);
    f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f)) {
        long long soft;
        if (sscanf(line, "Max address space %lld", &soft) == 1) *limit = soft; /* "unlimited": no number */
    }
    if (f) fclose(f);
}

/* SIGTERM to the group, SIGKILL after grace; always reaps. The group id is the child's pid (setpgid 0),
 * which the kernel does not reuse while the group has members. */
static void kill_group(pid_t pid, double grace_s, int *status) {
    kill(-pid, SIGTERM);
    if (!wait_for(pid, status, grace_s)) {
        kill(-pid, SIGKILL);
        while (wait4(pid, status, 0, &g_child_ru) < 0 && errno == EINTR) {
        }
    }
    kill(-pid, SIGKILL); /* grandchildren (a compiler the backend ran) that ignored SIGTERM */
}

int kh_child_run(char *const argv[], char *const envp[], const char *log_path, double timeout_s,
                 double grace_s, kh_child_result *out) {
    memset(out, 0, sizeof *out);
    out->outcome = KH_CHILD_SPAWN_FAILED;
    out->vm_size_bytes = out->as_limit_bytes = -1;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    int rc, logfd = -1, have_fa = 0, have_at = 0;
    pid_t pid = -1;

    if ((rc = posix_spawn_file_actions_init(&fa)) != 0) goto fail;
    have_fa = 1;
    if ((rc = posix_spawnattr_init(&at)) != 0) goto fail;
    have_at = 1;
    if ((rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)) != 0) goto fail;
    if (log_path) {
        /* a link in the log's place is not followed, a FIFO never waited on: a regular file or an error */
        char why[128];
        logfd = kh_create_regular(log_path, O_WRONLY | O_TRUNC | O_CLOEXEC, 0666, why, sizeof why);
        if (logfd < 0) {
            snprintf(out->err, sizeof out->err, "%s: cannot create log: %s", log_path, why);
            goto cleanup;
        }
        if ((rc = posix_spawn_file_actions_adddup2(&fa, logfd, 1)) != 0 ||
            (rc = posix_spawn_file_actions_adddup2(&fa, logfd, 2)) != 0)
            goto fail;
    }
    /* Own process group, so a timeout kills everything the cell started; default dispositions and an
     * empty mask, whatever this process ignores or blocks. */
    sigset_t none, def;
    sigemptyset(&none);
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    sigaddset(&def, SIGINT);
    sigaddset(&def, SIGTERM);
    sigaddset(&def, SIGHUP);
    if ((rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                                POSIX_SPAWN_SETSIGDEF)) != 0 ||
        (rc = posix_spawnattr_setpgroup(&at, 0)) != 0 || (rc = posix_spawnattr_setsigmask(&at, &none)) != 0 ||
        (rc = posix_spawnattr_setsigdefault(&at, &def)) != 0)
        goto fail;

    double start = kh_now();
    memset(&g_child_ru, 0, sizeof g_child_ru);
    rc = posix_spawn(&pid, argv[0], &fa, &at, argv, envp ? envp : environ);
    if (rc != 0) goto fail;
    /* Until the child has called setpgid, kill(-pid) could miss it; posix_spawn returns after the exec
     * succeeded on glibc, so the group exists by now. */
    int status = 0, done = 0;
    while (!done) {
        double left = timeout_s > 0 ? timeout_s - (kh_now() - start) : -1;
        if (timeout_s > 0 && left <= 0) {
            address_space(pid, &out->vm_size_bytes, &out->as_limit_bytes);
            kill_group(pid, grace_s, &status);
            out->outcome = KH_CHILD_TIMEOUT;
            out->code = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
            break;
        }
        if (g_interrupted) {
            kill_group(pid, grace_s, &status);
            out->outcome = KH_CHILD_INTERRUPTED;
            out->code = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
            break;
        }
        /* Slices of at most 1 s so timeouts and interrupts are noticed promptly. */
        done = wait_for(pid, &status, left < 0 || left > 1.0 ? 1.0 : left);
        if (done) {
            if (WIFSIGNALED(status)) {
                out->outcome = KH_CHILD_SIGNALED;
                out->code = WTERMSIG(status);
            } else {
                out->outcome = KH_CHILD_EXITED;
                out->code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            }
        }
    }
    out->wall_s = kh_now() - start;
    out->peak_rss_bytes = (int64_t)g_child_ru.ru_maxrss * 1024;
    goto cleanup;
fail:
    snprintf(out->err, sizeof out->err, "cannot start %s: %s", argv[0], strerror(rc));
cleanup:
    if (logfd >= 0) close(logfd);
    if (have_fa) posix_spawn_file_actions_destroy(&fa);
    if (have_at) posix_spawnattr_destroy(&at);
    return out->outcome == KH_CHILD_SPAWN_FAILED ? -1 : 0;
}
