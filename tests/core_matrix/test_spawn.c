/* tests/core_matrix/test_spawn.c — the child runner behind `khost matrix` (core/base/child.h): exit codes,
 * crashes, timeouts that kill the whole process group (also a child ignoring SIGTERM), logs, environment,
 * spawn failures and Ctrl-C. Uses /bin/sh as the child, so it needs no backend or task module. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/child.h"
#include "testutil.h"

static int sh(const char *script, char *const envp[], const char *log, double timeout, double grace,
              kh_child_result *res) {
    char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
    return kh_child_run(argv, envp, log, timeout, grace, res);
}

static void nap(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* A process is gone when kill(0) fails or it is a zombie nobody reaps (PID 1 in a container may not). */
static int gone(pid_t pid) {
    for (int i = 0; i < 40; i++) {
        if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
        char path[64], stat[256] = {0};
        snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
        FILE *f = fopen(path, "r");
        if (f) {
            size_t n = fread(stat, 1, sizeof stat - 1, f);
            fclose(f);
            stat[n] = 0;
            const char *rp = strrchr(stat, ')');
            if (rp && rp[1] == ' ' && rp[2] == 'Z') return 1;
        }
        nap(0.05);
    }
    return 0;
}

static char *slurp(const char *path) {
    static char buf[4096];
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

int main(void) {
    const char *tmp = kh_test_tmpdir("spawn");
    char log[512], pidfile[512], script[1024];
    kh_child_result r;
    snprintf(log, sizeof log, "%s/cell.log", tmp);

    /* exit codes pass through */
    CHECK(sh("exit 3", NULL, NULL, 10, 1, &r) == 0, "spawn failed: %s", r.err);
    CHECK(r.outcome == KH_CHILD_EXITED && r.code == 3, "exit 3: outcome %d code %d", r.outcome, r.code);
    CHECK(sh("exit 0", NULL, NULL, 0, 1, &r) == 0 && r.outcome == KH_CHILD_EXITED && r.code == 0, "exit 0");

    /* a crash is a signal, not an exit code */
    CHECK(sh("kill -SEGV $$", NULL, NULL, 10, 1, &r) == 0, "spawn failed: %s", r.err);
    CHECK(r.outcome == KH_CHILD_SIGNALED && r.code == SIGSEGV, "segv: outcome %d code %d", r.outcome, r.code);

    /* stdout and stderr go to the log; stdin is /dev/null (cat ends at once) */
    CHECK(sh("echo to-stdout; echo to-stderr >&2; cat", NULL, log, 10, 1, &r) == 0, "spawn: %s", r.err);
    CHECK(r.outcome == KH_CHILD_EXITED && r.code == 0, "log run: %d %d", r.outcome, r.code);
    const char *text = slurp(log);
    CHECK(text && strstr(text, "to-stdout") && strstr(text, "to-stderr"), "log: %s", text ? text : "(none)");
    /* the log is truncated per run */
    CHECK(sh("echo second", NULL, log, 10, 1, &r) == 0, "spawn: %s", r.err);
    text = slurp(log);
    CHECK(text && !strstr(text, "to-stdout") && strstr(text, "second"), "log not truncated: %s", text ? text : "");

    /* the environment given is the one the child sees */
    char *envp[] = {"KHOST_TEST_VALUE=bar", "PATH=/usr/bin:/bin", NULL};
    CHECK(sh("test \"$KHOST_TEST_VALUE\" = bar", envp, NULL, 10, 1, &r) == 0 && r.outcome == KH_CHILD_EXITED &&
              r.code == 0, "environment not passed: code %d", r.code);

    /* timeout: the child and its background grandchild both die, promptly */
    snprintf(pidfile, sizeof pidfile, "%s/grandchild.pid", tmp);
    snprintf(script, sizeof script, "sleep 30 & echo $! > '%s'; wait", pidfile);
    CHECK(sh(script, NULL, NULL, 0.5, 1, &r) == 0, "spawn: %s", r.err);
    CHECK(r.outcome == KH_CHILD_TIMEOUT, "timeout: outcome %d code %d", r.outcome, r.code);
    CHECK(r.wall_s >= 0.5 && r.wall_s < 5, "timeout took %.2f s", r.wall_s);
    text = slurp(pidfile);
    long gpid = text ? atol(text) : 0;
    CHECK(gpid > 1, "no grandchild pid");
    if (gpid > 1) CHECK(gone((pid_t)gpid), "grandchild %ld survived the timeout", gpid);

    /* a child that ignores SIGTERM gets SIGKILL after the grace period */
    CHECK(sh("trap '' TERM; sleep 30; sleep 30", NULL, NULL, 0.3, 0.3, &r) == 0, "spawn: %s", r.err);
    CHECK(r.outcome == KH_CHILD_TIMEOUT && r.code == SIGKILL, "term-ignoring: outcome %d code %d", r.outcome, r.code);
    CHECK(r.wall_s < 5, "term-ignoring took %.2f s", r.wall_s);

    /* a program that cannot start */
    char *bad[] = {"/nonexistent/khost", "run", NULL};
    CHECK(kh_child_run(bad, NULL, NULL, 10, 1, &r) == -1, "spawning a missing program succeeded");
    CHECK(r.outcome == KH_CHILD_SPAWN_FAILED && strstr(r.err, "/nonexistent/khost"), "err: %s", r.err);
    /* an unwritable log */
    CHECK(sh("exit 0", NULL, "/nonexistent/dir/cell.log", 10, 1, &r) == -1, "unwritable log accepted");
    CHECK(strstr(r.err, "/nonexistent/dir/cell.log") != NULL, "err: %s", r.err);

    /* Ctrl-C while a cell runs: the child's group is killed, the runner says so. SIGHUP, ignored here as
     * under nohup, must stay ignored. */
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_IGN);
    kh_child_signals(1);
    raise(SIGHUP);
    CHECK(!kh_child_interrupted(), "interrupted before SIGINT (an ignored SIGHUP counted)");
    pid_t helper = fork();
    if (helper == 0) {
        nap(0.3);
        kill(getppid(), SIGINT);
        _exit(0);
    }
    CHECK(helper > 0, "fork failed");
    CHECK(sh("sleep 30", NULL, NULL, 0, 0.5, &r) == 0, "spawn: %s", r.err);
    CHECK(r.outcome == KH_CHILD_INTERRUPTED, "interrupt: outcome %d code %d", r.outcome, r.code);
    CHECK(r.wall_s < 5, "interrupt took %.2f s", r.wall_s);
    CHECK(kh_child_interrupted(), "interrupt not recorded");
    if (helper > 0) waitpid(helper, NULL, 0);
    kh_child_signals(0);
    return kh_test_finish("core_matrix_spawn");
}
