/* core/cell/mapped.c — the files this process has mapped, from /proc/self/maps (mapped.h). */
#define _POSIX_C_SOURCE 200809L /* fdopen */
#include "cell/mapped.h"
#include "base/files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int kh_mapped_write(const char *path, char *err, size_t errlen) {
    FILE *in = fopen("/proc/self/maps", "r");
    if (!in) {
        snprintf(err, errlen, "/proc/self/maps: cannot open: %s", strerror(errno));
        return -1;
    }
    char why[128] = "";
    int fd = kh_create_regular(path, O_WRONLY | O_TRUNC | O_CLOEXEC, 0644, why, sizeof why);
    FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!out && fd >= 0) close(fd);
    if (!out) {
        snprintf(err, errlen, "%s: cannot create: %s", path, why[0] ? why : strerror(errno));
        fclose(in);
        return -1;
    }
    /* maps lists a file once per mapped range, ranges of one file adjacent: print a path when it changes */
    char line[4608], last[4096] = "";
    while (fgets(line, sizeof line, in)) {
        const char *file = strchr(line, '/');
        if (!file) continue; /* anonymous, [heap], [stack], ... */
        size_t n = strcspn(file, "\n");
        if (n >= sizeof last || (!strncmp(file, last, n) && last[n] == 0)) continue;
        memcpy(last, file, n);
        last[n] = 0;
        fprintf(out, "%s\n", last);
    }
    fclose(in);
    if (fclose(out) != 0) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}
