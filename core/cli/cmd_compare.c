/* core/cli/cmd_compare.c — `khost compare BASE NEW [--fail-above PCT] [--noise PCT] [--aa] [--json] [--html FILE]`:
 * two result folders cell by cell (docs/PERFORMANCE.md, "How khost measures").
 *
 * The cells, their changes and verdicts are computed by results/compare.h (which says how); this file reads the
 * command line and prints them: a markdown table, JSON (--json) and a self-contained HTML page (--html).
 * An A/A section (results/aa.h, printed by compare_aa.c) follows when the two sets are one build on one machine,
 * or when --aa asks for it (then a warning says when they are not, and the section is marked so).
 * Exit status: 0; KH_EXIT_TRAIN (1) when --fail-above PCT is given and a cell is "slower" by more than PCT;
 * otherwise KH_EXIT_UNCOMPARABLE (9) when --fail-above is given and it cannot compare: no cell is in both sets,
 * or a cell in both has no verdict (a side without two finished repetitions, other settings, impossible times)
 * or is "too noisy to tell" (its interval is wider than the effect asked about, or most of a side's repetitions
 * were taken under noise); KH_EXIT_USAGE; KH_EXIT_IO when a folder or record cannot be read or the HTML cannot be
 * written. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/escape.h"
#include "base/exitcodes.h"
#include "base/files.h"
#include "cli/commands.h"
#include "cli/compare_aa.h"
#include "results/compare.h"
#include "results/stats.h"

#define NOISE_DEFAULT 2.0 /* percent */

typedef kh_cmp_row row;
typedef kh_cmp_rule rule;

/* What the three outputs show: the rows, the rule, the verdict counts and the A/A section when there is one. */
typedef struct view {
    const char *bdir, *ndir;
    const row *rows;
    int nr;
    const rule *ru;
    const int *count;
    const kh_aa *aa;          /* NULL: no A/A section */
    int aa_asked;             /* --aa */
} view;

static void fmt_time(double s, char *buf, size_t n) {
    if (!isfinite(s)) snprintf(buf, n, "—");
    else if (s >= 1) snprintf(buf, n, "%.3g s", s);
    else snprintf(buf, n, "%.3g ms", 1000 * s);
}

static void fmt_change(const row *r, char *chg, size_t cn, char *ci, size_t in) {
    if (!isfinite(r->ratio)) snprintf(chg, cn, "—");
    else snprintf(chg, cn, "%+.1f %%", 100 * (r->ratio - 1));
    if (!isfinite(r->ci.lo)) snprintf(ci, in, "—");
    else snprintf(ci, in, "%+.1f %% … %+.1f %%", 100 * (r->ci.lo - 1), 100 * (r->ci.hi - 1));
}

static const char method_note[] =
    "value: per repetition, its median step time (records with samples) or else its mean epoch time; "
    "median over repetitions; change = median(NEW) / median(BASE) - 1 with a percentile bootstrap 95 % CI "
    "(each set's repetitions resampled on their own)";

/* "verdicts: the whole interval beyond ±2 %, each at the 99.72 % level (Bonferroni over 18 cells)" */
static void verdict_note(const rule *ru, char *buf, size_t n) {
    snprintf(buf, n,
             "verdicts: faster / slower when the whole interval of the change lies beyond the noise threshold "
             "±%g %%, each interval at the %.4g %% level (Bonferroni over the %d cell%s compared, so a rerun of the "
             "same build flags any cell with at most 5 %% probability)",
             ru->noise, 100 * ru->level, ru->m, ru->m == 1 ? "" : "s");
}

/* A row's cells as text, the same in the Markdown and the HTML table. */
typedef struct row_text {
    char plugin[256], device[64], tb[32], tn[32], chg[32], ci[64];
} row_text;

static void row_texts(const row *r, row_text *t) {
    kh_cmp_split_base(r->base, t->plugin, sizeof t->plugin, t->device, sizeof t->device);
    fmt_time(r->mb, t->tb, sizeof t->tb);
    fmt_time(r->mn, t->tn, sizeof t->tn);
    fmt_change(r, t->chg, sizeof t->chg, t->ci, sizeof t->ci);
}

