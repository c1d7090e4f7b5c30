/* tests/core_slurm/test_slurm_units.c — the Slurm side of `khost matrix` without a Slurm: the plan file,
 * job states, the command runner, the scripts `--slurm-script-only` writes, the array task run by hand
 * (records, Slurm ids in the environment, Slurm's SIGTERM with and without its reason) and the collector
 * with stand-in sacct and scontrol. tests/slurm runs the whole thing against a real Slurm.
 * Usage: test_slurm_units REGISTRY (the fixtures' khost-test.ini); needs $KHOST_BIN. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cell/env.h"
#include "e2e_testlib.h"
#include "results/results.h"
#include "sched/slurm/slurm.h"
#include "testutil.h"
#include "khost/kit/clock.h"

static const char *bin, *ini, *tmp;
static char out[1 << 16];

/* khost outside any Slurm job, whatever the environment of the test: env's assignments come after. */
static int khost(const char *env, const char *args) {
    char vars[4096];
    snprintf(vars, sizeof vars, "SLURM_JOB_ID= SLURM_ARRAY_JOB_ID= SLURM_ARRAY_TASK_ID= SLURMD_NODENAME= %s",
             env ? env : "");
    return kh_e2e_khost(bin, ini, vars, args, out, sizeof out);
}

static char *slurp(const char *path) {
    static char buf[1 << 16];
    buf[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return buf;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* The folder `--slurm-script-only` wrote for kind under dir/slurm/ (the newest of that kind). */
static int plan_dir(const char *dir, const char *kind, char *buf, size_t n) {
    char sl[4096];
    snprintf(sl, sizeof sl, "%s/slurm", dir);
    DIR *d = opendir(sl);
    buf[0] = 0;
    if (!d) return -1;
    struct dirent *e;
    char best[256] = "";
    size_t kl = strlen(kind);
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > kl + 1 && !strcmp(e->d_name + l - kl, kind) && e->d_name[l - kl - 1] == '-' &&
            strcmp(e->d_name, best) > 0)
            snprintf(best, sizeof best, "%s", e->d_name);
    }
    closedir(d);
    if (!best[0]) return -1;
    snprintf(buf, n, "%s/%s", sl, best);
    return 0;
}

static int env_is(const kh_cell_record *r, const char *key, const char *want) {
    const char *v = kh_record_get_env(r, key);
    return v && !strcmp(v, want);
}

