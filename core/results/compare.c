/* core/results/compare.c — the cells of two result folders and their verdicts (compare.h). */
#include "results/compare.h"

#include <cjson/cJSON.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/escape.h"
#include "base/grow.h"
#include "results/results.h"
#include "results/resultsdb.h"
#include "results/setfile.h"

const char *const kh_verdict_name[KH_V_N] = {"faster", "slower", "unchanged", "too noisy to tell", "inconclusive",
                                             "missing"};

void kh_cmp_side_free(kh_cmp_side *s) {
    for (int i = 0; i < s->n; i++) kh_cell_stats_free(&s->c[i].st);
    free(s->c);
    memset(s, 0, sizeof *s);
}

static int cmp_cell(const void *a, const void *b) {
    const kh_cmp_cell *x = a, *y = b;
    int c = strcmp(x->task, y->task);
    return c ? c : strcmp(x->base, y->base);
}

/* The cells of one task folder (dir/task, or dir itself with task "" for a one-task folder). */
static int side_scan_folder(kh_cmp_side *s, const char *folder, const char *task, char *err, size_t errlen) {
    kh_cell_files l;
    if (kh_cell_files_read(folder, &l, err, errlen) != 0) return -1;
    if (l.n_odd) {
        fprintf(stderr, "khost: compare: skipped %d file(s) in ", l.n_odd);
        kh_esc_line(stderr, folder);
        kh_esc_msg(" not named like a record (<plugin>__<device>[.rep<k>].json of " KH_RECORD_NAME_CHARS "), "
                   "the first: ", l.odd);
    }
    int rc = 0;
    for (int i = 0; i < l.n && rc == 0; i = kh_cell_files_run_end(&l, i)) {
        if (s->n == s->cap) {
            kh_cmp_cell *nc = kh_grow(s->c, &s->cap, sizeof *nc, 32);
            if (!nc) {
                snprintf(err, errlen, "%s: out of memory", folder);
                rc = -1;
                break;
            }
            s->c = nc;
        }
        kh_cmp_cell *c = &s->c[s->n];
        snprintf(c->task, sizeof c->task, "%s", task);
        snprintf(c->base, sizeof c->base, "%.*s", l.v[i].base_len, l.v[i].name);
        if (kh_cell_stats_load_run(folder, &l, i, 0, &c->st, err, errlen) != 0) {
            rc = -1;
            break;
        }
        s->n++;
        for (int k = 0; k < c->st.n_reps; k++)
            if (c->st.reps[k].record_version > KH_RECORD_VERSION) {
                char path[4400], text[4600];
                snprintf(path, sizeof path, "%s/%s", folder, c->st.reps[k].file);
                kh_record_newer_text(path, c->st.reps[k].record_version, text, sizeof text);
                kh_esc_msg("khost: compare: warning: ", text);
            }
    }
    kh_cell_files_free(&l);
    return rc;
}

/* The next task folder name of s->dir: from its pack when it is packed (setfile.h), else from the folder. */
static const char *next_name(DIR *d, char **packed, int *i) {
    if (packed) return packed[*i] ? packed[(*i)++] : NULL;
    struct dirent *e = readdir(d);
    return e ? e->d_name : NULL;
}

int kh_cmp_side_scan(kh_cmp_side *s, char *err, size_t errlen) {
    int packed = kh_results_mount(s->dir, err, errlen), n_packed = 0, oom = 0, at = 0;
    if (packed < 0) return -1;
    if (packed && kh_set_loose_folders(s->dir) > 0)
        kh_esc_msg("khost: compare: warning: its records are read from " KH_SETFILE_NAME " only; the task folders "
                   "beside it are not read (khost pack them in again): ", s->dir);
    char **names = packed ? kh_set_names(s->dir, 1, &n_packed, &oom) : NULL;
    DIR *d = packed ? NULL : opendir(s->dir);
    if ((packed && !names) || (!packed && !d)) {
        snprintf(err, errlen, "%s: cannot read: %s", s->dir, packed ? "out of memory" : strerror(errno));
        return -1;
    }
    int rc = side_scan_folder(s, s->dir, "", err, errlen);
    const char *name;
    while (rc == 0 && (name = next_name(d, names, &at))) {
        if (name[0] == '.' || !strcmp(name, "slurm")) continue;
        char path[4096];
        struct stat st;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", s->dir, name) >= sizeof path) continue;
        if (!packed && (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))) continue;
        if (!kh_record_name_ok(name, sizeof s->c->task - 1)) { /* a task is a name (results.h) */
            fputs("khost: compare: skipped the folder ", stderr);
            kh_esc_line(stderr, path);
            fputs(" (a task folder's name is 1 to 127 of " KH_RECORD_NAME_CHARS ")\n", stderr);
            continue;
        }
        rc = side_scan_folder(s, path, name, err, errlen);
    }
    if (d) closedir(d);
    kh_set_names_free(names);
    if (rc == 0 && s->n > 1) qsort(s->c, (size_t)s->n, sizeof *s->c, cmp_cell);
    return rc;
}

