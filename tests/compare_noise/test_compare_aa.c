/* tests/compare_noise/test_compare_aa.c — `khost compare` on records written here with known step times:
 *   1. the A/A section: two sets of one build on one machine get it without asking; its false-positive rate is
 *      the faster/slower cells over the cells with a verdict, and each cell's detectable change is what
 *      results/aa.h defines, recomputed here from the same values with the same bootstrap (kh_stats_ratio_unpaired,
 *      seed and resamples of the compare code): (1 + T) / lo - 1 and 1 - (1 - T) / hi, the larger;
 *   2. that definition end to end: NEW's times of one cell scaled just past the detectable slowdown (speed-up)
 *      make it "slower" ("faster"), scaled just short of it do not;
 *   3. other builds, machines, or a record that does not say: no section, unless --aa, which warns and marks it;
 *      a tools/reference row of another revision does not make the sets two builds;
 *   4. "too noisy to tell" by its second rule: a majority of a side's repetitions taken under noise (the
 *      report's rule), named with the side and the count; exactly half is no majority; with --fail-above such a
 *      cell makes the exit status 9, unless another cell is slower than the threshold (1). */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "results/stats.h"
#include "testutil.h"

#define REPS 6
#define STEPS 5
#define NOISE_PCT 2.0

static const char *g_bin;
static char out[1 << 20];

/* The environment every record gets unless a test says otherwise. */
typedef struct env {
    const char *rev, *isa, *cpu, *reference;
    const char *other_cores; /* noise_other_cores of the noisy repetitions, NULL: none noisy */
    int noisy;               /* how many of the repetitions (the first ones) */
} env;

static const env QUIET = {"0123456789ab", "avx2", "Test CPU", NULL, NULL, 0};

/* A cell's REPS repetitions: repetition k's steps are all v[k] seconds, so its median step is v[k] exactly. */
static void write_cell(const char *dir, const char *task, const char *plugin, const double *v, const env *e) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, task);
    mkdir(dir, 0777);
    mkdir(path, 0777);
    for (int k = 0; k < REPS; k++) {
        char buf[4096], noise[160] = "", ref[64] = "";
        int n = 0;
        if (e->other_cores && k < e->noisy)
            snprintf(noise, sizeof noise, ",\"noise_other_cores\":\"%s\",\"noise_steal_pct\":\"0.0\",\"noise_window_s\":\"2.0\"",
                     e->other_cores);
        if (e->reference) snprintf(ref, sizeof ref, ",\"reference\":\"%s\"", e->reference);
        n += snprintf(buf + n, sizeof buf - n,
                      "{\"khost_record\":2,\"plugin\":\"%s\",\"task\":\"%s\",\"device\":\"cpu\",\"status\":\"ok\","
                      "\"reason\":\"\",\"batch_size\":32,\"mean_epoch_s\":%.17g,\"samples\":{\"step_s\":[",
                      plugin, task, STEPS * v[k] * 1.01);
        for (int i = 0; i < STEPS; i++) n += snprintf(buf + n, sizeof buf - n, "%s%.17g", i ? "," : "", v[k]);
        n += snprintf(buf + n, sizeof buf - n,
                      "],\"epoch_s\":[%.17g],\"step_sync\":\"device\",\"warmup_steps\":2,\"steps_per_epoch\":%d},"
                      "\"repeat\":{\"index\":%d,\"of\":%d,\"round\":%d},\"environment\":{\"khost_version\":\"0.1.0\","
                      "\"git_rev\":\"%s\",\"cpu_model\":\"%s\",\"device_name\":\"%s\"%s%s%s%s%s}}\n",
                      STEPS * v[k] * 1.01, STEPS, k + 1, REPS, k + 1, e->rev, e->cpu, e->cpu, e->isa ? ",\"cpu_isa\":\"" : "",
                      e->isa ? e->isa : "", e->isa ? "\"" : "", noise, ref);
        snprintf(path, sizeof path, "%s/%s/%s__cpu.rep%d.json", dir, task, plugin, k + 1);
        kh_test_write_file(path, buf, (size_t)n);
    }
}

/* The planted values: three cells, each side its own small spread (a few tenths of a percent up to 1 %). */
static const char *const PLUGINS[3] = {"cntk", "tensorflow", "theano"};
static const double BASE_V[3][REPS] = {{0.0100, 0.0101, 0.0099, 0.01005, 0.00998, 0.01002},
                                       {0.0200, 0.0203, 0.0198, 0.0201, 0.0199, 0.0202},
                                       {0.0300, 0.0300, 0.0301, 0.0299, 0.03004, 0.02997}};
static const double NEW_V[3][REPS] = {{0.01001, 0.00997, 0.01003, 0.0100, 0.01006, 0.00995},
                                      {0.0199, 0.0204, 0.0201, 0.0197, 0.0200, 0.0202},
                                      {0.03002, 0.02999, 0.0300, 0.03003, 0.02998, 0.0301}};

