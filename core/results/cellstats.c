/* core/results/cellstats.c — a cell's repetition records read back, their per-repetition values, statistics and
 * warnings (cellstats.h), and the summary file the matrix writes after a cell's last repetition. */
#define _POSIX_C_SOURCE 200809L
#include "base/files.h"
#include "results/cellstats.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results/json_scan.h"
#include "results/results.h"

void kh_cell_stats_free(kh_cell_stats *c) {
    for (int i = 0; i < c->n_reps; i++) free(c->reps[i].steps);
    free(c->reps);
    memset(c, 0, sizeof *c);
}

/* An integer member of o, or -1 when absent or not a number. */
static int64_t int_or_unknown(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) ? (int64_t)v->valuedouble : -1;
}

static void read_settings(const cJSON *o, const cJSON *samples, kh_rep_settings *s) {
    s->batch_size = int_or_unknown(o, "batch_size");
    s->train_samples = int_or_unknown(o, "train_samples");
    s->warmup_steps = int_or_unknown(samples, "warmup_steps");
    s->steps_per_epoch = int_or_unknown(samples, "steps_per_epoch");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "math");
    snprintf(s->math, sizeof s->math, "%s", cJSON_IsString(m) ? m->valuestring : "");
}

/* Why the times of an "ok" record cannot be true, into why (empty when they can): no positive finite epoch
 * time, a step of 0 s, or a step longer than the repetition's epochs together. */
static void check_times(const cJSON *mean, const cJSON *epochs, const double *steps, int n, char *why, size_t len) {
    why[0] = 0;
    if (!cJSON_IsNumber(mean) || !isfinite(mean->valuedouble) || mean->valuedouble <= 0) {
        snprintf(why, len, "no positive mean_epoch_s");
        return;
    }
    double total = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, epochs) total += cJSON_IsNumber(e) ? e->valuedouble : 0;
    for (int i = 0; i < n; i++)
        if (steps[i] <= 0 || (total > 0 && steps[i] > total)) {
            snprintf(why, len, "samples.step_s[%d] = %g s, %s", i, steps[i],
                     steps[i] <= 0 ? "a step of no time" : "longer than the repetition's epochs together");
            return;
        }
}

/* An environment value that is a finite number (they are strings there); NAN otherwise. */
static double env_number(const cJSON *env, const char *key) {
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(env, key));
    char *end = NULL;
    double x = v && *v ? strtod(v, &end) : NAN;
    return end && !*end && isfinite(x) ? x : NAN;
}

/* An environment value as text; NULL when absent or not a string. */
static const char *env_string(const cJSON *env, const char *key) {
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(env, key));
}

