/* tests/core_e2e/test_e2e.c — the khost binary end to end with fixture modules: a real training run to
 * >95% validation accuracy, the CSV/JSON records, an unsupported cell, a diverging cell, name resolution by
 * file name, and a machine without the CUDA driver listing only the cpu. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/abi.h"
#include "results/results.h"
#include "e2e_testlib.h"
#include "testutil.h"

static const char *bin, *ini;
static char out[1 << 16];

/* khost with extra environment assignments (env: "A=1 B=2" or ""). */
static int khost_env(const char *env, const char *args) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s KHOST_CONF='%s' KHOST_LIBCUDA=/nonexistent/libcuda.so.1 '%s' %s", env, ini, bin, args);
    return kh_test_run(cmd, out, sizeof out);
}
static int khost(const char *args) { return khost_env("", args); }

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 18];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

static int count_lines(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0, c;
    while ((c = fgetc(f)) != EOF) n += c == '\n';
    fclose(f);
    return n;
}

static void test_training_run(const char *dir) {
    char args[1024], path[2048], err[512];
    snprintf(args, sizeof args, "run --plugin fixture --task fixture_blobs --device cpu --out '%s' --json --quiet", dir);
    int rc = khost(args);
    CHECK(rc == 0, "run exit %d: %s", rc, out);
    /* --json: the record is the last line of stdout */
    const char *last = strrchr(out, '{');
    CHECK(last && strstr(out, "\"khost_record\":2"), "no JSON record in output: %s", out);
    kh_cell_record r;
    kh_record_path(path, sizeof path, dir, "fixture_blobs", "fixture", "cpu", "json");
    CHECK(kh_record_read(path, &r, err, sizeof err) == 0, "read %s: %s", path, err);
    CHECK(strcmp(r.status, "ok") == 0, "status %s (%s)", r.status, r.reason);
    /* the raw samples: one per timed step, summing to the epochs' training time; a single run is 1 of 1 */
    double train_sum = 0, step_sum = 0;
    for (int e = 0; e < r.n_rows; e++) train_sum += r.rows[e].train_s;
    for (int64_t k = 0; k < r.n_step_s; k++) step_sum += r.step_s[k];
    CHECK(r.steps_per_epoch > 0 && r.n_step_s == r.steps_per_epoch * r.n_rows,
          "%lld step samples for %d epochs of %lld steps", (long long)r.n_step_s, r.n_rows, (long long)r.steps_per_epoch);
    CHECK(fabs(step_sum - train_sum) <= 0.05 * train_sum + 1e-4, "steps sum to %g s, epochs' training %g s", step_sum,
          train_sum);
    CHECK(!strcmp(r.step_sync, "device") && r.rep_index == 1 && r.rep_of == 1, "sync %s, repetition %d of %d",
          r.step_sync, r.rep_index, r.rep_of);
    CHECK(r.peak_rss_bytes > (1 << 20), "peak RSS %lld", (long long)r.peak_rss_bytes);
    CHECK(r.n_rows == 5, "epochs recorded %d, expected the task's 5", r.n_rows);
    CHECK(r.n_rows > 0 && r.rows[r.n_rows - 1].val_acc > 0.95, "final val_acc %.4f <= 0.95",
          r.n_rows ? r.rows[r.n_rows - 1].val_acc : -1.0);
    CHECK(r.train_samples == 2048 && r.val_samples == 512, "samples %lld/%lld", (long long)r.train_samples,
          (long long)r.val_samples);
    CHECK(isfinite(r.mean_epoch_s) && r.mean_epoch_s > 0, "mean epoch time %g", r.mean_epoch_s);
    CHECK(r.n_rows < 2 || r.rows[1].elapsed > r.rows[0].elapsed, "elapsed not increasing");
    for (int i = 0; i < r.n_rows; i++)
        CHECK(fabs(r.rows[i].epoch_s - (r.rows[i].train_s + r.rows[i].val_s)) < 0.05 + 0.05 * r.rows[i].epoch_s,
              "epoch %d: epoch_s %g != train_s %g + val_s %g", i + 1, r.rows[i].epoch_s, r.rows[i].train_s,
              r.rows[i].val_s);
    CHECK(kh_record_get_env(&r, "cpu_model") && kh_record_get_env(&r, "git_rev") &&
              kh_record_get_env(&r, "backend_env") && !strcmp(kh_record_get_env(&r, "backend_env"), "fixture=1"),
          "environment incomplete");
    /* the revision is taken at build time: it must be the source tree's HEAD now, not the one at configure */
    const char *src = getenv("KHOST_SOURCE"), *rev = kh_record_get_env(&r, "git_rev");
    char cmd[1024], head[64] = "";
    snprintf(cmd, sizeof cmd, "git -C '%s' rev-parse --short=12 HEAD 2>/dev/null", src ? src : ".");
    if (src && kh_test_run(cmd, head, sizeof head) == 0 && strlen(head) >= 12) {
        head[12] = 0;
        CHECK(rev && strncmp(rev, head, 12) == 0, "git_rev %s, source HEAD %s", rev ? rev : "(none)", head);
    }
    CHECK(r.seed == 7, "seed %llu, expected the registry's 7", (unsigned long long)r.seed);
    CHECK(isfinite(r.time_to_target_s), "time to target 0.95 not recorded");
    kh_record_free(&r);
    kh_record_path(path, sizeof path, dir, "fixture_blobs", "fixture", "cpu", "csv");
    CHECK(count_lines(path) == 6, "%s: %d lines, expected header + 5", path, count_lines(path));
    FILE *f = fopen(path, "r");
    char header[256] = "";
    if (f) {
        if (!fgets(header, sizeof header, f)) header[0] = 0;
        fclose(f);
    }
    CHECK(strcmp(header, "epoch,elapsed,loss,acc,val_loss,val_acc,train_s,val_s\n") == 0, "CSV header '%s'", header);
}

