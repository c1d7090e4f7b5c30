/* core/cli/cmd_history.c — `khost history DB[:filters] [--task T] [--plugin P] [--threshold PCT] [--fail-above
 * PCT]`: each cell's series across revisions, one machine per series, with its change points
 * (results/steps.h) and a CI for each change; exit 1 when a regression is above --fail-above. */
#define _GNU_SOURCE /* strdup */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/escape.h"
#include "base/exitcodes.h"
#include "base/files.h"
#include "cli/commands.h"
#include "cli/history_confirm.h"
#include "results/history.h"
#include "sched/slurm/slurm.h"
#include "guard/outpath.h"
#include "results/resultsdb.h"

static int git_order_read(const char *dir, kh_git_order *g) {
    size_t cap = 64u << 20;
    char *out = malloc(cap);
    char *argv[] = {"git", "-C", (char *)dir, "rev-list", "--topo-order", "--reverse", "--all", NULL};
    if (!out || kh_slurm_exec(argv, out, cap, 120) != 0) {
        fprintf(stderr, "khost: history: --git: ");
        kh_esc_line(stderr, dir);
        fprintf(stderr, ": git rev-list failed: %.200s\n", out ? out : "out of memory");
        free(out);
        return -1;
    }
    int lines = 0;
    for (char *p = out; *p; p++) lines += *p == '\n';
    g->rev = malloc(((size_t)lines + 1) * sizeof *g->rev);
    if (!g->rev) {
        free(out);
        fputs("khost: history: out of memory\n", stderr);
        return -1;
    }
    char *save = NULL;
    for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        if (strspn(l, "0123456789abcdef") >= 7) snprintf(g->rev[g->n++], 8, "%.7s", l);
    free(out);
    return 0;
}


static void print_text(const kh_hist_series *s) {
    fputs("\n## ", stdout);
    kh_esc_md(stdout, s->task);
    fputs(" · ", stdout);
    kh_esc_md(stdout, s->plugin);
    fputs(" · ", stdout);
    kh_esc_md(stdout, s->device);
    printf(" (%s time)\n\nmachine: ", s->kind);
    kh_esc_md(stdout, s->machine);
    printf("; revisions in %s", s->order);
    printf("\n\n| # | revision | first measured | n | median (ms) | 95 %% CI (ms) |\n|---:|---|---|---:|---:|---|\n");
    for (int k = 0; k < s->n_revs; k++) {
        const kh_hist_rev *r = &s->revs[k];
        printf("| %d | ", k + 1);
        kh_esc_md(stdout, r->name);
        fputs(" | ", stdout);
        kh_esc_md(stdout, r->first);
        printf(" | %d | %.4g | ", r->n, 1e3 * r->median);
        if (isfinite(r->ci.lo)) printf("%.4g … %.4g |\n", 1e3 * r->ci.lo, 1e3 * r->ci.hi);
        else printf("— |\n");
    }
    printf("\nlevels:");
    for (int j = 0; j < s->n_steps; j++)
        printf("%s revisions %d–%d %.4g ms", j ? ";" : "", s->steps[j].left + 1, s->steps[j].right,
               1e3 * s->steps[j].value);
    printf("\n");
    for (int j = 0; j < s->n_changes; j++) {
        const kh_hist_change *c = &s->changes[j];
        printf("change after revision %d (", c->after);
        kh_esc_md(stdout, s->revs[c->after - 1].name);
        fputs(" → ", stdout);
        kh_esc_md(stdout, s->revs[c->after].name);
        printf("): %+.1f %%", 100 * c->change);
        if (isfinite(c->ci.lo)) printf(" [%+.1f, %+.1f]", 100 * (c->ci.lo - 1), 100 * (c->ci.hi - 1));
        printf(" %s%s\n", c->what, c->regression ? ": a regression (the latest level is above the best)" : "");
        if (c->confirm[0]) {
            fputs("  confirm: ", stdout);
            kh_esc_md(stdout, c->confirm);
            putchar('\n');
        }
    }
    if (s->n_steps <= 1) printf("no change point\n");
}

