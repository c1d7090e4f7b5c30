/* core/sched/matrix.h — `khost matrix` on this machine, and the record rules a Slurm array task shares with it.
 * kh_cmd_matrix (cli/cmd_matrix.c) chooses between this machine (kh_matrix_local) and a Slurm array
 * (sched/slurm); every cell runs through the child runner (base/child.h). */
#ifndef KHOST_CORE_MATRIX_H
#define KHOST_CORE_MATRIX_H

#include <stddef.h>
#include <stdint.h>

#include "base/child.h"

/* `khost matrix` on this machine: every cell (and repetition) in its own child. A KH_EXIT_ code. */
struct kh_host;
int kh_matrix_local(struct kh_host *h, int argc, char **argv);

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