static void print_markdown(FILE *f, const view *w) {
    const row *rows = w->rows;
    const rule *ru = w->ru;
    int nr = w->nr;
    char vn[400];
    verdict_note(ru, vn, sizeof vn);
    fputs("# khost compare\n\nBASE: ", f);
    kh_esc_md(f, w->bdir);
    fputs("; NEW: ", f);
    kh_esc_md(f, w->ndir);
    fputs(".\n\n", f);
    fprintf(f, "%s, %d resamples, seed %llu; %s.\n\n", method_note, KH_STATS_RESAMPLES,
            (unsigned long long)KH_STATS_SEED, vn);
    fprintf(f, "| task | backend | device | value | BASE | NEW | change | 95 %% CI | verdict |\n");
    fprintf(f, "|---|---|---|---|---:|---:|---:|---:|---|\n");
    for (int i = 0; i < nr; i++) {
        const row *r = &rows[i];
        row_text t;
        row_texts(r, &t);
        fprintf(f, "| %s | %s | %s | %s | %s (n=%d) | %s (n=%d) | %s | %s | %s%s%s |\n", r->task[0] ? r->task : "-",
                t.plugin, t.device,
                r->v == KH_V_MISSING && !isfinite(r->mb) && !isfinite(r->mn) ? "—" : r->kind ? "step" : "epoch", t.tb, r->nb,
                t.tn, r->nn, t.chg, t.ci, r->fails ? "**" : "", kh_verdict_name[r->v], r->fails ? "**" : "");
    }
    fprintf(f, "\n");
    for (int v = 0; v < KH_V_N; v++) fprintf(f, "%s%s %d", v ? ", " : "", kh_verdict_name[v], w->count[v]);
    fprintf(f, ".\n");
    int any = 0;
    for (int i = 0; i < nr; i++)
        if (rows[i].why[0] && rows[i].v != KH_V_UNCHANGED) {
            char plugin[256], device[64];
            kh_cmp_split_base(rows[i].base, plugin, sizeof plugin, device, sizeof device);
            if (!any) fprintf(f, "\n");
            any = 1;
            fprintf(f, "- %s %s on %s: %s: ", rows[i].task, plugin, device, kh_verdict_name[rows[i].v]);
            kh_esc_md(f, rows[i].why);
            fputc('\n', f);
        }
    if (w->aa) kh_aa_markdown(f, w->aa, w->aa_asked, rows, ru);
}

/* A string member from text that was read (a path, a why naming a file or a record's setting): valid UTF-8
 * whatever the bytes were, so the JSON parses anywhere (cJSON escapes the rest). */
static void add_text(cJSON *o, const char *key, const char *text) {
    char *valid = kh_esc_line_dup(text);
    cJSON_AddStringToObject(o, key, valid ? valid : "(out of memory)");
    free(valid);
}

static cJSON *jnum(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

static char *to_json(const view *w) {
    const row *rows = w->rows;
    const rule *ru = w->ru;
    int nr = w->nr;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "khost_compare", 1);
    add_text(o, "base", w->bdir);
    add_text(o, "new", w->ndir);
    cJSON_AddNumberToObject(o, "noise_pct", ru->noise);
    cJSON_AddNumberToObject(o, "cells_compared", ru->m);
    cJSON_AddNumberToObject(o, "verdict_level", ru->level);
    cJSON_AddItemToObject(o, "fail_above_pct", ru->have_fail ? cJSON_CreateNumber(ru->fail_above) : cJSON_CreateNull());
    cJSON_AddStringToObject(o, "method", method_note);
    cJSON_AddNumberToObject(o, "resamples", KH_STATS_RESAMPLES);
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)KH_STATS_SEED);
    cJSON_AddStringToObject(o, "seed", seed);
    cJSON *cnt = cJSON_AddObjectToObject(o, "counts");
    for (int v = 0; cnt && v < KH_V_N; v++) cJSON_AddNumberToObject(cnt, kh_verdict_name[v], w->count[v]);
    cJSON *cells = cJSON_AddArrayToObject(o, "cells");
    for (int i = 0; cells && i < nr; i++) {
        const row *r = &rows[i];
        cJSON *c = kh_cmp_json_cell(cells, r->task, r->base);
        if (!c) break;
        cJSON_AddStringToObject(c, "value", r->kind ? "step_s" : "epoch_s");
        cJSON_AddNumberToObject(c, "base_n", r->nb);
        cJSON_AddNumberToObject(c, "new_n", r->nn);
        cJSON_AddItemToObject(c, "base_median", jnum(r->mb));
        cJSON_AddItemToObject(c, "new_median", jnum(r->mn));
        cJSON_AddItemToObject(c, "ratio", jnum(r->ratio));
        cJSON_AddItemToObject(c, "ratio_ci_lo", jnum(r->ci.lo));
        cJSON_AddItemToObject(c, "ratio_ci_hi", jnum(r->ci.hi));
        cJSON_AddItemToObject(c, "verdict_ci_lo", jnum(r->vci.lo));
        cJSON_AddItemToObject(c, "verdict_ci_hi", jnum(r->vci.hi));
        cJSON_AddItemToObject(c, "verdict_halfwidth_pct", jnum(r->halfwidth));
        cJSON_AddStringToObject(c, "verdict", kh_verdict_name[r->v]);
        cJSON_AddBoolToObject(c, "fails", r->fails);
        cJSON_AddBoolToObject(c, "comparable", !r->cannot);
        add_text(c, "why", r->why);
    }
    cJSON *aa = w->aa ? kh_aa_json(w->aa, w->aa_asked, rows, nr, ru) : cJSON_CreateNull();
    if (!aa) {
        cJSON_Delete(o);
        return NULL;
    }
    cJSON_AddItemToObject(o, "aa", aa);
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}