/* A set of the three cells under tmp/name: NEW's or BASE's values, cell `scaled` (-1: none) times k. */
static void write_set(const char *tmp, const char *name, const double (*v)[REPS], int scaled, double k, const env *e,
                      char *dir, size_t n) {
    snprintf(dir, n, "%s/%s", tmp, name);
    for (int c = 0; c < 3; c++) {
        double x[REPS];
        for (int r = 0; r < REPS; r++) x[r] = v[c][r] * (c == scaled ? k : 1);
        write_cell(dir, "mnist_mlp", PLUGINS[c], x, e);
    }
}

static cJSON *compare_json(const char *a, const char *b, const char *extra, int *status) {
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "{ '%s' compare '%s' '%s' --json %s 2>/dev/null; }", g_bin, a, b, extra); /* stdout only */
    *status = kh_test_run(cmd, out, sizeof out);
    cJSON *o = cJSON_Parse(out);
    CHECK(o != NULL, "compare --json printed JSON: %.300s", out);
    return o;
}

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static double num(const cJSON *o, const char *k) {
    const cJSON *v = get(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const cJSON *cell_of(const cJSON *cells, const char *plugin) {
    const cJSON *c;
    cJSON_ArrayForEach(c, cells) {
        const cJSON *p = get(c, "plugin");
        if (cJSON_IsString(p) && !strcmp(p->valuestring, plugin)) return c;
    }
    return NULL;
}

static const char *verdict_of(const cJSON *o, const char *plugin) {
    const cJSON *v = get(cell_of(get(o, "cells"), plugin), "verdict");
    return cJSON_IsString(v) ? v->valuestring : "(none)";
}

/* What results/aa.h says cell c's detectable change is, from the planted values. */
static void expected(int c, int m, double *slower, double *faster) {
    double ratio;
    kh_ci ci;
    int rc = kh_stats_ratio_unpaired(NEW_V[c], REPS, BASE_V[c], REPS, KH_STATS_RESAMPLES, KH_STATS_SEED,
                                     1 - (1 - KH_STATS_LEVEL) / m, &ratio, &ci);
    CHECK(rc == 0, "bootstrap");
    double t = NOISE_PCT / 100;
    *slower = 100 * ((1 + t) / ci.lo - 1);
    *faster = 100 * (1 - (1 - t) / ci.hi);
}

/* 1 and 2. */
static void test_aa(const char *tmp, const char *base, const char *nw) {
    int status;
    cJSON *o = compare_json(base, nw, "", &status);
    const cJSON *aa = get(o, "aa");
    CHECK(status == 0 && cJSON_IsObject(aa) && cJSON_IsTrue(get(aa, "same_build_and_machine")) &&
              cJSON_IsFalse(get(aa, "asked")),
          "one build on one machine: the A/A section without --aa (exit %d)", status);
    if (!cJSON_IsObject(aa)) {
        cJSON_Delete(o);
        return;
    }
    const cJSON *build = get(aa, "build"), *machine = get(aa, "machine");
    CHECK(cJSON_IsString(build) && !strcmp(build->valuestring, "khost 0.1.0 (git 0123456789ab)") &&
              cJSON_IsString(machine) && !strcmp(machine->valuestring, "Test CPU (avx2)"),
          "the build and machine named: %s / %s", cJSON_IsString(build) ? build->valuestring : "?",
          cJSON_IsString(machine) ? machine->valuestring : "?");
    int m = (int)num(o, "cells_compared"), fp = 0;
    CHECK(m == 3 && num(aa, "cells_with_verdict") == 3, "3 cells with a verdict: %d", m);
    for (int c = 0; c < 3; c++) {
        const char *v = verdict_of(o, PLUGINS[c]);
        fp += !strcmp(v, "faster") || !strcmp(v, "slower");
    }
    CHECK(num(aa, "false_positives") == fp, "false positives counted: %g vs %d", num(aa, "false_positives"), fp);
    CHECK_CLOSE(num(aa, "false_positive_rate"), fp / 3.0, 0, 1e-12, "rate = false positives / cells with a verdict");
    double want[3], lo = INFINITY, hi = -INFINITY;
    const cJSON *cells = get(aa, "cells");
    CHECK(cJSON_GetArraySize(cells) == 3, "a detectable change per cell: %d", cJSON_GetArraySize(cells));
    for (int c = 0; c < 3; c++) {
        double s, f;
        expected(c, 3, &s, &f);
        want[c] = s > f ? s : f;
        const cJSON *x = cell_of(cells, PLUGINS[c]);
        CHECK_CLOSE(num(x, "detectable_slower_pct"), s, 1e-9, 1e-9, PLUGINS[c]);
        CHECK_CLOSE(num(x, "detectable_faster_pct"), f, 1e-9, 1e-9, PLUGINS[c]);
        CHECK_CLOSE(num(x, "detectable_change_pct"), want[c], 1e-9, 1e-9, PLUGINS[c]);
        double hw = num(x, "verdict_halfwidth_pct");
        CHECK(want[c] > NOISE_PCT && want[c] < NOISE_PCT + 2.5 * hw && hw > 0,
              "%s: the noise threshold < %g < the threshold plus about the half-width %g", PLUGINS[c], want[c], hw);
        lo = fmin(lo, want[c]), hi = fmax(hi, want[c]);
    }
    const cJSON *d = get(aa, "detectable_change_pct");
    double med = want[0] + want[1] + want[2] - lo - hi;
    CHECK_CLOSE(num(d, "median"), med, 1e-9, 1e-9, "median over the cells");
    CHECK_CLOSE(num(d, "largest"), hi, 1e-9, 1e-9, "largest over the cells");

    /* 2. the definition end to end, on the cell with the widest interval: NEW times k */
    int c = want[0] >= want[1] && want[0] >= want[2] ? 0 : want[1] >= want[2] ? 1 : 2;
    double s, f;
    expected(c, 3, &s, &f);
    const struct { double k; const char *want; int is; } cases[4] = {
        {1 + s / 100 + 0.001, "slower", 1}, {1 + s / 100 - 0.001, "slower", 0},
        {1 - f / 100 - 0.001, "faster", 1}, {1 - f / 100 + 0.001, "faster", 0}};
    for (int i = 0; i < 4; i++) {
        char name[32], dir[4200];
        snprintf(name, sizeof name, "scaled%d", i);
        write_set(tmp, name, NEW_V, c, cases[i].k, &QUIET, dir, sizeof dir);
        cJSON *o2 = compare_json(base, dir, "", &status);
        const char *v = verdict_of(o2, PLUGINS[c]);
        CHECK((strcmp(v, cases[i].want) == 0) == cases[i].is, "NEW x %.5f (detectable %s %.3f %%): %s", cases[i].k,
              cases[i].want, cases[i].want[0] == 's' ? s : f, v);
        cJSON_Delete(o2);
    }
    /* the text and the page say the same */
    char cmd[9000], html[4200];
    snprintf(html, sizeof html, "%s/aa.html", tmp);
    snprintf(cmd, sizeof cmd, "'%s' compare '%s' '%s' --html '%s' 2>&1", g_bin, base, nw, html);
    status = kh_test_run(cmd, out, sizeof out);
    char line[200];
    snprintf(line, sizeof line, "median %.2f %%, largest %.2f %%", med, hi);
    CHECK(status == 0 && strstr(out, "## A/A: one build on one machine") && strstr(out, "false-positive rate: ") &&
              strstr(out, line),
          "markdown A/A section with %s: %.3000s", line, out);
    char *page = kh_test_slurp(html, NULL);
    CHECK(page && strstr(page, "<section class=\"aa\">") && strstr(page, line), "the page's A/A section");
    free(page);
    cJSON_Delete(o);
}

/* 3. */
static void test_not_aa(const char *tmp, const char *base) {
    struct {
        const char *name;
        env e;
        const char *why;
    } cases[4] = {{"otherbuild", {"fedcba987654", "avx2", "Test CPU", NULL, NULL, 0}, "(git fedcba987654)"},
                  {"dirty", {"0123456789ab-dirty", "avx2", "Test CPU", NULL, NULL, 0}, "(git 0123456789ab-dirty)"},
                  {"othermachine", {"0123456789ab", "avx512", "Test CPU", NULL, NULL, 0}, "on Test CPU (avx512)"},
                  {"noisa", {"0123456789ab", NULL, "Test CPU", NULL, NULL, 0}, "no cpu_isa"}};
    for (int i = 0; i < 4; i++) {
        char dir[4200], cmd[9000];
        write_set(tmp, cases[i].name, NEW_V, -1, 1, &cases[i].e, dir, sizeof dir);
        int status;
        cJSON *o = compare_json(base, dir, "", &status);
        CHECK(cJSON_IsNull(get(o, "aa")), "%s: no A/A section without --aa", cases[i].name);
        cJSON_Delete(o);
        o = compare_json(base, dir, "--aa", &status);
        const cJSON *aa = get(o, "aa"), *why = get(aa, "why_not");
        CHECK(cJSON_IsTrue(get(aa, "asked")) && cJSON_IsFalse(get(aa, "same_build_and_machine")) &&
                  cJSON_IsString(why) && strstr(why->valuestring, cases[i].why) &&
                  cJSON_IsNumber(get(aa, "false_positive_rate")),
              "%s with --aa: computed, marked, why names %s: %s", cases[i].name, cases[i].why,
              cJSON_IsString(why) ? why->valuestring : "(none)");
        cJSON_Delete(o);
        snprintf(cmd, sizeof cmd, "'%s' compare '%s' '%s' --aa 2>&1", g_bin, base, dir);
        status = kh_test_run(cmd, out, sizeof out);
        CHECK(status == 0 && strstr(out, "khost: compare: warning: --aa:") &&
                  strstr(out, "## A/A (asked with --aa): NOT one build on one machine") && strstr(out, cases[i].why),
              "%s: warned on stderr and marked in the text: %.2000s", cases[i].name, out);
    }
    /* a reference row measured at another revision beside the same build */
    char dir[4200], bref[4200];
    write_set(tmp, "withref", NEW_V, -1, 1, &QUIET, dir, sizeof dir);
    env ref = {"abcdef1", "avx2", "Test CPU", "pytorch 2.5", NULL, 0};
    write_cell(dir, "mnist_mlp", "pytorch", NEW_V[0], &ref);
    write_set(tmp, "baseref", BASE_V, -1, 1, &QUIET, bref, sizeof bref);
    write_cell(bref, "mnist_mlp", "pytorch", BASE_V[0], &ref);
    int status;
    cJSON *o = compare_json(bref, dir, "", &status);
    CHECK(cJSON_IsTrue(get(get(o, "aa"), "same_build_and_machine")), "a reference row's revision is no other build");
    cJSON_Delete(o);
    (void)base;
}

/* 4. */
static void test_noisy_reps(const char *tmp, const char *base) {
    char dir[4200];
    struct {
        const char *name;
        int noisy;
        int want;
    } cases[2] = {{"noisy4", 4, 1}, {"noisy3", 3, 0}};
    for (int i = 0; i < 2; i++) {
        env e = QUIET;
        e.other_cores = "1.50";
        e.noisy = cases[i].noisy;
        write_set(tmp, cases[i].name, NEW_V, -1, 1, &e, dir, sizeof dir);
        int status;
        cJSON *o = compare_json(base, dir, "--noise 10", &status);
        const cJSON *c = cell_of(get(o, "cells"), "cntk"), *why = get(c, "why");
        const char *v = verdict_of(o, "cntk");
        if (cases[i].want)
            CHECK(!strcmp(v, "too noisy to tell") && cJSON_IsString(why) &&
                      strstr(why->valuestring, "4 of NEW's 6 finished repetitions were taken under noise"),
                  "%d of 6 repetitions under noise: %s: %s", cases[i].noisy, v, cJSON_IsString(why) ? why->valuestring : "");
        else
            CHECK(!strcmp(v, "unchanged"), "%d of 6 is no majority (and ±10 %% is wider than the interval): %s",
                  cases[i].noisy, v);
        cJSON_Delete(o);
    }
    /* the gate: 9 for the too-noisy cell, 1 when another cell is slower than the threshold */
    env e = QUIET;
    e.other_cores = "1.50";
    e.noisy = 4;
    char gate[4200], cmd[9000];
    write_set(tmp, "gate", NEW_V, -1, 1, &e, gate, sizeof gate);
    snprintf(cmd, sizeof cmd, "{ '%s' compare '%s' '%s' --noise 10 --fail-above 20 >/dev/null; } 2>&1", g_bin, base, gate);
    int status = kh_test_run(cmd, out, sizeof out);
    CHECK(status == 9 && strstr(out, "--fail-above cannot compare mnist_mlp cntk cpu: 4 of NEW's 6"),
          "a too-noisy cell fails the gate with 9, named: exit %d: %s", status, out);
    double slow[REPS];
    for (int r = 0; r < REPS; r++) slow[r] = NEW_V[1][r] * 1.5;
    write_cell(gate, "mnist_mlp", "tensorflow", slow, &QUIET);
    status = kh_test_run(cmd, out, sizeof out);
    CHECK(status == 1, "with another cell 50 %% slower than --fail-above 20: exit 1, got %d: %s", status, out);
}

int main(void) {
    g_bin = getenv("KHOST_BIN");
    if (!g_bin) kh_test_skip("KHOST_BIN not set (run through ctest)");
    const char *tmp = kh_test_tmpdir_kept("compare-aa");
    char base[4200], nw[4200];
    write_set(tmp, "base", BASE_V, -1, 1, &QUIET, base, sizeof base);
    write_set(tmp, "new", NEW_V, -1, 1, &QUIET, nw, sizeof nw);
    test_aa(tmp, base, nw);
    test_not_aa(tmp, base);
    test_noisy_reps(tmp, base);
    int rc = kh_test_finish("compare_aa");
    if (rc == 0) kh_test_remove_tmpdirs();
    return rc;
}