static void test_same_seed_same_result(const char *dir) {
    /* identical seed: identical weights and shuffles, so identical metrics (time aside) */
    char args[1024], p1[2048], err[512];
    double acc[2];
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "--plugin fixture --task fixture_blobs --epochs 2 --seed 3 --out '%s/s%d' --quiet",
                 dir, k);
        CHECK(khost(args) == 0, "implicit run failed: %s", out);
        snprintf(p1, sizeof p1, "%s/s%d", dir, k);
        char path[2100];
        kh_record_path(path, sizeof path, p1, "fixture_blobs", "fixture", "cpu", "json");
        kh_cell_record r;
        acc[k] = -1;
        if (kh_record_read(path, &r, err, sizeof err) == 0) {
            acc[k] = r.n_rows == 2 ? r.rows[1].val_loss : -2;
            kh_record_free(&r);
        }
    }
    CHECK(acc[0] > 0 && acc[0] == acc[1], "same seed gave val_loss %.9g and %.9g", acc[0], acc[1]);
}

static void test_steps(const char *dir) {
    /* --steps 5 with batch 64: 320 samples per epoch; --warmup-steps trains untimed batches first */
    char args[1024];
    snprintf(args, sizeof args, "run --plugin fixture --task fixture_blobs --epochs 2 --steps 5 --warmup-steps 3 "
             "--out '%s/steps' --quiet", dir);
    CHECK(khost(args) == 0, "--steps run failed: %s", out);
    char sub[2048];
    snprintf(sub, sizeof sub, "%s/steps", dir);
    kh_cell_record r;
    if (kh_e2e_record(sub, "fixture_blobs", "fixture", &r) == 0) {
        CHECK(!strcmp(r.status, "ok") && r.n_rows == 2, "steps: status %s rows %d", r.status, r.n_rows);
        kh_record_free(&r);
    }
    /* the progress line shows the samples trained per epoch */
    snprintf(args, sizeof args, "run --plugin fixture --task fixture_blobs --epochs 1 --steps 5 --out '%s/steps'", dir);
    CHECK(khost(args) == 0 && strstr(out, "320/320"), "--steps 5 did not train 320 samples: %s", out);
    CHECK(khost("run --plugin fixture --task fixture_blobs --steps 0") == 2, "--steps 0 accepted");
    /* more steps than an epoch has: a warning and a note in the record, never a silent cut */
    snprintf(args, sizeof args, "run --plugin fixture --task fixture_blobs --epochs 1 --steps 100000 --out '%s/many'", dir);
    CHECK(khost(args) == 0 && strstr(out, "--steps 100000: an epoch of fixture_blobs has"), "--steps above an epoch: %s",
          out);
    snprintf(sub, sizeof sub, "%s/many", dir);
    if (kh_e2e_record(sub, "fixture_blobs", "fixture", &r) == 0) {
        int noted = 0;
        for (int i = 0; i < r.n_env; i++) noted |= !strcmp(r.env_key[i], "steps_note") && strstr(r.env_val[i], "100000");
        CHECK(noted, "the record notes the steps asked and run");
        kh_record_free(&r);
    }
    CHECK(khost("verify --plugin fixture --task fixture_blobs --tol inf") == 2 && strstr(out, "finite"),
          "verify --tol inf refused: %s", out);
}

