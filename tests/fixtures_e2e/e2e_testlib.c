/* tests/fixtures_e2e/e2e_testlib.c — see e2e_testlib.h. */
#include "e2e_testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "testutil.h"

void kh_e2e_args(int argc, char **argv, const char **bin, const char **ini) {
    struct stat st;
    *bin = getenv("KHOST_BIN");
    *ini = argc > 1 ? argv[1] : NULL;
    if (!*bin || stat(*bin, &st) != 0) kh_test_skip("the khost binary is not built");
    if (!*ini || stat(*ini, &st) != 0) kh_test_skip("the fixture registry is not generated");
}

int kh_e2e_khost(const char *bin, const char *ini, const char *env, const char *args, char *out, size_t outlen) {
    char cmd[8192];
    const char *asan = getenv("ASAN_OPTIONS");
    snprintf(cmd, sizeof cmd,
             "ASAN_OPTIONS='handle_segv=0%s%s' KHOST_CONF='%s' KHOST_LIBCUDA=/nonexistent/libcuda.so.1 %s '%s' %s",
             asan && *asan ? ":" : "", asan ? asan : "", ini, env ? env : "", bin, args);
    return kh_test_run(cmd, out, outlen);
}

int kh_e2e_record(const char *dir, const char *task, const char *plugin, kh_cell_record *r) {
    char path[4096], err[4400];
    kh_record_path(path, sizeof path, dir, task, plugin, "cpu", "json");
    int rc = kh_record_read(path, r, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    return rc;
}