static void test_plan(void) {
    char path[600], err[1200];
    snprintf(path, sizeof path, "%s/plan", tmp);
    kh_slurm_plan p;
    memset(&p, 0, sizeof p);
    p.out_dir = "/shared/results";
    p.data_dir = "/shared/data";
    p.fetch = "";
    p.timeout_s = 90.5;
    p.epochs = "2";
    p.limit_val = "64";
    p.math = "tf32";
    kh_slurm_cell c0 = {"cntk", "cntk", "mnist_mlp", "mnist_mlp", "cpu", "mnist", NULL, 0, 0};
    kh_slurm_cell c1 = {"mine", "/opt/x/mine.so", "imdb_fasttext", "imdb_fasttext", "cuda:0", "", NULL, 0, 0};
    kh_slurm_cell c2 = {"cntk", "cntk", "mnist_mlp", "mnist_mlp", "cpu", "mnist", "41", 2, 3}; /* seed 2 of 3 */
    CHECK(kh_slurm_plan_add(&p, &c0) == 0 && kh_slurm_plan_add(&p, &c1) == 0 && kh_slurm_plan_add(&p, &c2) == 0,
          "plan_add");
    CHECK(kh_slurm_plan_write(path, &p, err, sizeof err) == 0, "write: %s", err);
    kh_slurm_plan_free(&p);
    kh_slurm_plan q;
    CHECK(kh_slurm_plan_read(path, &q, err, sizeof err) == 0, "read: %s", err);
    if (q.n == 3) {
        CHECK(!strcmp(q.out_dir, "/shared/results") && !strcmp(q.data_dir, "/shared/data") && !strcmp(q.fetch, ""),
              "dirs %s %s", q.out_dir, q.data_dir);
        CHECK(q.timeout_s == 90.5 && !strcmp(q.epochs, "2") && !strcmp(q.limit_val, "64") && !q.seed &&
                  !q.batch_size && !q.limit_train && q.math && !strcmp(q.math, "tf32"), "settings");
        CHECK(!strcmp(q.cells[1].plugin_arg, "/opt/x/mine.so") && !strcmp(q.cells[1].device, "cuda:0") &&
                  !strcmp(q.cells[1].dataset, "") && !strcmp(q.cells[0].dataset, "mnist"), "cells");
        CHECK(!q.cells[0].seed && q.cells[0].rep == 0 && q.cells[2].seed && !strcmp(q.cells[2].seed, "41") &&
                  q.cells[2].rep == 2 && q.cells[2].rep_of == 3, "a cell's own seed and k/N");
    } else {
        CHECK(0, "read %d cells, wrote 3", q.n);
    }
    kh_slurm_plan_free(&q);

    static const char *const bad[][2] = {
        {"not a plan\n", "not a khost Slurm plan"},
        {"khost-slurm-plan\t1\nout\t/r\ncell\ta\tb\tc\n", ":3: a cell line has 6"},
        {"khost-slurm-plan\t1\nout\t/r\nfrob\tx\n", ":3: unknown key 'frob'"},
        {"khost-slurm-plan\t1\ncell\ta\ta\tt\tt\tcpu\t\n", "no 'out' line"},
        {"khost-slurm-plan\t1\nout\t/r\n", "no cell lines"},
        {"khost-slurm-plan\t1\nout\t/r\ntimeout\t-3\n", "timeout '-3'"},
        {"khost-slurm-plan\t1\nout\t/r\ncell\ta\ta\tt\tt\tcpu\t\t-1\t1/3\n", ":3: a cell's seed '-1'"},
        {"khost-slurm-plan\t1\nout\t/r\ncell\ta\ta\tt\tt\tcpu\t\t5\t4/3\n", "and k/N '4/3'"},
        {"khost-slurm-plan\t1\nout\t/r\ncell\ta\ta\tt\tt\tcpu\t\t5\t+1/3\n", "and k/N '+1/3'"},
        {"khost-slurm-plan\t1\nout\t/r\ncell\ta\ta\tt\tt\tcpu\t\t5\t1/3x\n", "and k/N '1/3x'"},
        {"khost-slurm-plan\t1\nout\t/r\ncell\ta\ta\tt\tt\tcpu\t\t5\n", ":3: a cell line has 6"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kh_test_write_file(path, bad[i][0], strlen(bad[i][0]));
        int rc = kh_slurm_plan_read(path, &q, err, sizeof err);
        CHECK(rc != 0 && strstr(err, bad[i][1]) && strstr(err, path), "bad plan %zu: %s", i, err);
    }
    snprintf(path, sizeof path, "%s/no-such-plan", tmp);
    CHECK(kh_slurm_plan_read(path, &q, err, sizeof err) != 0 && strstr(err, "no-such-plan"), "%s", err);
}

static void test_states_and_exec(void) {
    static const char *const map[][2] = {{"COMPLETED", ""},          {"CANCELLED by 0", "cancelled"},
                                         {"CANCELLED", "cancelled"}, {"TIMEOUT", "timeout"},
                                         {"NODE_FAIL", "node_fail"}, {"PREEMPTED", "preempted"},
                                         {"OUT_OF_MEMORY", "oom"},   {"FAILED", "error"},
                                         {"BOOT_FAIL", "killed"},    {"DEADLINE", "killed"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        const char *s = kh_slurm_status(map[i][0]);
        CHECK(s && !strcmp(s, map[i][1]), "%s -> %s", map[i][0], s ? s : "NULL");
    }
    CHECK(!kh_slurm_status("RUNNING") && !kh_slurm_status("PENDING") && !kh_slurm_status("COMPLETING") &&
              !kh_slurm_status("CANCELLEDX"), "unfinished states");

    char buf[64];
    char *a1[] = {"sh", "-c", "echo out; echo err >&2; exit 3", NULL};
    int rc = kh_slurm_exec(a1, buf, sizeof buf, 10);
    CHECK(rc == 3 && strstr(buf, "out") && strstr(buf, "err"), "exec: %d '%s'", rc, buf);
    char *a2[] = {"sh", "-c", "head -c 5000 /dev/zero | tr '\\0' x", NULL};
    rc = kh_slurm_exec(a2, buf, sizeof buf, 10);
    CHECK(rc == 0 && strlen(buf) == sizeof buf - 1, "truncated: %d %zu", rc, strlen(buf));
    double t0 = kh_now();
    char *a3[] = {"sleep", "20", NULL};
    rc = kh_slurm_exec(a3, buf, sizeof buf, 0.3);
    CHECK(rc == -2 && kh_now() - t0 < 5, "timeout: %d after %.1f s", rc, kh_now() - t0);
    char *a4[] = {"no-such-command-khost", NULL};
    rc = kh_slurm_exec(a4, buf, sizeof buf, 5);
    CHECK(rc == -1 && strstr(buf, "no-such-command-khost"), "missing command: %d %s", rc, buf);
}

/* The next argument of an #SBATCH line as sbatch's script parser reads it (whitespace separates, quotes group, a
 * backslash escapes the next character) into arg; the rest of the line after it, or NULL when none is left. */
static const char *sbatch_argument(const char *p, char *arg, size_t n) {
    while (*p == ' ' || *p == '\t') p++;
    if (!*p || *p == '\n') return NULL;
    size_t i = 0;
    char q = 0;
    int esc = 0;
    for (; *p && *p != '\n' && (q || (*p != ' ' && *p != '\t')); p++) {
        if (esc) esc = 0;
        else if (*p == '\\') { esc = 1; continue; }
        else if (q && *p == q) { q = 0; continue; }
        else if (!q && (*p == '"' || *p == '\'')) { q = *p; continue; }
        if (i + 1 < n) arg[i++] = *p;
    }
    arg[i] = 0;
    return p;
}

/* The #SBATCH options of a script as sbatch reads them: each line must be one option, and no option may come
 * twice. Returns their number; the value of option `want` (its text after '=') into val, "" when absent. */
static int sbatch_options(const char *script, const char *what, const char *want, char *val, size_t vn) {
    int n = 0;
    char seen[32][64], arg[4400], more[64];
    if (val) val[0] = 0;
    for (const char *l = script; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, "#SBATCH", 7)) continue;
        const char *rest = sbatch_argument(l + 7, arg, sizeof arg);
        CHECK(rest && !sbatch_argument(rest, more, sizeof more), "%s: one option per #SBATCH line: %.80s", what, l);
        if (!rest || n == 32) continue;
        snprintf(seen[n], sizeof seen[n], "%.*s", (int)strcspn(arg, "="), arg);
        for (int i = 0; i < n; i++) CHECK(strcmp(seen[i], seen[n]), "%s: %s set twice", what, seen[n]);
        if (val && !strcmp(seen[n], want) && arg[strlen(seen[n])] == '=') snprintf(val, vn, "%s", arg + strlen(seen[n]) + 1);
        n++;
    }
    return n;
}

