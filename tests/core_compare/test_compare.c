/* tests/core_compare/test_compare.c — `khost compare` verdicts on synthetic result sets whose differences are
 * known (the records, khost_record 2 with samples, are written here), a "no difference" pair in which no cell
 * may come out faster or slower (each is unchanged, or too noisy to tell where its interval is wider than the
 * band), the exit status of --fail-above, and the cell summary file (kh_stats_write_cell_summary). */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "results/cellstats.h"
#include "results/results.h"
#include "results/stats.h"
#include "testutil.h"

static double uniform(uint64_t *st) { return ((kh_stats_splitmix64(st) >> 11) + 0.5) / 9007199254740992.0; }
static double gauss(uint64_t *st) {
    double u1 = uniform(st), u2 = uniform(st);
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Top-level members every record written next gets (",\"batch_size\":64"), "" for none. */
static const char *g_extra = "";

/* One record: `steps` step times around step_s (rep-level drift rep_noise, per-step noise 5 %). k = 0 writes
 * the classic file name (and a v1 record without samples). */
static void write_rec(const char *out, const char *task, const char *plugin, const char *device, int k, int of,
                      const char *status, double step_s, double rep_noise, uint64_t *st) {
    char dir[4096], path[4200], dev[32];
    snprintf(dir, sizeof dir, "%s/%s", out, task);
    mkdir(dir, 0777);
    size_t j = 0;
    for (const char *c = device; *c && j + 1 < sizeof dev; c++)
        if (*c != ':') dev[j++] = *c;
    dev[j] = 0;
    if (k) snprintf(path, sizeof path, "%s/%s__%s.rep%d.json", dir, plugin, dev, k);
    else snprintf(path, sizeof path, "%s/%s__%s.json", dir, plugin, dev);
    static char buf[1 << 16];
    int steps = 40, n = 0;
    double drift = 1 + rep_noise * gauss(st), sum = 0;
    n += snprintf(buf + n, sizeof buf - n, "{\"khost_record\":%d,\"plugin\":\"%s\",\"task\":\"%s\",\"device\":\"%s\","
                                           "\"status\":\"%s\",\"reason\":\"\"%s", k ? 2 : 1, plugin, task, device, status,
                 g_extra);
    double t[40];
    for (int i = 0; i < steps; i++) {
        t[i] = step_s * drift * (1 + 0.05 * gauss(st));
        sum += t[i];
    }
    int ok = !strcmp(status, "ok");
    if (ok) n += snprintf(buf + n, sizeof buf - n, ",\"mean_epoch_s\":%.6g", sum * 1.05);
    if (k && ok) {
        n += snprintf(buf + n, sizeof buf - n, ",\"samples\":{\"step_s\":[");
        for (int i = 0; i < steps; i++) n += snprintf(buf + n, sizeof buf - n, "%s%.6g", i ? "," : "", t[i]);
        n += snprintf(buf + n, sizeof buf - n, "],\"epoch_s\":[%.6g],\"step_sync\":\"device\",\"warmup_steps\":5,"
                                               "\"steps_per_epoch\":%d}", sum * 1.05, steps);
    }
    if (k) n += snprintf(buf + n, sizeof buf - n, ",\"repeat\":{\"index\":%d,\"of\":%d,\"round\":%d,\"position\":0,"
                                                  "\"order_seed\":1}", k, of, k);
    n += snprintf(buf + n, sizeof buf - n, "}\n");
    kh_test_write_file(path, buf, (size_t)n);
}

static void write_cell(const char *out, const char *task, const char *plugin, const char *device, int reps,
                       double step_s, double rep_noise, const char *status, uint64_t seed) {
    uint64_t st = seed;
    for (int k = 1; k <= reps; k++) write_rec(out, task, plugin, device, k, reps, status, step_s, rep_noise, &st);
}

static const cJSON *find_cell(const cJSON *cells, const char *task, const char *plugin, const char *device) {
    const cJSON *c;
    cJSON_ArrayForEach(c, cells) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, "task"), *p = cJSON_GetObjectItemCaseSensitive(c, "plugin"),
                    *d = cJSON_GetObjectItemCaseSensitive(c, "device");
        if (cJSON_IsString(t) && cJSON_IsString(p) && cJSON_IsString(d) && !strcmp(t->valuestring, task) &&
            !strcmp(p->valuestring, plugin) && !strcmp(d->valuestring, device))
            return c;
    }
    return NULL;
}