/* One series: computed, confirmed when asked, printed and drawn (html: the page, or NULL). The number of its
 * regressions above fail_above (PCT); *oom set when out of memory. */
static int one_series(const kh_history *h, int i, double threshold, double fail_above, FILE *html,
                      const kh_hist_confirm *cf, const kh_git_order *git, int *oom) {
    kh_hist_series s;
    if (kh_history_series(h, i, threshold, git, &s) != 0) {
        *oom = 1;
        return 0;
    }
    int fails = 0;
    for (int j = 0; j < s.n_changes; j++) {
        kh_hist_change *c = &s.changes[j];
        if (c->regression && c->significant && fail_above >= 0 && 100 * c->change > fail_above) fails++;
        if (cf && c->significant) kh_history_confirm(cf, &s, c, c->confirm, sizeof c->confirm);
    }
    print_text(&s);
    if (html) kh_history_page_series(html, &s, i + 1);
    kh_hist_series_free(&s);
    return fails;
}

static void history_usage(FILE *f) {
    fputs("usage: khost history DB[:filters] [--task T] [--plugin P] [--threshold PCT] [--fail-above PCT]\n"
          "                     [--html FILE] [--git DIR] [--confirm --build REV=KHOST...]\n"
          "  each backend x task x device x machine of the results database DB (khost db import) as a series of\n"
          "  revisions in the order they were first measured: per revision the median of its repetitions and a\n"
          "  95 % bootstrap CI; the series' levels and change points (asv's step detection), each change with\n"
          "  its size and a 95 % CI. A series never mixes machines (CPU model, ISA, device, driver) or step and\n"
          "  epoch times. --threshold: smallest change reported as one (default 5). --fail-above PCT: exit 1\n"
          "  when a regression (a change that leaves the latest level above the best) is larger than PCT and\n"
          "  significant. --html FILE: the same as a page, a chart per series (medians, CI band, levels, change\n"
          "  points; each point linked to its revision's row and records). filters as for report: set= (a name\n"
          "  or PREFIX*), rev=, machine=, since=, until=.\n"
          "  --git DIR: revisions in that repository's commit order (rev-list --topo-order) where it has them all.\n"
          "  --confirm --build REV=KHOST...: each significant change re-measured by running the two revisions'\n"
          "  builds (their khost) side by side, alternating over --confirm-rounds N (default 5) runs of\n"
          "  --confirm-steps S timed steps (default 30), then compared: confirmed, refuted or inconclusive.\n",
          f);
}

