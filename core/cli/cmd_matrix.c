/* core/cli/cmd_matrix.c — `khost matrix`: the cells on this machine (sched/matrix.c), or with --slurm as job
 * arrays (sched/slurm/); the choice is made here, above both, so neither needs the other's command. */
#include "cli/commands.h"
#include "sched/matrix.h"
#include "sched/slurm/slurm.h"

int kh_cmd_matrix(kh_host *h, int argc, char **argv) {
    if (kh_slurm_wanted(argc, argv)) return kh_cmd_matrix_slurm(h, argc, argv);
    return kh_matrix_local(h, argc, argv);
}
