/* core/cell/env.h — the environment a result was measured in: device, driver and library versions, CPU, BLAS,
 * khost revision, seed and data set, carried by every record (docs/ARCHITECTURE.md, "Data flow of one cell"). */
#ifndef KHOST_CORE_ENV_H
#define KHOST_CORE_ENV_H

#include <stddef.h>
#include <stdint.h>

/* Total size in bytes of the files under path (0 if missing). */
int64_t kh_env_tree_bytes(const char *path);
/* Inside a Slurm job: its job id, array job and task ids and node name into the record's environment
 * (slurm_job_id, slurm_array_job_id, slurm_array_task_id, slurm_node); nothing outside one. */
struct kh_cell_record;
void kh_env_add_slurm(struct kh_cell_record *r);
#endif
