/* tests/core_report/test_report.c — `khost report` on a hand-written results folder (data/: tasks with two
 * devices, a crashed, a timed-out and an unsupported cell): the markdown must equal expected.md byte for
 * byte (imdb_fasttext's two records come from different machines and builds: the report refuses the set
 * without --mixed, and with it says its times do not compare the backends), the SVG must be produced, malformed
 * records must be named and skipped, and bad folders and command lines must give the documented exit codes.
 * Planted columns of two machines (one CPU model, two ISAs; two GPUs in a cuda:0 column) or two builds are
 * refused naming both cells and reported with the mark under --mixed; one machine and build, a reference row of
 * another revision, or one GPU in hosts of two ISAs are not.
 * data-compile/ holds records with model-compile times (ABI 1.2) beside old ones: expected-compile.md.
 * Usage: test_report SOURCE_DIR (the folder holding data/ and expected.md); needs $KHOST_BIN. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "results/report/report.h"
#include "testutil.h"

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

static void copy_file(const char *from, const char *to) {
    size_t n;
    char *d = kh_test_slurp(from, &n);
    if (!d) {
        fprintf(stderr, "test setup: cannot read %s\n", from);
        exit(2);
    }
    kh_test_write_file(to, d, n);
    free(d);
}

/* The helpers the tables and the chart share. */
static void test_helpers(void) {
    char b[32];
    kh_report_fmt_seconds(245.46, b, sizeof b);
    CHECK(!strcmp(b, "245.5"), "%s", b);
    kh_report_fmt_seconds(1.0, b, sizeof b);
    CHECK(!strcmp(b, "1.0"), "%s", b);
    kh_report_fmt_seconds(0.04213, b, sizeof b);
    CHECK(!strcmp(b, "0.0421"), "%s", b);
    kh_report_fmt_seconds(NAN, b, sizeof b);
    CHECK(!strcmp(b, "n/a"), "%s", b);
    CHECK(kh_report_cmp_device("cpu", "cuda:0") < 0, "cpu first");
    CHECK(kh_report_cmp_device("cuda:2", "cuda:10") < 0, "cuda:2 before cuda:10");
    CHECK(kh_report_cmp_device("cuda:10", "cuda:2") > 0, "cuda:10 after cuda:2");
    CHECK(kh_report_cmp_device("cuda:10", "mystery") < 0, "unknown kinds last");
    CHECK(kh_report_cmp_device("cuda:1", "cuda:1") == 0, "equal");
}

/* A copy of record `from` into dir/name with `members` (e.g. "\"cpu_isa\": \"avx2\", ") added to its environment
 * (before cpu_model) and its git_rev replaced by rev. */
static void record_with(const char *from, const char *dir, const char *name, const char *members, const char *rev) {
    size_t n;
    char *d = kh_test_slurp(from, &n), *at = d ? strstr(d, "\"cpu_model\"") : NULL;
    char *g = d ? strstr(d, "\"git_rev\": \"") : NULL;
    if (!at || !g) {
        fprintf(stderr, "test setup: no cpu_model or git_rev in %s\n", from);
        exit(2);
    }
    g += strlen("\"git_rev\": \"");
    size_t glen = strcspn(g, "\"");
    char path[4096], *full = malloc(n + 512);
    if (!full) exit(2);
    /* the text up to the revision, the new revision, the text up to cpu_model, the members, the rest */
    size_t k = 0, head = (size_t)(g - d), mid = (size_t)(at - (g + glen));
    memcpy(full, d, head), k = head;
    k += (size_t)snprintf(full + k, 64, "%s", rev);
    memcpy(full + k, g + glen, mid), k += mid;
    k += (size_t)snprintf(full + k, 256, "%s", members);
    memcpy(full + k, at, n - (size_t)(at - d)), k += n - (size_t)(at - d);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    kh_test_write_file(path, full, k);
    free(full), free(d);
}

/* A column of two machines or two builds is refused (exit 9) naming the task, the column and each backend's
 * machine or build; --mixed reports it with the mark; one machine and build: no mark, exit 0. A reference row
 * (tools/reference) measured at another revision is no other build. */
