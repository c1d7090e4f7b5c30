/* tests/fuzz/harness.c — the fuzz targets' temporary files and output checks (harness.h). */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_PATHS 8

static char dir[256];
static struct {
    char path[320];
    int is_dir;
} made[MAX_PATHS];
static int n_made;

static void teardown(void) {
    while (n_made > 0) {
        n_made--;
        if (made[n_made].is_dir) rmdir(made[n_made].path);
        else unlink(made[n_made].path);
    }
    rmdir(dir);
}

const char *harness_files(const char *name, const char *const rel[]) {
    if (dir[0]) return dir;
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/khost-fuzz-%s-XXXXXX", t && *t ? t : "/tmp", name);
    if (!mkdtemp(dir)) {
        dir[0] = 0;
        return NULL;
    }
    atexit(teardown);
    for (; n_made < MAX_PATHS && rel[n_made]; n_made++) {
        size_t l = strlen(rel[n_made]);
        snprintf(made[n_made].path, sizeof made[n_made].path, "%s/%s", dir, rel[n_made]);
        made[n_made].is_dir = l && rel[n_made][l - 1] == '/';
        if (made[n_made].is_dir && mkdir(made[n_made].path, 0700) != 0) return NULL;
    }
    return dir;
}

const char *harness_file(int i) { return made[i].path; }

int harness_put(const char *path, const uint8_t *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = n ? fwrite(b, 1, n, f) : 0;
    return (fclose(f) == 0 && w == n) ? 0 : -1;
}

void harness_touch(const kh_images *im) {
    size_t sum = 0, n = (size_t)im->n * kh_images_stride(im);
    for (size_t i = 0; i < n; i++) sum += im->pixels[i];
    for (int64_t i = 0; i < im->n; i++) sum += (size_t)im->labels[i];
    if (sum == 1 && n == 0) abort(); /* never true: keeps the reads from being optimised away */
}
