/* task_host.h — a minimal stand-in for the khost binary for the text-task tests: a host-services table and
 * dlopen of a task module from the build tree ($KHOST_BUILD/tasks/<name>.so). */
#ifndef KHOST_TESTS_TASK_HOST_H
#define KHOST_TESTS_TASK_HOST_H

#include "khost/khost.h"

extern const kh_host_api th_host;
extern long th_progress_calls;

/* Loads the module and returns its task API (NULL with a message on stderr when it cannot). */
const kh_task_api *th_open_task(const char *name, const kh_module_desc **desc);
/* describe() printer that writes "  line\n" to stdout and appends the line to a buffer (th_described). */
void th_print(void *ctx, const char *line);
extern char th_described[16384];

#endif