static void test_mixed(const char *bin, const char *src, const char *tmp) {
    char cmd[8192], out[65536], dir[4096], from[2][4096];
    snprintf(from[0], sizeof from[0], "%s/data/mnist_cnn/cntk__cpu.json", src);
    snprintf(from[1], sizeof from[1], "%s/data/mnist_cnn/tensorflow__cpu.json", src);
    const struct {
        const char *members[2], *rev[2];
        int refused;
        const char *names; /* in the refusal and the mark */
    } cases[5] = {
        {{"\"cpu_isa\": \"avx512\", ", "\"cpu_isa\": \"avx2\", "}, {"abc123def456", "abc123def456"}, 1,
         "different machines (cntk: Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz (avx512); tensorflow: Intel(R) Xeon(R) "
         "Gold 6248 CPU @ 2.50GHz (avx2))"},
        {{"\"cpu_isa\": \"avx2\", ", "\"cpu_isa\": \"avx2\", "}, {"abc123def456", "abc123def456"}, 0, NULL},
        {{"\"cpu_isa\": \"avx2\", ", "\"cpu_isa\": \"avx2\", "}, {"abc123def456", "0123456789ab"}, 1,
         "different builds (cntk: khost 0.1.0 (git abc123def456); tensorflow: khost 0.1.0 (git 0123456789ab))"},
        {{"\"cpu_isa\": \"avx2\", ", "\"cpu_isa\": \"avx2\", "}, {"abc123def456", "abc123d"}, 0, NULL},
        {{"\"cpu_isa\": \"avx2\", ", "\"reference\": \"pytorch 2.5\", \"cpu_isa\": \"avx2\", "}, {"abc123def456", "fedcba9"},
         0, NULL}};
    for (int c = 0; c < 5; c++) {
        snprintf(dir, sizeof dir, "%s/mixed%d/mnist_cnn", tmp, c);
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
        CHECK(kh_test_run(cmd, out, sizeof out) == 0, "mkdir %s", dir);
        record_with(from[0], dir, "cntk__cpu.json", cases[c].members[0], cases[c].rev[0]);
        record_with(from[1], dir, "tensorflow__cpu.json", cases[c].members[1], cases[c].rev[1]);
        snprintf(cmd, sizeof cmd, "'%s' report '%s/mixed%d'", bin, tmp, c);
        int rc = kh_test_run(cmd, out, sizeof out);
        if (!cases[c].refused) {
            CHECK(rc == 0 && strstr(out, "## mnist_cnn") && !strstr(out, "mixed") && !strstr(out, "different machines"),
                  "case %d: one machine and build: exit 0, no mark: %d %s", c, rc, out);
            continue;
        }
        char want[1024];
        snprintf(want, sizeof want, "khost: report: task mnist_cnn, column cpu: records from %s", cases[c].names);
        CHECK(rc == 9 && strstr(out, want) && !strstr(out, "## mnist_cnn"),
              "case %d: refused with exit 9, naming the task, column and both cells (%s), reporting nothing: %d %s", c,
              want, rc, out);
        snprintf(cmd, sizeof cmd, "'%s' report '%s/mixed%d' --mixed --html '%s/mixed%d.html'", bin, tmp, c, tmp, c);
        rc = kh_test_run(cmd, out, sizeof out);
        snprintf(want, sizeof want, "Note: mixed: the cpu column holds records from %s: its times and factors do not "
                                    "compare the backends.", cases[c].names);
        CHECK(rc == 0 && strstr(out, "## mnist_cnn") && strstr(out, want), "case %d: --mixed reports it, marked: %d %s",
              c, rc, out);
        snprintf(want, sizeof want, "%s/mixed%d.html", tmp, c);
        char *page = kh_test_slurp(want, NULL);
        CHECK(page && strstr(page, "<p class=\"mixed\"><strong>Mixed:</strong> the cpu column holds records from "),
              "case %d: the page is marked too", c);
        free(page);
    }
    /* a CUDA column: the machine is the device's name; the host CPU's vector extensions do not enter it */
    snprintf(from[0], sizeof from[0], "%s/data/mnist_cnn/cntk__cuda0.json", src);
    snprintf(from[1], sizeof from[1], "%s/data/mnist_cnn/tensorflow__cuda0.json", src);
    for (int c = 0; c < 2; c++) {
        snprintf(dir, sizeof dir, "%s/mixedcuda%d/mnist_cnn", tmp, c);
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
        CHECK(kh_test_run(cmd, out, sizeof out) == 0, "mkdir %s", dir);
        record_with(from[0], dir, "cntk__cuda0.json", "\"cpu_isa\": \"avx512\", ", "abc123def456");
        record_with(from[1], dir, "tensorflow__cuda0.json", "\"cpu_isa\": \"avx2\", ", "abc123def456");
        if (c == 0) { /* another GPU for tensorflow */
            snprintf(cmd, sizeof cmd, "sed -i 's/\"device_name\": \"NVIDIA H200\"/\"device_name\": \"NVIDIA H100\"/' "
                                      "'%s/tensorflow__cuda0.json'", dir);
            CHECK(kh_test_run(cmd, out, sizeof out) == 0, "sed: %s", out);
        }
        snprintf(cmd, sizeof cmd, "'%s' report '%s/mixedcuda%d'", bin, tmp, c);
        int rc = kh_test_run(cmd, out, sizeof out);
        if (c == 0)
            CHECK(rc == 9 && strstr(out, "task mnist_cnn, column cuda:0: records from different machines (cntk: NVIDIA "
                                         "H200; tensorflow: NVIDIA H100)"),
                  "two GPUs in one cuda:0 column: refused, naming both: %d %s", rc, out);
        else
            CHECK(rc == 0 && !strstr(out, "mixed"), "one GPU, hosts of two ISAs: not mixed: %d %s", rc, out);
    }
}

