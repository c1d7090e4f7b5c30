/* core/base/procguard.h — a child of khost (a matrix cell, a module scanner) ends when its parent ends.
 *
 * posix_spawn cannot set PR_SET_PDEATHSIG, so the child sets it itself, first thing in main(), when
 * KHOST_PARENT_PID names the parent that spawned it; the parent's pid is compared with getppid() after
 * that, since a parent that died before the prctl would never send the signal. The signal is SIGTERM,
 * and its handler kills the child's whole process group (cells and scanners lead their own group), so
 * whatever a backend started dies too. KHOST_MEMORY_LIMIT (bytes) caps the child's address space with
 * RLIMIT_AS, set here before any module is loaded: a limit applied from outside (prlimit) after the spawn
 * would race with the child's start.
 */
#ifndef KHOST_CORE_PROCGUARD_H
#define KHOST_CORE_PROCGUARD_H

#include <stddef.h>
#include <stdint.h>

#define KH_PARENT_PID_ENV "KHOST_PARENT_PID"
#define KH_MEMORY_LIMIT_ENV "KHOST_MEMORY_LIMIT"

/* Apply both; 0 to go on, -1 (err says why: the parent is already gone, a bad value, setrlimit failed)
 * when the process must exit at once. A no-op without the variables. */
int kh_procguard_enter(char *err, size_t errlen);
/* The memory limit this process runs under (from KHOST_MEMORY_LIMIT), 0 when none. */
uint64_t kh_procguard_memory_limit(void);
/* 1 when this process is a child that khost spawned (KHOST_PARENT_PID set). */
int kh_procguard_is_child(void);
/* Parse "512M", "2G", "1048576" (K/M/G/T binary suffixes) into bytes; -1 when malformed or zero. */
int kh_parse_bytes(const char *s, uint64_t *out);
#endif
