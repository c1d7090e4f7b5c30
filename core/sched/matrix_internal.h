/* core/sched/matrix_internal.h — what the files of `khost matrix` share: its options (matrix_options.c), its
 * lists of modules and devices (matrix_lists.c), a cell and its record (matrix_records.c); the command itself is
 * matrix.c. Not for use outside sched/. */
#ifndef KHOST_CORE_MATRIX_INTERNAL_H
#define KHOST_CORE_MATRIX_INTERNAL_H

#include <stdint.h>

#include "base/child.h"
#include "modules/host.h"
#include "results/results.h"
#include "sched/matrix.h"

/* Time a child gets between SIGTERM and SIGKILL to flush and exit on its own. */
#define KH_MATRIX_GRACE_S 5.0

/* Parse the matrix's options into o (kh_matrix_opts_init first): 0, 1 after --help, -1 on a usage error (printed). */
int mx_parse(int argc, char **argv, kh_matrix_opts *o);

/* Modules are kept by index until every list is resolved: loading one on demand (a path) may realloc
 * the module array, so pointers are only taken afterwards (mx_pin). */
typedef struct mx_mod {
    int idx;
    kh_module *m;
    const char *name; /* descriptor name: records and output use it */
    const char *arg;  /* what the child gets: the name when it resolves to this module, else the path */
} mx_mod;
/* Pointers into the host's module array, once every list is resolved. */
void mx_pin(kh_host *h, mx_mod *v, int n);
/* --references LIST: the frameworks run as reference cells. A KH_EXIT_ code. */
int mx_references(const char *list, mx_mod **v, int *n);
/* --plugins/--tasks LIST of the kind (KH_MODULE_BACKEND or KH_MODULE_TASK), sorted by name. A KH_EXIT_ code. */
int mx_modules(kh_host *h, int kind, const char *list, mx_mod **out, int *n);
/* --devices LIST resolved to the host's devices. A KH_EXIT_ code. */
int mx_devices(kh_host *h, const char *list, const kh_device ***out, int *n);

typedef struct mx_cell {
    const mx_mod *plugin, *task;
    const kh_device *dev;
    const kh_task_info *info; /* may be NULL */
    const char *out_dir;
    const kh_matrix_opts *o;
    uint64_t reg_seed;
    char started_at[32];
    int rep, round, position; /* repetition rep (0: the cell is not repeated) of round, position in it */
    const char *stage;        /* a reference runner's results folder (its record is checked and copied from
                                 there, so a runner never writes into out_dir); NULL for khost's own cells */
    const char *seed;         /* the --seed its child gets (--seeds: this round's), NULL: none (the registry's) */
} mx_cell;
/* Remove a reference cell's stage folder and everything in it (links removed, never followed). */
void mx_stage_remove(const char *dir);
/* Remove a cell's leftover temporary record files (a cell killed mid-write). */
void mx_remove_partial(const char *record_path);
/* A status --resume keeps: "ok" or "unsupported". */
int mx_final_status(const char *s);
/* Whether a record was measured with the settings given now (--epochs, --batch-size, ...) and seed (the --seed
 * the cell's child gets; NULL: any). */
int mx_same_settings(const kh_cell_record *r, const kh_matrix_opts *o, const char *seed);
/* Whether a record was measured on another machine or by another build than this matrix's (results/identity.h:
 * CPU model and ISA, or the CUDA device's name; khost version and git revision): 1 with why, naming both. A
 * task's column is one machine and one build (report refuses a mixed one), so --resume reruns such a record
 * here rather than keep it. */
int mx_other_machine_or_build(const kh_cell_record *r, const kh_device *dev, char *why, size_t n);
/* A record for a cell whose child could not write one (or was killed): what the matrix knows. */
void mx_fill_record(kh_cell_record *r, const mx_cell *c, const char *status, const char *reason,
                    const char *log_path, int fresh);
/* The cell's record after its child ended, written to json_path (see matrix.c's outcome table). */
void mx_settle(const mx_cell *c, const kh_child_result *res, const char *json_path, const char *log_path,
               kh_cell_record *out);
/* The progress line's end: the status and the time a step or an epoch took. */
void mx_print_end(const mx_cell *c, int i, int n, const kh_cell_record *r, double wall_s, const char *log_path);
#endif