/* The CSS class of a verdict's row. */
static const char *const verdict_class[KH_V_N] = {"faster", "slower", "unchanged", "too-noisy", "inconclusive",
                                                  "missing"};

static int write_html(const char *path, const view *w, char *err, size_t errlen) {
    const row *rows = w->rows;
    int nr = w->nr;
    kh_memfile m;
    FILE *f = kh_memfile_open(&m, path, err, errlen);
    if (!f) return -1;
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/><title>khost compare</title>\n"
          "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
          "td,th{border:1px solid #ccc;padding:.3em .6em}td.n{text-align:right}"
          ".faster{background:#d8f3dc}.slower{background:#ffd6d6}.missing,.inconclusive{background:#eee}"
          ".too-noisy{background:#fff0c2}.not-aa h2{color:#a00}"
          "</style></head><body>\n<h1>khost compare</h1>\n<p>BASE: ", f);
    kh_esc_xml(f, w->bdir);
    fputs("; NEW: ", f);
    kh_esc_xml(f, w->ndir);
    fprintf(f, ".</p>\n<p>");
    kh_esc_xml(f, method_note);
    char vn[400];
    verdict_note(w->ru, vn, sizeof vn);
    fprintf(f, ", %d resamples, seed %llu; ", KH_STATS_RESAMPLES, (unsigned long long)KH_STATS_SEED);
    kh_esc_xml(f, vn);
    fputs(".</p>\n<p>", f);
    for (int v = 0; v < KH_V_N; v++) fprintf(f, "%s%s %d", v ? ", " : "", kh_verdict_name[v], w->count[v]);
    fputs(".</p>\n<table><thead><tr><th>task</th><th>backend</th><th>device</th><th>value</th><th>BASE</th>"
          "<th>NEW</th><th>change</th><th>95 % CI</th><th>verdict</th></tr></thead><tbody>\n", f);
    for (int i = 0; i < nr; i++) {
        const row *r = &rows[i];
        row_text t;
        row_texts(r, &t);
        fprintf(f, "<tr class=\"%s\"><td>", verdict_class[r->v]);
        kh_esc_xml(f, r->task);
        fputs("</td><td>", f);
        kh_esc_xml(f, t.plugin);
        fputs("</td><td>", f);
        kh_esc_xml(f, t.device);
        fprintf(f, "</td><td>%s</td><td class=\"n\">%s (n=%d)</td><td class=\"n\">%s (n=%d)</td><td class=\"n\">%s</td>"
                   "<td class=\"n\">%s</td><td title=\"", r->kind ? "step" : "epoch", t.tb, r->nb, t.tn, r->nn, t.chg, t.ci);
        kh_esc_xml(f, r->why);
        fprintf(f, "\">%s%s</td></tr>\n", kh_verdict_name[r->v], r->fails ? " (fails)" : "");
    }
    fputs("</tbody></table>\n", f);
    if (w->aa) kh_aa_html(f, w->aa, w->aa_asked, rows, w->ru);
    fputs("</body></html>\n", f);
    return kh_memfile_write(&m, f, path, err, errlen);
}

