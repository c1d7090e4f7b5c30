/* core/cell/mapped.h — the files this process has mapped (mapped.c), for the check that a cell maps only what
 * its device needs: `khost run` writes them to $KHOST_MAPPED_OUT when the cell is over (tests/backend_e2e
 * asserts that a cpu cell maps no CUDA library and that a run loads no backend module it was not given). */
#ifndef KHOST_CORE_MAPPED_H
#define KHOST_CORE_MAPPED_H

#include <stddef.h>

#define KH_MAPPED_ENV "KHOST_MAPPED_OUT"

/* Write each file mapped into this process (the path column of /proc/self/maps), one per line, each once, to
 * `path`. 0, or -1 with err naming the file that could not be read or written. */
int kh_mapped_write(const char *path, char *err, size_t errlen);

#endif