static void test_scripts(void) {
    char args[4096], dir[600], pd[4096], path[4300];
    snprintf(dir, sizeof dir, "%s/a", tmp);
    snprintf(args, sizeof args,
             "matrix --slurm-script-only --plugins fixture_segv,fixture --tasks fixture_blobs --epochs 2 --out '%s' "
             "--timeout 120 --partition p1 --account a1 --sbatch-arg=--constraint=h100 --cpus-per-cell 3 "
             "--data /shared/data --math tf32", dir);
    int rc = khost(NULL, args);
    CHECK(rc == 0 && strstr(out, "slurm: cpu: 2 cell(s): wrote "), "script-only: %d\n%s", rc, out);
    if (plan_dir(dir, "cpu", pd, sizeof pd) != 0) {
        CHECK(0, "no plan folder under %s/slurm", dir);
        return;
    }
    snprintf(path, sizeof path, "%s/array.sh", pd);
    const char *s = slurp(path);
    CHECK(strstr(s, "#SBATCH --array=0-1\n") && strstr(s, "#SBATCH --time=7\n") &&
              strstr(s, "#SBATCH --cpus-per-task=3\n") && !strstr(s, "--exclusive") && !strstr(s, "--gres") &&
              strstr(s, "#SBATCH --partition=p1\n") && strstr(s, "#SBATCH --account=a1\n") &&
              strstr(s, "#SBATCH --constraint=h100\n") && strstr(s, "export KHOST_DATA='/shared/data'\n") &&
              strstr(s, " matrix --slurm-cell \"$SLURM_ARRAY_TASK_ID\" --slurm-plan '") &&
              strstr(s, "#SBATCH --output="), "array.sh:\n%s", s);
    CHECK(sbatch_options(s, "array.sh", "", NULL, 0) == 9, "array.sh: 9 options as sbatch reads them");
    CHECK(strstr(s, "#SBATCH --no-requeue\n") != NULL, "array.sh: a failed node's cell is recorded, not requeued");
    snprintf(path, sizeof path, "%s/collect.sh", pd);
    s = slurp(path);
    CHECK(strstr(s, "#SBATCH --partition=p1\n") && !strstr(s, "h100") && strstr(s, "--slurm-collect \"$1\""),
          "collect.sh:\n%s", s);
    snprintf(path, sizeof path, "%s/cells", pd);
    s = slurp(path);
    CHECK(strstr(s, "cell\tfixture\tfixture\tfixture_blobs\tfixture_blobs\tcpu\t") &&
              strstr(s, "cell\tfixture_segv\t") && strstr(s, "cell\tfixture\t") < strstr(s, "cell\tfixture_segv\t") &&
              strstr(s, "\nepochs\t2\n") && strstr(s, "\ntimeout\t120\n") && strstr(s, "\nmath\ttf32\n"),
          "cells (sorted by plugin):\n%s", s);
    snprintf(args, sizeof args, "matrix --slurm-script-only --plugins fixture --tasks fixture_blobs --math bf16 --out '%s'",
             dir);
    rc = khost(NULL, args);
    CHECK(rc == 2 && strstr(out, "--math expects fp32 or tf32"), "--slurm --math bf16 (usage error, 2): %d\n%s", rc, out);

    /* all = a cpu array (whole node) and a cuda array (one GPU per cell, cuda:0 inside the job) */
    snprintf(dir, sizeof dir, "%s/b", tmp);
    snprintf(args, sizeof args, "matrix --slurm-script-only --plugins fixture --tasks fixture_blobs --devices all "
             "--timeout 0 --out '%s'", dir);
    rc = khost(NULL, args);
    CHECK(rc == 0 && strstr(out, "slurm: cpu: 1 cell(s)") && strstr(out, "slurm: cuda: 1 cell(s)"), "all: %d\n%s", rc,
          out);
    if (plan_dir(dir, "cuda", pd, sizeof pd) == 0) {
        snprintf(path, sizeof path, "%s/array.sh", pd);
        s = slurp(path);
        CHECK(strstr(s, "#SBATCH --gres=gpu:1\n") && !strstr(s, "--time=") && !strstr(s, "--exclusive"),
              "cuda array.sh:\n%s", s);
        snprintf(path, sizeof path, "%s/cells", pd);
        CHECK(strstr(slurp(path), "\tcuda:0\t"), "cuda cells: %s", slurp(path));
    } else {
        CHECK(0, "no cuda plan under %s", dir);
    }
    if (plan_dir(dir, "cpu", pd, sizeof pd) == 0) {
        snprintf(path, sizeof path, "%s/array.sh", pd);
        CHECK(strstr(slurp(path), "#SBATCH --exclusive\n"), "cpu array.sh: %s", slurp(path));
        /* Submitted (the job file) but nothing recorded yet: the report lists the cells, never drops them. */
        snprintf(path, sizeof path, "%s/job", pd);
        kh_test_write_file(path, "123 124\n", 8);
        snprintf(args, sizeof args, "report '%s'", dir);
        rc = khost(NULL, args);
        CHECK(rc == 0 && strstr(out, "| fixture | missing | missing |") &&
                  strstr(out, "- fixture on cpu: missing: submitted to Slurm as array task 123_0, no record yet") &&
                  strstr(out, "- fixture on cuda:0: missing: submitted to Slurm as array task ?_0") &&
                  strstr(out, "Slurm array tasks: fixture on cpu = 123_0."),
              "report of a queued plan: %d\n%s", rc, out);
    }

    /* Bad command lines: usage errors naming the option; no sbatch on PATH: says so. */
    static const char *const bad[][2] = {{"--devices cuda:1", "cuda:1"},
                                         {"--sbatch-arg=--output=x", "--output"},
                                         {"--sbatch-arg=--arr=0-3", "khost sets --array itself"},
                                         {"--sbatch-arg=--ou=x", "khost sets --output itself"},
                                         {"--sbatch-arg=--job=x", "khost sets --job-name itself"},
                                         {"--sbatch-arg=-a0-3", "khost sets -a itself"},
                                         {"--timeout 1e15", "longer than a Slurm time limit"},
                                         {"--sbatch-arg constraint=a", "constraint=a"},
                                         {"--time-per-cell 1h", "--time-per-cell"},
                                         {"--epochs 0", "--epochs"},
                                         {"--frobnicate", "--frobnicate"},
                                         {"--slurm-cell 0", "--slurm-plan"},
                                         {"--resume=1", "--resume"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "matrix --slurm --plugins fixture --tasks fixture_blobs --out '%s/c' %s", tmp,
                 bad[i][0]);
        rc = khost(NULL, args);
        CHECK(rc == 2 && strstr(out, bad[i][1]), "%s: %d\n%s", bad[i][0], rc, out);
    }
    /* values that would add or change a directive are quoted as sbatch reads quotes: a partition and an
     * --sbatch-arg holding spaces and another option, an account with a quote, a results folder with a space, a
     * quote, a backslash and a % (a Slurm file-name pattern) */
    snprintf(dir, sizeof dir, "%s/o d\\'q%%", tmp);
    snprintf(args, sizeof args,
             "matrix --slurm-script-only --plugins fixture --tasks fixture_blobs --out \"%s\" --partition 'p --array=0-9' "
             "--account 'a\"b' '--sbatch-arg=--comment=x --array=1'", dir);
    rc = khost(NULL, args);
    CHECK(rc == 0, "odd values: %d\n%s", rc, out);
    if (plan_dir(dir, "cpu", pd, sizeof pd) == 0) {
        snprintf(path, sizeof path, "%s/array.sh", pd);
        s = slurp(path);
        char val[4400], want[4400];
        CHECK(sbatch_options(s, "quoted array.sh", "--partition", val, sizeof val) == 9 && !strcmp(val, "p --array=0-9"),
              "the partition is one value: '%s'\n%s", val, s);
        sbatch_options(s, "quoted array.sh", "--account", val, sizeof val);
        CHECK(!strcmp(val, "a\"b"), "the account is one value: '%s'", val);
        sbatch_options(s, "quoted array.sh", "--comment", val, sizeof val);
        CHECK(!strcmp(val, "x --array=1"), "the --sbatch-arg is one option: '%s'", val);
        sbatch_options(s, "quoted array.sh", "--array", val, sizeof val);
        CHECK(!strcmp(val, "0-0"), "--array is khost's alone: '%s'", val);
        sbatch_options(s, "quoted array.sh", "--output", val, sizeof val);
        snprintf(want, sizeof want, "%s/%%A_%%a.out", pd);
        char *pct = strstr(want, "%/"); /* the folder's own % doubled: Slurm reads "%%" as a percent sign */
        CHECK(pct && !strncmp(val, want, (size_t)(pct - want)) && !strncmp(val + (pct - want), "%%/", 3),
              "--output is the folder (its %% literal) and the pattern: '%s'", val);
    } else {
        CHECK(0, "no plan folder under %s/slurm", dir);
    }
    snprintf(args, sizeof args, "matrix --slurm --plugins fixture --tasks fixture_blobs --out '%s/c'", tmp);
    rc = khost("PATH=/nonexistent", args);
    CHECK(rc == 2 && strstr(out, "sbatch"), "no sbatch: %d\n%s", rc, out);
    rc = khost(NULL, "matrix --slurm --plugins no_such_backend");
    CHECK(rc == 3 && strstr(out, "no_such_backend"), "unknown plugin: %d\n%s", rc, out);
    rc = khost(NULL, "matrix --slurm --help");
    CHECK(rc == 0 && strstr(out, "--time-per-cell") && strstr(out, "--sbatch-arg"), "--help: %d\n%s", rc, out);
}