static void test_unsupported(const char *dir) {
    char args[1024];
    snprintf(args, sizeof args, "run --plugin fixture --task fixture_conv --device cpu --out '%s' --quiet", dir);
    int rc = khost(args);
    CHECK(rc == 6, "unsupported cell exit %d (expected 6): %s", rc, out);
    kh_cell_record r;
    if (kh_e2e_record(dir, "fixture_conv", "fixture", &r) == 0) {
        CHECK(!strcmp(r.status, "unsupported") && strstr(r.reason, "conv2d"), "status %s reason %s", r.status,
              r.reason);
        kh_record_free(&r);
    }
    snprintf(args, sizeof args, "run --plugin fixture --task fixture_conv --device cpu --out '%s'", dir);
    rc = khost(args);
    CHECK(rc == 6 && strstr(out, "unsupported: layer") && !strstr(out, "unsupported: unsupported"),
          "the message names the status once (exit %d): %s", rc, out);
}

static void test_diverged(const char *dir) {
    char args[1024];
    snprintf(args, sizeof args, "run --plugin fixture_nan --task fixture_blobs --device cpu --out '%s' --quiet", dir);
    int rc = khost(args);
    CHECK(rc == 1, "diverging cell exit %d (expected 1): %s", rc, out);
    kh_cell_record r;
    if (kh_e2e_record(dir, "fixture_blobs", "fixture_nan", &r) == 0) {
        CHECK(!strcmp(r.status, "diverged") && strstr(r.reason, "NaN"), "status %s reason %s", r.status, r.reason);
        CHECK(r.n_rows == 1, "a diverged cell keeps the epoch it diverged in (%d rows)", r.n_rows);
        kh_record_free(&r);
    }
}

static void test_crash_keeps_finished_epochs(const char *dir) {
    /* fixture_segv crashes in epoch 2: the record checkpointed after epoch 1 must survive */
    char args[1024];
    snprintf(args, sizeof args, "run --plugin fixture_segv --task fixture_blobs --device cpu --out '%s' --quiet", dir);
    int rc = khost(args);
    CHECK(rc != 0, "a crashing cell exited 0");
    kh_cell_record r;
    if (kh_e2e_record(dir, "fixture_blobs", "fixture_segv", &r) == 0) {
        CHECK(!strcmp(r.status, "running") && r.n_rows == 1 && r.rows[0].val_acc > 0.5,
              "checkpoint: status %s, %d rows", r.status, r.n_rows);
        kh_record_free(&r);
    }
}