static void compare_usage(FILE *f) {
    fprintf(f,
            "usage: khost compare BASE NEW [--fail-above PCT] [--noise PCT] [--aa] [--json] [--html FILE]\n"
            "Two result folders cell by cell: per task x backend x device the change of the median time (per\n"
            "repetition: its median step time where both have samples, else its mean epoch time) with a\n"
            "bootstrap 95 %% CI, and a verdict: faster / slower (the whole CI lies beyond the noise\n"
            "threshold), unchanged, too noisy to tell (the verdict CI's half-width is wider than the effect\n"
            "asked about, --fail-above PCT or else --noise PCT, and the CI does not settle it; or a majority\n"
            "of a side's repetitions were taken under noise, as the report marks them), inconclusive (under 2\n"
            "finished repetitions, other settings such as the batch size, steps or math, or times that cannot\n"
            "be true), missing.\n"
            "When BASE and NEW are one build on one machine (the records' git_rev and khost_version, cpu_model\n"
            "and cpu_isa or the CUDA device's name), an A/A section follows: the false-positive rate (cells\n"
            "called faster or slower / cells with a verdict) and the smallest change this machine lets a cell\n"
            "detect (median and largest over the cells; per cell in the JSON).\n"
            "  --noise PCT        the band of changes that are \"unchanged\", +-PCT %% (default %g; under 100)\n"
            "  --fail-above PCT   a gate: exit 1 when a cell is slower by more than PCT %%; else exit 9 when it\n"
            "                     cannot compare (no cell in both folders, or a cell in both without a verdict\n"
            "                     or too noisy to tell)\n"
            "  --aa               the A/A section even when the sets are not known to be one build on one\n"
            "                     machine (warned, and marked so)\n"
            "  --json             print JSON instead of the markdown table\n"
            "  --html FILE        also write the table as a self-contained HTML page\n"
            "Exit status: 0; 1 a cell slower than --fail-above; 2 usage; 8 a folder or record unreadable;\n"
            "9 --fail-above could not compare (or a cell was too noisy to tell).\n",
            NOISE_DEFAULT);
}

static int parse_pct(const char *s, double *v) {
    char *end = NULL;
    errno = 0;
    double x = strtod(s, &end);
    if (errno || !end || end == s || *end || !isfinite(x) || x < 0) return -1;
    *v = x;
    return 0;
}

/* The gate's exit status: a cell slower than --fail-above fails it (1); otherwise a gate that could not compare
 * fails too (KH_EXIT_UNCOMPARABLE), each cell named: no cell in both sets, or a shared cell without a verdict. */
static int gate(const row *rows, int nr, int fails, int cannot, int shared, double fail_above) {
    if (shared == 0) fprintf(stderr, "khost: compare: --fail-above: no cell is in both BASE and NEW\n");
    for (int i = 0; i < nr; i++)
        if (rows[i].cannot) {
            char plugin[128], device[64];
            kh_cmp_split_base(rows[i].base, plugin, sizeof plugin, device, sizeof device);
            fprintf(stderr, "khost: compare: --fail-above cannot compare %s %s %s: ", rows[i].task, plugin, device);
            kh_esc_msg("", rows[i].why);
        }
    if (fails) {
        fprintf(stderr, "khost: compare: %d cell(s) slower than BASE by more than %g %%\n", fails, fail_above);
        return KH_EXIT_TRAIN;
    }
    return shared == 0 || cannot ? KH_EXIT_UNCOMPARABLE : KH_EXIT_OK;
}