static const char *verdict(const cJSON *cells, const char *task, const char *plugin, const char *device) {
    const cJSON *c = find_cell(cells, task, plugin, device);
    const cJSON *v = c ? cJSON_GetObjectItemCaseSensitive(c, "verdict") : NULL;
    return cJSON_IsString(v) ? v->valuestring : "(absent)";
}

static char out[1 << 20];

static cJSON *run_json(const char *bin, const char *a, const char *b, const char *extra, int *status) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' compare '%s' '%s' --json %s 2>/dev/null", bin, a, b, extra);
    *status = kh_test_run(cmd, out, sizeof out);
    cJSON *o = cJSON_Parse(out);
    CHECK(o != NULL, "compare --json printed JSON: %.300s", out);
    return o;
}

/* A set of one cell (mnist_mlp cntk cpu, 5 repetitions around step_s) under tmp/name, written with g_extra. */
static void one_cell(const char *tmp, const char *name, double step_s, const char *extra, char *dir, size_t n) {
    snprintf(dir, n, "%s/%s", tmp, name);
    mkdir(dir, 0777);
    g_extra = extra;
    write_cell(dir, "mnist_mlp", "cntk", "cpu", 5, step_s, 0.01, "ok", 77);
    g_extra = "";
}

/* The gate fails when it cannot compare: no shared cell, other settings, impossible times; a noise band of 100 %
 * or more is refused. */
static void test_gate(const char *bin, const char *tmp, const char *base) {
    char a[4200], b[4200], cmd[9000];
    one_cell(tmp, "gate_a", 0.01, ",\"batch_size\":128,\"math\":\"fp32\"", a, sizeof a);
    /* no shared cell: base has no cntk mnist_mlp at cuda... so a set of one other task */
    char other[4200];
    snprintf(other, sizeof other, "%s/gate_other", tmp);
    mkdir(other, 0777);
    write_cell(other, "lstm_text_generation", "cntk", "cpu", 5, 0.01, 0.01, "ok", 78);
    snprintf(cmd, sizeof cmd, "{ '%s' compare '%s' '%s' --fail-above 10 2>&1 >/dev/null; }", bin, a, other);
    CHECK(kh_test_run(cmd, out, sizeof out) == 9 && strstr(out, "no cell is in both BASE and NEW"),
          "no shared cell: exit 9 and said: %s", out);
    snprintf(cmd, sizeof cmd, "{ '%s' compare '%s' '%s' 2>&1 >/dev/null; }", bin, a, other);
    CHECK(kh_test_run(cmd, out, sizeof out) == 0, "without the gate the same pair only reports: %s", out);

    /* the same times measured with another batch size, then with another math */
    one_cell(tmp, "gate_b64", 0.01, ",\"batch_size\":64,\"math\":\"fp32\"", b, sizeof b);
    int status;
    cJSON *o = run_json(bin, a, b, "--fail-above 10", &status);
    const cJSON *cells = cJSON_GetObjectItemCaseSensitive(o, "cells");
    const cJSON *c = find_cell(cells, "mnist_mlp", "cntk", "cpu");
    const cJSON *why = c ? cJSON_GetObjectItemCaseSensitive(c, "why") : NULL;
    CHECK(status == 9 && !strcmp(verdict(cells, "mnist_mlp", "cntk", "cpu"), "inconclusive") && cJSON_IsString(why) &&
              strstr(why->valuestring, "other settings: batch_size 128 and 64"),
          "other batch size: exit %d, %s", status, cJSON_IsString(why) ? why->valuestring : "(no why)");
    cJSON_Delete(o);
    one_cell(tmp, "gate_tf32", 0.01, ",\"batch_size\":128,\"math\":\"tf32\"", b, sizeof b);
    snprintf(cmd, sizeof cmd, "{ '%s' compare '%s' '%s' --fail-above 10 2>&1 >/dev/null; }", bin, a, b);
    CHECK(kh_test_run(cmd, out, sizeof out) == 9 && strstr(out, "math fp32 and tf32"), "other math: %s", out);
    one_cell(tmp, "gate_same", 0.01, ",\"batch_size\":128,\"math\":\"fp32\"", b, sizeof b);
    snprintf(cmd, sizeof cmd, "{ '%s' compare '%s' '%s' --fail-above 10 2>&1 >/dev/null; }", bin, a, b);
    CHECK(kh_test_run(cmd, out, sizeof out) == 0, "the same settings and times pass the gate: %s", out);

    /* impossible times: a step of 0 s; a step longer than the repetition */
    const char *odd_step[2] = {"0", "1e308"};
    const char *want[2] = {"a step of no time", "longer than the repetition"};
    for (int i = 0; i < 2; i++) {
        char dir[4300], path[4400], rec[512];
        snprintf(dir, sizeof dir, "%s/gate_odd%d", tmp, i);
        mkdir(dir, 0777);
        snprintf(path, sizeof path, "%s/mnist_mlp", dir);
        mkdir(path, 0777);
        for (int k = 1; k <= 3; k++) {
            snprintf(path, sizeof path, "%s/mnist_mlp/cntk__cpu.rep%d.json", dir, k);
            int len = snprintf(rec, sizeof rec,
                               "{\"khost_record\":2,\"status\":\"ok\",\"mean_epoch_s\":0.5,\"samples\":{\"step_s\":[0.01,%s],"
                               "\"epoch_s\":[0.5]},\"repeat\":{\"round\":%d}}\n",
                               odd_step[i], k);
            kh_test_write_file(path, rec, (size_t)len);
        }
        snprintf(cmd, sizeof cmd, "{ '%s' compare '%s' '%s' --fail-above 10 2>&1 >/dev/null; }", bin, base, dir);
        CHECK(kh_test_run(cmd, out, sizeof out) == 9 && strstr(out, "impossible times in NEW") && strstr(out, want[i]),
              "%s: %s", want[i], out);
    }

    snprintf(cmd, sizeof cmd, "'%s' compare '%s' '%s' --noise 100 2>&1", bin, a, b);
    CHECK(kh_test_run(cmd, out, sizeof out) == 2 && strstr(out, "--noise"), "--noise 100 refused: %s", out);
}