/* One record file into rep. -1 with err naming the file and field. */
static int read_rep(const char *path, kh_rep *rep, char *step_sync, size_t sslen, char *err, size_t errlen) {
    kh_json_int seed = {.path = "seed"};
    cJSON *o = kh_record_json_read(path, &seed, 1, &rep->record_version, err, errlen);
    if (!o) return -1;
    int rc = -1;
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "status");
    if (!cJSON_IsString(st)) {
        snprintf(err, errlen, "%s: field \"status\" missing or of the wrong type", path);
        goto done;
    }
    snprintf(rep->status, sizeof rep->status, "%s", st->valuestring);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "mean_epoch_s");
    int ok = !strcmp(rep->status, "ok");
    if (seed.found < 0) { /* seeds are exact integers (json_scan.h), as kh_record_read has them */
        snprintf(err, errlen, "%s: field \"seed\" is not an integer from 0 to 2^64 - 1", path);
        goto done;
    }
    rep->seed = seed.found ? seed.v : 0;
    rep->seed_known = seed.found > 0;
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(o, "metric");
    const cJSON *mv = cJSON_GetObjectItemCaseSensitive(o, "metric_value");
    snprintf(rep->metric_name, sizeof rep->metric_name, "%s", cJSON_IsString(mn) ? mn->valuestring : "");
    rep->metric = ok && cJSON_IsNumber(mv) && isfinite(mv->valuedouble) ? mv->valuedouble : NAN;
    const cJSON *tt = cJSON_GetObjectItemCaseSensitive(o, "time_to_target_s");
    rep->time_to_target_s = cJSON_IsNumber(tt) && isfinite(tt->valuedouble) ? tt->valuedouble : NAN;
    char note[8];
    if (kh_record_target_read(o, &rep->target, &rep->target_is_max, &rep->epochs_to_target, note, sizeof note, path,
                              err, errlen) != 0)
        goto done;
    rep->epoch_s = ok && cJSON_IsNumber(m) && m->valuedouble > 0 ? m->valuedouble : NAN;
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "repeat");
    const cJSON *rr = cJSON_GetObjectItemCaseSensitive(r, "round");
    if (cJSON_IsNumber(rr) && rr->valuedouble >= 1 && rr->valuedouble < 1e9) rep->round = (int)rr->valuedouble;
    const cJSON *samples = cJSON_GetObjectItemCaseSensitive(o, "samples");
    if (samples && !cJSON_IsObject(samples)) {
        snprintf(err, errlen, "%s: field \"samples\" is not an object", path);
        goto done;
    }
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(samples, "step_s"), *e;
    if (steps && !cJSON_IsArray(steps)) {
        snprintf(err, errlen, "%s: field \"samples.step_s\" is not an array", path);
        goto done;
    }
    const cJSON *sync = cJSON_GetObjectItemCaseSensitive(samples, "step_sync");
    if (cJSON_IsString(sync) && step_sync && !step_sync[0]) snprintf(step_sync, sslen, "%s", sync->valuestring);
    int n = cJSON_GetArraySize(steps);
    if (n > 0) {
        rep->steps = malloc((size_t)n * sizeof *rep->steps);
        if (!rep->steps) {
            snprintf(err, errlen, "%s: out of memory", path);
            goto done;
        }
        int i = 0;
        cJSON_ArrayForEach(e, steps) {
            if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || e->valuedouble < 0) {
                snprintf(err, errlen, "%s: field \"samples.step_s\"[%d] is not a time in seconds", path, i);
                goto done;
            }
            rep->steps[i++] = e->valuedouble;
        }
        rep->n_steps = n;
        if (ok) rep->step_s = kh_stats_median(rep->steps, n);
    }
    read_settings(o, samples, &rep->set);
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(o, "environment");
    rep->other_cores = env_number(env, "noise_other_cores");
    rep->steal_pct = env_number(env, "noise_steal_pct");
    rep->noise_window_s = env_number(env, "noise_window_s");
    const cJSON *dev = cJSON_GetObjectItemCaseSensitive(o, "device");
    kh_identity_set(&rep->id, cJSON_GetStringValue(dev), env_string(env, "cpu_model"), env_string(env, "cpu_isa"),
                    env_string(env, "device_name"), env_string(env, "khost_version"), env_string(env, "git_rev"),
                    env_string(env, "reference"));
    if (ok) check_times(m, cJSON_GetObjectItemCaseSensitive(samples, "epoch_s"), rep->steps, rep->n_steps,
                        rep->impossible, sizeof rep->impossible);
    if (rep->impossible[0]) rep->epoch_s = rep->step_s = NAN; /* never a value of any statistic */
    rc = 0;
done:
    cJSON_Delete(o);
    return rc;
}

/* A repetition's value of one kind: 0 its mean epoch time, 1 its median step time. */
static double rep_value(const kh_rep *r, int kind) { return kind ? r->step_s : r->epoch_s; }