static void test_resolution_and_usage(const char *dir) {
    char args[1024];
    snprintf(args, sizeof args, "--plugin fixture.so --task fixture_blobs --epochs 1 --out '%s' --quiet", dir);
    CHECK(khost(args) == 0, "--plugin fixture.so (file name) failed: %s", out);
    CHECK(khost("run --plugin nosuch --task fixture_blobs") == 3, "unknown plugin should exit 3: %s", out);
    CHECK(strstr(out, "nosuch") != NULL, "message does not name the plugin: %s", out);
    CHECK(khost("run --plugin fixture --task fixture_blobs --device cuda:0") == 5, "cuda:0 here should exit 5: %s", out);
    CHECK(khost("run --plugin fixture --task fixture_blobs --epochs zero") == 2, "bad --epochs should exit 2: %s", out);
    CHECK(khost("frobnicate") == 2, "unknown command should exit 2");
    CHECK(khost("--help") == 0 && strstr(out, "exit status") && strstr(out, "matrix"), "--help incomplete: %s", out);
}

static void test_no_driver(void) {
    int rc = khost("--list-devices");
    CHECK(rc == 0, "--list-devices exit %d: %s", rc, out);
    CHECK(strncmp(out, "cpu ", 4) == 0, "first device is not cpu: %s", out);
    CHECK(strstr(out, "cuda:") == NULL, "a CUDA device listed without a driver: %s", out);
    CHECK(strstr(out, "no CUDA device") != NULL, "no explanation of the missing CUDA devices: %s", out);
}

/* Model-compile time in the records (ABI 1.2). fixture_codegen plays a backend with a generated-code cache
 * (its compiles are logged one line each); fixture has no compile_info; fixture_abi11 was built against ABI
 * 1.1 (its table ends before compile_info). The report of the folder shows the compile column and its note. */
