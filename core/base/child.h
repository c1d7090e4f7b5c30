/* core/base/child.h — run one child process to its end (base/child.c), exposed so tests can drive it directly
 * (crash, hang and exit-code classification without a full benchmark). */
#ifndef KHOST_CORE_CHILD_H
#define KHOST_CORE_CHILD_H

#include <stdint.h>

typedef enum kh_child_outcome {
    KH_CHILD_EXITED = 0,      /* code = exit status */
    KH_CHILD_SIGNALED = 1,    /* code = the signal that killed it */
    KH_CHILD_TIMEOUT = 2,     /* killed by us after timeout_s; code = the signal that ended it */
    KH_CHILD_INTERRUPTED = 3, /* we got SIGINT/SIGTERM/SIGHUP and killed it */
    KH_CHILD_SPAWN_FAILED = 4 /* never ran; err says why */
} kh_child_outcome;

typedef struct kh_child_result {
    int outcome; /* kh_child_outcome */
    int code;
    double wall_s;
    int64_t peak_rss_bytes; /* the child's peak resident set (wait4's rusage); 0 unknown */
    /* at a timeout, before the kill: the child's address space and its limit (RLIMIT_AS), from /proc; -1 unknown
     * or unlimited. A child stuck at its limit (a library that retries a failing mmap forever) is out of memory. */
    int64_t vm_size_bytes, as_limit_bytes;
    char err[256];
} kh_child_result;

/* Run argv[0] (a path; no PATH search) with argv and envp (NULL: this process's environment) in a new
 * process group, stdin from /dev/null, stdout and stderr into log_path (truncated; NULL: inherited).
 * Polls until it ends; after timeout_s (0: never) sends SIGTERM to the whole group, then SIGKILL after
 * grace_s. Returns 0 when the child ran (whatever its outcome), -1 when it could not be started. */
int kh_child_run(char *const argv[], char *const envp[], const char *log_path, double timeout_s,
                 double grace_s, kh_child_result *out);

/* Install (on != 0) or remove the SIGINT/SIGTERM/SIGHUP handlers that make a running kh_child_run kill
 * its child's group and return KH_CHILD_INTERRUPTED (the child is in its own group, so a terminal's
 * Ctrl-C reaches only us). Signals this process ignores (nohup, background jobs) stay ignored.
 * kh_child_interrupted() says whether one arrived since installation. */
void kh_child_signals(int on);
int kh_child_interrupted(void);
#endif
