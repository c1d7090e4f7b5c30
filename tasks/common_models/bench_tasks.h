/* tasks/common_models/bench_tasks.h — what the six task modules tell the host about themselves, kept in one
 * place: each task's training setup and published results (the kh_task_info its info() returns), and the
 * module descriptor every task module's entry point returns. */
#ifndef KHOST_TASKS_BENCH_TASKS_H
#define KHOST_TASKS_BENCH_TASKS_H

#include "khost/khost.h"

/* The descriptor of this module's one task, `name` (a name in kh_bench_model_names), version 1.0: a copy of
 * `members` but for struct_size and info, and info() the benchmark's setup and published results of the task.
 * The module's entry point calls it, before the host can call a member; NULL for an unknown name. */
const kh_module_desc *kh_bench_task_module(const char *name, const char *description, const kh_task_api *members);

/* The module's task info, as kh_bench_task_module made it. */
const kh_task_info *kh_bench_task_info(void);

#endif
