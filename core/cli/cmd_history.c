/* core/cli/cmd_history.c — `khost history DB[:filters] [--task T] [--plugin P] [--threshold PCT] [--fail-above
 * PCT]`: each cell's series across revisions, one machine per series, with its change points
 * (results/steps.h) and a CI for each change; exit 1 when a regression is above --fail-above. */
#define _GNU_SOURCE /* strdup */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "base/exitcodes.h"
#include "base/grow.h"
#include "cli/commands.h"
#include "results/resultsdb.h"
#include "results/stats.h"
#include "results/steps.h"

#define RESAMPLES 2000
#define SEED 20261207u

typedef struct obs {
    char *series; /* task \t plugin \t device \t kind \t machine */
    char rev[48], when[32];
    double v; /* seconds: a repetition's median step time, or its mean epoch time */
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

static int add_record(void *ctx, const char *machine, const char *text) {
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

static int cmp_obs(const void *a, const void *b) {
    const obs *x = a, *y = b;
    int c = strcmp(x->series, y->series);
    return c ? c : strcmp(x->when, y->when);
}

typedef struct rev {
    const char *name, *first;
    double *x;
    int n;
    double median;
    kh_ci ci;
} rev;

/* All values of revisions [a, b) pooled into out (room for every observation); their number. */
static int pool(const rev *r, int a, int b, double *out) {
    int m = 0;
    for (int i = a; i < b; i++)
        for (int j = 0; j < r[i].n; j++) out[m++] = r[i].x[j];
    return m;
}

/* One series: its table, levels and changes. Returns the number of regressions above fail_above (PCT). */
static int one_series(const obs *o, int n, double threshold, double fail_above, int *oom) {
    rev *r = calloc((size_t)n, sizeof *r);
    double *all = malloc((size_t)n * 2 * sizeof *all), *med = malloc((size_t)n * sizeof *med);
    kh_step *st = malloc((size_t)n * sizeof *st);
    kh_regression *reg = malloc((size_t)n * sizeof *reg);
    int nr = 0, fails = 0;
    if (!r || !all || !med || !st || !reg) {
        *oom = 1;
        goto out;
    }
    double *xs = all + n; /* values grouped by revision, in order of each revision's first measurement */
    for (int i = 0; i < n; i++) {
        int k = 0;
        while (k < nr && strcmp(r[k].name, o[i].rev)) k++;
        if (k == nr) r[nr++] = (rev){.name = o[i].rev, .first = o[i].when};
        r[k].n++;
    }
    for (int k = 0, at = 0; k < nr; k++) r[k].x = xs + at, at += r[k].n, r[k].n = 0;
    for (int i = 0; i < n; i++) {
        int k = 0;
        while (strcmp(r[k].name, o[i].rev)) k++;
        r[k].x[r[k].n++] = o[i].v;
    }
    char *save = NULL, *key = strdup(o[0].series);
    if (!key) {
        *oom = 1;
        goto out;
    }
    const char *task = strtok_r(key, "\t", &save), *plugin = strtok_r(NULL, "\t", &save);
    const char *device = strtok_r(NULL, "\t", &save), *kind = strtok_r(NULL, "\t", &save);
    const char *machine = save ? save : "";
    printf("\n## %s · %s · %s (%s time)\n\nmachine: ", task, plugin, device, kind);
    kh_esc_md(stdout, machine);
    printf("\n\n| # | revision | first measured | n | median (ms) | 95 %% CI (ms) |\n|---:|---|---|---:|---:|---|\n");
    for (int k = 0; k < nr; k++) {
        r[k].median = med[k] = kh_stats_median(r[k].x, r[k].n);
        if (kh_stats_median_ci(r[k].x, r[k].n, RESAMPLES, SEED, 0.95, &r[k].ci) != 0) *oom = 1;
        printf("| %d | ", k + 1);
        kh_esc_md(stdout, r[k].name);
        printf(" | %s | %d | %.4g | ", r[k].first, r[k].n, 1e3 * r[k].median);
        if (isfinite(r[k].ci.lo)) printf("%.4g … %.4g |\n", 1e3 * r[k].ci.lo, 1e3 * r[k].ci.hi);
        else printf("— |\n");
    }
    int k = kh_steps_detect(med, NULL, nr, st);
    if (k < 0) {
        *oom = 1;
        free(key);
        goto out;
    }
    double latest, best;
    int ng = kh_steps_regressions(st, k, threshold, 2, reg, &latest, &best);
    printf("\nlevels:");
    for (int j = 0; j < k; j++)
        printf("%s revisions %d–%d %.4g ms", j ? ";" : "", st[j].left + 1, st[j].right, 1e3 * st[j].value);
    printf("\n");
    for (int j = 0; j + 1 < k; j++) {
        double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b), ratio;
        kh_ci ci = {0};
        if (!a || !b) {
            free(a), free(b);
            *oom = 1;
            break;
        }
        int na = pool(r, st[j].left, st[j].right, a), nb = pool(r, st[j + 1].left, st[j + 1].right, b);
        if (kh_stats_ratio_unpaired(b, nb, a, na, RESAMPLES, SEED, 0.95, &ratio, &ci) != 0) *oom = 1;
        double change = st[j + 1].value / st[j].value - 1;
        int gating = 0;
        for (int g = 0; g < ng; g++) gating |= reg[g].before == st[j].right - 1;
        int sure = isfinite(ci.lo) && (ci.lo > 1 || ci.hi < 1);
        const char *what = fabs(change) < threshold ? "below the threshold" : !sure ? "not significant"
                           : change > 0 ? "slower" : "faster";
        printf("change after revision %d (", st[j].right);
        kh_esc_md(stdout, r[st[j].right - 1].name);
        fputs(" → ", stdout);
        kh_esc_md(stdout, r[st[j + 1].left].name);
        printf("): %+.1f %%", 100 * change);
        if (isfinite(ci.lo)) printf(" [%+.1f, %+.1f]", 100 * (ci.lo - 1), 100 * (ci.hi - 1));
        printf(" %s%s\n", what, gating ? ": a regression (the latest level is above the best)" : "");
        if (gating && sure && fail_above >= 0 && 100 * change > fail_above) fails++;
        free(a), free(b);
    }
    if (k <= 1) printf("no change point\n");
    free(key);
out:
    free(r), free(all), free(med), free(st), free(reg);
    return fails;
}

static void history_usage(FILE *f) {
    fputs("usage: khost history DB[:filters] [--task T] [--plugin P] [--threshold PCT] [--fail-above PCT]\n"
          "  each backend x task x device x machine of the results database DB (khost db import) as a series of\n"
          "  revisions in the order they were first measured: per revision the median of its repetitions and a\n"
          "  95 % bootstrap CI; the series' levels and change points (asv's step detection), each change with\n"
          "  its size and a 95 % CI. A series never mixes machines (CPU model, ISA, device, driver) or step and\n"
          "  epoch times. --threshold: smallest change reported as one (default 5). --fail-above PCT: exit 1\n"
          "  when a regression (a change that leaves the latest level above the best) is larger than PCT and\n"
          "  significant. filters as for report: set=, rev=, machine=, since=, until=.\n",
          f);
}

int kh_cmd_history(int argc, char **argv) {
    const char *src = NULL;
    double threshold = 5, fail_above = -1;
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
    const char *filters = kh_db_source(src, file, sizeof file);
    if (!filters) {
        fputs("khost: history: ", stderr);
        kh_esc_line(stderr, src);
        fputs(": not a results database (khost db import makes one)\n", stderr);
        return KH_EXIT_IO;
    }
    kh_db *db = kh_db_open(file, 0, err, sizeof err);
    if (!db || kh_db_each_record(db, filters, add_record, &c, err, sizeof err) != 0 || c.oom) {
        kh_esc_msg("khost: history: ", c.oom ? "out of memory" : err);
        kh_db_close(db);
        for (int i = 0; i < c.n; i++) free(c.v[i].series);
        free(c.v);
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
           "model, ISA, device, driver), step or epoch time; revisions in the order first measured. Change points: "
           "asv's step detection (a penalised L1 piecewise-constant fit); a change's CI compares the repetitions of "
           "the two levels (percentile bootstrap, 95 %%); threshold %g %%.\n", n_series, c.n, threshold);
    for (int i = 0; i < c.n && !oom;) {
        int j = i;
        while (j < c.n && !strcmp(c.v[j].series, c.v[i].series)) j++;
        fails += one_series(c.v + i, j - i, threshold / 100, fail_above, &oom);
        i = j;
    }
    for (int i = 0; i < c.n; i++) free(c.v[i].series);
    free(c.v);
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