static void test_compare(const char *bin, const char *tmp) {
    char base[4096], newer[4096], same[4096];
    snprintf(base, sizeof base, "%s/base", tmp);
    snprintf(newer, sizeof newer, "%s/new", tmp);
    snprintf(same, sizeof same, "%s/rerun", tmp);
    mkdir(base, 0777);
    mkdir(newer, 0777);
    mkdir(same, 0777);
    /* BASE and a rerun of the same "build": the same true times, other noise */
    const char *tasks[3] = {"mnist_mlp", "mnist_cnn", "imdb_fasttext"};
    const char *plugins[3] = {"cntk", "tensorflow", "theano"};
    for (int t = 0; t < 3; t++)
        for (int p = 0; p < 3; p++) {
            double s = 0.01 * (1 + t) * (1 + 0.5 * p);
            write_cell(base, tasks[t], plugins[p], "cpu", 5, s, 0.01, "ok", 100 + 10 * t + p);
            write_cell(same, tasks[t], plugins[p], "cpu", 5, s, 0.01, "ok", 900 + 10 * t + p);
        }
    /* NEW: known differences against BASE on mnist_mlp; the other cells as BASE with other noise */
    write_cell(newer, "mnist_mlp", "cntk", "cpu", 5, 0.01 * 1.20, 0.01, "ok", 7);           /* 20 % slower */
    write_cell(newer, "mnist_mlp", "tensorflow", "cpu", 5, 0.015 * 0.85, 0.01, "ok", 8);    /* 15 % faster */
    write_cell(newer, "mnist_mlp", "theano", "cpu", 5, 0.02 * 1.01, 0.01, "ok", 9);         /* 1 %: noise */
    write_cell(newer, "mnist_cnn", "cntk", "cpu", 5, 0.02, 0.01, "crashed", 10);            /* no finished rep */
    write_cell(newer, "mnist_cnn", "tensorflow", "cpu", 5, 0.03 * 1.06, 0.25, "ok", 11);    /* 6 %, very noisy */
    write_cell(newer, "mnist_cnn", "theano", "cpu", 5, 0.04, 0.01, "ok", 12);
    for (int p = 0; p < 3; p++) write_cell(newer, "imdb_fasttext", plugins[p], "cpu", 5, 0.03 * (1 + 0.5 * p), 0.01, "ok", 20 + p);
    write_cell(newer, "imdb_fasttext", "cntk", "cuda:0", 5, 0.001, 0.01, "ok", 30);      /* only in NEW */
    write_cell(base, "mnist_cnn", "tensorflow", "cpu", 5, 0.03, 0.25, "ok", 31);          /* BASE as noisy */
    /* one classic single-run record on each side: one repetition, no interval */
    uint64_t st = 40;
    write_rec(base, "cifar10_cnn", "cntk", "cpu", 0, 1, "ok", 0.05, 0.01, &st);
    write_rec(newer, "cifar10_cnn", "cntk", "cpu", 0, 1, "ok", 0.08, 0.01, &st);

    int status;
    cJSON *o = run_json(bin, base, newer, "", &status);
    CHECK(status == 0, "compare without --fail-above exits 0, got %d", status);
    const cJSON *cells = cJSON_GetObjectItemCaseSensitive(o, "cells");
    CHECK(!strcmp(verdict(cells, "mnist_mlp", "cntk", "cpu"), "slower"), "20 %% slower: %s", verdict(cells, "mnist_mlp", "cntk", "cpu"));
    CHECK(!strcmp(verdict(cells, "mnist_mlp", "tensorflow", "cpu"), "faster"), "15 %% faster: %s", verdict(cells, "mnist_mlp", "tensorflow", "cpu"));
    /* 1 % within 5 repetitions of 1 % noise: the verdict interval (about ±3 %) is wider than the ±2 % band, so
     * "unchanged" could hide a change of the band's size: too noisy to tell (at --noise 5 below: unchanged) */
    CHECK(!strcmp(verdict(cells, "mnist_mlp", "theano", "cpu"), "too noisy to tell"), "1 %%: %s", verdict(cells, "mnist_mlp", "theano", "cpu"));
    CHECK(!strcmp(verdict(cells, "mnist_cnn", "cntk", "cpu"), "missing"), "crashed in NEW: %s", verdict(cells, "mnist_cnn", "cntk", "cpu"));
    CHECK(!strcmp(verdict(cells, "mnist_cnn", "tensorflow", "cpu"), "too noisy to tell"), "6 %% in 25 %% noise: %s", verdict(cells, "mnist_cnn", "tensorflow", "cpu"));
    CHECK(!strcmp(verdict(cells, "imdb_fasttext", "cntk", "cuda:0"), "missing"), "only in NEW: %s", verdict(cells, "imdb_fasttext", "cntk", "cuda:0"));
    CHECK(!strcmp(verdict(cells, "cifar10_cnn", "cntk", "cpu"), "inconclusive"), "single runs: %s", verdict(cells, "cifar10_cnn", "cntk", "cpu"));
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "cells_compared"),
                *lv = cJSON_GetObjectItemCaseSensitive(o, "verdict_level");
    CHECK(m && m->valueint == 8 && lv && fabs(lv->valuedouble - (1 - 0.05 / 8)) < 1e-12,
          "Bonferroni over the 8 cells with intervals: m %d, level %g", m ? m->valueint : -1, lv ? lv->valuedouble : -1);
    const cJSON *slow = find_cell(cells, "mnist_mlp", "cntk", "cpu");
    double slow_r = NAN, slow_lo = NAN;
    if (slow) {
        double r = cJSON_GetObjectItemCaseSensitive(slow, "ratio")->valuedouble;
        double lo = cJSON_GetObjectItemCaseSensitive(slow, "ratio_ci_lo")->valuedouble;
        slow_r = r;
        const cJSON *vlo = cJSON_GetObjectItemCaseSensitive(slow, "verdict_ci_lo");
        slow_lo = vlo ? vlo->valuedouble : NAN;
        CHECK(vlo && slow_lo <= lo, "the verdict interval (Bonferroni) is at least as wide as the 95 %% one: %g vs %g",
              slow_lo, lo);
        double hi = cJSON_GetObjectItemCaseSensitive(slow, "ratio_ci_hi")->valuedouble;
        CHECK(r > 1.15 && r < 1.25 && lo > 1 && lo <= r && r <= hi, "slower: ratio %g CI [%g, %g]", r, lo, hi);
        CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(slow, "value")->valuestring, "step_s"), "step samples used");
    }
    const cJSON *single = find_cell(cells, "cifar10_cnn", "cntk", "cpu");
    if (single) CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(single, "value")->valuestring, "epoch_s"), "v1: epoch time");
    int nu = 0, total = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cells) {
        total++;
        nu += !strcmp(cJSON_GetObjectItemCaseSensitive(c, "verdict")->valuestring, "too noisy to tell");
    }
    CHECK(total == 11, "11 cells listed, got %d", total);
    CHECK(nu == 6, "6 cells too noisy to tell at ±2 %% (3 imdb_fasttext cpu, theano x2, noisy tensorflow), got %d", nu);
    const cJSON *tw = find_cell(cells, "mnist_mlp", "theano", "cpu");
    const cJSON *twhy = tw ? cJSON_GetObjectItemCaseSensitive(tw, "why") : NULL;
    const cJSON *thw = tw ? cJSON_GetObjectItemCaseSensitive(tw, "verdict_halfwidth_pct") : NULL;
    CHECK(cJSON_IsString(twhy) && cJSON_IsNumber(thw) && thw->valuedouble > 2 &&
              strstr(twhy->valuestring, "half-width") && strstr(twhy->valuestring, "the noise threshold 2 %"),
          "the why names the half-width against the effect asked about: %s (half-width %g)",
          cJSON_IsString(twhy) ? twhy->valuestring : "(none)", cJSON_IsNumber(thw) ? thw->valuedouble : -1);
    cJSON_Delete(o);
    /* a band wider than the intervals: the quiet cells are "unchanged"; the cell of 25 % noise stays too noisy,
     * the 20 % and 15 % changes keep their verdicts */
    o = run_json(bin, base, newer, "--noise 5", &status);
    cells = cJSON_GetObjectItemCaseSensitive(o, "cells");
    CHECK(!strcmp(verdict(cells, "mnist_mlp", "theano", "cpu"), "unchanged") &&
              !strcmp(verdict(cells, "mnist_cnn", "tensorflow", "cpu"), "too noisy to tell") &&
              !strcmp(verdict(cells, "mnist_mlp", "cntk", "cpu"), "slower") &&
              !strcmp(verdict(cells, "mnist_mlp", "tensorflow", "cpu"), "faster"),
          "--noise 5: theano %s, noisy tensorflow %s, cntk %s, tensorflow %s", verdict(cells, "mnist_mlp", "theano", "cpu"),
          verdict(cells, "mnist_cnn", "tensorflow", "cpu"), verdict(cells, "mnist_mlp", "cntk", "cpu"),
          verdict(cells, "mnist_mlp", "tensorflow", "cpu"));
    cJSON_Delete(o);

    /* --fail-above: 20 % slower fails at 10, not at 30 */
    o = run_json(bin, base, newer, "--fail-above 10", &status);
    CHECK(status == 1, "--fail-above 10 with a 20 %% slowdown exits 1, got %d", status);
    cJSON_Delete(o);
    /* at 30 nothing is slower by more, but the gate cannot compare two shared cells: the one that crashed in NEW
     * and the single runs (no interval) */
    o = run_json(bin, base, newer, "--fail-above 30", &status);
    CHECK(status == 9, "--fail-above 30: the gate cannot compare the crashed and the single-run cells: exit %d", status);
    cells = cJSON_GetObjectItemCaseSensitive(o, "cells");
    const cJSON *crashed = find_cell(cells, "mnist_cnn", "cntk", "cpu"), *onlynew = find_cell(cells, "imdb_fasttext", "cntk", "cuda:0");
    CHECK(crashed && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(crashed, "comparable")) && onlynew &&
              cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(onlynew, "comparable")),
          "a shared cell without a verdict is not comparable; a cell of one side only is no gate failure");
    cJSON_Delete(o);
    char gcmd[8192];
    snprintf(gcmd, sizeof gcmd, "{ '%s' compare '%s' '%s' --fail-above 30 2>&1 >/dev/null; }", bin, base, newer);
    CHECK(kh_test_run(gcmd, out, sizeof out) == 9 &&
              strstr(out, "--fail-above cannot compare mnist_cnn cntk cpu: no finished repetition in NEW") &&
              strstr(out, "--fail-above cannot compare cifar10_cnn cntk cpu: fewer than 2 finished repetitions"),
          "the gate names each cell it cannot compare: %s", out);
    /* criterion's rule: "slower" needs the whole verdict interval beyond the threshold. A threshold between the
     * interval's lower end and the point change leaves the cell unchanged; one just below the lower end does not. */
    if (isfinite(slow_r)) {
        double r = slow_r, lo = slow_lo;
        char opt[64];
        if (r - lo > 0.002) {
            snprintf(opt, sizeof opt, "--noise %.4f", 100 * ((lo - 1) + (r - 1)) / 2);
            cJSON *o2 = run_json(bin, base, newer, opt, &status);
            const cJSON *c2 = cJSON_GetObjectItemCaseSensitive(o2, "cells");
            CHECK(!strcmp(verdict(c2, "mnist_mlp", "cntk", "cpu"), "unchanged"),
                  "%s: the point change clears it, the interval's lower end %g does not: %s", opt, lo,
                  verdict(c2, "mnist_mlp", "cntk", "cpu"));
            cJSON_Delete(o2);
        } else {
            CHECK(0, "the 20 %% cell's interval should have some width: ratio %g, lower end %g", r, lo);
        }
        snprintf(opt, sizeof opt, "--noise %.4f", 100 * (lo - 1) - 0.1);
        cJSON *o3 = run_json(bin, base, newer, opt, &status);
        const cJSON *c3 = cJSON_GetObjectItemCaseSensitive(o3, "cells");
        CHECK(!strcmp(verdict(c3, "mnist_mlp", "cntk", "cpu"), "slower"), "%s: the whole CI beyond it: %s", opt,
              verdict(c3, "mnist_mlp", "cntk", "cpu"));
        cJSON_Delete(o3);
    }
    /* a noise threshold above the change hides it */
    o = run_json(bin, base, newer, "--noise 25", &status);
    cells = cJSON_GetObjectItemCaseSensitive(o, "cells");
    CHECK(!strcmp(verdict(cells, "mnist_mlp", "cntk", "cpu"), "unchanged"), "--noise 25: %s", verdict(cells, "mnist_mlp", "cntk", "cpu"));
    cJSON_Delete(o);

    /* no difference: no cell faster or slower. At ±2 % the intervals of 5 repetitions are too wide to call a cell
     * unchanged, so the gate (even at --fail-above 0: the effect asked about is never below the band) cannot pass:
     * exit 9. At ±5 % the quiet cells are unchanged; the cell with 25 % noise in BASE stays too noisy to tell. */
    const char *opts[2] = {"--fail-above 0", "--noise 5 --fail-above 5"};
    for (int k = 0; k < 2; k++) {
        o = run_json(bin, base, same, opts[k], &status);
        CHECK(status == 9, "rerun of the same times, %s: exit 9 (a cell too noisy to tell), got %d", opts[k], status);
        cells = cJSON_GetObjectItemCaseSensitive(o, "cells");
        nu = total = 0;
        int noisy = 0;
        cJSON_ArrayForEach(c, cells) {
            total++;
            const char *v = cJSON_GetObjectItemCaseSensitive(c, "verdict")->valuestring;
            int is_u = !strcmp(v, "unchanged"), is_n = !strcmp(v, "too noisy to tell");
            nu += is_u;
            noisy += is_n;
            const char *task = cJSON_GetObjectItemCaseSensitive(c, "task")->valuestring;
            const char *plugin = cJSON_GetObjectItemCaseSensitive(c, "plugin")->valuestring;
            /* only the cell BASE has and the rerun lacks is neither */
            CHECK(is_u || is_n || !strcmp(task, "cifar10_cnn"), "no-difference set, %s: %s %s is %s", opts[k], task,
                  plugin, v);
            if (k == 1 && is_n)
                CHECK(!strcmp(task, "mnist_cnn") && !strcmp(plugin, "tensorflow"),
                      "--noise 5: only the cell of 25 %% noise is too noisy, not %s %s", task, plugin);
        }
        CHECK(nu + noisy == 9 && (k == 0 ? noisy == 9 : nu == 8),
              "no-difference set, %s: of the 9 shared cells %d unchanged and %d too noisy to tell (of %d)", opts[k], nu,
              noisy, total);
        cJSON_Delete(o);
    }

    /* markdown and HTML */
    char cmd[8192], html[4200];
    snprintf(html, sizeof html, "%s/cmp.html", tmp);
    snprintf(cmd, sizeof cmd, "'%s' compare '%s' '%s' --html '%s' 2>&1", bin, base, newer, html);
    status = kh_test_run(cmd, out, sizeof out);
    CHECK(status == 0, "markdown run: %d", status);
    CHECK(strstr(out, "| mnist_mlp | cntk | cpu | step |") && strstr(out, "| slower |"), "markdown row: %.400s", out);
    CHECK(strstr(out, "faster 1, slower 1, unchanged 0, too noisy to tell 6, inconclusive 1, missing 2."), "counts line: %.2000s", out);
    CHECK(strstr(out, "- mnist_mlp theano on cpu: too noisy to tell: the verdict interval's half-width"),
          "the too-noisy cell and why under the table: %.3000s", out);
    FILE *f = fopen(html, "r");
    CHECK(f != NULL, "HTML written");
    if (f) {
        size_t n = fread(out, 1, sizeof out - 1, f);
        out[n] = 0;
        fclose(f);
        CHECK(strstr(out, "<tr class=\"slower\">") && strstr(out, "<tr class=\"too-noisy\">") && strstr(out, "</html>"),
              "HTML table");
    }
    test_gate(bin, tmp, base);

    /* usage and unreadable folders */
    snprintf(cmd, sizeof cmd, "'%s' compare '%s' 2>&1", bin, base);
    CHECK(kh_test_run(cmd, out, sizeof out) == 2, "one folder: usage");
    snprintf(cmd, sizeof cmd, "'%s' compare '%s' '%s/nope' 2>&1", bin, base, tmp);
    CHECK(kh_test_run(cmd, out, sizeof out) == 8 && strstr(out, "nope"), "missing folder named: %s", out);
    /* a FIFO named like a record is refused at once, named, never read (it would wait for a writer) */
    char fifo_dir[4200], fifo[4400];
    snprintf(fifo_dir, sizeof fifo_dir, "%s/fifo_set", tmp);
    mkdir(fifo_dir, 0777);
    snprintf(fifo, sizeof fifo, "%s/mnist_mlp", fifo_dir);
    mkdir(fifo, 0777);
    snprintf(fifo, sizeof fifo, "%s/mnist_mlp/cntk__cpu.rep1.json", fifo_dir);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo %s", fifo);
    snprintf(cmd, sizeof cmd, "timeout 20 '%s' compare '%s' '%s' 2>&1", bin, base, fifo_dir);
    CHECK(kh_test_run(cmd, out, sizeof out) == 8 && strstr(out, "cntk__cpu.rep1.json") && strstr(out, "a FIFO"),
          "a FIFO record: exit 8 naming it: %s", out);
    snprintf(cmd, sizeof cmd, "'%s' compare '%s' '%s' --noise x 2>&1", bin, base, newer);
    CHECK(kh_test_run(cmd, out, sizeof out) == 2 && strstr(out, "--noise"), "bad --noise: %s", out);
}

