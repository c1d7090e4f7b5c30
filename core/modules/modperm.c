/* core/modules/modperm.c — the StrictModes-like ownership and permission rule for module files (modperm.h).
 * Only the file and its own folder are checked: the folders above are the administrator's business, and a
 * build tree under a world-writable sticky /tmp must still work. */
#define _GNU_SOURCE /* getpwuid_r */
#include "modules/modperm.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void owner_name(uid_t uid, char *buf, size_t n) {
    struct passwd pw, *res = NULL;
    char tmp[1024];
    if (getpwuid_r(uid, &pw, tmp, sizeof tmp, &res) == 0 && res && res->pw_name)
        snprintf(buf, n, " (%s)", res->pw_name);
    else
        snprintf(buf, n, " (no such user)");
}

static int check_one(const char *what, const char *path, char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(err, errlen, "%s: cannot check: %s", path, strerror(errno));
        return -1;
    }
    static const char hint[] = "refusing to load modules from it (strict_modes = false in [khost] of the "
                               "registry turns this check off)";
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(err, errlen, "%s: %s is %s-writable (mode %04o): %s", path, what,
                 (st.st_mode & S_IWOTH) ? "world" : "group", (unsigned)(st.st_mode & 07777), hint);
        return -1;
    }
    if (st.st_uid != 0 && st.st_uid != geteuid()) {
        char name[300];
        owner_name(st.st_uid, name, sizeof name);
        snprintf(err, errlen, "%s: %s is owned by uid %u%s, neither root nor the user running khost (uid %u): %s",
                 path, what, (unsigned)st.st_uid, name, (unsigned)geteuid(), hint);
        return -1;
    }
    return 0;
}

int kh_modperm_check(const char *path, char *err, size_t errlen) {
    if (check_one("the module file", path, err, errlen)) return -1;
    char *dir = strdup(path);
    if (!dir) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    char *slash = strrchr(dir, '/');
    if (slash == dir) slash[1] = 0;
    else if (slash) *slash = 0;
    int rc = check_one("the module's folder", slash ? dir : ".", err, errlen);
    free(dir);
    return rc;
}
