/* core/results/report/report_model.c — the results model every output of `khost report` shares: a folder's
 * records read and grouped by task (a cell of repetitions read as one, its statistics beside), the Slurm
 * plans' missing cells, the sort orders, and the formatting of times and compile times (report.h). */
#define _GNU_SOURCE /* strdup, open_memstream */
#include "base/grow.h"
#include "results/report/report.h"
#include "results/resultsdb.h"
#include "results/setfile.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sched/slurm/slurm.h"
#include "khost/kit/regular.h"

void kh_report_esc_note(FILE *f, const char *s, const char *open, const char *note, const char *close) {
    kh_esc_xml(f, s);
    if (!note || !note[0]) return;
    fputs(open, f);
    kh_esc_xml(f, note);
    fputs(close, f);
}

int kh_report_is_reference(const kh_cell_record *r) {
    const char *v = kh_record_get_env(r, "reference");
    return v && *v;
}

void kh_report_md_head(FILE *f, const kh_report_task *t) {
    fprintf(f, "| backend |");
    for (int d = 0; d < t->nd; d++) fprintf(f, " %s |", t->devices[d]);
    fprintf(f, "\n|---|");
    for (int d = 0; d < t->nd; d++) fprintf(f, "---:|");
    fprintf(f, "\n");
}

void kh_report_md_label(FILE *f, const kh_report_task *t, int p) {
    const kh_cell_record *any = NULL;
    for (int d = 0; d < t->nd && !any; d++) any = t->cells[p * t->nd + d];
    fprintf(f, "| %s%s |", t->plugins[p], any && kh_report_is_reference(any) ? " (reference)" : "");
}

void kh_report_html_head(FILE *f, const kh_report_task *t, const char *first) {
    fprintf(f, "<thead><tr><th>%s</th>", first);
    for (int d = 0; d < t->nd; d++) {
        fputs("<th>", f);
        kh_esc_xml(f, t->devices[d]);
        fputs("</th>", f);
    }
    fputs("</tr></thead>\n", f);
}

// --- formatting shared by the tables, the chart and the page ----------------------------------------------------------------------
void kh_report_fmt_seconds(double s, char *buf, size_t n) { kh_fmt_seconds(s, "n/a", buf, n); }

const char kh_report_compile_note[] =
    "compile: model-compile time before the first epoch (s); cold = code generated and compiled (cache miss), "
    "warm = loaded from the generated-code cache; — = unknown. Backends without generated code show one "
    "time: they compile in milliseconds.";

int kh_report_has_compile(const kh_report_task *t, int d) {
    for (int p = 0; p < t->np; p++) {
        const kh_cell_record *r = t->cells[p * t->nd + d];
        if (r && isfinite(r->compile_s)) return 1;
    }
    return 0;
}

/* A compile time: as the tables print seconds, but under a millisecond only "<0.001" (a backend without
 * generated code takes microseconds; more digits would be noise). */
static void fmt_compile_seconds(double s, char *buf, size_t n) {
    if (isfinite(s) && s < 0.001)
        snprintf(buf, n, "<0.001");
    else
        kh_report_fmt_seconds(s, buf, n);
}

void kh_report_fmt_compile(const kh_cell_record *r, char *buf, size_t n) {
    static const char dash[] = "—";
    if (!r || !isfinite(r->compile_s)) {
        snprintf(buf, n, "%s", dash);
        return;
    }
    if (strcmp(r->compile_cache, "hit") && strcmp(r->compile_cache, "miss")) {
        fmt_compile_seconds(r->compile_s, buf, n);
        return;
    }
    char cold[32], warm[32];
    if (isfinite(r->compile_cold_s)) fmt_compile_seconds(r->compile_cold_s, cold, sizeof cold);
    else snprintf(cold, sizeof cold, "%s", dash);
    if (isfinite(r->compile_warm_s)) fmt_compile_seconds(r->compile_warm_s, warm, sizeof warm);
    else snprintf(warm, sizeof warm, "%s", dash);
    snprintf(buf, n, "%s / %s", cold, warm);
}

/* Rank: cpu, then cuda:N by N, then anything else by name. */
static int dev_rank(const char *d, long *ord) {
    *ord = 0;
    if (!strcmp(d, "cpu")) return 0;
    if (!strncmp(d, "cuda:", 5) && d[5]) {
        char *end = NULL;
        long v = strtol(d + 5, &end, 10);
        if (!*end && v >= 0) {
            *ord = v;
            return 1;
        }
    }
    return 2;
}

