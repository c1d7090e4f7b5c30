/* core/sched/slurm/slurm_exec.c — running Slurm's commands (sbatch, sacct, scontrol) with their output captured and a
 * bounded wait (a controller that does not answer must not hang a cell or the collector), and reading
 * Slurm's job states. */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cell/env.h"
#include "sched/slurm/slurm.h"
#include "khost/kit/clock.h"

extern char **environ;

int kh_slurm_exec(char *const argv[], char *out, size_t n, double timeout_s) {
    out[0] = 0;
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        snprintf(out, n, "%s: pipe: %s", argv[0], strerror(errno));
        return -1;
    }
    posix_spawn_file_actions_t fa;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc == 0) {
        if ((rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)) == 0 &&
            (rc = posix_spawn_file_actions_adddup2(&fa, pfd[1], 1)) == 0)
            rc = posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
        pid_t pid = -1;
        if (rc == 0) rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (rc == 0) {
            close(pfd[1]);
            size_t got = 0;
            int timed_out = 0;
            double start = kh_now();
            for (;;) {
                double left = timeout_s - (kh_now() - start);
                if (left <= 0) {
                    timed_out = 1;
                    break;
                }
                struct pollfd p = {pfd[0], POLLIN, 0};
                int pr = poll(&p, 1, left > 1.0 ? 1000 : (int)(left * 1000) + 1);
                if (pr < 0 && errno != EINTR) break;
                if (pr <= 0) continue;
                char tmp[4096];
                ssize_t r = read(pfd[0], tmp, sizeof tmp);
                if (r < 0 && errno == EINTR) continue;
                if (r <= 0) break; /* EOF: the command (and anything holding its output) is done */
                size_t take = (size_t)r;
                if (got + take > n - 1) take = n - 1 - got; /* the rest is drained and dropped */
                memcpy(out + got, tmp, take);
                got += take;
            }
            out[got] = 0;
            close(pfd[0]);
            if (timed_out) kill(pid, SIGKILL);
            int st = 0;
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
            }
            if (timed_out) return -2;
            return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
        }
    }
    close(pfd[0]);
    close(pfd[1]);
    snprintf(out, n, "cannot run %s: %s", argv[0], strerror(rc));
    return -1;
}

const char *kh_slurm_status(const char *state) {
    static const char *const map[][2] = {
        {"COMPLETED", ""},         {"CANCELLED", "cancelled"}, {"TIMEOUT", "timeout"},
        {"NODE_FAIL", "node_fail"}, {"PREEMPTED", "preempted"}, {"OUT_OF_MEMORY", "oom"},
        {"FAILED", "error"},       {"BOOT_FAIL", "killed"},    {"DEADLINE", "killed"},
        {"REVOKED", "killed"},     {"SPECIAL_EXIT", "killed"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        size_t l = strlen(map[i][0]);
        if (!strncmp(state, map[i][0], l) && (state[l] == 0 || state[l] == ' ' || state[l] == '+'))
            return map[i][1];
    }
    return NULL; /* PENDING, RUNNING, COMPLETING, REQUEUED, SUSPENDED, ...: not over yet */
}
