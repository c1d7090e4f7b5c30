/* plugins/theano/cache/th_spawn.h — run a program without a shell (posix_spawn), its output captured.
 * The child gets stdin from /dev/null, the caller's environment with LC_ALL=C (so compiler messages and
 * `cc -v` are the same text whatever the user's locale), and stdout and stderr together in one place. */
#ifndef TH_SPAWN_H
#define TH_SPAWN_H

#include <stddef.h>

/* Runs path with argv (argv[0] is what the program sees as its name). Output goes to a NUL-terminated
 * malloc'ed buffer *out (the first 1 MiB; the rest is read and dropped) unless out is NULL, and then to the
 * file log_path (created 0600, truncated) when log_path is not NULL, else to /dev/null.
 * Returns 0 when the program ran (its wait status in *wstatus), or -1 with err filled and errno set
 * (ENOENT: no such program; *out is NULL then). */
int th_spawn(const char *path, char *const argv[], char **out, const char *log_path, int *wstatus, char *err,
             size_t errlen);

/* Every later th_spawn kills its program (its whole process group) after this many seconds and fails with
 * errno ETIMEDOUT; 0 (the start) means no deadline. The program also gets SIGKILL when the calling thread
 * ends (PR_SET_PDEATHSIG), so a killed khost leaves no compiler behind. */
void th_spawn_set_timeout(double seconds);

/* "exit status N" / "killed by signal N (NAME)" for a wait status. */
void th_spawn_describe(int wstatus, char *buf, size_t buflen);

#endif
