/* core/base/pinned.h — the results folder a command writes into, held open from its start (base/pinned.c).
 * Every file khost makes below it (records, logs, lock files, task folders: base/files.c) is reached from that
 * handle one folder at a time, never through a symbolic link: a module's chdir(), a folder renamed away, or a
 * link put in the place of a folder below it cannot move where khost writes. A pinned folder that was removed
 * takes no more files (the write fails, and kh_pinned_gone says why). One folder per process. */
#ifndef KHOST_CORE_PINNED_H
#define KHOST_CORE_PINNED_H

#include <sys/stat.h>

/* Hold path (an absolute path to an existing folder) open. nofollow: refuse a link at path itself (a folder
 * khost has just made; the user's own --out may be a link). 0 ok, -1 with errno. */
int kh_pin_dir(const char *path, int nofollow);
void kh_unpin_dir(void);
/* The pinned folder's identity (fstat of the handle); -1 when nothing is pinned. */
int kh_pinned_stat(struct stat *st);
/* 1 when the pinned folder has been removed (no name links to it any more). */
int kh_pinned_gone(void);
/* Where to make path: a descriptor of the folder that holds it and, in *leaf, its last component. Below the
 * pinned folder the descriptor is reached from the handle (make: the folders on the way are made); elsewhere
 * it is AT_FDCWD and *leaf the path itself. Close a descriptor >= 0 after use; -1 with errno on failure. */
int kh_pinned_parent(const char *path, int make, const char **leaf);
#endif
