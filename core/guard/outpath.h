/* core/guard/outpath.h — where `khost report --html FILE` / `--svg FILE` may write.
 *
 * The output is written atomically (a temporary file renamed over FILE), so FILE must be a path of a
 * regular file: it may not exist yet, or be an existing regular file, which is replaced. Anything else
 * already at that path is refused before anything is written: a symbolic link (renaming over it would
 * replace the link, following it would write where the user did not name), a device node such as
 * /dev/stdout, a FIFO, a socket or a directory. To write to a terminal or a pipe, name a file and copy it.
 */
#ifndef KHOST_CORE_OUTPATH_H
#define KHOST_CORE_OUTPATH_H
#include <stddef.h>
/* 0 when path may be written; -1 and err ("PATH: is a symbolic link: ...") when not. */
int kh_outpath_check(const char *path, char *err, size_t errlen);
#endif
