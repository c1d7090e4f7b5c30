/* tests/fixtures_e2e/e2e_testlib.h — running the khost binary on this folder's fixture registry and reading
 * the records it writes, for the end-to-end tests of `khost matrix` (tests/core_matrix, tests/core_slurm). */
#ifndef KHOST_TESTS_E2E_TESTLIB_H
#define KHOST_TESTS_E2E_TESTLIB_H

#include <stddef.h>

#include "results/results.h"

/* The khost binary ($KHOST_BIN) into *bin and the registry (argv[1]) into *ini; the test is skipped where
 * either is missing. */
void kh_e2e_args(int argc, char **argv, const char **bin, const char **ini);

/* Run `bin args` with registry `ini` and no CUDA driver (so `all` devices is just the cpu everywhere); env:
 * more VAR=value words before the binary, or NULL. handle_segv=0: in a sanitizer build ASan would turn a
 * fixture's SIGSEGV into exit 1. Output in out; returns kh_test_run's status. */
int kh_e2e_khost(const char *bin, const char *ini, const char *env, const char *args, char *out, size_t outlen);

/* Read the cpu record of task x plugin under dir into r, a failed check when it cannot; 0 when read. */
int kh_e2e_record(const char *dir, const char *task, const char *plugin, kh_cell_record *r);

#endif
