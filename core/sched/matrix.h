/* core/sched/matrix.h — `khost matrix` on this machine, and the record rules a Slurm array task shares with it.
 * kh_cmd_matrix (cli/cmd_matrix.c) chooses between this machine (kh_matrix_local) and a Slurm array
 * (sched/slurm); every cell runs through the child runner (base/child.h). */
#ifndef KHOST_CORE_MATRIX_H
#define KHOST_CORE_MATRIX_H

#include <stddef.h>
#include <stdint.h>

#include "base/child.h"

/* The matrix's settings, as `khost matrix` parses them from its command line (matrix_options.c); count and name
 * options are kept as given (they are handed to every cell's `khost run` as they are). */
typedef struct kh_matrix_opts {
    const char *plugins, *tasks, *devices, *out;
    const char *epochs, *batch_size, *limit_train, *limit_val, *seed; /* passed through as given */
    const char *steps, *warmup_steps;                                  /* likewise */
    int timing;          /* --timing, or --references alone: the timing protocol's counts where none was given */
    const char *references;  /* --references: frameworks of tools/reference run as cells (refcell.h) */
    const char *math;                                                  /* --math, checked by kh_math_parse */
    int repeat;          /* repetitions of every cell, each its own child process (default 1); with
                            repeat_auto the most rounds it may take (KH_MATRIX_AUTO_MAX_ROUNDS) */
    int seeds;           /* --seeds N > 1: N rounds, round k trains every cell from seed S + k - 1 (S: --seed, else
                            the registry's), one repetition each; repeat must be 1 (0 or 1: one seed) */
    int repeat_auto;     /* --repeat auto: rounds until every cell's median is known to auto_pct or auto_budget_s */
    double auto_pct, auto_budget_s;
    uint64_t order_seed; /* the rounds' orders are drawn from it */
    int order_seed_set;
    double timeout_s;
    const char *memory_limit; /* as given; checked by kh_parse_bytes */
    const char *db;           /* --db: each record also goes into this results database (resultsdb.h) */
    int resume, quiet;
} kh_matrix_opts;
/* --repeat auto: at least 3 rounds (a median's interval needs repetitions), at most this many; by default until
 * every median's 95 % CI is within 3 % of it, or 20 minutes have passed. */
#define KH_MATRIX_AUTO_MIN_ROUNDS 3
#define KH_MATRIX_AUTO_MAX_ROUNDS 30
/* The timing protocol (the Keras 3 benchmarks'): one epoch of 100 timed steps after 5 untimed warm-up steps, the
 * same counts for every backend and reference row. `matrix --timing` asks for it; `--references` without
 * --epochs, --steps, --warmup-steps or --seeds gets it, since reference rows are there to compare time. */
#define KH_MATRIX_TIMING_EPOCHS "1"
#define KH_MATRIX_TIMING_STEPS "100"
#define KH_MATRIX_TIMING_WARMUP "5"
/* Six hours: the slowest published cell (theano cifar10_cnn on a Titan X, 630 s x 20 epochs = 3.5 h)
 * fits with room; a CPU run of the full benchmark needs --timeout 0 or more. */
#define KH_MATRIX_DEFAULT_TIMEOUT_S (6 * 3600.0)
/* The defaults: no lists (kh_matrix_run reads a NULL --plugins/--tasks as "all", a NULL --devices as the
 * registry's default device), one repetition, the six-hour timeout, no memory limit. */
void kh_matrix_opts_init(kh_matrix_opts *o);

/* `khost matrix` on this machine: every cell (and repetition) in its own child. A KH_EXIT_ code. */
struct kh_host;
int kh_matrix_local(struct kh_host *h, int argc, char **argv);
/* The same with settings made by the caller (`khost run --repeat N`: one cell as N repetitions). It checks no
 * value the parsers check (repeat >= 1, counts, --math, --seeds with --repeat); it refuses seeds whose last
 * would pass the largest seed. */
int kh_matrix_run(struct kh_host *h, const kh_matrix_opts *o);

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
    int rep, rep_of;                        /* seed k of N (--seeds): repetition k, round k; 0: not repeated */
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