/* The array task by hand: Slurm's variables as a job would have them. */
static void test_cell(void) {
    char args[4096], dir[600], pd[4096], plan[4300], env[512];
    snprintf(dir, sizeof dir, "%s/a", tmp);
    if (plan_dir(dir, "cpu", pd, sizeof pd) != 0) return;
    snprintf(plan, sizeof plan, "%s/cells", pd);
    snprintf(env, sizeof env, "SLURM_JOB_ID=78 SLURM_ARRAY_JOB_ID=77 SLURM_ARRAY_TASK_ID=0 SLURMD_NODENAME=nodeX");
    snprintf(args, sizeof args, "matrix --slurm-cell 0 --slurm-plan '%s'", plan);
    int rc = khost(env, args);
    CHECK(rc == 0 && strstr(out, "fixture x fixture_blobs x cpu ... ok"), "cell 0: %d\n%s", rc, out);
    kh_cell_record r;
    if (kh_e2e_record(dir, "fixture_blobs", "fixture", &r) == 0) {
        CHECK(!strcmp(r.status, "ok") && r.n_rows == 2, "cell 0: %s, %d epochs", r.status, r.n_rows);
        CHECK(env_is(&r, "slurm_job_id", "78") && env_is(&r, "slurm_array_job_id", "77") &&
                  env_is(&r, "slurm_array_task_id", "0") && env_is(&r, "slurm_node", "nodeX"), "cell 0: Slurm env");
        kh_record_free(&r);
    }
    snprintf(args, sizeof args, "matrix --slurm-cell 1 --slurm-plan '%s'", plan);
    rc = khost("SLURM_ARRAY_JOB_ID=77 SLURM_ARRAY_TASK_ID=1 SLURMD_NODENAME=nodeX", args);
    CHECK(rc == 1 && strstr(out, "crashed: signal 11"), "cell 1: %d\n%s", rc, out);
    if (kh_e2e_record(dir, "fixture_blobs", "fixture_segv", &r) == 0) {
        CHECK(!strcmp(r.status, "crashed") && env_is(&r, "slurm_array_task_id", "1") &&
                  env_is(&r, "slurm_node", "nodeX") && r.epochs_requested == 2, "cell 1: %s", r.status);
        kh_record_free(&r);
    }
    snprintf(args, sizeof args, "matrix --slurm-cell 2 --slurm-plan '%s'", plan);
    rc = khost(NULL, args);
    CHECK(rc == 2 && strstr(out, "cells 0-1"), "cell 2 of 2: %d\n%s", rc, out);
    /* a plan whose seed is "-1" is refused naming the line, never read as 2^64 - 1 */
    char badplan[4400], *text = slurp(plan);
    snprintf(badplan, sizeof badplan, "%s/cells-bad", pd);
    if (text) {
        size_t len = strlen(text);
        char *t2 = malloc(len + 16);
        if (t2) {
            snprintf(t2, len + 16, "%sseed\t-1\n", text);
            kh_test_write_file(badplan, t2, strlen(t2));
            free(t2);
        }
    }
    snprintf(args, sizeof args, "matrix --slurm-cell 0 --slurm-plan '%s'", badplan);
    rc = khost(NULL, args);
    CHECK(rc != 0 && strstr(out, "seed '-1' is not a non-negative integer"), "plan with seed -1: %d\n%s", rc, out);

    /* Slurm's SIGTERM: with slurmstepd's message in the task's output file, and without. */
    snprintf(dir, sizeof dir, "%s/h", tmp);
    snprintf(args, sizeof args, "matrix --slurm-script-only --plugins fixture_hang --tasks fixture_blobs "
             "--epochs 3 --timeout 60 --out '%s'", dir);
    rc = khost(NULL, args);
    if (rc != 0 || plan_dir(dir, "cpu", pd, sizeof pd) != 0) {
        CHECK(0, "hang plan: %d\n%s", rc, out);
        return;
    }
    snprintf(plan, sizeof plan, "%s/cells", pd);
    char marker[4400];
    snprintf(marker, sizeof marker, "%s/55_0.out", pd);
    const char *msg = "slurm: cell 0: ...\nslurmstepd: error: *** JOB 56 ON nodeX CANCELLED AT "
                      "2026-01-01T00:00:00 DUE TO TIME LIMIT ***\n";
    kh_test_write_file(marker, msg, strlen(msg));
    snprintf(args, sizeof args, "matrix --slurm-cell 0 --slurm-plan '%s' & p=$!; sleep 1; kill -TERM $p; wait $p",
             plan);
    double t0 = kh_now();
    rc = khost("SLURM_ARRAY_JOB_ID=55 SLURM_ARRAY_TASK_ID=0", args);
    CHECK(rc == 1 && kh_now() - t0 < 15, "SIGTERM: %d after %.1f s\n%s", rc, kh_now() - t0, out);
    if (kh_e2e_record(dir, "fixture_blobs", "fixture_hang", &r) == 0) {
        CHECK(!strcmp(r.status, "timeout") &&
                  !strcmp(r.reason, "Slurm: JOB 56 ON nodeX CANCELLED AT 2026-01-01T00:00:00 DUE TO TIME LIMIT "
                                    "(array task 55_0)"), "time limit: %s: %s", r.status, r.reason);
        CHECK(env_is(&r, "slurm_array_job_id", "55") && r.epochs_requested == 3, "time limit record");
        kh_record_free(&r);
    }
    rc = khost("SLURM_ARRAY_JOB_ID=57 SLURM_ARRAY_TASK_ID=0", args);
    CHECK(rc == 1, "SIGTERM without a reason: %d\n%s", rc, out);
    if (kh_e2e_record(dir, "fixture_blobs", "fixture_hang", &r) == 0) {
        CHECK(!strcmp(r.status, "killed") && strstr(r.reason, "SIGTERM from Slurm (array task 57_0)"), "%s: %s",
              r.status, r.reason);
        kh_record_free(&r);
    }
}

