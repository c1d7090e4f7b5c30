/* core/base/subreaper.h — the process tree a cell starts ends with the cell. A process group is not enough: a
 * module's helper that calls setsid() leaves khost's group, and one whose parent exits is adopted by init. As a
 * child subreaper (PR_SET_CHILD_SUBREAPER) khost adopts every orphan of its tree instead, and ends them all when
 * the cell is over. */
#ifndef KHOST_CORE_SUBREAPER_H
#define KHOST_CORE_SUBREAPER_H

/* Become the subreaper of everything this process starts from now on; 0 ok, -1 (errno) when the kernel refuses. */
int kh_subreaper_begin(void);
/* SIGKILL and reap every child this process still has, again until none is left (the children of a killed one
 * are adopted in turn); returns how many were running. Call it when no child of the caller's own should be
 * left (its cell reaped). */
int kh_subreaper_end_children(void);
#endif
