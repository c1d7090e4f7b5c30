/* core/cli/cmd_history.c — `khost history DB[:filters] [--task T] [--plugin P] [--threshold PCT] [--fail-above
 * PCT]`: each cell's series across revisions, one machine per series, with its change points
 * (results/steps.h) and a CI for each change; exit 1 when a regression is above --fail-above. */
#define _GNU_SOURCE /* strdup */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/escape.h"
#include "base/exitcodes.h"
#include "base/grow.h"
#include "base/files.h"
#include "cli/commands.h"
#include "cli/history.h"
#include "sched/slurm/slurm.h"
#include "guard/outpath.h"
#include "results/resultsdb.h"
#include "results/stats.h"
#include "results/steps.h"

#define RESAMPLES 2000
#define SEED 20261207u

typedef struct obs {
    char *series; /* task \t plugin \t device \t kind \t machine */
    char rev[48], when[32];
    double v; /* seconds: a repetition's median step time, or its mean epoch time */
    char *where; /* its record files */
} obs;

typedef struct collect {
    obs *v;
    int n, cap;
    const char *task, *plugin;
    int oom;
} collect;

static double median_of(const cJSON *arr) {
    int n = cJSON_GetArraySize(arr);
    double *x = n > 0 ? malloc((size_t)n * sizeof *x) : NULL;
    if (!x) return NAN;
    int m = 0;
    for (const cJSON *e = arr ? arr->child : NULL; e; e = e->next)
        if (cJSON_IsNumber(e) && e->valuedouble > 0) x[m++] = e->valuedouble;
    double r = kh_stats_median(x, m);
    free(x);
    return r;
}

static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static int add_record(void *ctx, const char *machine, const char *text, const char *where) {
    collect *c = ctx;
    cJSON *o = cJSON_Parse(text);
    if (!o) return 0;
    const char *task = str(o, "task"), *plugin = str(o, "plugin"), *device = str(o, "device");
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(o, "environment");
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "samples"), "step_s");
    const cJSON *mean = cJSON_GetObjectItemCaseSensitive(o, "mean_epoch_s");
    double v = cJSON_GetArraySize(steps) > 0 ? median_of(steps) : cJSON_IsNumber(mean) ? mean->valuedouble : NAN;
    const char *kind = cJSON_GetArraySize(steps) > 0 ? "step" : "epoch";
    int keep = !strcmp(str(o, "status"), "ok") && isfinite(v) && v > 0 && (!c->task || !strcmp(c->task, task)) &&
               (!c->plugin || !strcmp(c->plugin, plugin));
    if (keep) {
        obs *nv = c->n == c->cap ? kh_grow(c->v, &c->cap, sizeof *nv, 256) : c->v;
        char *key = NULL;
        if (!nv || asprintf(&key, "%s\t%s\t%s\t%s\t%s", task, plugin, device, kind, machine) < 0) {
            c->oom = 1;
            cJSON_Delete(o);
            return 1;
        }
        c->v = nv;
        obs *b = &c->v[c->n++];
        b->series = key;
        if (!(b->where = strdup(where))) c->oom = 1;
        /* one revision whether recorded with 7 or 12 digits: 7, and a suffix such as "-dirty" kept */
        const char *g = *str(env, "git_rev") ? str(env, "git_rev") : "unknown";
        size_t hex = strspn(g, "0123456789abcdef");
        snprintf(b->rev, sizeof b->rev, "%.*s%s", (int)(hex > 7 ? 7 : hex), g, g + hex);
        snprintf(b->when, sizeof b->when, "%s", str(env, "finished_at"));
        b->v = v;
    }
    cJSON_Delete(o);
    return 0;
}

static void obs_free(collect *c) {
    for (int i = 0; i < c->n; i++) free(c->v[i].series), free(c->v[i].where);
    free(c->v);
}

static int cmp_obs(const void *a, const void *b) {
    const obs *x = a, *y = b;
    int c = strcmp(x->series, y->series);
    return c ? c : strcmp(x->when, y->when);
}

/* --git DIR: the repository's commits oldest first (rev-list --topo-order --reverse), by their first 7 digits. */
typedef struct git_order {
    char (*rev)[8];
    int n;
} git_order;