/* The collector, with sacct and scontrol replaced by scripts that print what Slurm would. */
static void test_collect(void) {
    char args[4096], dir[600], pd[4096], plan[4300], fake[700], path[800], env[1400];
    snprintf(dir, sizeof dir, "%s/k", tmp);
    snprintf(args, sizeof args, "matrix --slurm-script-only --plugins fixture,fixture_nan --tasks "
             "fixture_blobs,fixture_conv --epochs 1 --out '%s'", dir);
    int rc = khost(NULL, args);
    if (rc != 0 || plan_dir(dir, "cpu", pd, sizeof pd) != 0) {
        CHECK(0, "collect plan: %d\n%s", rc, out);
        return;
    }
    snprintf(plan, sizeof plan, "%s/cells", pd);
    snprintf(fake, sizeof fake, "%s/bin", tmp);
    mkdir(fake, 0755);
    /* cell 0 ran (its own record); 1 was cancelled while running; 2 never started; 3 has a stale record */
    snprintf(args, sizeof args, "matrix --slurm-cell 0 --slurm-plan '%s'", plan);
    rc = khost("SLURM_ARRAY_JOB_ID=90 SLURM_ARRAY_TASK_ID=0", args);
    CHECK(rc == 0, "cell 0: %d\n%s", rc, out);
    snprintf(args, sizeof args, "matrix --slurm-cell 3 --slurm-plan '%s'", plan);
    rc = khost("SLURM_ARRAY_JOB_ID=50 SLURM_ARRAY_TASK_ID=3", args);
    CHECK(rc == 0 && strstr(out, "... unsupported: layer 0 conv2d"), "cell 3 (stale): %d\n%s", rc, out);
    snprintf(path, sizeof path, "%s/90_1.out", pd);
    kh_test_write_file(path, "", 0);
    const char *sacct_off = "#!/bin/sh\necho 'sacct: error: Slurm accounting storage is disabled' >&2\nexit 1\n";
    const char *scontrol =
        "#!/bin/sh\ncase \"$*\" in\n'show job -o 57') echo 'JobId=57 ArrayJobId=57 ArrayTaskId=0 "
        "JobState=CANCELLED Reason=None BatchHost=nodeX'; exit 0;;\n'show job -o 90') ;;\n*) exit 1;;\nesac\n"
        "echo 'JobId=91 JobName=khost-cpu ArrayJobId=90 ArrayTaskId=0 JobState=COMPLETED Reason=None "
        "BatchHost=n1'\n"
        "echo 'JobId=92 JobName=khost-cpu ArrayJobId=90 ArrayTaskId=1 JobState=CANCELLED Reason=None "
        "BatchHost=n2'\n"
        "echo 'JobId=90 JobName=khost-cpu ArrayJobId=90 ArrayTaskId=3 JobState=RUNNING Reason=None BatchHost=n1'\n";
    snprintf(path, sizeof path, "%s/sacct", fake);
    kh_test_write_file(path, sacct_off, strlen(sacct_off));
    chmod(path, 0755);
    snprintf(path, sizeof path, "%s/scontrol", fake);
    kh_test_write_file(path, scontrol, strlen(scontrol));
    chmod(path, 0755);
    snprintf(env, sizeof env, "PATH='%s':\"$PATH\"", fake);
    snprintf(args, sizeof args, "matrix --slurm-collect 90 --slurm-plan '%s'", plan);
    rc = khost(env, args);
    CHECK(rc == 0 && strstr(out, "4 cell(s): 1 recorded by their array task, 2 recorded here (states: 0 from sacct, 3 from scontrol)") &&
              strstr(out, "is still RUNNING"), "collect (scontrol): %d\n%s", rc, out);
    kh_cell_record r;
    if (kh_e2e_record(dir, "fixture_blobs", "fixture", &r) == 0) {
        CHECK(!strcmp(r.status, "ok") && env_is(&r, "slurm_array_job_id", "90"), "cell 0 kept: %s", r.status);
        kh_record_free(&r);
    }
    if (kh_e2e_record(dir, "fixture_blobs", "fixture_nan", &r) == 0) {
        CHECK(!strcmp(r.status, "cancelled") &&
                  !strcmp(r.reason, "Slurm state CANCELLED (array task 90_1, from scontrol)") &&
                  env_is(&r, "slurm_job_id", "92") && env_is(&r, "slurm_node", "n2") &&
                  env_is(&r, "slurm_array_task_id", "1") && r.epochs_requested == 1, "cell 1: %s: %s", r.status,
              r.reason);
        kh_record_free(&r);
    }
    if (kh_e2e_record(dir, "fixture_conv", "fixture", &r) == 0) {
        CHECK(!strcmp(r.status, "cancelled") && strstr(r.reason, "never started (no 90_2.out)") &&
                  !kh_record_get_env(&r, "slurm_node"), "cell 2: %s: %s", r.status, r.reason);
        kh_record_free(&r);
    }
    if (kh_e2e_record(dir, "fixture_conv", "fixture_nan", &r) == 0) { /* still running: left alone */
        CHECK(env_is(&r, "slurm_array_job_id", "50"), "cell 3 was touched: %s", r.status);
        kh_record_free(&r);
    }

    /* sacct answers: its states win, the stale record is replaced, a COMPLETED task without its own record
     * is an error. */
    const char *sacct =
        "#!/bin/sh\ncase \"$*\" in *'-j 95 '*) ;; *) exit 1;; esac\n"
        "echo '95_0|COMPLETED|n1|96'\necho '95_1|CANCELLED by 0|n1|97'\necho '95_2|NODE_FAIL|n3|98'\n"
        "echo '95_3|TIMEOUT|nodeY|95'\necho '95_3.batch|CANCELLED|nodeY|95.batch'\n";
    snprintf(path, sizeof path, "%s/sacct", fake);
    kh_test_write_file(path, sacct, strlen(sacct));
    snprintf(args, sizeof args, "matrix --slurm-collect 95 --slurm-plan '%s'", plan);
    rc = khost(env, args);
    CHECK(rc == 0 && strstr(out, "0 recorded by their array task, 4 recorded here (states: 4 from sacct, 0 from scontrol)"),
          "collect (sacct): %d\n%s", rc, out);
    static const char *const want[4][3] = {{"fixture_blobs", "fixture", "error"},
                                           {"fixture_blobs", "fixture_nan", "cancelled"},
                                           {"fixture_conv", "fixture", "node_fail"},
                                           {"fixture_conv", "fixture_nan", "timeout"}};
    for (int i = 0; i < 4; i++)
        if (kh_e2e_record(dir, want[i][0], want[i][1], &r) == 0) {
            CHECK(!strcmp(r.status, want[i][2]) && env_is(&r, "slurm_array_job_id", "95"), "sacct cell %d: %s: %s", i,
                  r.status, r.reason);
            if (i == 3)
                CHECK(env_is(&r, "slurm_node", "nodeY") && env_is(&r, "slurm_job_id", "95") &&
                          strstr(r.reason, "TIMEOUT (array task 95_3, from sacct)"), "cell 3: %s", r.reason);
            if (i == 0) CHECK(strstr(r.reason, "completed without writing a record"), "cell 0: %s", r.reason);
            kh_record_free(&r);
        }
    /* A task that recorded "killed" (Slurm's message missing) gets Slurm's own state from the collector. */
    char hdir[600];
    snprintf(hdir, sizeof hdir, "%s/h", tmp);
    if (plan_dir(hdir, "cpu", pd, sizeof pd) == 0) {
        snprintf(args, sizeof args, "matrix --slurm-collect 57 --slurm-plan '%s/cells'", pd);
        rc = khost(env, args);
        CHECK(rc == 0 && strstr(out, "0 recorded by their array task, 1 recorded here (states: 0 from sacct, 1 from scontrol)"),
              "collect job 57: %d\n%s", rc, out);
        if (kh_e2e_record(hdir, "fixture_blobs", "fixture_hang", &r) == 0) {
            CHECK(!strcmp(r.status, "cancelled") && strstr(r.reason, "CANCELLED (array task 57_0, from scontrol)"),
                  "killed refined: %s: %s", r.status, r.reason);
            kh_record_free(&r);
        }
    }
    rc = khost(env, "matrix --slurm-collect 9x --slurm-plan /nonexistent");
    CHECK(rc == 2 && strstr(out, "9x"), "bad job id: %d\n%s", rc, out);
    snprintf(args, sizeof args, "report '%s'", dir);
    rc = khost(NULL, args);
    CHECK(strstr(out, "| fixture | node_fail |") && strstr(out, "| fixture_nan | timeout |"), "report: %d\n%s", rc,
          out);
    CHECK(strstr(out, "Slurm array tasks: fixture on cpu = 95_2 on n3; fixture_nan on cpu = 95_3 on nodeY.\n"),
          "report names the array tasks:\n%s", out);

    /* The accounting database behind the controller: sacct lists the array as one pending job at first, while
     * scontrol already has every task's end; the collector waits for sacct, whose states it then records. */
    char counter[600];
    snprintf(counter, sizeof counter, "%s/sacct-calls", tmp);
    char lagging[2048];
    snprintf(lagging, sizeof lagging,
             "#!/bin/sh\ncase \"$*\" in *'-j 99 '*) ;; *) exit 1;; esac\n"
             "if [ ! -e '%s' ]; then : > '%s'; echo '99|PENDING|None assigned|99'; exit 0; fi\n"
             "echo '99_0|FAILED|n1|100'\necho '99_1|CANCELLED by 0|n1|101'\necho '99_2|NODE_FAIL|n3|102'\n"
             "echo '99_3|TIMEOUT|n1|99'\n", counter, counter);
    const char *ctl99 =
        "#!/bin/sh\n[ \"$*\" = 'show job -o 99' ] || exit 1\n"
        "for i in 0 1 2 3; do echo \"JobId=10$i ArrayJobId=99 ArrayTaskId=$i JobState=FAILED BatchHost=n1\"; done\n";
    snprintf(path, sizeof path, "%s/sacct", fake);
    kh_test_write_file(path, lagging, strlen(lagging));
    snprintf(path, sizeof path, "%s/scontrol", fake);
    kh_test_write_file(path, ctl99, strlen(ctl99));
    snprintf(args, sizeof args, "matrix --slurm-collect 99 --slurm-plan '%s'", plan);
    rc = khost(env, args);
    CHECK(rc == 0 && strstr(out, "does not have the end of 4 array task(s) yet: waiting") &&
              strstr(out, "0 recorded by their array task, 4 recorded here (states: 4 from sacct, 0 from scontrol)"),
          "collect (sacct behind scontrol): %d\n%s", rc, out);
    if (kh_e2e_record(dir, "fixture_conv", "fixture", &r) == 0) {
        CHECK(!strcmp(r.status, "node_fail") && strstr(r.reason, "NODE_FAIL (array task 99_2, from sacct)"),
              "sacct's state once it caught up: %s: %s", r.status, r.reason);
        kh_record_free(&r);
    }

}

