/* core/sched/refcell.c — the reference frameworks and where their launcher is (refcell.h). */
#include "sched/refcell.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const kh_refcell_all[] = {"pytorch", "keras3-jax", "keras3-tensorflow", "keras3-torch", NULL};

const char *kh_refcell_find(const char *name) {
    for (int i = 0; kh_refcell_all[i]; i++)
        if (!strcmp(name, kh_refcell_all[i])) return kh_refcell_all[i];
    return NULL;
}

int kh_refcell_runner(const char *exe_path, char *buf, size_t n, char *err, size_t errlen) {
    const char *env = getenv("KHOST_REFERENCE_RUNNER");
    if (env && *env) {
        if (snprintf(buf, n, "%s", env) < (int)n && access(buf, X_OK) == 0) return 0;
        snprintf(err, errlen, "KHOST_REFERENCE_RUNNER=%s is not an executable file", env);
        return -1;
    }
    const char *slash = exe_path ? strrchr(exe_path, '/') : NULL;
    int dir_len = slash ? (int)(slash - exe_path) : 1;
    const char *dir = slash ? exe_path : ".";
    static const char *const tails[] = {"/../tools/reference/run", "/tools/reference/run"};
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++)
        if (snprintf(buf, n, "%.*s%s", dir_len, dir, tails[i]) < (int)n && access(buf, X_OK) == 0) return 0;
    snprintf(err, errlen, "no reference launcher: neither %.*s/../tools/reference/run nor %.*s/tools/reference/run "
             "exists (set KHOST_REFERENCE_RUNNER to tools/reference/run of a khost checkout)", dir_len, dir, dir_len, dir);
    return -1;
}
