/* core/lockfile.h — one writer per results directory: `khost matrix` and `khost run` hold <out>/.khost.lock.
 *
 * The lock is flock(2) on the file, which the kernel drops when the last process holding it ends: a lock
 * left by a killed khost is taken over without guessing from pids, and a pid that was reused cannot keep
 * it. The file holds the holder's pid, for the message that refuses a second writer. The descriptor is
 * inherited by the matrix's cells on purpose: the lock lasts until the last process of a matrix is gone,
 * so a --resume cannot start while a cell of the killed matrix is still dying. The file is never deleted
 * (deleting a lock file races with the next holder's open).
 */
#ifndef KHOST_CORE_LOCKFILE_H
#define KHOST_CORE_LOCKFILE_H

#include <stddef.h>

#define KH_LOCK_NAME ".khost.lock"

typedef struct kh_lock {
    int fd;     /* -1 when not held */
    char *path;
} kh_lock;

/* Take dir's lock (dir must exist). 0 ok; -1 with err: "<dir>: in use by khost pid N (lock <file>)" or
 * "<file>: cannot create: <why>". A stale lock (its holder is gone) is taken over, saying so on stderr. */
int kh_lock_acquire(kh_lock *l, const char *dir, char *err, size_t errlen);
void kh_lock_release(kh_lock *l);
#endif