int kh_report_cmp_device(const char *a, const char *b) {
    long oa, ob;
    int ra = dev_rank(a, &oa), rb = dev_rank(b, &ob);
    if (ra != rb) return ra < rb ? -1 : 1;
    if (ra == 1 && oa != ob) return oa < ob ? -1 : 1;
    return strcmp(a, b);
}

// --- reading --------------------------------------------------------------------------------------------
typedef struct names { char **v; int n, cap; } names;

static int names_add(names *s, const char *x) {
    if (s->n == s->cap) {
        char **nv = kh_grow(s->v, &s->cap, sizeof *nv, 16);
        if (!nv) return -1;
        s->v = nv;
    }
    if (!(s->v[s->n] = strdup(x))) return -1;
    s->n++;
    return 0;
}

static void names_free(names *s) {
    for (int i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Entries of a folder, sorted; dirs != 0 keeps sub-folders, else *.json files. -1 with errno. */
static int list_dir(const char *dir, int dirs, names *out) {
    int n_packed, oom;
    char **packed = kh_set_names(dir, dirs, &n_packed, &oom); /* a packed folder (setfile.h) */
    if (packed || oom) {
        for (int i = 0; !oom && i < n_packed; i++) oom = names_add(out, packed[i]) != 0;
        kh_set_names_free(packed);
        if (oom) errno = ENOMEM;
        return oom ? -1 : 0;
    }
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        if (n[0] == '.') continue;
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, n) >= sizeof path) continue;
        struct stat st;
        if (stat(path, &st) != 0) continue;
        size_t len = strlen(n);
        int keep = dirs ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode) && len > 5 && !strcmp(n + len - 5, ".json");
        if (keep && names_add(out, n)) {
            rc = -1;
            errno = ENOMEM;
            break;
        }
    }
    closedir(d);
    if (out->n) qsort(out->v, (size_t)out->n, sizeof *out->v, cmp_str);
    return rc;
}

typedef struct reader {
    kh_cell_record *recs; int n, cap;
    int skipped;
    kh_report_cstats *cs; int ncs, capcs;
} reader;

static int read_one(reader *rd, const char *path) {
    if (rd->n == rd->cap) {
        kh_cell_record *nv = kh_grow(rd->recs, &rd->cap, sizeof *nv, 32);
        if (!nv) return -1;
        rd->recs = nv;
    }
    char err[4400];
    if (kh_record_read(path, &rd->recs[rd->n], err, sizeof err) != 0) {
        kh_esc_msg("khost: report: skipped ", err); /* err starts with the file's path */
        rd->skipped++;
        return 0;
    }
    kh_cell_record *r = &rd->recs[rd->n];
    if (r->record_version > KH_RECORD_VERSION) {
        kh_record_newer_text(path, r->record_version, err, sizeof err);
        kh_esc_msg("khost: report: warning: ", err);
    }
    if (!r->task[0] || !r->plugin[0] || !r->device[0]) {
        kh_esc_msg("khost: report: skipped (empty task, plugin or device) ", path);
        kh_record_free(r);
        rd->skipped++;
        return 0;
    }
    rd->n++;
    return 0;
}

/* A folder's records, one per cell: a cell of repetitions (<base>.rep<k>.json, cellstats.h) is read from
 * the record that stands for it (its first finished repetition) and its statistics are kept beside;
 * summaries (<base>.stats.json) are not records. */
