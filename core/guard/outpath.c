/* core/guard/outpath.c — see outpath.h. */
#define _POSIX_C_SOURCE 200809L
#include "guard/outpath.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int kh_outpath_check(const char *path, char *err, size_t errlen) {
    struct stat st;
    if (!path || !*path) {
        snprintf(err, errlen, "an empty output file name");
        return -1;
    }
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return 0;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (S_ISREG(st.st_mode)) return 0;
    const char *what = S_ISLNK(st.st_mode)    ? "a symbolic link"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISDIR(st.st_mode)  ? "a directory"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    snprintf(err, errlen, "%s: is %s: reports are written to regular files only (nothing was written)", path, what);
    return -1;
}