static const kh_cmp_cell *find_cell(const kh_cmp_side *s, const char *task, const char *base) {
    kh_cmp_cell key;
    snprintf(key.task, sizeof key.task, "%s", task);
    snprintf(key.base, sizeof key.base, "%s", base);
    return s->n ? bsearch(&key, s->c, (size_t)s->n, sizeof *s->c, cmp_cell) : NULL; /* side_scan sorted them */
}

/* "plugin__cuda0" -> plugin "plugin", device "cuda:0". */
void kh_cmp_split_base(const char *base, char *plugin, size_t pn, char *device, size_t dn) {
    const char *sep = strstr(base, "__");
    if (!sep) {
        snprintf(plugin, pn, "%s", base);
        snprintf(device, dn, "?");
        return;
    }
    snprintf(plugin, pn, "%.*s", (int)(sep - base), base);
    const char *dev = sep + 2;
    if (!strncmp(dev, "cuda", 4) && dev[4] >= '0' && dev[4] <= '9') snprintf(device, dn, "cuda:%s", dev + 4);
    else snprintf(device, dn, "%s", dev);
}

cJSON *kh_cmp_json_cell(cJSON *cells, const char *task, const char *base) {
    char plugin[256], device[64];
    kh_cmp_split_base(base, plugin, sizeof plugin, device, sizeof device);
    cJSON *c = cJSON_CreateObject();
    if (!c) return NULL;
    cJSON_AddItemToArray(cells, c);
    cJSON_AddStringToObject(c, "task", task);
    cJSON_AddStringToObject(c, "plugin", plugin);
    cJSON_AddStringToObject(c, "device", device);
    return c;
}

/* How many of c's finished repetitions (a value of kind: 0 epoch, 1 step) were taken under noise; *finished gets
 * their count. */
static int noisy_reps(const kh_cell_stats *c, int kind, int *finished) {
    int n = 0, q = 0;
    for (int i = 0; i < c->n_reps; i++) {
        const kh_rep *r = &c->reps[i];
        if (!isfinite(kind ? r->step_s : r->epoch_s)) continue;
        n++;
        q += kh_rep_noisy(r);
    }
    *finished = n;
    return q;
}

/* The "too noisy to tell" rules (compare.h) over a cell whose verdict is faster, slower or unchanged: r->v and
 * r->why replaced when one applies, naming the side and the rule. */