static double jnum(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* A cell with known per-repetition medians, a first-repetition outlier, a failed repetition and a stale
 * classic record that must not count. */
static void test_summary(const char *tmp) {
    char outdir[4096], dir[4200], path[4400];
    snprintf(outdir, sizeof outdir, "%s/summary", tmp);
    snprintf(dir, sizeof dir, "%s/mnist_mlp", outdir);
    mkdir(outdir, 0777);
    mkdir(dir, 0777);
    const double med[5] = {0.200, 0.100, 0.101, 0.099, 0.1005};
    for (int k = 1; k <= 6; k++) {
        char buf[4096];
        int n = 0;
        if (k == 6) {
            n = snprintf(buf, sizeof buf, "{\"khost_record\":2,\"plugin\":\"cntk\",\"task\":\"mnist_mlp\",\"device\":\"cpu\","
                                          "\"status\":\"crashed\",\"repeat\":{\"index\":6,\"of\":6,\"round\":6}}\n");
        } else {
            double v = med[k - 1];
            n = snprintf(buf, sizeof buf, "{\"khost_record\":2,\"plugin\":\"cntk\",\"task\":\"mnist_mlp\",\"device\":\"cpu\","
                                          "\"status\":\"ok\",\"mean_epoch_s\":%.6g,\"samples\":{\"step_s\":[%.6g,%.6g,%.6g,%.6g,%.6g],"
                                          "\"step_sync\":\"device\"},\"repeat\":{\"index\":%d,\"of\":6,\"round\":%d}}\n",
                         10 * v, v, 0.9 * v, v, 1.2 * v, v, k, k);
        }
        snprintf(path, sizeof path, "%s/cntk__cpu.rep%d.json", dir, k);
        kh_test_write_file(path, buf, (size_t)n);
    }
    snprintf(path, sizeof path, "%s/cntk__cpu.json", dir);
    const char stale[] = "{\"khost_record\":1,\"plugin\":\"cntk\",\"task\":\"mnist_mlp\",\"device\":\"cpu\",\"status\":\"ok\","
                         "\"mean_epoch_s\":99}\n";
    kh_test_write_file(path, stale, sizeof stale - 1);
    char err[4400];
    CHECK(kh_stats_write_cell_summary(outdir, "mnist_mlp", "cntk", "cpu", err, sizeof err) == 0, "summary: %s", err);
    snprintf(path, sizeof path, "%s/cntk__cpu.stats.json", dir);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "%s written", path);
    if (!f) return;
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    fclose(f);
    cJSON *o = cJSON_Parse(out);
    CHECK(o != NULL, "summary is JSON");
    if (!o) return;
    CHECK(jnum(o, "repetitions") == 6 && jnum(o, "failed") == 1, "6 repetitions, 1 failed");
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(o, "step_s"), *ep = cJSON_GetObjectItemCaseSensitive(o, "epoch_s");
    CHECK(jnum(sp, "n") == 5, "5 finished repetitions");
    CHECK_CLOSE(jnum(sp, "median"), 0.1005, 1e-12, 0, "median of the repetitions' median steps");
    CHECK_CLOSE(jnum(ep, "median"), 1.005, 1e-9, 0, "median epoch time (the stale classic 99 s not counted)");
    CHECK_CLOSE(jnum(sp, "min"), 0.099, 1e-12, 0, "min");
    CHECK_CLOSE(jnum(sp, "max"), 0.2, 1e-12, 0, "max");
    CHECK_CLOSE(jnum(sp, "mad"), 0.0005, 1e-9, 0, "mad");
    double lo = jnum(sp, "median_ci_lo"), hi = jnum(sp, "median_ci_hi");
    CHECK(lo <= 0.1005 && 0.1005 <= hi && lo >= 0.099 && hi <= 0.2, "CI [%g, %g]", lo, hi);
    const cJSON *bs = cJSON_GetObjectItemCaseSensitive(sp, "bootstrap");
    CHECK(jnum(bs, "resamples") == KH_STATS_RESAMPLES && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(bs, "seed")),
          "resample count and seed recorded");
    /* the recorded resample count and seed reproduce the recorded interval */
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(bs, "seed");
    if (cJSON_IsString(seed)) {
        kh_ci again;
        double v[5] = {0.200, 0.100, 0.101, 0.099, 0.1005};
        kh_stats_median_ci(v, 5, (int)jnum(bs, "resamples"), strtoull(seed->valuestring, NULL, 10), jnum(bs, "level"), &again);
        CHECK(fabs(again.lo - lo) < 1e-9 && fabs(again.hi - hi) < 1e-9, "recomputed from the recorded seed: [%g, %g] vs [%g, %g]",
              again.lo, again.hi, lo, hi);
    }
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(sp, "warnings");
    int cv = 0, first = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, w) {
        cv |= cJSON_IsString(e) && !strcmp(e->valuestring, "cv");
        first |= cJSON_IsString(e) && !strcmp(e->valuestring, "first_repetition_outlier");
    }
    CHECK(cv && first, "warnings: cv %d, first outlier %d", cv, first);
    CHECK(jnum(sp, "outliers") == 1, "one outlier flagged (and kept: n is still 5)");
    const cJSON *reps = cJSON_GetObjectItemCaseSensitive(o, "reps");
    CHECK(cJSON_GetArraySize(reps) == 6, "every repetition listed");
    const cJSON *r1 = cJSON_GetArrayItem(reps, 0), *r6 = cJSON_GetArrayItem(reps, 5);
    CHECK(r1 && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r1, "step_outlier")), "rep 1 is the outlier");
    CHECK(r6 && !strcmp(cJSON_GetObjectItemCaseSensitive(r6, "status")->valuestring, "crashed"), "rep 6 crashed");
    cJSON_Delete(o);
    /* the summary file itself is no record: the cell still reads as 6 repetitions */
    kh_cell_stats c;
    CHECK(kh_cell_stats_load(dir, "cntk__cpu", &c, err, sizeof err) == 0 && c.n_reps == 6, "reload: %d", c.n_reps);
    kh_cell_stats_free(&c);
    /* a malformed sample is named */
    snprintf(path, sizeof path, "%s/cntk__cpu.rep2.json", dir);
    const char bad[] = "{\"khost_record\":2,\"status\":\"ok\",\"samples\":{\"step_s\":[0.1,\"x\"]}}";
    kh_test_write_file(path, bad, sizeof bad - 1);
    CHECK(kh_stats_write_cell_summary(outdir, "mnist_mlp", "cntk", "cpu", err, sizeof err) != 0 &&
              strstr(err, "rep2.json") && strstr(err, "samples.step_s"), "bad sample: %s", err);
    CHECK(kh_stats_write_cell_summary(outdir, "mnist_mlp", "nope", "cpu", err, sizeof err) != 0 && strstr(err, "no record"),
          "no record: %s", err);
}

int main(void) {
    const char *bin = getenv("KHOST_BIN");
    if (!bin) kh_test_skip("KHOST_BIN not set (run through ctest)");
    const char *tmp = kh_test_tmpdir("compare");
    char a[64], b[64];
    int k;
    CHECK(kh_cell_parse_name("cntk__cpu.rep12.json", a, sizeof a, &k) && !strcmp(a, "cntk__cpu") && k == 12, "rep name");
    CHECK(kh_cell_parse_name("cntk__cpu.json", b, sizeof b, &k) && !strcmp(b, "cntk__cpu") && k == 0, "classic name");
    CHECK(!kh_cell_parse_name("cntk__cpu.stats.json", b, sizeof b, &k), "summary is not a record");
    test_compare(bin, tmp);
    test_summary(tmp);
    return kh_test_finish("core_compare");
}
