/* core/base/subreaper.c — a cell's whole process tree ended with it (subreaper.h). */
#define _GNU_SOURCE /* prctl */
#include "base/subreaper.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

int kh_subreaper_begin(void) { return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 ? 0 : -1; }

/* The parent and state of process pid from /proc/<pid>/stat (read after the last ')': the command may hold
 * spaces and parentheses); -1 when it is gone or unreadable. */
static long parent_of(const char *pid, char *state) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *close = strrchr(buf, ')');
    long ppid;
    return close && sscanf(close + 1, " %c %ld", state, &ppid) == 2 ? ppid : -1;
}

/* SIGKILL every child of ours, then wait for each; the number that were still running (not zombies). */
static int end_generation(pid_t self, int *any) {
    DIR *d = opendir("/proc");
    if (!d) return 0;
    int running = 0;
    *any = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char state;
        if (e->d_name[0] < '1' || e->d_name[0] > '9' || parent_of(e->d_name, &state) != (long)self) continue;
        pid_t pid = (pid_t)strtol(e->d_name, NULL, 10);
        if (state != 'Z' && kill(pid, SIGKILL) == 0) running++;
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
        *any = 1;
    }
    closedir(d);
    return running;
}

int kh_subreaper_end_children(void) {
    pid_t self = getpid();
    int total = 0, any = 1;
    for (int round = 0; round < 64 && any; round++) /* one generation of adopted descendants per round */
        total += end_generation(self, &any);
    return total;
}
