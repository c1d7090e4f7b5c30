/* core/sched/slurm/slurm.h — `khost matrix --slurm`: the matrix as a Slurm job array, one array task per cell.
 *
 * The submitting khost writes a plan (the cells, one per line, and the settings every cell shares) and two
 * batch scripts next to it, <out>/slurm/<stamp>-<cpu|cuda>/, then submits the array and a collector job
 * that depends on it (afterany). Array task K runs `khost matrix --slurm-cell K --slurm-plan FILE`: cell K
 * in a child process exactly as a local matrix runs it. The collector runs `khost matrix --slurm-collect JOB
 * --slurm-plan FILE` and records, from sacct or scontrol, every cell the array left without a record of its
 * own (cancelled while pending, killed without SIGTERM, node failure). docs/ARCHITECTURE.md "Slurm".
 */
#ifndef KHOST_CORE_SLURM_H
#define KHOST_CORE_SLURM_H

#include <stddef.h>

struct kh_host;

/* Whether a matrix command line asks for Slurm (any --slurm... option). */
int kh_slurm_wanted(int argc, char **argv);
/* `khost matrix --slurm ...` and the hidden --slurm-cell / --slurm-collect modes. Returns a KH_EXIT_ code. */
int kh_cmd_matrix_slurm(struct kh_host *h, int argc, char **argv);

// --- the plan file (slurm_plan.c) -----------------------------------------------------------------------
typedef struct kh_slurm_cell {
    const char *plugin, *plugin_arg; /* the record's name; what the child is given (name or path) */
    const char *task, *task_arg;
    const char *device;              /* "cpu" or "cuda:0" (the one GPU Slurm gives the array task) */
    const char *dataset;             /* the task's data set (for --fetch-data); may be "" */
    const char *seed;                /* --seeds: this element's seed (its own --seed); NULL: the plan's */
    int rep, rep_of;                 /* --seeds: seed k of N, written as repetition k; 0: a single run */
} kh_slurm_cell;

typedef struct kh_slurm_plan {
    const char *out_dir, *data_dir, *fetch; /* fetch: tools/fetch-datasets to run per node, or "" */
    double timeout_s;
    const char *epochs, *batch_size, *seed, *limit_train, *limit_val, *math; /* NULL when not given */
    kh_slurm_cell *cells;
    int n, cap;
    char *buf; /* read: the file's text, which the strings point into */
} kh_slurm_plan;

/* Tab-separated "key<TAB>value" lines; cell line K (from 0) is array index K: "cell", plugin, its argument,
 * task, its argument, device, data set, and with --seeds the element's seed and "k/N" (seed k of N). 0 ok, else
 * err names why. */
int kh_slurm_plan_write(const char *path, const kh_slurm_plan *p, char *err, size_t errlen);
int kh_slurm_plan_read(const char *path, kh_slurm_plan *p, char *err, size_t errlen);
int kh_slurm_plan_add(kh_slurm_plan *p, const kh_slurm_cell *c); /* 0 ok, -1 out of memory */
void kh_slurm_plan_free(kh_slurm_plan *p);

// --- helpers (slurm_exec.c) -----------------------------------------------------------------------------
/* Run argv[0] (searched on PATH) with stdin from /dev/null and stdout+stderr captured into out (NUL-ended,
 * truncated). Returns its exit status, 128+signal when killed, -1 when it could not be started (out says
 * why), -2 when it ran past timeout_s (then it is killed). */
int kh_slurm_exec(char *const argv[], char *out, size_t n, double timeout_s);
/* Slurm's name of a job state ("CANCELLED by 0", "TIMEOUT", "NODE_FAIL") as a record status: "cancelled",
 * "timeout", "node_fail", "preempted", "oom", "error" (FAILED) or "killed"; "" for COMPLETED (the task
 * ran and its own record counts); NULL while the job is still pending or running. */
const char *kh_slurm_status(const char *state);

// --- the array task and the collector (slurm_cell.c) ----------------------------------------------------
int kh_slurm_run_cell(struct kh_host *h, const char *plan_path, const char *index);
int kh_slurm_collect(struct kh_host *h, const char *plan_path, const char *job_id);
#endif