static void too_noisy(const kh_cmp_cell *b, const kh_cmp_cell *n, const kh_cmp_rule *ru, double change, kh_cmp_row *r) {
    int fb, fn, qb = noisy_reps(&b->st, r->kind, &fb), qn = noisy_reps(&n->st, r->kind, &fn);
    if (2 * qb > fb || 2 * qn > fn) {
        int new_side = 2 * qn > fn && (2 * qb <= fb || qn * fb >= qb * fn); /* the noisier, when both are */
        r->v = KH_V_NOISY;
        snprintf(r->why, sizeof r->why,
                 "%d of %s's %d finished repetitions were taken under noise (other processes above %.2g cores or "
                 "steal above %.0f %% over %.0f s or more)%s",
                 new_side ? qn : qb, new_side ? "NEW" : "BASE", new_side ? fn : fb, KH_NOISE_OTHER_CORES,
                 KH_NOISE_STEAL_PCT, KH_NOISE_MIN_WINDOW_S,
                 2 * qb > fb && 2 * qn > fn ? ", and a majority of the other side's too" : "");
        return;
    }
    double effect = ru->have_fail && ru->fail_above > ru->noise ? ru->fail_above : ru->noise;
    int open = r->v == KH_V_UNCHANGED || (r->v == KH_V_SLOWER && ru->have_fail && change <= ru->fail_above);
    if (!(r->halfwidth > effect) || !open) return;
    const kh_rep_stats *sb = r->kind ? &b->st.step : &b->st.epoch, *sn = r->kind ? &n->st.step : &n->st.epoch;
    double cb = 100 * sb->s.cv, cn = 100 * sn->s.cv;
    int new_side = !(cb > cn);
    r->v = KH_V_NOISY;
    snprintf(r->why, sizeof r->why,
             "the verdict interval's half-width, %.1f %%, is wider than the effect asked about, %s %g %%; %s's "
             "repetitions vary most (CV %.1f %%, %s's %.1f %%)",
             r->halfwidth, ru->have_fail && ru->fail_above > ru->noise ? "--fail-above" : "the noise threshold",
             effect, new_side ? "NEW" : "BASE", new_side ? cn : cb, new_side ? "BASE" : "NEW", new_side ? cb : cn);
}

static void compare_cell(const kh_cmp_cell *b, const kh_cmp_cell *n, const kh_cmp_rule *ru, kh_cmp_row *r) {
    double noise = ru->noise, fail_above = ru->fail_above;
    int have_fail = ru->have_fail;
    r->ratio = r->mb = r->mn = r->halfwidth = NAN;
    r->ci.lo = r->ci.hi = NAN;
    r->ci.resamples = KH_STATS_RESAMPLES;
    r->ci.seed = KH_STATS_SEED;
    r->ci.level = KH_STATS_LEVEL;
    r->why[0] = 0;
    r->fails = r->cannot = 0;
    r->both = b && n;
    if (!r->both) {
        r->v = KH_V_MISSING;
        snprintf(r->why, sizeof r->why, "only in %s", b ? "BASE" : "NEW");
        return;
    }
    /* from here on the cell is in both sets: whatever stops a verdict stops the gate too */
    r->cannot = 1;
    char diff[120];
    const kh_rep *odd_b = kh_cell_stats_impossible(&b->st), *odd = odd_b ? odd_b : kh_cell_stats_impossible(&n->st);
    if (odd) {
        r->v = KH_V_INCONCLUSIVE;
        snprintf(r->why, sizeof r->why, "impossible times in %s: %s: %s", odd_b ? "BASE" : "NEW", odd->file,
                 odd->impossible);
        return;
    }
    if (b->st.n_reps && n->st.n_reps &&
        kh_rep_settings_differ(&b->st.reps[b->st.rep_file].set, &n->st.reps[n->st.rep_file].set, diff, sizeof diff)) {
        r->v = KH_V_INCONCLUSIVE;
        snprintf(r->why, sizeof r->why, "measured with other settings: %s (BASE and NEW)", diff);
        return;
    }
    r->kind = b->st.step.n > 0 && n->st.step.n > 0;
    const kh_rep_stats *sb = r->kind ? &b->st.step : &b->st.epoch, *sn = r->kind ? &n->st.step : &n->st.epoch;
    r->nb = sb->n;
    r->nn = sn->n;
    r->mb = sb->s.median;
    r->mn = sn->s.median;
    if (sb->n == 0 || sn->n == 0) {
        const kh_cell_stats *bad = sb->n == 0 ? &b->st : &n->st;
        r->v = KH_V_MISSING;
        snprintf(r->why, sizeof r->why, "no finished repetition in %s (%s)", sb->n == 0 ? "BASE" : "NEW",
                 bad->n_reps ? bad->reps[0].status : "no record");
        return;
    }
    int cap = b->st.n_reps > n->st.n_reps ? b->st.n_reps : n->st.n_reps;
    double *vb = malloc((size_t)cap * sizeof *vb), *vn = malloc((size_t)cap * sizeof *vn);
    if (!vb || !vn) {
        free(vb);
        free(vn);
        r->v = KH_V_INCONCLUSIVE;
        snprintf(r->why, sizeof r->why, "out of memory");
        return;
    }
    int nb = kh_cell_stats_values(&b->st, r->kind, vb), nn = kh_cell_stats_values(&n->st, r->kind, vn);
    int rc = kh_stats_ratio_unpaired(vn, nn, vb, nb, KH_STATS_RESAMPLES, KH_STATS_SEED, KH_STATS_LEVEL, &r->ratio,
                                     &r->ci);
    r->vci = r->ci;
    double vratio;
    if (rc == 0 && ru->level > KH_STATS_LEVEL)
        rc = kh_stats_ratio_unpaired(vn, nn, vb, nb, KH_STATS_RESAMPLES, KH_STATS_SEED, ru->level, &vratio, &r->vci);
    free(vb);
    free(vn);
    double change = 100 * (r->ratio - 1);
    if (rc != 0) {
        r->v = KH_V_INCONCLUSIVE;
        snprintf(r->why, sizeof r->why, "out of memory");
    } else if (nb < 2 || nn < 2) {
        r->v = KH_V_INCONCLUSIVE;
        snprintf(r->why, sizeof r->why, "fewer than 2 finished repetitions in %s", nb < 2 ? "BASE" : "NEW");
    } else if (r->vci.lo <= 1 && 1 <= r->vci.hi) {
        r->v = KH_V_UNCHANGED;
        snprintf(r->why, sizeof r->why, "not significant (the verdict interval contains 1)");
    } else if (100 * (r->vci.lo - 1) > noise) {
        r->v = KH_V_SLOWER;
    } else if (100 * (r->vci.hi - 1) < -noise) {
        r->v = KH_V_FASTER;
    } else {
        r->v = KH_V_UNCHANGED;
        snprintf(r->why, sizeof r->why, fabs(change) <= noise ? "within the noise threshold"
                                                              : "the verdict interval reaches into the noise threshold");
    }
    r->halfwidth = isfinite(r->vci.lo) && isfinite(r->vci.hi) ? 100 * (r->vci.hi - r->vci.lo) / 2 : NAN;
    if (r->v == KH_V_FASTER || r->v == KH_V_SLOWER || r->v == KH_V_UNCHANGED) too_noisy(b, n, ru, change, r);
    r->cannot = r->v == KH_V_INCONCLUSIVE || r->v == KH_V_NOISY;
    if (r->v == KH_V_SLOWER && have_fail && change > fail_above) {
        r->fails = 1;
        snprintf(r->why, sizeof r->why, "slower by more than --fail-above %g %%", fail_above);
    }
}