static void rep_stats(kh_cell_stats *c, int kind, int with_ci, kh_rep_stats *o) {
    memset(o, 0, sizeof *o);
    kh_stats_summary(NULL, 0, &o->s); /* all NAN */
    o->ci.lo = o->ci.hi = NAN;
    double *v = malloc((size_t)(c->n_reps ? c->n_reps : 1) * sizeof *v);
    double *z = malloc((size_t)(c->n_reps ? c->n_reps : 1) * sizeof *z);
    int *flag = malloc((size_t)(c->n_reps ? c->n_reps : 1) * sizeof *flag);
    if (!v || !z || !flag) goto out;
    int n = kh_cell_stats_values(c, kind, v);
    o->n = n;
    if (n == 0) goto out;
    kh_stats_summary(v, n, &o->s);
    if (with_ci) kh_stats_median_ci(v, n, KH_STATS_RESAMPLES, KH_STATS_SEED, KH_STATS_LEVEL, &o->ci);
    o->n_outliers = kh_stats_outliers(v, n, z, flag);
    for (int i = 0, j = 0; i < c->n_reps; i++) {
        kh_rep *r = &c->reps[i];
        double x = rep_value(r, kind);
        if (!isfinite(x)) continue;
        if (kind) r->step_z = z[j], r->step_outlier = flag[j];
        else r->epoch_z = z[j], r->epoch_outlier = flag[j];
        j++;
    }
    o->warn = kh_stats_warnings(v, n, KH_STATS_CV_WARN, o->warnings, sizeof o->warnings);
    if (o->warn < 0) o->warn = 0;
out:
    free(v);
    free(z);
    free(flag);
}

const kh_rep *kh_cell_stats_impossible(const kh_cell_stats *c) {
    for (int i = 0; i < c->n_reps; i++)
        if (c->reps[i].impossible[0]) return &c->reps[i];
    return NULL;
}

int kh_rep_settings_differ(const kh_rep_settings *a, const kh_rep_settings *b, char *why, size_t n) {
    const struct { const char *name; int64_t x, y; } f[] = {{"batch_size", a->batch_size, b->batch_size},
                                                            {"train_samples", a->train_samples, b->train_samples},
                                                            {"warmup_steps", a->warmup_steps, b->warmup_steps},
                                                            {"steps_per_epoch", a->steps_per_epoch, b->steps_per_epoch}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].x >= 0 && f[i].y >= 0 && f[i].x != f[i].y) {
            snprintf(why, n, "%s %lld and %lld", f[i].name, (long long)f[i].x, (long long)f[i].y);
            return 1;
        }
    if (a->math[0] && b->math[0] && strcmp(a->math, b->math)) {
        snprintf(why, n, "math %s and %s", a->math, b->math);
        return 1;
    }
    return 0;
}

int kh_cell_stats_values(const kh_cell_stats *c, int kind, double *v) {
    int n = 0;
    for (int i = 0; i < c->n_reps; i++) {
        double x = rep_value(&c->reps[i], kind);
        if (isfinite(x)) v[n++] = x;
    }
    return n;
}

/* y's repetitions with a value, ordered by round and then by position (so the first of a round comes first). */
typedef struct by_round {
    int round, j;
} by_round;

static int cmp_by_round(const void *a, const void *b) {
    const by_round *x = a, *y = b;
    return x->round != y->round ? (x->round > y->round) - (x->round < y->round) : (x->j > y->j) - (x->j < y->j);
}

int kh_cell_stats_pairs(const kh_cell_stats *x, const kh_cell_stats *y, int kind, double *a, double *b) {
    by_round *o = malloc((size_t)(y->n_reps ? y->n_reps : 1) * sizeof *o);
    int n = 0, m = 0;
    for (int j = 0; o && j < y->n_reps; j++)
        if (isfinite(rep_value(&y->reps[j], kind))) o[m++] = (by_round){y->reps[j].round, j};
    if (o) qsort(o, (size_t)m, sizeof *o, cmp_by_round);
    for (int i = 0; i < x->n_reps; i++) {
        double u = rep_value(&x->reps[i], kind);
        int r = x->reps[i].round, j = -1;
        if (!isfinite(u)) continue;
        if (o) { /* the first of round r by binary search */
            int lo = 0, hi = m;
            while (lo < hi) {
                int mid = lo + (hi - lo) / 2;
                if (o[mid].round < r) lo = mid + 1;
                else hi = mid;
            }
            if (lo < m && o[lo].round == r) j = o[lo].j;
        } else { /* out of memory for the index: the same match by a scan */
            for (int k = 0; k < y->n_reps && j < 0; k++)
                if (y->reps[k].round == r && isfinite(rep_value(&y->reps[k], kind))) j = k;
        }
        if (j < 0) continue;
        a[n] = u;
        b[n] = rep_value(&y->reps[j], kind);
        n++;
    }
    free(o);
    return n;
}