int main(int argc, char **argv) {
    test_helpers();
    const char *bin = getenv("KHOST_BIN");
    if (argc < 2) {
        fprintf(stderr, "usage: test_report SOURCE_DIR\n");
        return 2;
    }
    if (!bin || !*bin) kh_test_skip("KHOST_BIN is not set");
    struct stat st;
    if (stat(bin, &st) != 0) kh_test_skip("the khost binary is not built");
    const char *src = argv[1];
    const char *tmp = kh_test_tmpdir("report");
    /* kh_test_run appends 2>&1: a redirection of stdout goes inside { } so stderr still reaches `out`. */
    char cmd[8192], out[65536], path[4096], path2[4096];

    test_mixed(bin, src, tmp);
    /* 1. The golden report and the chart. data/ mixes machines and builds in imdb_fasttext's cpu column: refused
     * without --mixed (exit 9, nothing written), reported and marked with it. */
    snprintf(cmd, sizeof cmd, "{ '%s' report '%s/data' --svg '%s/chart.svg' >/dev/null; }", bin, src, tmp);
    int rc = kh_test_run(cmd, out, sizeof out);
    snprintf(path, sizeof path, "%s/chart.svg", tmp);
    CHECK(rc == 9 && strstr(out, "task imdb_fasttext, column cpu: records from different machines and builds") &&
              !kh_test_exists(path),
          "data/ without --mixed: refused, no chart: %d %s", rc, out);
    snprintf(cmd, sizeof cmd, "{ '%s' report '%s/data' --mixed --svg '%s/chart.svg' > '%s/report.md'; }", bin, src, tmp, tmp);
    rc = kh_test_run(cmd, out, sizeof out);
    CHECK(rc == 0, "report exited %d: %s", rc, out);
    CHECK(out[0] == 0, "stderr not empty: %s", out);
    snprintf(path, sizeof path, "%s/report.md", tmp);
    snprintf(path2, sizeof path2, "%s/expected.md", src);
    size_t n_got = 0, n_want = 0;
    char *got = kh_test_slurp(path, &n_got), *want = kh_test_slurp(path2, &n_want);
    CHECK(got && want, "cannot read %s or %s", path, path2);
    if (got && want) {
        int same = n_got == n_want && memcmp(got, want, n_got) == 0;
        CHECK(same, "report differs from expected.md; got:\n%s", got);
        if (!same) {
            size_t i = 0;
            while (i < n_got && i < n_want && got[i] == want[i]) i++;
            fprintf(stderr, "first difference at byte %zu\n", i);
        }
    }
    free(got);
    free(want);
    /* 1b. Model-compile times (ABI 1.2 records, data-compile/): a "compile cold/warm" column beside a
     * device's time per epoch only where some record of that column has compile_s (old records read "—"),
     * the explanation with the table; expected-compile.md byte for byte. The old result set above has none. */
    snprintf(cmd, sizeof cmd, "'%s' report '%s/data' --mixed", bin, src);
    rc = kh_test_run(cmd, out, sizeof out);
    CHECK(rc == 0 && !strstr(out, "compile"), "a result set without compile times shows no compile column: %s", out);
    snprintf(cmd, sizeof cmd, "{ '%s' report '%s/data-compile' > '%s/compile.md'; }", bin, src, tmp);
    rc = kh_test_run(cmd, out, sizeof out);
    CHECK(rc == 0 && out[0] == 0, "report data-compile exited %d: %s", rc, out);
    snprintf(path, sizeof path, "%s/compile.md", tmp);
    snprintf(path2, sizeof path2, "%s/expected-compile.md", src);
    got = kh_test_slurp(path, &n_got);
    want = kh_test_slurp(path2, &n_want);
    CHECK(got && want, "cannot read %s or %s", path, path2);
    if (got && want) {
        int same = n_got == n_want && memcmp(got, want, n_got) == 0;
        CHECK(same, "report differs from expected-compile.md; got:\n%s", got);
        /* the points of it, spelled out (so a regenerated golden file cannot silently lose them) */
        CHECK(strstr(got, "| backend | cpu | cpu compile cold/warm | cuda:0 |\n") != NULL,
              "mnist_cnn: compile column for cpu only (cuda:0 has only old records)");
        CHECK(strstr(got, "| theano | 5.9 [\xe2\x80\x94] (1.8x [\xe2\x80\x94]) | 41.2 / 0.351 | 0.95 [\xe2\x80\x94] (1.1x [\xe2\x80\x94]) | \xe2\x80\x94 / 0.412 |") != NULL,
              "miss: cold / warm; hit: unknown cold / warm");
        CHECK(strstr(got, "| cntk | **3.2 [\xe2\x80\x94] (1.0x)** | 0.0021 | **0.84 [\xe2\x80\x94] (1.0x)** | \xe2\x80\x94 |") != NULL,
              "no compile_info: one time; an old record: a dash");
        CHECK(strstr(got, "| tensorflow | 4.0 [\xe2\x80\x94] (1.3x [\xe2\x80\x94]) | \xe2\x80\x94 | crashed | <0.001 |") != NULL, "crashed cell keeps its compile time");
        CHECK(count(got, "\ncompile: model-compile time before the first epoch") == 2, "one explanation per task with the column");
    }
    free(got);
    free(want);
    got = want = NULL;
    /* 1c. Repetitions (data-reps/: records v2, three rounds of three backends with per-step samples, a
     * crashed fourth repetition, a stale single-run record and a summary file beside them): medians with
     * their bootstrap CI, factors with a CI paired by round, "≈" exactly where that CI contains 1. */
    snprintf(cmd, sizeof cmd, "'%s' report '%s/data-reps' 2>&1", bin, src);
    rc = kh_test_run(cmd, out, sizeof out);
    CHECK(rc == 0 && !strstr(out, "skipped") && !strstr(out, "duplicate"), "report data-reps exited %d: %s", rc, out);
    CHECK(strstr(out, "| tensorflow | 4.1 [4.0, 4.3] (2.0x [2.0, 2.0]) |\n") != NULL, "significant factor, no \xe2\x89\x88: %s", out);
    CHECK(strstr(out, "| cntk | 2.0 [2.0, 2.1] (1.00x [0.99, 1.00] \xe2\x89\x88) |\n") != NULL, "not significant: \xe2\x89\x88");
    CHECK(strstr(out, "| theano | **2.0 [2.0, 2.1] (1.0x)** |\n") != NULL, "the fastest by its median (not the stale 99 s record)");
    CHECK(strstr(out, "| cntk | **10.2 [10.0, 10.5] (1.0x)** |\n") != NULL, "time per step: median of the repetitions' medians");
    CHECK(strstr(out, "| theano | 10.3 [10.1, 10.4] (1.01x [0.99, 1.01] \xe2\x89\x88) |\n") != NULL, "step factor \xe2\x89\x88");
    CHECK(strstr(out, "- cntk on cpu (step times, 4 repetitions): 1 did not finish (#4 crashed), not counted.") != NULL,
          "a failed repetition is listed");
    snprintf(path, sizeof path, "%s/reps.html", tmp);
    snprintf(cmd, sizeof cmd, "'%s' report '%s/data-reps' --html '%s' >/dev/null 2>&1", bin, src, path);
    CHECK(kh_test_run(cmd, out, sizeof out) == 0, "report data-reps --html");
    got = kh_test_slurp(path, NULL);
    CHECK(got && strstr(got, "strip-chart") && count(got, "<title>repetition ") == 9 &&
              strstr(got, "(1.00x [0.99, 1.00] \xe2\x89\x88)"),
          "HTML: a strip plot with each finished repetition's median, and the CIs in the time table");
    CHECK(got && strstr(got, "<table class=\"time steps\">") && strstr(got, "<td class=\"best\">10.2 [10.0, 10.5] (1.0x)</td>") &&
              strstr(got, "<li>cntk on cpu (step times, 4 repetitions): 1 did not finish (#4 crashed), not counted.</li>"),
          "HTML: the time-per-step table and the measurement warnings");
    free(got);
    got = NULL;
    free(got);
    free(want);

    snprintf(path, sizeof path, "%s/chart.svg", tmp);
    char *svg = kh_test_slurp(path, NULL);
    CHECK(svg != NULL, "no chart written to %s", path);
    if (svg) {
        CHECK(!strncmp(svg, "<svg", 4), "chart starts with %.20s", svg);
        size_t l = strlen(svg);
        CHECK(l > 7 && !strcmp(svg + l - 7, "</svg>\n"), "chart does not end with </svg>");
        CHECK(strstr(svg, "xmlns=\"http://www.w3.org/2000/svg\"") != NULL, "no SVG namespace");
        /* one bar per finished cell: 4 in mnist_cnn, 1 in lstm_text_generation */
        CHECK(count(svg, "<title>mnist_cnn: ") == 4, "mnist_cnn bars: %d", count(svg, "<title>mnist_cnn: "));
        CHECK(count(svg, "<title>lstm_text_generation: ") == 1, "lstm bars");
        CHECK(strstr(svg, "crashed: signal 11 (Segmentation fault)") != NULL, "crashed cell not marked");
        CHECK(strstr(svg, ">cntk on cuda:0</text>") != NULL, "legend entry missing");
        CHECK(!strstr(svg, "http://") || count(svg, "http://") == 1, "external references in the chart");
        free(svg);
    }

    /* 2. A malformed record is named and skipped; the rest is still reported; exit 8. */
    snprintf(path, sizeof path, "%s/bad", tmp);
    CHECK(mkdir(path, 0777) == 0, "mkdir %s", path);
    snprintf(path, sizeof path, "%s/bad/mnist_cnn", tmp);
    CHECK(mkdir(path, 0777) == 0, "mkdir %s", path);
    snprintf(path, sizeof path, "%s/data/mnist_cnn/cntk__cpu.json", src);
    snprintf(path2, sizeof path2, "%s/bad/mnist_cnn/cntk__cpu.json", tmp);
    copy_file(path, path2);
    snprintf(path, sizeof path, "%s/bad/mnist_cnn/broken__cpu.json", tmp);
    kh_test_write_file(path, "{ \"khost_record\": 1, \"plugin\": ", 31);
    snprintf(path, sizeof path, "%s/bad/mnist_cnn/nostatus__cpu.json", tmp);
    const char *nostatus = "{\"khost_record\":1,\"plugin\":\"x\",\"task\":\"mnist_cnn\",\"device\":\"cpu\"}";
    kh_test_write_file(path, nostatus, strlen(nostatus));
    snprintf(path, sizeof path, "%s/bad/mnist_cnn/empty__cpu.json", tmp);
    kh_test_write_file(path, "", 0);
    snprintf(cmd, sizeof cmd, "'%s' report '%s/bad'", bin, tmp);
    rc = kh_test_run(cmd, out, sizeof out);
    CHECK(rc == 8, "malformed: exit %d: %s", rc, out);
    CHECK(strstr(out, "broken__cpu.json") && strstr(out, "not valid JSON"), "broken file not named: %s", out);
    CHECK(strstr(out, "nostatus__cpu.json") && strstr(out, "\"status\""), "missing field not named: %s", out);
    CHECK(strstr(out, "empty__cpu.json") != NULL, "empty file not named: %s", out);
    CHECK(strstr(out, "| cntk | 0.9871 |") != NULL, "good record not reported: %s", out);

    /* 3. A task folder given directly works too. */
    snprintf(cmd, sizeof cmd, "'%s' report '%s/data/mnist_cnn'", bin, src);
    rc = kh_test_run(cmd, out, sizeof out);
    CHECK(rc == 0 && strstr(out, "## mnist_cnn") && !strstr(out, "## lstm"), "task folder: %d %s", rc, out);

    /* 4. Empty and missing folders, bad command lines. */
    snprintf(path, sizeof path, "%s/empty", tmp);
    CHECK(mkdir(path, 0777) == 0, "mkdir %s", path);
    snprintf(cmd, sizeof cmd, "'%s' report '%s'", bin, path);
    rc = kh_test_run(cmd, out, sizeof out);
    CHECK(rc == 8 && strstr(out, "no result records"), "empty dir: %d %s", rc, out);
    snprintf(cmd, sizeof cmd, "'%s' report '%s/does-not-exist'", bin, tmp);
    rc = kh_test_run(cmd, out, sizeof out);
    CHECK(rc == 8 && strstr(out, "does-not-exist") && strstr(out, "cannot read"), "missing dir: %d %s", rc, out);
    snprintf(cmd, sizeof cmd, "'%s' report", bin);
    rc = kh_test_run(cmd, out, sizeof out);
    CHECK(rc == 2 && strstr(out, "usage"), "no dir: %d %s", rc, out);
    snprintf(cmd, sizeof cmd, "'%s' report '%s/data' --frobnicate", bin, src);
    rc = kh_test_run(cmd, out, sizeof out);
    CHECK(rc == 2 && strstr(out, "--frobnicate"), "unknown option: %d %s", rc, out);
    snprintf(cmd, sizeof cmd, "{ '%s' report '%s/data' --mixed --svg '%s/no/such/dir/chart.svg' >/dev/null; }", bin, src, tmp);
    rc = kh_test_run(cmd, out, sizeof out);
    CHECK(rc == 8 && strstr(out, "chart.svg"), "unwritable svg: %d %s", rc, out);

    /* 5. --published without a registry: the tables still come, with a note. */
    snprintf(cmd, sizeof cmd, "KHOST_CONF='%s/none.ini' '%s' report '%s/data' --published --mixed", tmp, bin, src);
    rc = kh_test_run(cmd, out, sizeof out);
    CHECK(rc == 0 && strstr(out, "Published figures unavailable") && strstr(out, "## mnist_cnn"),
          "published without registry: %d %s", rc, out);

    /* 6. --published with the build's registry, when the mnist_cnn task module is built. */
    const char *build = getenv("KHOST_BUILD");
    snprintf(path, sizeof path, "%s/tasks/mnist_cnn.so", build ? build : "/nonexistent");
    if (build && stat(path, &st) == 0) {
        snprintf(cmd, sizeof cmd, "KHOST_CONF='%s/khost.ini' '%s' report '%s/data' --published --mixed", build, bin, src);
        rc = kh_test_run(cmd, out, sizeof out);
        CHECK(rc == 0 && strstr(out, "Published by the Keras backend benchmark"), "published: %d %s", rc, out);
    } else {
        printf("note: %s not built; published figures not checked\n", path);
    }
    return kh_test_finish("core_report");
}
