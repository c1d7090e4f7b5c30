/* kit/base/pathtrust.c — see khost/kit/pathtrust.h. */
#define _XOPEN_SOURCE 700 /* S_ISVTX */
#include "khost/kit/pathtrust.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int check_component(const char *p, char *err, size_t errlen) {
    struct stat st;
    if (stat(p, &st) != 0) {
        /* the rest does not exist yet (created private, 0700, by its user), or cannot (a file stands where a
         * folder would be: creating it fails and says so) */
        if (errno == ENOENT || errno == ENOTDIR) return 1;
        snprintf(err, errlen, "%s: cannot check: %s", p, strerror(errno));
        return -1;
    }
    if (st.st_uid != 0 && st.st_uid != geteuid()) {
        snprintf(err, errlen, "%s is owned by uid %u, neither root nor the user running khost (uid %u)", p,
                 (unsigned)st.st_uid, (unsigned)geteuid());
        return -1;
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
        snprintf(err, errlen, "%s is %s-writable without the sticky bit (mode %04o)", p,
                 (st.st_mode & S_IWOTH) ? "world" : "group", (unsigned)(st.st_mode & 07777));
        return -1;
    }
    return 0;
}

int kh_path_trusted(const char *dir, char *err, size_t errlen) {
    if (!dir || dir[0] != '/') {
        snprintf(err, errlen, "%s: not an absolute path", dir ? dir : "(null)");
        return -1;
    }
    char *p = strdup(dir);
    if (!p) {
        snprintf(err, errlen, "%s: out of memory", dir);
        return -1;
    }
    int rc = check_component("/", err, errlen);
    for (char *s = p + 1; rc == 0; s++) {
        if (*s != '/' && *s) continue;
        char save = *s;
        *s = 0;
        if (s > p + 1 && s[-1] != '/') rc = check_component(p, err, errlen);
        *s = save;
        if (!save) break;
    }
    free(p);
    return rc < 0 ? -1 : 0;
}

int kh_path_trusted_file(const char *file, char *err, size_t errlen) {
    char *d = strdup(file ? file : "");
    if (!d) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    char *slash = strrchr(d, '/');
    if (slash == d) slash[1] = 0;
    else if (slash) *slash = 0;
    int rc = kh_path_trusted(d, err, errlen);
    free(d);
    return rc;
}