static int git_order_read(const char *dir, git_order *g) {
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

/* A revision's place in the repository's order (by its first 7 digits, a suffix such as "-dirty" ignored), -1
 * when the repository does not have it. */
static int git_index(const git_order *g, const char *rev) {
    for (int i = 0; i < g->n; i++)
        if (!strncmp(g->rev[i], rev, 7)) return i;
    return -1;
}

static const git_order *sort_git; /* for cmp_git_rev: qsort has no context */
static int cmp_git_rev(const void *a, const void *b) {
    const kh_hist_rev *x = a, *y = b;
    int i = git_index(sort_git, x->name), j = git_index(sort_git, y->name);
    if (i != j) return (i > j) - (i < j);
    return strcmp(x->first, y->first); /* a clean and a "-dirty" build of one commit: as measured */
}

/* All values of revisions [a, b) pooled into out (room for every observation); their number. */
static int pool(const kh_hist_rev *r, int a, int b, double *out) {
    int m = 0;
    for (int i = a; i < b; i++)
        for (int j = 0; j < r[i].n; j++) out[m++] = r[i].x[j];
    return m;
}

static void print_text(const kh_hist_series *s) {
    printf("\n## %s · %s · %s (%s time)\n\nmachine: ", s->task, s->plugin, s->device, s->kind);
    kh_esc_md(stdout, s->machine);
    printf("; revisions in %s", s->order);
    printf("\n\n| # | revision | first measured | n | median (ms) | 95 %% CI (ms) |\n|---:|---|---|---:|---:|---|\n");
    for (int k = 0; k < s->n_revs; k++) {
        const kh_hist_rev *r = &s->revs[k];
        printf("| %d | ", k + 1);
        kh_esc_md(stdout, r->name);
        printf(" | %s | %d | %.4g | ", r->first, r->n, 1e3 * r->median);
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

/* One series: computed, printed and drawn (html: the page, or NULL). Returns the number of regressions above
 * fail_above (PCT). */
static int one_series(const obs *o, int n, double threshold, double fail_above, FILE *html, int index,
                      const kh_hist_confirm *cf, const git_order *git, int *oom) {
    kh_hist_rev *r = calloc((size_t)n, sizeof *r);
    double *xs = malloc((size_t)n * sizeof *xs), *med = malloc((size_t)n * sizeof *med);
    double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    const char **where = malloc((size_t)n * sizeof *where);
    kh_step *st = malloc((size_t)n * sizeof *st);
    kh_regression *reg = malloc((size_t)n * sizeof *reg);
    kh_hist_change *ch = malloc((size_t)n * sizeof *ch);
    char *key = strdup(o[0].series);
    int nr = 0, fails = 0;
    if (!r || !xs || !med || !a || !b || !where || !st || !reg || !ch || !key) {
        *oom = 1;
        goto out;
    }
    for (int i = 0; i < n; i++) { /* revisions in order of first measurement; values grouped by revision */
        int k = 0;
        while (k < nr && strcmp(r[k].name, o[i].rev)) k++;
        if (k == nr) r[nr++] = (kh_hist_rev){.name = o[i].rev, .first = o[i].when};
        r[k].n++;
    }
    for (int k = 0, at = 0; k < nr; k++) r[k].x = xs + at, r[k].where = where + at, at += r[k].n, r[k].n = 0;
    for (int i = 0; i < n; i++) {
        int k = 0;
        while (strcmp(r[k].name, o[i].rev)) k++;
        r[k].where[r[k].n] = o[i].where;
        r[k].x[r[k].n++] = o[i].v;
    }
    int in_git = git != NULL;
    for (int k = 0; in_git && k < nr; k++) in_git = git_index(git, r[k].name) >= 0;
    if (in_git) { /* every revision is in the repository: its commit order */
        sort_git = git;
        qsort(r, (size_t)nr, sizeof *r, cmp_git_rev);
    }
    for (int k = 0; k < nr; k++) {
        r[k].median = med[k] = kh_stats_median(r[k].x, r[k].n);
        if (kh_stats_median_ci(r[k].x, r[k].n, RESAMPLES, SEED, 0.95, &r[k].ci) != 0) *oom = 1;
    }
    char *save = NULL;
    kh_hist_series s = {.revs = r, .n_revs = nr, .steps = st, .changes = ch,
                        .order = in_git ? "commit order (--git)" : git ? "the order first measured (a revision is not in --git's repository)" : "the order first measured"};
    s.task = strtok_r(key, "\t", &save), s.plugin = strtok_r(NULL, "\t", &save);
    s.device = strtok_r(NULL, "\t", &save), s.kind = strtok_r(NULL, "\t", &save), s.machine = save ? save : "";
    int k = kh_steps_detect(med, NULL, nr, st);
    if (k < 0) {
        *oom = 1;
        goto out;
    }
    s.n_steps = k;
    double latest, best;
    int ng = kh_steps_regressions(st, k, threshold, 2, reg, &latest, &best);
    for (int j = 0; j + 1 < k; j++) {
        kh_hist_change *c = &ch[s.n_changes++];
        double ratio;
        int na = pool(r, st[j].left, st[j].right, a), nb = pool(r, st[j + 1].left, st[j + 1].right, b);
        if (kh_stats_ratio_unpaired(b, nb, a, na, RESAMPLES, SEED, 0.95, &ratio, &c->ci) != 0) *oom = 1;
        c->after = st[j].right;
        c->change = st[j + 1].value / st[j].value - 1;
        c->regression = 0;
        for (int g = 0; g < ng; g++) c->regression |= reg[g].before == st[j].right - 1;
        int sure = isfinite(c->ci.lo) && (c->ci.lo > 1 || c->ci.hi < 1);
        c->what = fabs(c->change) < threshold ? "below the threshold" : !sure ? "not significant"
                  : c->change > 0 ? "slower" : "faster";
        if (c->regression && sure && fail_above >= 0 && 100 * c->change > fail_above) fails++;
        c->confirm[0] = 0;
        if (cf && sure && fabs(c->change) >= threshold) kh_history_confirm(cf, &s, c, c->confirm, sizeof c->confirm);
    }
    print_text(&s);
    if (html) kh_history_page_series(html, &s, index);
out:
    free(r), free(xs), free(med), free(a), free(b), free(where), free(st), free(reg), free(ch), free(key);
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
    git_order git = {0};
    double threshold = 5, fail_above = -1;
    int confirm = 0;
    kh_hist_build builds[64];
    kh_hist_confirm cf = {.builds = builds, .rounds = 5, .steps = 30, .timeout_s = 1800};
    collect c = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc && argv[i + 1][0];
        char *end = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            history_usage(stdout);
            return KH_EXIT_OK;
        } else if (!strcmp(a, "--task") && has) c.task = argv[++i];
        else if (!strcmp(a, "--plugin") && has) c.plugin = argv[++i];
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
    kh_db *db = kh_db_open(file, 0, err, sizeof err);
    if (!db || kh_db_each_record(db, filters, add_record, &c, err, sizeof err) != 0 || c.oom) {
        free(git.rev);
        kh_esc_msg("khost: history: ", c.oom ? "out of memory" : err);
        kh_db_close(db);
        obs_free(&c);
        return KH_EXIT_IO;
    }
    kh_db_close(db);
    if (c.n > 1) qsort(c.v, (size_t)c.n, sizeof *c.v, cmp_obs);
    int n_series = 0, fails = 0, oom = 0;
    for (int i = 0; i < c.n;) {
        int j = i;
        while (j < c.n && !strcmp(c.v[j].series, c.v[i].series)) j++;
        n_series++, i = j;
    }
    fputs("# khost history: ", stdout);
    kh_esc_md(stdout, src);
    printf("\n\n%d series from %d repetition record(s). A series is one backend x task x device on one machine (CPU "
           "model, ISA, device, driver), step or epoch time; revisions in commit order with --git, else in the "
           "order first measured. Change points: "
           "asv's step detection (a penalised L1 piecewise-constant fit); a change's CI compares the repetitions of "
           "the two levels (percentile bootstrap, 95 %%); threshold %g %%.\n", n_series, c.n, threshold);
    kh_memfile page;
    FILE *pf = html ? kh_memfile_open(&page, html, err, sizeof err) : NULL;
    if (html && !pf) oom = 1;
    if (pf) kh_history_page_begin(pf, src, n_series, c.n, threshold);
    for (int i = 0, index = 1; i < c.n && !oom; index++) {
        int j = i;
        while (j < c.n && !strcmp(c.v[j].series, c.v[i].series)) j++;
        fails += one_series(c.v + i, j - i, threshold / 100, fail_above, pf, index, confirm ? &cf : NULL,
                            git_dir ? &git : NULL, &oom);
        i = j;
    }
    obs_free(&c);
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