static int read_folder(reader *rd, const char *dir) {
    kh_cell_files files;
    char err[4400];
    int lr = kh_cell_files_read(dir, &files, err, sizeof err);
    if (lr != 0) { /* the folder was listed a moment ago */
        kh_esc_msg("khost: report: skipped ", err);
        rd->skipped++;
        return lr == -2 ? -1 : 0;
    }
    if (files.n_odd) {
        fprintf(stderr, "khost: report: skipped %d file(s) in ", files.n_odd);
        kh_esc_line(stderr, dir);
        kh_esc_msg(" not named like a record (<plugin>__<device>[.rep<k>].json of " KH_RECORD_NAME_CHARS "), "
                   "the first: ", files.odd);
        rd->skipped += files.n_odd;
    }
    int rc = 0;
    for (int i = 0; rc == 0 && i < files.n; i = kh_cell_files_run_end(&files, i)) {
        char path[4096];
        kh_cell_stats st;
        if (kh_cell_stats_load_run(dir, &files, i, 1, &st, err, sizeof err) != 0) {
            kh_esc_msg("khost: report: skipped ", err);
            rd->skipped++;
            continue;
        }
        if (st.n_reps == 0 ||
            (size_t)snprintf(path, sizeof path, "%s/%s", dir, st.reps[st.rep_file].file) >= sizeof path) {
            kh_cell_stats_free(&st);
            continue;
        }
        int before = rd->n;
        rc = read_one(rd, path);
        if (rc == 0 && rd->n > before) {
            if (rd->ncs == rd->capcs) {
                kh_report_cstats *nc = kh_grow(rd->cs, &rd->capcs, sizeof *nc, 32);
                if (!nc) {
                    kh_cell_stats_free(&st);
                    rc = -1;
                    break;
                }
                rd->cs = nc;
            }
            kh_report_cstats *c = &rd->cs[rd->ncs++];
            const kh_cell_record *r = &rd->recs[rd->n - 1];
            snprintf(c->task, sizeof c->task, "%s", r->task);
            snprintf(c->plugin, sizeof c->plugin, "%s", r->plugin);
            snprintf(c->device, sizeof c->device, "%s", r->device);
            c->st = st;
        } else {
            kh_cell_stats_free(&st);
        }
    }
    kh_cell_files_free(&files);
    return rc;
}

/* A record's place in rd, ordered by cell and then by place: a cell's first record comes first. */
typedef struct rec_at {
    const kh_cell_record *r;
    int i;
} rec_at;

/* Records by cell (task, plugin, device: the report's order). */
static int cmp_rec(const void *a, const void *b) {
    const kh_cell_record *x = a, *y = b;
    int c = strcmp(x->task, y->task);
    if (!c) c = strcmp(x->plugin, y->plugin);
    if (!c) c = kh_report_cmp_device(x->device, y->device);
    return c;
}

