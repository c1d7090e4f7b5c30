/* core/sched/refcell.h — reference cells of `khost matrix --references`: a framework of tools/reference
 * (PyTorch, Keras 3 over JAX / TensorFlow / PyTorch) run as a cell under the same protocol as a backend's —
 * its own child per repetition, in the same shuffled rounds, with the same options — through the
 * reference launcher (tools/reference/run), which writes the same record (samples, repetitions). */
#ifndef KHOST_CORE_REFCELL_H
#define KHOST_CORE_REFCELL_H

#include <stddef.h>

/* The frameworks "all" stands for, in the order the report lists them. */
extern const char *const kh_refcell_all[];

/* The entry of kh_refcell_all that is name, or NULL when tools/reference knows no such framework. */
const char *kh_refcell_find(const char *name);

/* The launcher: $KHOST_REFERENCE_RUNNER, else <folder of exe_path>/../tools/reference/run (a build folder
 * inside the repository), else <folder of exe_path>/tools/reference/run. Returns 0 with an executable
 * path in buf, else -1 with what was tried in err. */
int kh_refcell_runner(const char *exe_path, char *buf, size_t n, char *err, size_t errlen);

#endif
