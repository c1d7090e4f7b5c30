/* th_build.c — a generated source to a loaded function: compiled by the configured C compiler and dlopen'ed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "th.h"

extern char **environ;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

kh_status th_build(th_session *s, const char *source, size_t len, const char *what, void **dl, th_fn *fn, int *hit,
                   double *cc_s, double *load_s) {
    char dir[] = "/tmp/khost-theano-XXXXXX";
    if (!mkdtemp(dir)) return th_fail(s, KH_ERR_IO, "compile", "cannot create a build directory: %s", strerror(errno));
    char src[256], so[256], log[256];
    snprintf(src, sizeof src, "%s/%s.c", dir, what);
    snprintf(so, sizeof so, "%s/%s.so", dir, what);
    snprintf(log, sizeof log, "%s/%s.log", dir, what);
    FILE *f = fopen(src, "w");
    if (!f || fwrite(source, 1, len, f) != len || fclose(f) != 0)
        return th_fail(s, KH_ERR_IO, "compile", "cannot write %s", src);
    char flags[512];
    snprintf(flags, sizeof flags, "%s", s->set.cflags);
    char *argv[64];
    int ac = 0;
    argv[ac++] = s->set.cc;
    for (char *tok = strtok(flags, " "); tok && ac < 56; tok = strtok(NULL, " ")) argv[ac++] = tok;
    argv[ac++] = "-shared";
    argv[ac++] = "-fPIC";
    argv[ac++] = "-o";
    argv[ac++] = so;
    argv[ac++] = src;
    argv[ac] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    double t0 = now();
    pid_t pid;
    int rc = posix_spawnp(&pid, s->set.cc, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return th_fail(s, KH_ERR_UNSUPPORTED, "compile",
                       "C compiler '%s' not found (set [plugin theano] cc = /path/to/compiler in khost.ini)", s->set.cc);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    *cc_s = now() - t0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return th_fail(s, KH_ERR_INTERNAL, "compile", "%s failed on %s (log %s)", s->set.cc, src, log);
    t0 = now();
    *dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!*dl) return th_fail(s, KH_ERR_INTERNAL, "compile", "dlopen %s: %s", so, dlerror());
    *fn = (th_fn)dlsym(*dl, "th_main");
    *load_s = now() - t0;
    *hit = 0;
    if (!*fn) return th_fail(s, KH_ERR_INTERNAL, "compile", "%s has no th_main", so);
    return KH_OK;
}