/* Submission with a stand-in sbatch: the array first, then the collector depending on it (afterany), the
 * job ids printed and kept beside the plan; a refusal is an error quoting sbatch. */
static void test_submit(void) {
    char fake[700], path[800], log[800], env[1400], args[4096], dir[600], pd[4096];
    snprintf(fake, sizeof fake, "%s/sbin", tmp);
    mkdir(fake, 0755);
    snprintf(log, sizeof log, "%s/sbatch.log", tmp);
    char script[2000];
    snprintf(script, sizeof script,
             "#!/bin/sh\necho \"$*\" >> '%s'\nif grep -qs -e partition=refuse -- \"$2\"; then\n"
             "  echo 'sbatch: error: invalid partition specified: refuse' >&2; exit 1\nfi\n"
             "case \"$*\" in *--dependency=*) echo '4712;khosttest';; *) echo 4711;; esac\n", log);
    snprintf(path, sizeof path, "%s/sbatch", fake);
    kh_test_write_file(path, script, strlen(script));
    chmod(path, 0755);
    snprintf(env, sizeof env, "PATH='%s':\"$PATH\"", fake);
    snprintf(dir, sizeof dir, "%s/s", tmp);
    snprintf(args, sizeof args, "matrix --slurm --plugins fixture --tasks fixture_blobs --epochs 1 --out '%s'", dir);
    int rc = khost(env, args);
    CHECK(rc == 0 && strstr(out, "slurm: cpu: 1 cell(s) -> job 4711 (array 0-0), collector job 4712; plan "),
          "submit: %d\n%s", rc, out);
    if (plan_dir(dir, "cpu", pd, sizeof pd) == 0) {
        char want1[4400], want2[4400];
        snprintf(want1, sizeof want1, "--parsable %s/array.sh\n", pd);
        snprintf(want2, sizeof want2, "--parsable --dependency=afterany:4711 %s/collect.sh 4711\n", pd);
        const char *l = slurp(log);
        CHECK(strstr(l, want1) && strstr(l, want2) && strstr(l, want1) < strstr(l, want2), "sbatch calls:\n%s", l);
        snprintf(path, sizeof path, "%s/job", pd);
        CHECK(!strcmp(slurp(path), "4711 4712\n"), "job file: %s", slurp(path));
    } else {
        CHECK(0, "no plan under %s", dir);
    }
    snprintf(args, sizeof args, "matrix --slurm --plugins fixture --tasks fixture_blobs --partition refuse --out '%s'",
             dir);
    rc = khost(env, args);
    CHECK(rc == 2 && strstr(out, "invalid partition specified: refuse") && strstr(out, "sbatch --parsable"),
          "refused: %d\n%s", rc, out);
}

int main(int argc, char **argv) {
    kh_e2e_args(argc, argv, &bin, &ini);
    tmp = kh_test_tmpdir("slurm-units");
    test_plan();
    test_states_and_exec();
    test_scripts();
    test_cell();
    test_collect();
    test_submit();
    if (kh_test_failed == 0) { /* kept for a post-mortem otherwise */
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
        kh_test_run(cmd, out, sizeof out);
    }
    return kh_test_finish("core_slurm");
}
