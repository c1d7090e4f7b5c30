/* tests/core_matrix/test_matrix.c — `khost matrix` end to end with the fixture modules of
 * tests/fixtures_e2e: a working backend, one that segfaults, one that hangs, one that diverges. Every cell
 * must end with the right record (the crash and the hang recorded by the parent), the hang must be killed
 * at the timeout, one cell's failure must not stop the others, --resume must skip only final cells, and
 * bad command lines must give the documented exit codes.
 * Usage: test_matrix REGISTRY (the fixtures' khost-test.ini); needs $KHOST_BIN. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "e2e_testlib.h"
#include "results/results.h"
#include "testutil.h"

static const char *bin, *ini;
static char out[1 << 16];

static int khost(const char *args) { return kh_e2e_khost(bin, ini, NULL, args, out, sizeof out); }

/* Processes whose command line mentions `needle` (our unique output folder), other than zombies. */
static int alive_with(const char *needle) {
    int found = 0;
    for (int tries = 0; tries < 40; tries++) {
        found = 0;
        DIR *d = opendir("/proc");
        if (!d) return 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
            char path[300], buf[8192];
            snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
            FILE *f = fopen(path, "rb");
            if (!f) continue;
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
            for (size_t i = 0; i < n; i++)
                if (!buf[i]) buf[i] = ' ';
            buf[n] = 0;
            if (n && strstr(buf, needle)) found++; /* a zombie has an empty cmdline */
        }
        closedir(d);
        if (!found) return 0;
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    return found;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    kh_e2e_args(argc, argv, &bin, &ini);
    struct stat st;
    const char *tmp = kh_test_tmpdir("matrix");
    char args[4096];

    /* 1. Four backends on one task: ok, crashed, timeout, diverged; all four cells run. */
    double t0 = now();
    snprintf(args, sizeof args,
             "matrix --plugins fixture_segv,fixture_hang,fixture_nan,fixture --tasks fixture_blobs --devices all "
             "--epochs 2 --timeout 2 --out '%s'", tmp);
    int rc = khost(args);
    double wall = now() - t0;
    CHECK(rc == 1, "matrix with failing cells exited %d:\n%s", rc, out);
    CHECK(wall < 30, "matrix took %.1f s: the hanging cell was not killed at its timeout", wall);
    CHECK(strstr(out, "[1/4] fixture x fixture_blobs x cpu ... ok"), "ok cell line:\n%s", out);
    CHECK(strstr(out, "fixture_segv x fixture_blobs x cpu ... crashed: signal 11 (Segmentation fault)"),
          "crash line:\n%s", out);
    CHECK(strstr(out, "fixture_hang x fixture_blobs x cpu ... timeout: no result after 2 s"), "timeout line:\n%s", out);
    CHECK(strstr(out, "fixture_nan x fixture_blobs x cpu ... diverged"), "diverged line:\n%s", out);
    CHECK(strstr(out, "4 of 4 cell(s) done: 1 ok"), "summary:\n%s", out);

    kh_cell_record r;
    if (kh_e2e_record(tmp, "fixture_blobs", "fixture", &r) == 0) {
        CHECK(!strcmp(r.status, "ok") && r.n_rows == 2, "fixture: %s, %d epochs", r.status, r.n_rows);
        kh_record_free(&r);
    }
    if (kh_e2e_record(tmp, "fixture_blobs", "fixture_segv", &r) == 0) {
        CHECK(!strcmp(r.status, "crashed"), "segv status %s", r.status);
        CHECK(!strcmp(r.reason, "signal 11 (Segmentation fault) in backend 'fixture_segv' train_batch"),
              "segv reason, with the module call it died in: %s", r.reason);
        CHECK(!strcmp(r.plugin, "fixture_segv") && !strcmp(r.task, "fixture_blobs") && !strcmp(r.device, "cpu"),
              "segv cell %s %s %s", r.plugin, r.task, r.device);
        CHECK(r.epochs_requested == 2 && !strcmp(r.metric, "val_acc"), "segv record: epochs %d metric %s",
              r.epochs_requested, r.metric);
        const char *dn = kh_record_get_env(&r, "device_name"), *log = kh_record_get_env(&r, "log");
        CHECK(dn && *dn, "no device_name in the crash record");
        CHECK(log && stat(log, &st) == 0, "crash log %s missing", log ? log : "(none)");
        kh_record_free(&r);
    }
    if (kh_e2e_record(tmp, "fixture_blobs", "fixture_hang", &r) == 0) {
        CHECK(!strcmp(r.status, "timeout") && !strcmp(r.reason, "no result after 2 s"), "hang: %s: %s", r.status,
              r.reason);
        kh_record_free(&r);
    }
    if (kh_e2e_record(tmp, "fixture_blobs", "fixture_nan", &r) == 0) {
        CHECK(!strcmp(r.status, "diverged"), "nan status %s (the child's own record must be kept)", r.status);
        kh_record_free(&r);
    }

    /* 1b. tasks run in the order given on the command line, not sorted */
    const char *tmp2 = kh_test_tmpdir("matrix-order");
    snprintf(args, sizeof args, "matrix --plugins fixture --tasks fixture_conv,fixture_blobs --devices cpu --epochs 1 "
             "--out '%s'", tmp2);
    rc = khost(args);
    const char *c1 = strstr(out, "[1/2] fixture x fixture_conv"), *c2 = strstr(out, "[2/2] fixture x fixture_blobs");
    CHECK(rc == 0 && c1 && c2 && c1 < c2, "task order fixture_conv, fixture_blobs kept (exit %d):\n%s", rc, out);

    /* 2. --resume skips the final cell (ok) and reruns the crashed one; the ok record is untouched. */
    char okpath[4096];
    kh_record_path(okpath, sizeof okpath, tmp, "fixture_blobs", "fixture", "cpu", "json");
    struct stat before, after;
    CHECK(stat(okpath, &before) == 0, "%s missing", okpath);
    snprintf(args, sizeof args, "matrix --plugins fixture,fixture_segv --tasks fixture_blobs --devices cpu "
             "--epochs 2 --out '%s' --resume", tmp);
    rc = khost(args);
    CHECK(rc == 1, "resume exited %d:\n%s", rc, out);
    CHECK(strstr(out, "fixture x fixture_blobs x cpu ... skipped (recorded ok)"), "ok cell not skipped:\n%s", out);
    CHECK(strstr(out, "fixture_segv x fixture_blobs x cpu ...\n"), "crashed cell not rerun:\n%s", out);
    CHECK(stat(okpath, &after) == 0 && after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
              after.st_mtim.tv_nsec == before.st_mtim.tv_nsec, "the skipped cell's record was rewritten");

    /* ... but not when the settings differ from the record's. */
    snprintf(args, sizeof args, "matrix --plugins fixture --tasks fixture_blobs --devices cpu --epochs 1 --out '%s' "
             "--resume", tmp);
    rc = khost(args);
    CHECK(rc == 0 && !strstr(out, "skipped") && strstr(out, "... ok"), "resume with other epochs: %d\n%s", rc, out);

    /* ... nor when it was measured on another machine (CPU model and ISA) or by another build: a task's column
     * is one machine and one build, so --resume redoes the cell here and says why. */
    snprintf(args, sizeof args, "matrix --plugins fixture --tasks fixture_blobs --devices cpu --epochs 1 --out '%s' "
             "--resume --quiet", tmp);
    static const char *const planted[][2] = {{"cpu_model", "Other CPU 9000"}, {"git_rev", "0123456789ab"}};
    for (int k = 0; k < 2; k++) {
        kh_cell_record moved;
        char err[512];
        if (kh_record_read(okpath, &moved, err, sizeof err) != 0) {
            CHECK(0, "%s", err);
            break;
        }
        kh_record_set_env(&moved, planted[k][0], planted[k][1]);
        CHECK(kh_record_write(&moved, tmp, err, sizeof err) == 0, "plant %s: %s", planted[k][0], err);
        kh_record_free(&moved);
        rc = khost(args);
        CHECK(rc == 0 && strstr(out, "fixture x fixture_blobs x cpu ... rerun: recorded on ") &&
                  strstr(out, planted[k][1]) && strstr(out, "this is "),
              "a record of %s %s is rerun, saying so (exit %d):\n%s", planted[k][0], planted[k][1], rc, out);
        if (kh_record_read(okpath, &moved, err, sizeof err) == 0) {
            const char *v = kh_record_get_env(&moved, planted[k][0]);
            CHECK(v && strcmp(v, planted[k][1]) && !strcmp(moved.status, "ok"), "the rerun's record is this %s's: %s",
                  k ? "build" : "machine", v ? v : "(none)");
            kh_record_free(&moved);
        }
        rc = khost(args); /* and now it is this machine's: kept */
        CHECK(rc == 0 && !strstr(out, "rerun"), "then kept (exit %d):\n%s", rc, out);
    }

    /* 3. Only good cells: exit 0; then the report reads what matrix wrote. */
    snprintf(args, sizeof args, "matrix --plugins fixture --tasks fixture_blobs --epochs 1 --out '%s' --quiet", tmp);
    rc = khost(args);
    CHECK(rc == 0, "all-ok matrix exited %d:\n%s", rc, out);
    CHECK(!strstr(out, "[1/1]"), "--quiet printed an ok cell:\n%s", out);
    snprintf(args, sizeof args, "report '%s'", tmp);
    rc = khost(args);
    CHECK(rc == 0 && strstr(out, "| fixture_segv | crashed |") && strstr(out, "| fixture_hang | timeout |"),
          "report of the matrix: %d\n%s", rc, out);

    /* 4. An interrupt (SIGTERM here: a shell's background job ignores SIGINT, and khost keeps ignored
     * signals ignored) stops the matrix, kills the running cell (in its own process group) and records
     * nothing for it, so --resume will run it again. */
    char idir[4096];
    snprintf(idir, sizeof idir, "%s/interrupted", tmp);
    snprintf(args, sizeof args,
             "matrix --plugins fixture_hang,fixture_segv --tasks fixture_blobs --devices cpu --timeout 60 "
             "--out '%s' & p=$!; sleep 1; kill -TERM $p; wait $p", idir);
    t0 = now();
    rc = khost(args);
    wall = now() - t0;
    CHECK(rc == 1 && strstr(out, "interrupted"), "interrupted matrix: %d\n%s", rc, out);
    CHECK(wall < 20, "interrupt took %.1f s", wall);
    CHECK(!strstr(out, "fixture_segv x"), "a cell started after the interrupt:\n%s", out);
    char hang_json[4096];
    kh_record_path(hang_json, sizeof hang_json, idir, "fixture_blobs", "fixture_hang", "cpu", "json");
    CHECK(stat(hang_json, &st) != 0, "the interrupted cell has a record");
    CHECK(alive_with(idir) == 0, "a process of the interrupted cell is still running");

    /* 4b. A device kind the plugin cannot use: the cell is recorded "unsupported" without being scheduled
     * (no child, so no log) and, run directly, stops before its task loads any data. */
    char ndir[4096], mark[4200], nlog[4200];
    snprintf(ndir, sizeof ndir, "%s/nodev", tmp);
    snprintf(mark, sizeof mark, "%s/loaded", tmp);
    snprintf(args, sizeof args, "matrix --plugins fixture_nodev,fixture --tasks fixture_blobs --devices cpu "
             "--epochs 1 --out '%s'", ndir);
    setenv("FIXTURE_LOAD_MARK", mark, 1);
    rc = khost(args);
    CHECK(rc == 0 && strstr(out, "fixture_nodev x fixture_blobs x cpu ... unsupported: device kind not available: "
                                 "fixture_nodev has no device\n"),
          "unavailable device in the matrix: %d\n%s", rc, out);
    if (kh_e2e_record(ndir, "fixture_blobs", "fixture_nodev", &r) == 0) {
        CHECK(!strcmp(r.status, "unsupported"), "status %s", r.status);
        kh_record_free(&r);
    }
    kh_record_path(nlog, sizeof nlog, ndir, "fixture_blobs", "fixture_nodev", "cpu", "log");
    CHECK(stat(nlog, &st) != 0, "the unavailable cell was scheduled (it has a log)");
    CHECK(stat(mark, &st) == 0, "the runnable cell did not load its data: the marker is not written");
    unlink(mark);
    snprintf(args, sizeof args, "run --plugin fixture_nodev --task fixture_blobs --device cpu --out '%s' --quiet", ndir);
    rc = khost(args);
    CHECK(rc == 6, "run on an unavailable device kind exited %d:\n%s", rc, out);
    CHECK(stat(mark, &st) != 0, "the task loaded its data before the device kind was found unavailable");
    unsetenv("FIXTURE_LOAD_MARK");

    /* 5. The matrix cannot start: documented exit codes, named culprits. */
    snprintf(args, sizeof args, "matrix --plugins no_such_backend --tasks fixture_blobs --out '%s'", tmp);
    rc = khost(args);
    CHECK(rc == 3 && strstr(out, "no_such_backend"), "unknown plugin: %d %s", rc, out);
    snprintf(args, sizeof args, "matrix --plugins fixture --tasks fixture_blobs --devices cuda:0 --out '%s'", tmp);
    rc = khost(args);
    CHECK(rc == 5 && strstr(out, "cuda:0") && strstr(out, "0 CUDA device(s)"), "unknown device: %d %s", rc, out);
    rc = khost("matrix --epochs 0");
    CHECK(rc == 2 && strstr(out, "--epochs"), "--epochs 0: %d %s", rc, out);
    rc = khost("matrix --timeout -1");
    CHECK(rc == 2 && strstr(out, "--timeout"), "--timeout -1: %d %s", rc, out);
    rc = khost("matrix --frobnicate");
    CHECK(rc == 2 && strstr(out, "--frobnicate"), "unknown option: %d %s", rc, out);
    rc = khost("matrix --help");
    CHECK(rc == 0 && strstr(out, "--resume"), "--help: %d %s", rc, out);
    return kh_test_finish("core_matrix");
}
