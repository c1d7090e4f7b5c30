/* core/cell/env.c — facts about the machine and the data set for the results' environment record. */
#define _XOPEN_SOURCE 700
#include "cell/env.h"

#include <ftw.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "results/results.h"

static int64_t g_tree_bytes;
static int add_size(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)path;
    (void)ftw;
    if (flag == FTW_F) g_tree_bytes += st->st_size;
    return 0;
}

int64_t kh_env_tree_bytes(const char *path) {
    g_tree_bytes = 0;
    if (nftw(path, add_size, 16, FTW_PHYS) != 0) return g_tree_bytes;
    return g_tree_bytes;
}

void kh_env_add_slurm(kh_cell_record *r) {
    static const char *const vars[4][2] = {{"SLURM_JOB_ID", "slurm_job_id"},
                                           {"SLURM_ARRAY_JOB_ID", "slurm_array_job_id"},
                                           {"SLURM_ARRAY_TASK_ID", "slurm_array_task_id"},
                                           {"SLURMD_NODENAME", "slurm_node"}};
    for (int i = 0; i < 4; i++) {
        const char *v = getenv(vars[i][0]);
        if (v && *v) kh_record_set_env(r, vars[i][1], v);
    }
}