static int cmp_rec_at(const void *a, const void *b) {
    const rec_at *x = a, *y = b;
    int c = cmp_rec(x->r, y->r);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* Drops the plans' "missing" records (those from index `from` on) whose cell has a record before them — a
 * finished cell, or the same cell in an earlier plan line — by one sort, not a search per plan line. */
static int drop_listed_twice(reader *rd, int from) {
    if (rd->n - from < 1) return 0;
    rec_at *o = malloc((size_t)rd->n * sizeof *o);
    char *drop = calloc((size_t)rd->n, 1);
    if (!o || !drop) {
        free(o);
        free(drop);
        return -1;
    }
    for (int i = 0; i < rd->n; i++) o[i] = (rec_at){&rd->recs[i], i};
    qsort(o, (size_t)rd->n, sizeof *o, cmp_rec_at);
    for (int i = 1; i < rd->n; i++)
        if (o[i].i >= from && !cmp_rec(o[i - 1].r, o[i].r)) drop[o[i].i] = 1;
    free(o);
    int m = from;
    for (int i = from; i < rd->n; i++) {
        if (drop[i]) kh_record_free(&rd->recs[i]);
        else rd->recs[m++] = rd->recs[i];
    }
    rd->n = m;
    free(drop);
    return 0;
}

/* Cells a Slurm plan under DIR/slurm/ lists that have no record: shown as "missing" rather than left out,
 * whether the array is still queued or its collector never ran. Returns -1 when out of memory. */
static int read_slurm_plans(reader *rd, const char *dir) {
    char sdir[4096];
    if ((size_t)snprintf(sdir, sizeof sdir, "%s/slurm", dir) >= sizeof sdir) return 0;
    names plans = {0};
    if (list_dir(sdir, 1, &plans) != 0) {
        names_free(&plans);
        return errno == ENOMEM ? -1 : 0;
    }
    int rc = 0, first_missing = rd->n;
    for (int i = 0; i < plans.n && rc == 0; i++) {
        char path[4200], jpath[4200], err[4400], job[64] = "";
        snprintf(path, sizeof path, "%s/%s/cells", sdir, plans.v[i]);
        snprintf(jpath, sizeof jpath, "%s/%s/job", sdir, plans.v[i]);
        kh_slurm_plan p;
        if (kh_slurm_plan_read(path, &p, err, sizeof err) != 0) continue; /* written but never submitted */
        char why[64];
        FILE *jf = kh_fopen_regular(jpath, why, sizeof why);
        if (jf) {
            if (!fgets(job, sizeof job, jf)) job[0] = 0;
            job[strspn(job, "0123456789")] = 0;
            fclose(jf);
        }
        for (int k = 0; k < p.n && rc == 0; k++) {
            const kh_slurm_cell *c = &p.cells[k]; /* a cell with a record is dropped again below */
            if (rd->n == rd->cap) {
                kh_cell_record *nv = kh_grow(rd->recs, &rd->cap, sizeof *nv, 32);
                if (!nv) {
                    rc = -1;
                    break;
                }
                rd->recs = nv;
            }
            kh_cell_record *r = &rd->recs[rd->n++];
            kh_record_init(r);
            snprintf(r->plugin, sizeof r->plugin, "%s", c->plugin);
            snprintf(r->task, sizeof r->task, "%s", c->task);
            snprintf(r->device, sizeof r->device, "%s", c->device);
            snprintf(r->status, sizeof r->status, "missing");
            char idx[16];
            snprintf(idx, sizeof idx, "%d", k);
            if (job[0]) {
                kh_record_set_env(r, "slurm_array_job_id", job);
                kh_record_set_env(r, "slurm_array_task_id", idx);
            }
            snprintf(r->reason, sizeof r->reason,
                     "submitted to Slurm as array task %s_%d, no record yet: still queued or running, or its "
                     "collector did not run (khost matrix --slurm-collect %s --slurm-plan %s)",
                     job[0] ? job : "?", k, job[0] ? job : "JOB", path);
        }
        kh_slurm_plan_free(&p);
    }
    names_free(&plans);
    if (rc == 0) rc = drop_listed_twice(rd, first_missing);
    return rc;
}

// --- grouping -------------------------------------------------------------------------------------------
static int cmp_dev_ptr(const void *a, const void *b) {
    return kh_report_cmp_device(*(const char *const *)a, *(const char *const *)b);
}

void kh_report_free(kh_report *rep) {
    for (int t = 0; t < rep->n_tasks; t++) {
        free(rep->tasks[t].plugins);
        free(rep->tasks[t].devices);
        free(rep->tasks[t].cells);
        free(rep->tasks[t].stats);
    }
    free(rep->tasks);
    for (int i = 0; i < rep->n_cstats; i++) kh_cell_stats_free(&rep->cstats[i].st);
    free(rep->cstats);
    for (int i = 0; i < rep->n_recs; i++) kh_record_free(&rep->recs[i]);
    free(rep->recs);
    memset(rep, 0, sizeof *rep);
}

int kh_report_index(const char **v, int n, const char *x) {
    for (int i = 0; i < n; i++)
        if (!strcmp(v[i], x)) return i;
    return -1;
}

/* Sort the records and build the per-task grid. Takes ownership of recs and cs. -1 when out of memory. */
static int report_build(kh_report *rep, kh_cell_record *recs, int n, kh_report_cstats *cs, int ncs) {
    memset(rep, 0, sizeof *rep);
    rep->recs = recs;
    rep->n_recs = n;
    rep->cstats = cs;
    rep->n_cstats = ncs;
    if (n > 1) qsort(recs, (size_t)n, sizeof *recs, cmp_rec);
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && !strcmp(recs[j].task, recs[i].task)) j++;
        kh_report_task *nt = realloc(rep->tasks, (size_t)(rep->n_tasks + 1) * sizeof *nt);
        if (!nt) return -1;
        rep->tasks = nt;
        kh_report_task *t = &rep->tasks[rep->n_tasks++];
        memset(t, 0, sizeof *t);
        t->name = recs[i].task;
        t->plugins = calloc((size_t)(j - i), sizeof *t->plugins);
        t->devices = calloc((size_t)(j - i), sizeof *t->devices);
        if (!t->plugins || !t->devices) return -1;
        for (int k = i; k < j; k++) { /* records are sorted by plugin: plugins come out sorted */
            if (kh_report_index(t->plugins, t->np, recs[k].plugin) < 0) t->plugins[t->np++] = recs[k].plugin;
            if (kh_report_index(t->devices, t->nd, recs[k].device) < 0) t->devices[t->nd++] = recs[k].device;
        }
        qsort(t->devices, (size_t)t->nd, sizeof *t->devices, cmp_dev_ptr);
        t->cells = calloc((size_t)t->np * (size_t)t->nd, sizeof *t->cells);
        t->stats = calloc((size_t)t->np * (size_t)t->nd, sizeof *t->stats);
        if (!t->cells || !t->stats) return -1;
        for (int k = i; k < j; k++) {
            int p = kh_report_index(t->plugins, t->np, recs[k].plugin), d = kh_report_index(t->devices, t->nd, recs[k].device);
            const kh_cell_record **cell = &t->cells[p * t->nd + d];
            if (*cell) /* two files claim one cell (a copied file): keep the first, say so */
                fprintf(stderr, "khost: report: duplicate record for %s x %s x %s ignored\n", recs[k].plugin,
                        recs[k].task, recs[k].device);
            else
                *cell = &recs[k];
        }
        for (int c = 0; c < rep->n_cstats; c++) {
            const kh_report_cstats *x = &rep->cstats[c];
            if (strcmp(x->task, t->name)) continue;
            int p = kh_report_index(t->plugins, t->np, x->plugin), d = kh_report_index(t->devices, t->nd, x->device);
            if (p >= 0 && d >= 0 && !t->stats[p * t->nd + d]) t->stats[p * t->nd + d] = &x->st;
        }
        i = j;
    }
    return 0;
}

