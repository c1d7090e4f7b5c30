/* core/base/procguard.c — parent-death signal and memory limit for khost's children (procguard.h). */
#define _GNU_SOURCE /* prctl */
#include "base/procguard.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

static void on_parent_death(int sig) {
    (void)sig;
    kill(0, SIGKILL); /* our group: this process and everything it started */
    _exit(128 + SIGTERM);
}

int kh_parse_bytes(const char *s, uint64_t *out) {
    if (!s || *s < '0' || *s > '9') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno) return -1;
    unsigned shift = 0;
    if (*end) {
        const char *units = "KMGT", *u = strchr(units, *end == 'k' ? 'K' : *end);
        if (!u || !*u) return -1;
        shift = 10u * (unsigned)(u - units + 1);
        end++;
        if (*end == 'i') end++; /* "MiB" */
        if (*end == 'B') end++;
        if (*end) return -1;
    }
    if (v == 0 || (shift && v > (UINT64_MAX >> shift))) return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

int kh_procguard_is_child(void) {
    const char *p = getenv(KH_PARENT_PID_ENV);
    return p && *p;
}

uint64_t kh_procguard_memory_limit(void) {
    uint64_t v = 0;
    const char *m = getenv(KH_MEMORY_LIMIT_ENV);
    return m && *m && kh_parse_bytes(m, &v) == 0 ? v : 0;
}

int kh_procguard_enter(char *err, size_t errlen) {
    const char *p = getenv(KH_PARENT_PID_ENV);
    if (p && *p) {
        char *end;
        errno = 0;
        long want = strtol(p, &end, 10);
        if (errno || *end || want <= 0) {
            snprintf(err, errlen, "%s=%s: not a process id", KH_PARENT_PID_ENV, p);
            return -1;
        }
        /* Only a group leader may take its group down; anything else just ends. */
        if (getpgrp() == getpid()) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_parent_death;
            sigemptyset(&sa.sa_mask);
            if (sigaction(SIGTERM, &sa, NULL) != 0) {
                snprintf(err, errlen, "sigaction(SIGTERM): %s", strerror(errno));
                return -1;
            }
        }
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) {
            snprintf(err, errlen, "prctl(PR_SET_PDEATHSIG): %s", strerror(errno));
            return -1;
        }
        if ((long)getppid() != want) {
            snprintf(err, errlen, "the parent khost (pid %ld) is already gone", want);
            return -1;
        }
    }
    const char *m = getenv(KH_MEMORY_LIMIT_ENV);
    if (m && *m) {
        uint64_t bytes;
        if (kh_parse_bytes(m, &bytes) != 0) {
            snprintf(err, errlen, "%s=%s: not a size (bytes, or a number with K, M, G)", KH_MEMORY_LIMIT_ENV, m);
            return -1;
        }
        struct rlimit rl = {(rlim_t)bytes, (rlim_t)bytes};
        if (setrlimit(RLIMIT_AS, &rl) != 0) {
            snprintf(err, errlen, "setrlimit(RLIMIT_AS, %llu bytes): %s", (unsigned long long)bytes, strerror(errno));
            return -1;
        }
    }
    return 0;
}