int kh_cell_stats_load_run(const char *dir, const kh_cell_files *l, int first, int with_ci, kh_cell_stats *c,
                           char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    if (first < 0) return 0;
    int end = kh_cell_files_run_end(l, first), rc = 0, classic = l->v[first].k == 0;
    int reps = end - first - classic; /* the classic record sorts first (k 0) */
    int n = reps > 0 ? reps : classic;
    if (!(c->reps = calloc((size_t)n, sizeof *c->reps))) {
        snprintf(err, errlen, "%s: out of memory", dir);
        return -1;
    }
    c->n_reps = n;
    for (int i = 0; i < n; i++) { /* an older single run, when there is no repetition, is one repetition */
        const kh_cell_file *f = &l->v[reps > 0 ? first + classic + i : first];
        c->reps[i].index = reps > 0 ? f->k : 1;
        snprintf(c->reps[i].file, sizeof c->reps[i].file, "%s", f->name);
    }
    for (int i = 0; rc == 0 && i < c->n_reps; i++) {
        kh_rep *r = &c->reps[i];
        r->round = r->index;
        r->epoch_s = r->step_s = r->epoch_z = r->step_z = NAN;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, r->file);
        if (read_rep(path, r, c->step_sync, sizeof c->step_sync, err, errlen) != 0) rc = -1;
        else if (strcmp(r->status, "ok")) c->n_failed++;
        else if (r->impossible[0]) c->n_impossible++;
    }
    if (rc != 0) {
        kh_cell_stats_free(c);
        return -1;
    }
    c->rep_file = 0;
    for (int i = c->n_reps - 1; i >= 0; i--)
        if (!strcmp(c->reps[i].status, "ok")) c->rep_file = i;
    rep_stats(c, 0, with_ci, &c->epoch);
    rep_stats(c, 1, with_ci, &c->step);
    return 0;
}

int kh_cell_stats_load(const char *dir, const char *base, kh_cell_stats *c, char *err, size_t errlen) {
    kh_cell_files l;
    memset(c, 0, sizeof *c);
    if (kh_cell_files_read(dir, &l, err, errlen) != 0) return -1;
    int rc = kh_cell_stats_load_run(dir, &l, kh_cell_files_find(&l, base), 1, c, err, errlen);
    kh_cell_files_free(&l);
    return rc;
}

// --- the summary file -----------------------------------------------------------------------------------
static cJSON *num_or_null(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

static cJSON *rep_stats_json(const kh_rep_stats *s, const char *unit) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddItemToObject(o, "value", cJSON_CreateString(unit));
    cJSON_AddNumberToObject(o, "n", s->n);
    struct { const char *k; double v; } f[] = {
        {"median", s->s.median}, {"mean", s->s.mean}, {"sd", s->s.sd}, {"q1", s->s.q1}, {"q3", s->s.q3},
        {"iqr", s->s.iqr}, {"mad", s->s.mad}, {"min", s->s.min}, {"max", s->s.max}, {"cv", s->s.cv},
        {"median_ci_lo", s->ci.lo}, {"median_ci_hi", s->ci.hi}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) cJSON_AddItemToObject(o, f[i].k, num_or_null(f[i].v));
    cJSON *b = cJSON_AddObjectToObject(o, "bootstrap");
    if (b) {
        cJSON_AddNumberToObject(b, "resamples", s->ci.resamples);
        char seed[32];
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)s->ci.seed);
        cJSON_AddStringToObject(b, "seed", seed); /* a string: a 64-bit seed does not fit a double */
        cJSON_AddNumberToObject(b, "level", s->ci.level);
        cJSON_AddStringToObject(b, "method", "percentile, resampling repetitions");
    }
    cJSON_AddNumberToObject(o, "outliers", s->n_outliers);
    cJSON *w = cJSON_AddArrayToObject(o, "warnings");
    if (w) {
        if (s->warn & KH_STATS_WARN_CV) cJSON_AddItemToArray(w, cJSON_CreateString("cv"));
        if (s->warn & KH_STATS_WARN_FIRST_OUTLIER) cJSON_AddItemToArray(w, cJSON_CreateString("first_repetition_outlier"));
    }
    cJSON_AddStringToObject(o, "warning_text", s->warnings);
    return o;
}