static void test_compile_info(const char *dir) {
    char args[2048], env[2048], path[2048], log[2048], cache[2048], res[2048], err[512];
    kh_cell_record r;
    snprintf(res, sizeof res, "%s/compile", dir);
    snprintf(cache, sizeof cache, "%s/codegen-cache", dir);
    snprintf(args, sizeof args, "mkdir -p '%s'", cache);
    kh_test_run(args, out, sizeof out);
    snprintf(log, sizeof log, "%s/compile.log", dir);

    /* 1. a miss: the cold compile (>= the fixture's 200 ms "C compiler"), then one more compile of the same
     * spec, served from the cache, as the warm time */
    snprintf(env, sizeof env, "KHOST_FIXTURE_CODEGEN_CACHE='%s' KHOST_FIXTURE_COMPILE_LOG='%s'", cache, log);
    snprintf(args, sizeof args, "run --plugin fixture_codegen --task fixture_blobs --device cpu --epochs 1 --out '%s/miss'", res);
    int rc = khost_env(env, args);
    CHECK(rc == 0, "fixture_codegen (miss) exit %d: %s", rc, out);
    CHECK(strstr(out, "compile: ") && strstr(out, "cache miss, 3 units; warm "), "no compile line in the run's output: %s", out);
    char *lg = slurp(log);
    CHECK(lg && !strcmp(lg, "compile miss\ncompile hit\n"), "a miss must be followed by exactly one more compile, a hit: [%s]",
          lg ? lg : "(no log)");
    snprintf(path, sizeof path, "%s/miss", res);
    char rp[2200];
    kh_record_path(rp, sizeof rp, path, "fixture_blobs", "fixture_codegen", "cpu", "json");
    if (kh_record_read(rp, &r, err, sizeof err) == 0) {
        CHECK(!strcmp(r.status, "ok"), "status %s (%s)", r.status, r.reason);
        CHECK(!strcmp(r.compile_cache, "miss") && r.compile_units == 3, "cache '%s', units %d", r.compile_cache, r.compile_units);
        CHECK(r.compile_s >= 0.2 && r.compile_cold_s == r.compile_s, "cold: compile_s %g, compile_cold_s %g", r.compile_s,
              r.compile_cold_s);
        CHECK(isfinite(r.compile_warm_s) && r.compile_warm_s < 0.2 && r.compile_warm_s < r.compile_cold_s,
              "warm %g (cold %g)", r.compile_warm_s, r.compile_cold_s);
        CHECK(r.compile_cc_s >= 0.2 && r.compile_cc_s <= r.compile_s && isfinite(r.compile_codegen_s) &&
                  isfinite(r.compile_load_s),
              "split: codegen %g cc %g load %g", r.compile_codegen_s, r.compile_cc_s, r.compile_load_s);
        /* the training times start after both compiles */
        CHECK(r.n_rows == 1 && r.rows[0].elapsed < r.compile_s + 5, "epoch row");
        kh_record_free(&r);
    } else {
        CHECK(0, "no record: %s", err);
    }

    /* 2. the same model again: a hit; warm = compile_s, cold unknown (absent), no second compile */
    remove(log);
    snprintf(args, sizeof args, "run --plugin fixture_codegen --task fixture_blobs --device cpu --epochs 1 --out '%s/hit' --quiet", res);
    rc = khost_env(env, args);
    CHECK(rc == 0, "fixture_codegen (hit) exit %d: %s", rc, out);
    lg = slurp(log);
    CHECK(lg && !strcmp(lg, "compile hit\n"), "a hit needs no second compile: [%s]", lg ? lg : "(no log)");
    snprintf(path, sizeof path, "%s/hit", res);
    kh_record_path(rp, sizeof rp, path, "fixture_blobs", "fixture_codegen", "cpu", "json");
    char *js = slurp(rp);
    CHECK(js && strstr(js, "\"compile_cache\":\t\"hit\"") && !strstr(js, "\"compile_cold_s\""),
          "hit record: compile_cache hit, no compile_cold_s key: %s", js ? js : "(none)");
    if (kh_record_read(rp, &r, err, sizeof err) == 0) {
        CHECK(!strcmp(r.compile_cache, "hit") && isnan(r.compile_cold_s) && r.compile_warm_s == r.compile_s &&
                  r.compile_s < 0.2 && r.compile_cc_s == 0,
              "hit: cache %s cold %g warm %g compile_s %g cc %g", r.compile_cache, r.compile_cold_s, r.compile_warm_s,
              r.compile_s, r.compile_cc_s);
        kh_record_free(&r);
    } else {
        CHECK(0, "no record: %s", err);
    }

    /* 3. a cache that never hits: cold recorded, the second compile made once, no warm time (it was not warm) */
    remove(log);
    snprintf(env, sizeof env, "KHOST_FIXTURE_CODEGEN=miss KHOST_FIXTURE_CODEGEN_MS=20 KHOST_FIXTURE_COMPILE_LOG='%s'", log);
    snprintf(args, sizeof args, "run --plugin fixture_codegen --task fixture_blobs --device cpu --epochs 1 --out '%s/nocache'", res);
    rc = khost_env(env, args);
    CHECK(rc == 0 && strstr(out, "not a cache hit: no warm time"), "always-miss exit %d, no warning: %s", rc, out);
    lg = slurp(log);
    CHECK(lg && !strcmp(lg, "compile miss\ncompile miss\n"), "always-miss: two compiles expected: [%s]", lg ? lg : "(no log)");
    snprintf(path, sizeof path, "%s/nocache", res);
    kh_record_path(rp, sizeof rp, path, "fixture_blobs", "fixture_codegen", "cpu", "json");
    if (kh_record_read(rp, &r, err, sizeof err) == 0) {
        CHECK(!strcmp(r.compile_cache, "miss") && r.compile_cold_s == r.compile_s && isnan(r.compile_warm_s),
              "always-miss: cache %s cold %g warm %g", r.compile_cache, r.compile_cold_s, r.compile_warm_s);
        kh_record_free(&r);
    } else {
        CHECK(0, "no record: %s", err);
    }

    /* 4. no compile_info (fixture) and a module built against ABI 1.1 (fixture_abi11, whose source fills
     * compile_info beyond its table): compile_s only, and fixture_abi11 must never be asked (no log line) */
    remove(log);
    snprintf(env, sizeof env, "KHOST_FIXTURE_CODEGEN_CACHE='%s' KHOST_FIXTURE_COMPILE_LOG='%s'", cache, log);
    const char *plain[] = {"fixture", "fixture_abi11"};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "run --plugin %s --task fixture_blobs --device cpu --epochs 1 --out '%s/%s' --quiet",
                 plain[i], res, i ? "miss" : "hit");
        rc = khost_env(env, args);
        CHECK(rc == 0, "%s exit %d: %s", plain[i], rc, out);
        snprintf(path, sizeof path, "%s/%s", res, i ? "miss" : "hit");
        kh_record_path(rp, sizeof rp, path, "fixture_blobs", plain[i], "cpu", "json");
        js = slurp(rp);
        CHECK(js && strstr(js, "\"compile_s\":\t") && !strstr(js, "\"compile_s\":\tnull") && !strstr(js, "\"compile_cache\"") && !strstr(js, "\"compile_warm_s\"") &&
                  !strstr(js, "\"compile_units\""),
              "%s: compile_s only expected: %s", plain[i], js ? js : "(none)");
        if (kh_record_read(rp, &r, err, sizeof err) == 0) {
            CHECK(isfinite(r.compile_s) && r.compile_s >= 0 && !r.compile_cache[0] && isnan(r.compile_warm_s) &&
                      isnan(r.compile_cold_s),
                  "%s: compile_s %g cache '%s'", plain[i], r.compile_s, r.compile_cache);
            kh_record_free(&r);
        } else {
            CHECK(0, "no record: %s", err);
        }
    }
    lg = slurp(log);
    CHECK(lg && lg[0] == 'c' && !strcmp(lg, "compile hit\n"),
          "fixture_abi11 compiles through its cache (one line) and is never asked for compile_info: [%s]", lg ? lg : "(none)");

    /* 5. the report of these records: the column beside time per epoch, and what it means */
    snprintf(args, sizeof args, "report '%s/miss' --html '%s/miss.html'", res, res);
    rc = khost(args);
    CHECK(rc == 0, "report exit %d: %s", rc, out);
    CHECK(strstr(out, "| backend | cpu | cpu compile cold/warm |") && strstr(out, "compile: model-compile time"),
          "report: no compile column or note: %s", out);
    CHECK(strstr(out, "| fixture_abi11 |") && strstr(out, "| fixture_codegen |"), "report rows: %s", out);
    snprintf(path, sizeof path, "%s/miss.html", res);
    js = slurp(path);
    CHECK(js && strstr(js, "<th class=\"compile\">cpu compile cold/warm</th>") && strstr(js, "<p class=\"compile-note\">") &&
              strstr(js, "title=\"cache miss, 3 generated units; codegen "),
          "html: no compile column, note or split");
}

static void test_list(void) {
    int rc = khost("--list");
    CHECK(rc == 0, "--list exit %d", rc);
    char abi[32];
    snprintf(abi, sizeof abi, "ABI %d.%d", KH_ABI_MAJOR, KH_ABI_MINOR);
    CHECK(strstr(out, "fixture_blobs") && strstr(out, "fixture_segv") && strstr(out, abi),
          "--list misses modules: %s", out);
}

int main(int argc, char **argv) {
    bin = getenv("KHOST_BIN");
    ini = argc > 1 ? argv[1] : NULL;
    if (!bin || !ini) {
        fprintf(stderr, "usage: KHOST_BIN=khost test_e2e khost-test.ini\n");
        return 2;
    }
    const char *dir = kh_test_tmpdir("e2e");
    test_training_run(dir);
    test_same_seed_same_result(dir);
    test_steps(dir);
    test_unsupported(dir);
    test_diverged(dir);
    test_crash_keeps_finished_epochs(dir);
    test_resolution_and_usage(dir);
    test_no_driver();
    test_list();
    test_compile_info(dir);
    return kh_test_finish("test_e2e");
}
