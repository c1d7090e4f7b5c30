/* core/results/history.c — each cell's series across revisions from a results database (history.h). */
#define _GNU_SOURCE /* strdup, asprintf */
#include "results/history.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "results/results.h"

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
    int is_step;
    double v = kh_record_json_value(o, &is_step); /* as the matrix and the database's cell history count it */
    const char *kind = is_step ? "step" : "epoch";
    /* names are names (a series key is split on tabs, and the text is shown): what report would refuse, skipped */
    int keep = !strcmp(str(o, "status"), "ok") && isfinite(v) && v > 0 && (!c->task || !strcmp(c->task, task)) &&
               (!c->plugin || !strcmp(c->plugin, plugin)) && kh_record_name_ok(task, 127) &&
               kh_record_name_ok(plugin, 127) && kh_record_name_ok(device, 31) && !strchr(machine, '\t');
    if (keep) {
        obs *nv = c->n == c->cap ? kh_grow(c->v, &c->cap, sizeof *nv, 256) : c->v;
        if (nv) c->v = nv; /* kh_grow may have moved it: kept before anything else can fail */
        char *key = NULL;
        if (!nv || asprintf(&key, "%s\t%s\t%s\t%s\t%s", task, plugin, device, kind, machine) < 0) {
            c->oom = 1;
            cJSON_Delete(o);
            return 1;
        }
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

/* A revision's place in the repository's order (by its first 7 digits, a suffix such as "-dirty" ignored), -1
 * when the repository does not have it. */
static int git_index(const kh_git_order *g, const char *rev) {
    for (int i = 0; i < g->n; i++)
        if (!strncmp(g->rev[i], rev, 7)) return i;
    return -1;
}

static const kh_git_order *sort_git; /* for cmp_git_rev: qsort has no context */
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

static int series_compute(const obs *o, int n, double threshold, const kh_git_order *git, kh_hist_series *s) {
    memset(s, 0, sizeof *s);
    kh_hist_rev *r = calloc((size_t)n, sizeof *r);
    double *xs = malloc((size_t)n * sizeof *xs), *med = malloc((size_t)n * sizeof *med);
    double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    const char **where = malloc((size_t)n * sizeof *where);
    kh_step *st = malloc((size_t)n * sizeof *st);
    kh_regression *reg = malloc((size_t)n * sizeof *reg);
    kh_hist_change *ch = malloc((size_t)n * sizeof *ch);
    char *key = strdup(o[0].series);
    int nr = 0, oom = 0;
    if (!r || !xs || !med || !a || !b || !where || !st || !reg || !ch || !key) {
        oom = 1;
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
        if (kh_stats_median_ci(r[k].x, r[k].n, RESAMPLES, SEED, 0.95, &r[k].ci) != 0) oom = 1;
    }
    char *save = NULL;
    *s = (kh_hist_series){.revs = r, .n_revs = nr, .steps = st, .changes = ch,
                          .order = in_git ? "commit order (--git)"
                                   : git  ? "the order first measured (a revision is not in --git's repository)"
                                          : "the order first measured",
                          .own = {r, xs, where, st, ch, key}};
    s->task = strtok_r(key, "\t", &save), s->plugin = strtok_r(NULL, "\t", &save);
    s->device = strtok_r(NULL, "\t", &save), s->kind = strtok_r(NULL, "\t", &save), s->machine = save ? save : "";
    int k = kh_steps_detect(med, NULL, nr, st);
    if (k < 0) {
        oom = 1;
        goto out;
    }
    s->n_steps = k;
    double latest, best;
    int ng = kh_steps_regressions(st, k, threshold, 2, reg, &latest, &best);
    for (int j = 0; j + 1 < k; j++) {
        kh_hist_change *c = &ch[s->n_changes++];
        double ratio;
        int na = pool(r, st[j].left, st[j].right, a), nb = pool(r, st[j + 1].left, st[j + 1].right, b);
        if (kh_stats_ratio_unpaired(b, nb, a, na, RESAMPLES, SEED, 0.95, &ratio, &c->ci) != 0) oom = 1;
        c->after = st[j].right;
        c->change = st[j + 1].value / st[j].value - 1;
        c->regression = 0;
        for (int g = 0; g < ng; g++) c->regression |= reg[g].before == st[j].right - 1;
        int sure = isfinite(c->ci.lo) && (c->ci.lo > 1 || c->ci.hi < 1);
        c->what = fabs(c->change) < threshold ? "below the threshold" : !sure ? "not significant"
                  : c->change > 0 ? "slower" : "faster";
        c->significant = sure && fabs(c->change) >= threshold;
        c->confirm[0] = 0;
    }
out:
    free(med), free(a), free(b), free(reg);
    if (!oom && s->revs) return 0;
    if (!s->revs) free(r), free(xs), free(where), free(st), free(ch), free(key); /* not handed over yet */
    else kh_hist_series_free(s);
    return -1;
}


void kh_hist_series_free(kh_hist_series *s) {
    for (int i = 0; i < 6; i++) free(s->own[i]);
    memset(s, 0, sizeof *s);
}

struct kh_history {
    collect c;
    int *start; /* series i is observations [start[i], start[i + 1]) */
    int n_series;
};

kh_history *kh_history_load(kh_db *db, const char *filters, const char *task, const char *plugin, char *err,
                            size_t errlen) {
    kh_history *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->c.task = task, h->c.plugin = plugin;
    if (kh_db_each_record(db, filters, add_record, &h->c, err, errlen) != 0 || h->c.oom) {
        if (h->c.oom) snprintf(err, errlen, "out of memory");
        kh_history_free(h);
        return NULL;
    }
    collect *c = &h->c;
    if (c->n > 1) qsort(c->v, (size_t)c->n, sizeof *c->v, cmp_obs);
    if (!(h->start = malloc(((size_t)c->n + 1) * sizeof *h->start))) {
        snprintf(err, errlen, "out of memory");
        kh_history_free(h);
        return NULL;
    }
    for (int i = 0; i < c->n;) {
        int j = i;
        while (j < c->n && !strcmp(c->v[j].series, c->v[i].series)) j++;
        h->start[h->n_series++] = i;
        i = j;
    }
    h->start[h->n_series] = c->n;
    return h;
}

int kh_history_n_series(const kh_history *h) { return h->n_series; }
int kh_history_n_records(const kh_history *h) { return h->c.n; }

int kh_history_series(const kh_history *h, int i, double threshold, const kh_git_order *git, kh_hist_series *s) {
    return series_compute(h->c.v + h->start[i], h->start[i + 1] - h->start[i], threshold, git, s);
}

void kh_history_free(kh_history *h) {
    if (!h) return;
    obs_free(&h->c);
    free(h->start);
    free(h);
}