/* One row per cell of either side (BASE's order, then what only NEW has), by ru as it stands. */
static int fill_rows(const kh_cmp_side *s, const kh_cmp_rule *ru, kh_cmp_row *rows) {
    int nr = 0;
    for (int i = 0; i < s[0].n; i++) {
        const kh_cmp_cell *b = &s[0].c[i], *n = find_cell(&s[1], b->task, b->base);
        memset(&rows[nr], 0, sizeof rows[nr]);
        rows[nr].task = b->task;
        rows[nr].base = b->base;
        compare_cell(b, n, ru, &rows[nr]);
        nr++;
    }
    for (int i = 0; i < s[1].n; i++) {
        const kh_cmp_cell *n = &s[1].c[i];
        if (find_cell(&s[0], n->task, n->base)) continue;
        memset(&rows[nr], 0, sizeof rows[nr]);
        rows[nr].task = n->task;
        rows[nr].base = n->base;
        compare_cell(NULL, n, ru, &rows[nr]);
        nr++;
    }
    return nr;
}


int kh_cmp_fill(const kh_cmp_side s[2], kh_cmp_rule *ru, kh_cmp_row *rows) {
    /* first at 95 % to count the cells an interval can be formed for, then at the family-wise level */
    ru->m = 0;
    ru->level = KH_STATS_LEVEL;
    int nr = fill_rows(s, ru, rows);
    for (int i = 0; i < nr; i++) ru->m += rows[i].v != KH_V_MISSING && rows[i].v != KH_V_INCONCLUSIVE;
    if (ru->m > 1) {
        ru->level = 1 - (1 - KH_STATS_LEVEL) / ru->m;
        nr = fill_rows(s, ru, rows);
    }
    return nr;
}
