/* core/sched/matrix.h — the child-process runner behind `khost matrix`, exposed so tests can drive it directly
 * (crash, hang and exit-code classification without a full benchmark). kh_cmd_matrix (cli/cmd_matrix.c) chooses
 * between this machine (kh_matrix_local) and a Slurm array (sched/slurm). */
#ifndef KHOST_CORE_MATRIX_H
#define KHOST_CORE_MATRIX_H

#include <stddef.h>
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
 * kh_matrix_interrupted() says whether one arrived since installation. */
void kh_matrix_signals(int on);
/* `khost matrix` on this machine: every cell (and repetition) in its own child. A KH_EXIT_ code. */
struct kh_host;
int kh_matrix_local(struct kh_host *h, int argc, char **argv);
int kh_matrix_interrupted(void);

/* One cell as the Slurm array task runs it (slurm_cell.c): the matrix's own record rules, one cell. */
struct kh_host;
struct kh_module;
struct kh_cell_record;
typedef struct kh_matrix_cell_ref {
    struct kh_module *plugin, *task;
    const struct kh_device *dev;
    const char *out_dir;
    const char *epochs, *batch_size, *seed; /* as given to the matrix; NULL: the task's / the registry's */
    double timeout_s;
    uint64_t reg_seed;
    char started_at[32];
} kh_matrix_cell_ref;
/* The cell's record after its child ended, exactly as `khost matrix` settles it (written to disk). */
void kh_matrix_settle(const kh_matrix_cell_ref *c, const kh_child_result *res, struct kh_cell_record *r);
/* Fill what the matrix knows of a cell into r (fresh: also versions, device, hostname, settings). */
void kh_matrix_fill(const kh_matrix_cell_ref *c, struct kh_cell_record *r, const char *status, const char *reason,
                    int fresh);

/* The modules a --plugins/--tasks list selects, sorted by name: the name records use and the argument a
 * child gets. Pointers stay valid while the host is open. Returns a KH_EXIT_ code (errors logged). */
typedef struct kh_matrix_pick {
    const char *name, *arg;
} kh_matrix_pick;
int kh_matrix_pick_modules(struct kh_host *h, int kind, const char *list, kh_matrix_pick **out, int *n);
#endif