int kh_cmd_compare(int argc, char **argv) {
    const char *dirs[2] = {NULL, NULL}, *html = NULL;
    double noise = NOISE_DEFAULT, fail_above = 0;
    int have_fail = 0, json = 0, nd = 0, aa_asked = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            compare_usage(stdout);
            return KH_EXIT_OK;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--aa")) {
            aa_asked = 1;
        } else if (!strcmp(a, "--noise") || !strcmp(a, "--fail-above") || !strcmp(a, "--html")) {
            if (i + 1 >= argc || !argv[i + 1][0]) {
                fprintf(stderr, "khost: compare: %s needs a value\n", a);
                return KH_EXIT_USAGE;
            }
            const char *v = argv[++i];
            if (!strcmp(a, "--html")) {
                html = v;
            } else if (parse_pct(v, !strcmp(a, "--noise") ? &noise : &fail_above) != 0) {
                fprintf(stderr, "khost: compare: %s '%s': expected a percentage >= 0\n", a, v);
                return KH_EXIT_USAGE;
            } else if (!strcmp(a, "--noise") && noise >= 100) {
                fprintf(stderr, "khost: compare: --noise '%s': a band of +-100 %% or more hides every change\n", v);
                return KH_EXIT_USAGE;
            } else if (!strcmp(a, "--fail-above")) {
                have_fail = 1;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "khost: compare: unknown option '%s' (khost compare --help lists them)\n", a);
            return KH_EXIT_USAGE;
        } else if (nd < 2) {
            dirs[nd++] = a;
        } else {
            fprintf(stderr, "khost: compare: two result folders expected (BASE NEW), got a third: '%s'\n", a);
            return KH_EXIT_USAGE;
        }
    }
    if (nd != 2) {
        compare_usage(stderr);
        return KH_EXIT_USAGE;
    }
    kh_cmp_side s[2] = {{.dir = dirs[0]}, {.dir = dirs[1]}};
    char err[4400];
    for (int k = 0; k < 2; k++)
        if (kh_cmp_side_scan(&s[k], err, sizeof err) != 0) {
            kh_esc_msg(k ? "khost: compare: NEW: " : "khost: compare: BASE: ", err);
            kh_cmp_side_free(&s[0]);
            kh_cmp_side_free(&s[1]);
            return KH_EXIT_IO;
        }
    if (s[0].n == 0 || s[1].n == 0) {
        fputs("khost: compare: ", stderr);
        kh_esc_line(stderr, s[0].n == 0 ? dirs[0] : dirs[1]);
        fputs(": no result records (expected <task>/<plugin>__<device>[.rep<k>].json)\n", stderr);
        kh_cmp_side_free(&s[0]);
        kh_cmp_side_free(&s[1]);
        return KH_EXIT_IO;
    }
    row *rows = calloc((size_t)(s[0].n + s[1].n), sizeof *rows);
    if (!rows) {
        fprintf(stderr, "khost: compare: out of memory\n");
        kh_cmp_side_free(&s[0]);
        kh_cmp_side_free(&s[1]);
        return KH_EXIT_IO;
    }
    rule ru = {.noise = noise, .have_fail = have_fail, .fail_above = fail_above};
    int nr = kh_cmp_fill(s, &ru, rows);
    int count[KH_V_N] = {0}, fails = 0, cannot = 0, shared = 0;
    for (int i = 0; i < nr; i++) {
        count[rows[i].v]++;
        fails += rows[i].fails;
        cannot += rows[i].cannot;
        shared += rows[i].both;
    }
    kh_aa aa = {0};
    kh_aa_identify(s, &aa);
    int show_aa = aa.same || aa_asked;
    if (show_aa && kh_aa_compute(rows, nr, &ru, &aa) != 0) {
        fprintf(stderr, "khost: compare: out of memory\n");
        kh_aa_free(&aa);
        free(rows);
        kh_cmp_side_free(&s[0]);
        kh_cmp_side_free(&s[1]);
        return KH_EXIT_IO;
    }
    if (aa_asked && !aa.same)
        kh_esc_msg("khost: compare: warning: --aa: BASE and NEW are not known to be one build on one machine, the "
                   "A/A figures count real changes as false positives: ", aa.why);
    view w = {dirs[0], dirs[1], rows, nr, &ru, count, show_aa ? &aa : NULL, aa_asked};
    int rc = KH_EXIT_OK;
    if (json) {
        char *text = to_json(&w);
        if (!text) {
            fprintf(stderr, "khost: compare: out of memory\n");
            rc = KH_EXIT_IO;
        } else {
            printf("%s\n", text);
            free(text);
        }
    } else {
        print_markdown(stdout, &w);
    }
    if (html && write_html(html, &w, err, sizeof err) != 0) {
        kh_esc_msg("khost: compare: ", err);
        rc = KH_EXIT_IO;
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "khost: compare: cannot write the table: %s\n", strerror(errno));
        rc = KH_EXIT_IO;
    }
    if (rc == KH_EXIT_OK && have_fail) rc = gate(rows, nr, fails, cannot, shared, fail_above);
    kh_aa_free(&aa);
    free(rows);
    kh_cmp_side_free(&s[0]);
    kh_cmp_side_free(&s[1]);
    return rc;
}