// --- the tables -----------------------------------------------------------------------------------------

int kh_report_load(const char *dir, kh_report *rep, int *skipped) {
    reader rd = {0};
    names sub = {0};
    char err[4400];
    int packed = kh_results_mount(dir, err, sizeof err);
    if (packed < 0) {
        kh_esc_msg("khost: report: ", err);
        return -3;
    }
    if (packed && kh_set_loose_folders(dir) > 0)
        kh_esc_msg("khost: report: warning: its records are read from " KH_SETFILE_NAME " only; the task folders "
                   "beside it are not read (khost pack them in again): ", dir);
    if (list_dir(dir, 1, &sub) != 0) {
        int e = errno;
        names_free(&sub);
        errno = e;
        return -1;
    }
    int oom = read_folder(&rd, dir) != 0;
    for (int i = 0; i < sub.n && !oom; i++) {
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, sub.v[i]) >= sizeof path) continue;
        oom = read_folder(&rd, path) != 0;
    }
    names_free(&sub);
    if (!oom) oom = read_slurm_plans(&rd, dir) != 0;
    if (oom || report_build(rep, rd.recs, rd.n, rd.cs, rd.ncs) != 0) {
        if (oom) {
            for (int i = 0; i < rd.n; i++) kh_record_free(&rd.recs[i]);
            free(rd.recs);
            for (int i = 0; i < rd.ncs; i++) kh_cell_stats_free(&rd.cs[i].st);
            free(rd.cs);
        } else {
            kh_report_free(rep);
        }
        return -2;
    }
    *skipped = rd.skipped;
    return 0;
}

int kh_report_math(const kh_report_task *t, int d, char *buf, size_t n) {
    const char *first = NULL;
    int mixed = 0;
    for (int p = 0; p < t->np; p++) {
        const kh_cell_record *r = t->cells[p * t->nd + d];
        if (!r || !r->math[0]) continue;
        if (!first) first = r->math;
        else if (strcmp(first, r->math) != 0) mixed = 1;
    }
    if (n) buf[0] = 0;
    if (!first) return 0;
    if (!mixed) {
        snprintf(buf, n, "%s", first);
        return 0;
    }
    size_t u = (size_t)snprintf(buf, n, "mixed (");
    for (int p = 0, k = 0; p < t->np && u < n; p++) {
        const kh_cell_record *r = t->cells[p * t->nd + d];
        if (!r || !r->math[0]) continue;
        u += (size_t)snprintf(buf + u, n - u, "%s%s: %s", k++ ? "; " : "", t->plugins[p], r->math);
    }
    if (u < n) snprintf(buf + u, n - u, ")");
    return 1;
}