int kh_stats_write_cell_summary(const char *out_dir, const char *task, const char *plugin, const char *device,
                                char *err, size_t errlen) {
    char path[4096], dir[4096], base[512];
    kh_record_path(path, sizeof path, out_dir, task, plugin, device, "json");
    snprintf(dir, sizeof dir, "%s/%s", out_dir, task);
    const char *slash = strrchr(path, '/');
    snprintf(base, sizeof base, "%s", slash ? slash + 1 : path);
    base[strlen(base) - 5] = 0; /* ".json" */
    kh_cell_stats c;
    if (kh_cell_stats_load(dir, base, &c, err, errlen) != 0) return -1;
    if (c.n_reps == 0) {
        snprintf(err, errlen, "%s/%s[.rep<k>].json: no record of %s x %s x %s", dir, base, plugin, task, device);
        kh_cell_stats_free(&c);
        return -1;
    }
    kh_record_path(path, sizeof path, out_dir, task, plugin, device, "stats.json");
    int rc = -1;
    cJSON *o = cJSON_CreateObject();
    if (!o) goto oom;
    cJSON_AddNumberToObject(o, "khost_stats", 1);
    cJSON_AddStringToObject(o, "plugin", plugin);
    cJSON_AddStringToObject(o, "task", task);
    cJSON_AddStringToObject(o, "device", device);
    cJSON_AddNumberToObject(o, "repetitions", c.n_reps);
    cJSON_AddNumberToObject(o, "failed", c.n_failed);
    cJSON_AddStringToObject(o, "unit", "repetition");
    if (c.step_sync[0]) cJSON_AddStringToObject(o, "step_sync", c.step_sync);
    cJSON *reps = cJSON_AddArrayToObject(o, "reps");
    for (int i = 0; reps && i < c.n_reps; i++) {
        const kh_rep *r = &c.reps[i];
        cJSON *x = cJSON_CreateObject();
        if (!x) goto oom;
        cJSON_AddItemToArray(reps, x);
        cJSON_AddNumberToObject(x, "index", r->index);
        cJSON_AddNumberToObject(x, "round", r->round);
        cJSON_AddStringToObject(x, "status", r->status);
        cJSON_AddStringToObject(x, "file", r->file);
        cJSON_AddItemToObject(x, "epoch_s", num_or_null(r->epoch_s));
        cJSON_AddItemToObject(x, "step_s_median", num_or_null(r->step_s));
        cJSON_AddNumberToObject(x, "steps", r->n_steps);
        cJSON_AddItemToObject(x, "epoch_z", num_or_null(r->epoch_z));
        cJSON_AddItemToObject(x, "step_z", num_or_null(r->step_z));
        cJSON_AddBoolToObject(x, "epoch_outlier", r->epoch_outlier);
        cJSON_AddBoolToObject(x, "step_outlier", r->step_outlier);
    }
    cJSON *ep = rep_stats_json(&c.epoch, "each repetition's mean epoch time (s)");
    cJSON *sp = rep_stats_json(&c.step, "each repetition's median step time (s)");
    if (!ep || !sp) {
        cJSON_Delete(ep);
        cJSON_Delete(sp);
        goto oom;
    }
    cJSON_AddItemToObject(o, "epoch_s", ep);
    cJSON_AddItemToObject(o, "step_s", sp);
    char *text = cJSON_Print(o);
    if (!text) goto oom;
    size_t tl = strlen(text);
    char *line = realloc(text, tl + 2);
    if (!line) {
        free(text);
        goto oom;
    }
    line[tl] = '\n';
    line[tl + 1] = 0;
    rc = kh_write_atomic(path, line, tl + 1, err, errlen);
    free(line);
    cJSON_Delete(o);
    kh_cell_stats_free(&c);
    return rc;
oom:
    snprintf(err, errlen, "%s: out of memory", path);
    cJSON_Delete(o);
    kh_cell_stats_free(&c);
    return -1;
}

int kh_rep_noisy(const kh_rep *r) {
    return r->noise_window_s >= KH_NOISE_MIN_WINDOW_S &&
           (r->other_cores > KH_NOISE_OTHER_CORES || r->steal_pct > KH_NOISE_STEAL_PCT);
}
