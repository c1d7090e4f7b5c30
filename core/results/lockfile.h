/* core/results/lockfile.h — one writer per cell, and no run beside a matrix, in a results directory.
 *
 * `khost matrix` holds an exclusive lock on <out>/.khost.lock for its whole run; `khost run` holds a shared
 * lock on it plus an exclusive lock on its cell, <out>/<task>/.<plugin>__<device>.lock. So a second matrix
 * (or a --resume) is refused while a matrix or a run is writing there, a run is refused while a matrix is,
 * two runs of the same cell exclude each other, and runs of different cells (Slurm array tasks sharing a
 * folder) work side by side. Matrix cells take no lock: their parent holds it.
 * The locks are flock(2), which the kernel drops when the last process holding them ends: a lock left by a
 * killed khost is taken over without guessing from pids, and a reused pid cannot keep it. An exclusive
 * holder writes its pid into the file, for the message that refuses the next writer. The descriptor is
 * inherited by the matrix's cells on purpose: the lock lasts until the last process of a matrix is gone, so
 * a --resume cannot start while a cell of a killed matrix is still dying. Lock files are never deleted
 * (deleting one races with the next holder's open).
 */
#ifndef KHOST_CORE_LOCKFILE_H
#define KHOST_CORE_LOCKFILE_H

#include <stddef.h>

#define KH_LOCK_NAME ".khost.lock"

typedef struct kh_lock {
    int fd;     /* -1 when not held */
    char *path;
} kh_lock;

/* Lock the file at path (created when missing; its folder must exist), exclusively or shared. 0 ok; -1
 * with err: "<what>: in use by khost pid N (lock file <path>)" or "<path>: cannot create ...: <why>".
 * `what` names the thing locked in messages (the results folder, the cell's record). A stale exclusive
 * lock is taken over, saying so at info level. */
int kh_lock_acquire(kh_lock *l, const char *path, int exclusive, const char *what, char *err, size_t errlen);
void kh_lock_release(kh_lock *l);
#endif