int kh_cmd_history(int argc, char **argv) {
    const char *src = NULL, *html = NULL, *git_dir = NULL;
    kh_git_order git = {0};
    const char *task = NULL, *plugin = NULL;
    double threshold = 5, fail_above = -1;
    int confirm = 0;
    kh_hist_build builds[64];
    kh_hist_confirm cf = {.builds = builds, .rounds = 5, .steps = 30, .timeout_s = 1800};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc && argv[i + 1][0];
        char *end = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            history_usage(stdout);
            return KH_EXIT_OK;
        } else if (!strcmp(a, "--task") && has) task = argv[++i];
        else if (!strcmp(a, "--plugin") && has) plugin = argv[++i];
        else if (!strcmp(a, "--html") && has) html = argv[++i];
        else if (!strcmp(a, "--confirm")) confirm = 1;
        else if (!strcmp(a, "--git") && has) git_dir = argv[++i];
        else if (!strcmp(a, "--build") && has && strchr(argv[i + 1], '=') && cf.n_builds < 64) {
            char *eq = strchr(argv[++i], '=');
            *eq = 0;
            if (!argv[i][0] || !eq[1]) {
                fputs("khost: history: --build expects REV=KHOST (a revision and that build's khost)\n", stderr);
                return KH_EXIT_USAGE;
            }
            builds[cf.n_builds++] = (kh_hist_build){argv[i], eq + 1};
        } else if ((!strcmp(a, "--confirm-rounds") || !strcmp(a, "--confirm-steps")) && has) {
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 2 || v > 1000) {
                fprintf(stderr, "khost: history: %s expects a count from 2 to 1000, got '%s'\n", a, argv[i]);
                return KH_EXIT_USAGE;
            }
            *(!strcmp(a, "--confirm-rounds") ? &cf.rounds : &cf.steps) = (int)v;
        }
        else if ((!strcmp(a, "--threshold") || !strcmp(a, "--fail-above")) && has) {
            double v = strtod(argv[++i], &end);
            if (*end || !isfinite(v) || v < 0 || v >= 1000) {
                fprintf(stderr, "khost: history: %s expects a percentage from 0, got '%s'\n", a, argv[i]);
                return KH_EXIT_USAGE;
            }
            *(!strcmp(a, "--threshold") ? &threshold : &fail_above) = v;
        } else if (a[0] != '-' && a[0] && !src) src = a;
        else {
            history_usage(stderr);
            return KH_EXIT_USAGE;
        }
    }
    if (!src) {
        history_usage(stderr);
        return KH_EXIT_USAGE;
    }
    char file[4096], err[4400];
    static char self[4096]; /* this khost runs the comparison */
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    self[sl > 0 ? sl : 0] = 0;
    cf.self = sl > 0 ? self : argv[0];
    const char *filters = kh_db_source(src, file, sizeof file);
    if (!filters) {
        fputs("khost: history: ", stderr);
        kh_esc_line(stderr, src);
        fputs(": not a results database (khost db import makes one)\n", stderr);
        return KH_EXIT_IO;
    }
    if (html && kh_outpath_check(html, err, sizeof err) != 0) {
        kh_esc_msg("khost: history: --html: ", err);
        return KH_EXIT_IO;
    }
    if (git_dir && git_order_read(git_dir, &git) != 0) return KH_EXIT_IO;
    kh_db *db = kh_db_open(file, KH_DB_READ, err, sizeof err);
    kh_history *hist = db ? kh_history_load(db, filters, task, plugin, err, sizeof err) : NULL;
    kh_db_close(db);
    if (!hist) {
        free(git.rev);
        kh_esc_msg("khost: history: ", err);
        return KH_EXIT_IO;
    }
    int n_series = kh_history_n_series(hist), n_records = kh_history_n_records(hist), fails = 0, oom = 0;
    fputs("# khost history: ", stdout);
    kh_esc_md(stdout, src);
    printf("\n\n%d series from %d repetition record(s). A series is one backend x task x device on one machine (CPU "
           "model, ISA, device, driver), step or epoch time; revisions in commit order with --git, else in the "
           "order first measured. Change points: "
           "asv's step detection (a penalised L1 piecewise-constant fit); a change's CI compares the repetitions of "
           "the two levels (percentile bootstrap, 95 %%); threshold %g %%.\n", n_series, n_records, threshold);
    kh_memfile page;
    FILE *pf = html ? kh_memfile_open(&page, html, err, sizeof err) : NULL;
    if (html && !pf) {
        kh_esc_msg("khost: history: --html: ", err);
        kh_history_free(hist);
        free(git.rev);
        return KH_EXIT_IO;
    }
    if (pf) kh_history_page_begin(pf, src, n_series, n_records, threshold);
    for (int i = 0; i < n_series && !oom; i++)
        fails += one_series(hist, i, threshold / 100, fail_above, pf, confirm ? &cf : NULL, git_dir ? &git : NULL, &oom);
    kh_history_free(hist);
    free(git.rev);
    if (pf) {
        kh_history_page_end(pf);
        if (kh_memfile_write(&page, pf, html, err, sizeof err) != 0) {
            kh_esc_msg("khost: history: --html: ", err);
            return KH_EXIT_IO;
        }
    }
    if (oom) {
        fputs("khost: history: out of memory\n", stderr);
        return KH_EXIT_IO;
    }
    if (fails) {
        fprintf(stderr, "khost: history: %d regression(s) above %g %%\n", fails, fail_above);
        return KH_EXIT_TRAIN;
    }
    return KH_EXIT_OK;
}
