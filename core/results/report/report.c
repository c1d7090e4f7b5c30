/* core/results/report/report.c — `khost report DIR [--svg FILE] [--html FILE] [--published]`: the benchmark's tables from stored records.
 *
 * Reads DIR/<task>/<name>.json (and DIR/<name>.json, so one task's folder works too), groups the records
 * by task and prints, per task, the accuracy table (the record's metric: val_acc, or loss for text generation) and
 * the time-per-epoch table (mean over all epochs, the seed's definition) as markdown, backends as rows and
 * devices as columns. A time cell is "245.5 (2.6x)", the factor to the fastest finished cell of its column,
 * which is bold; beside each device's time column, when some record there has one, its model-compile time
 * ("cold / warm" for backends with a generated-code cache, one time for the others, "—" unknown) with the
 * explanation under the table; a third table gives each finished cell's achieved GFLOP/s and fraction of the roofline when
 * the records carry them. Reference rows (tools/reference) are labelled. Cells that did not finish show their
 * status; cells of a Slurm array name their array task and node (the records' slurm_* environment), and a cell
 * a Slurm plan under DIR/slurm/ lists without a record shows "missing". Everything is sorted, so the output depends
 * only on the records (the tests compare it byte for byte).
 * Exit status: 0; KH_EXIT_USAGE for a bad command line; KH_EXIT_IO when DIR cannot be read, holds no record,
 * a file had to be skipped (malformed: named on stderr, the rest is still reported) or the SVG cannot be
 * written.
 */
#define _GNU_SOURCE /* strdup, open_memstream */
#include "results/report/report.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "cli/exitcodes.h"
#include "modules/host_api.h"
#include "sched/slurm/slurm.h"

// --- helpers shared with the chart ----------------------------------------------------------------------
void kh_report_fmt_seconds(double s, char *buf, size_t n) {
    if (!isfinite(s))
        snprintf(buf, n, "n/a");
    else if (s >= 1.0)
        snprintf(buf, n, "%.1f", s);
    else
        snprintf(buf, n, "%.3g", s);
}

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
        int cap = s->cap ? s->cap * 2 : 16;
        char **nv = realloc(s->v, (size_t)cap * sizeof *nv);
        if (!nv) return -1;
        s->v = nv;
        s->cap = cap;
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
} reader;

static int read_one(reader *rd, const char *path) {
    if (rd->n == rd->cap) {
        int cap = rd->cap ? rd->cap * 2 : 32;
        kh_cell_record *nv = realloc(rd->recs, (size_t)cap * sizeof *nv);
        if (!nv) return -1;
        rd->recs = nv;
        rd->cap = cap;
    }
    char err[4400];
    if (kh_record_read(path, &rd->recs[rd->n], err, sizeof err) != 0) {
        fprintf(stderr, "khost: report: skipped %s\n", err); /* err starts with the file's path */
        rd->skipped++;
        return 0;
    }
    kh_cell_record *r = &rd->recs[rd->n];
    if (!r->task[0] || !r->plugin[0] || !r->device[0]) {
        fprintf(stderr, "khost: report: skipped %s: empty task, plugin or device\n", path);
        kh_record_free(r);
        rd->skipped++;
        return 0;
    }
    rd->n++;
    return 0;
}

static int read_folder(reader *rd, const char *dir) {
    names files = {0};
    int rc = list_dir(dir, 0, &files);
    for (int i = 0; rc == 0 && i < files.n; i++) {
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, files.v[i]) >= sizeof path) continue;
        rc = read_one(rd, path);
    }
    names_free(&files);
    return rc;
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
    int rc = 0;
    for (int i = 0; i < plans.n && rc == 0; i++) {
        char path[4200], jpath[4200], err[4400], job[64] = "";
        snprintf(path, sizeof path, "%s/%s/cells", sdir, plans.v[i]);
        snprintf(jpath, sizeof jpath, "%s/%s/job", sdir, plans.v[i]);
        kh_slurm_plan p;
        if (kh_slurm_plan_read(path, &p, err, sizeof err) != 0) continue; /* written but never submitted */
        FILE *jf = fopen(jpath, "r");
        if (jf) {
            if (!fgets(job, sizeof job, jf)) job[0] = 0;
            job[strspn(job, "0123456789")] = 0;
            fclose(jf);
        }
        for (int k = 0; k < p.n && rc == 0; k++) {
            const kh_slurm_cell *c = &p.cells[k];
            int have = 0;
            for (int j = 0; j < rd->n && !have; j++)
                have = !strcmp(rd->recs[j].task, c->task) && !strcmp(rd->recs[j].plugin, c->plugin) &&
                       !strcmp(rd->recs[j].device, c->device);
            if (have) continue;
            if (rd->n == rd->cap) {
                int cap = rd->cap ? rd->cap * 2 : 32;
                kh_cell_record *nv = realloc(rd->recs, (size_t)cap * sizeof *nv);
                if (!nv) {
                    rc = -1;
                    break;
                }
                rd->recs = nv;
                rd->cap = cap;
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
    return rc;
}

// --- grouping -------------------------------------------------------------------------------------------
static int cmp_rec(const void *a, const void *b) {
    const kh_cell_record *x = a, *y = b;
    int c = strcmp(x->task, y->task);
    if (!c) c = strcmp(x->plugin, y->plugin);
    if (!c) c = kh_report_cmp_device(x->device, y->device);
    return c;
}

static int cmp_dev_ptr(const void *a, const void *b) {
    return kh_report_cmp_device(*(const char *const *)a, *(const char *const *)b);
}

static void report_free(kh_report *rep) {
    for (int t = 0; t < rep->n_tasks; t++) {
        free(rep->tasks[t].plugins);
        free(rep->tasks[t].devices);
        free(rep->tasks[t].cells);
    }
    free(rep->tasks);
    for (int i = 0; i < rep->n_recs; i++) kh_record_free(&rep->recs[i]);
    free(rep->recs);
    memset(rep, 0, sizeof *rep);
}

static int in_list(const char **v, int n, const char *x) {
    for (int i = 0; i < n; i++)
        if (!strcmp(v[i], x)) return i;
    return -1;
}

/* Sort the records and build the per-task grid. Takes ownership of recs. -1 when out of memory. */
static int report_build(kh_report *rep, kh_cell_record *recs, int n) {
    memset(rep, 0, sizeof *rep);
    rep->recs = recs;
    rep->n_recs = n;
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
            if (in_list(t->plugins, t->np, recs[k].plugin) < 0) t->plugins[t->np++] = recs[k].plugin;
            if (in_list(t->devices, t->nd, recs[k].device) < 0) t->devices[t->nd++] = recs[k].device;
        }
        qsort(t->devices, (size_t)t->nd, sizeof *t->devices, cmp_dev_ptr);
        t->cells = calloc((size_t)t->np * (size_t)t->nd, sizeof *t->cells);
        if (!t->cells) return -1;
        for (int k = i; k < j; k++) {
            int p = in_list(t->plugins, t->np, recs[k].plugin), d = in_list(t->devices, t->nd, recs[k].device);
            const kh_cell_record **cell = &t->cells[p * t->nd + d];
            if (*cell) /* two files claim one cell (a copied file): keep the first, say so */
                fprintf(stderr, "khost: report: duplicate record for %s x %s x %s ignored\n", recs[k].plugin,
                        recs[k].task, recs[k].device);
            else
                *cell = &recs[k];
        }
        i = j;
    }
    return 0;
}

// --- the tables -----------------------------------------------------------------------------------------
static int is_ok(const kh_cell_record *r) { return r && !strcmp(r->status, "ok"); }

/* "12" or "2-12" over the finished records of a task; empty when none says. */
static void range_i64(const kh_report_task *t, int64_t (*get)(const kh_cell_record *), char *buf, size_t n) {
    int64_t lo = 0, hi = 0;
    int any = 0;
    for (int i = 0; i < t->np * t->nd; i++) {
        const kh_cell_record *r = t->cells[i];
        if (!is_ok(r)) continue;
        int64_t v = get(r);
        if (v <= 0) continue;
        if (!any || v < lo) lo = v;
        if (!any || v > hi) hi = v;
        any = 1;
    }
    buf[0] = 0;
    if (!any) return;
    if (lo == hi)
        snprintf(buf, n, "%lld", (long long)lo);
    else
        snprintf(buf, n, "%lld-%lld", (long long)lo, (long long)hi);
}
static int64_t get_epochs(const kh_cell_record *r) { return r->n_rows; }
static int64_t get_batch(const kh_cell_record *r) { return r->batch_size; }
static int64_t get_train(const kh_cell_record *r) { return r->train_samples; }
static int64_t get_val(const kh_cell_record *r) { return r->val_samples; }

static void print_header_row(FILE *f, const kh_report_task *t) {
    fprintf(f, "| backend |");
    for (int d = 0; d < t->nd; d++) fprintf(f, " %s |", t->devices[d]);
    fprintf(f, "\n|---|");
    for (int d = 0; d < t->nd; d++) fprintf(f, "---:|");
    fprintf(f, "\n");
}

/* What a cell that did not finish shows: its status ("crashed", "timeout", "unsupported"). */
static const char *unfinished(const kh_cell_record *r) { return r ? r->status : ""; }

/* Cells a Slurm array ran (or recorded): which array task, on which node. Nothing for local results. */
static void print_slurm(FILE *f, const kh_report_task *t) {
    int any = 0;
    for (int p = 0; p < t->np; p++)
        for (int d = 0; d < t->nd; d++) {
            const kh_cell_record *r = t->cells[p * t->nd + d];
            const char *aj = r ? kh_record_get_env(r, "slurm_array_job_id") : NULL;
            if (!aj || !*aj) continue;
            const char *at = kh_record_get_env(r, "slurm_array_task_id"), *node = kh_record_get_env(r, "slurm_node");
            fprintf(f, "%s %s on %s = %s_%s%s%s", any ? ";" : "Slurm array tasks:", t->plugins[p], t->devices[d], aj,
                    at ? at : "?", node && *node ? " on " : "", node && *node ? node : "");
            any = 1;
        }
    if (any) fprintf(f, ".\n\n");
}

static void print_row_label(FILE *f, const kh_report_task *t, int p) {
    const kh_cell_record *any = NULL;
    for (int d = 0; d < t->nd && !any; d++) any = t->cells[p * t->nd + d];
    fprintf(f, "| %s%s |", t->plugins[p], any && kh_report_is_reference(any) ? " (reference)" : "");
}

/* A fraction above 1 is physically impossible: the FLOP or byte count overstates the work, or the peak was
 * measured low. Said under the table rather than hidden, so that nobody reads such a row as a result. */
static void warn_roofline(FILE *f, const kh_report_task *t) {
    for (int i = 0; i < t->np * t->nd; i++) {
        const kh_cell_record *r = t->cells[i];
        if (is_ok(r) && isfinite(r->roofline_fraction) && r->roofline_fraction > 1.0)
            fprintf(f, "\nWarning: %s on %s is at %.0f%% of the roofline, above 100%% (impossible): its FLOP or byte "
                       "count, or the device's peak, is wrong.\n", r->plugin, r->device, 100 * r->roofline_fraction);
    }
}

/* Achieved GFLOP/s and the fraction of the roofline, when any finished record has them. */
static void print_throughput(FILE *f, const kh_report_task *t) {
    int any = 0;
    for (int i = 0; i < t->np * t->nd; i++) any |= is_ok(t->cells[i]) && isfinite(t->cells[i]->gflops);
    if (!any) return;
    fprintf(f, "\nAchieved GFLOP/s (model FLOPs per epoch / mean epoch time; %% of the device's roofline):\n\n");
    print_header_row(f, t);
    for (int p = 0; p < t->np; p++) {
        print_row_label(f, t, p);
        for (int d = 0; d < t->nd; d++) {
            const kh_cell_record *r = t->cells[p * t->nd + d];
            if (!is_ok(r) || !isfinite(r->gflops)) fprintf(f, " %s |", is_ok(r) ? "n/a" : unfinished(r));
            else if (isfinite(r->roofline_fraction)) fprintf(f, " %.3g (%.1f%%) |", r->gflops, 100 * r->roofline_fraction);
            else fprintf(f, " %.3g |", r->gflops);
        }
        fprintf(f, "\n");
    }
    warn_roofline(f, t);
}

static void print_task(FILE *f, const kh_report_task *t) {
    fprintf(f, "## %s\n\n", t->name);

    char ep[48], bs[48], tr[64], va[64];
    range_i64(t, get_epochs, ep, sizeof ep);
    range_i64(t, get_batch, bs, sizeof bs);
    range_i64(t, get_train, tr, sizeof tr);
    range_i64(t, get_val, va, sizeof va);
    if (ep[0] || bs[0]) {
        int first = 1;
        if (ep[0]) fprintf(f, "%s epoch%s", ep, strcmp(ep, "1") ? "s" : ""), first = 0;
        if (bs[0]) fprintf(f, "%sbatch size %s", first ? "" : ", ", bs), first = 0;
        if (tr[0]) fprintf(f, ", %s training", tr);
        if (va[0]) fprintf(f, " / %s validation", va);
        if (tr[0] || va[0]) fprintf(f, " samples");
        fprintf(f, ".\n\n");
    }

    /* Which hardware each column is: the first record (by backend) that names it. */
    fprintf(f, "Devices:");
    for (int d = 0; d < t->nd; d++) {
        const char *name = NULL, *threads = NULL;
        for (int p = 0; p < t->np; p++) {
            const kh_cell_record *r = t->cells[p * t->nd + d];
            if (!r) continue;
            const char *n = kh_record_get_env(r, "device_name");
            if (!n || !*n) n = !strcmp(t->devices[d], "cpu") ? kh_record_get_env(r, "cpu_model") : NULL;
            if (n && *n && !name) name = n;
            const char *th = kh_record_get_env(r, "cpu_threads");
            if (th && *th && !threads) threads = th;
        }
        fprintf(f, "%s %s = %s", d ? ";" : "", t->devices[d], name ? name : "unknown");
        if (!strcmp(t->devices[d], "cpu") && threads) fprintf(f, " (%s threads)", threads);
    }
    fprintf(f, ".\n\n");
    /* Records gathered from different machines (another host, another CPU model) share a column only for
     * their accuracy: say so, and for which backends, rather than print factors between them silently. */
    for (int d = 0; d < t->nd; d++) {
        const char *first = NULL;
        int mixed = 0;
        for (int p = 0; p < t->np; p++) {
            const kh_cell_record *r = t->cells[p * t->nd + d];
            const char *n = r ? kh_record_get_env(r, "device_name") : NULL;
            if (r && (!n || !*n)) n = kh_record_get_env(r, "cpu_model");
            if (!n || !*n) continue;
            if (!first) first = n;
            else if (strcmp(first, n) != 0) mixed = 1;
        }
        if (!mixed) continue;
        fprintf(f, "Note: the %s column holds records from different machines (", t->devices[d]);
        for (int p = 0, k = 0; p < t->np; p++) {
            const kh_cell_record *r = t->cells[p * t->nd + d];
            const char *n = r ? kh_record_get_env(r, "device_name") : NULL;
            if (r && (!n || !*n)) n = kh_record_get_env(r, "cpu_model");
            if (!n || !*n) continue;
            fprintf(f, "%s%s: %s", k++ ? "; " : "", t->plugins[p], n);
        }
        fprintf(f, "): its times and factors do not compare the backends.\n\n");
    }
    print_slurm(f, t);

    const char *metric = NULL;
    for (int i = 0; i < t->np * t->nd && !metric; i++)
        if (t->cells[i] && t->cells[i]->metric[0]) metric = t->cells[i]->metric;
    if (!metric) metric = "val_acc";
    if (!strcmp(metric, "val_acc"))
        fprintf(f, "Validation accuracy (val_acc):\n\n");
    else if (!strcmp(metric, "loss"))
        fprintf(f, "Training loss (loss; lower is better):\n\n");
    else
        fprintf(f, "%s:\n\n", metric);
    print_header_row(f, t);
    for (int p = 0; p < t->np; p++) {
        print_row_label(f, t, p);
        for (int d = 0; d < t->nd; d++) {
            const kh_cell_record *r = t->cells[p * t->nd + d];
            if (is_ok(r) && isfinite(r->metric_value))
                fprintf(f, " %.4f |", r->metric_value);
            else
                fprintf(f, " %s |", is_ok(r) ? "n/a" : unfinished(r));
        }
        fprintf(f, "\n");
    }

    /* Time per epoch, and beside each device's column its compile times when any record there has them. */
    int any_compile = 0;
    for (int d = 0; d < t->nd; d++) any_compile |= kh_report_has_compile(t, d);
    fprintf(f, "\nTime per epoch (s, mean over all epochs; factor to the fastest on each device)%s:\n\n",
            any_compile ? "; model-compile time (s, cold / warm)" : "");
    fprintf(f, "| backend |");
    for (int d = 0; d < t->nd; d++) {
        fprintf(f, " %s |", t->devices[d]);
        if (kh_report_has_compile(t, d)) fprintf(f, " %s compile cold/warm |", t->devices[d]);
    }
    fprintf(f, "\n|---|");
    for (int d = 0; d < t->nd; d++) fprintf(f, "%s", kh_report_has_compile(t, d) ? "---:|---:|" : "---:|");
    fprintf(f, "\n");
    for (int p = 0; p < t->np; p++) {
        print_row_label(f, t, p);
        for (int d = 0; d < t->nd; d++) {
            const kh_cell_record *r = t->cells[p * t->nd + d];
            char cc[96] = "";
            if (kh_report_has_compile(t, d)) kh_report_fmt_compile(r, cc, sizeof cc);
            if (!is_ok(r) || !isfinite(r->mean_epoch_s) || r->mean_epoch_s <= 0) {
                fprintf(f, " %s |", is_ok(r) ? "n/a" : unfinished(r));
                if (cc[0]) fprintf(f, " %s |", cc);
                continue;
            }
            double best = INFINITY;
            for (int q = 0; q < t->np; q++) {
                const kh_cell_record *o = t->cells[q * t->nd + d];
                if (is_ok(o) && isfinite(o->mean_epoch_s) && o->mean_epoch_s > 0 && o->mean_epoch_s < best)
                    best = o->mean_epoch_s;
            }
            char s[32];
            kh_report_fmt_seconds(r->mean_epoch_s, s, sizeof s);
            int fastest = r->mean_epoch_s == best;
            fprintf(f, " %s%s (%.1fx)%s |", fastest ? "**" : "", s, r->mean_epoch_s / best, fastest ? "**" : "");
            if (cc[0]) fprintf(f, " %s |", cc);
        }
        fprintf(f, "\n");
    }
    if (any_compile) fprintf(f, "\n%s\n", kh_report_compile_note);

    print_throughput(f, t);

    /* Why cells did not finish: the status alone does not say what to fix. */
    int any = 0;
    for (int p = 0; p < t->np; p++)
        for (int d = 0; d < t->nd; d++) {
            const kh_cell_record *r = t->cells[p * t->nd + d];
            if (!r || is_ok(r)) continue;
            if (!any) fprintf(f, "\nDid not finish:\n\n");
            any = 1;
            size_t sl = strlen(r->status); /* "unsupported: conv2d ..." already names its status */
            if (r->reason[0] && !strncmp(r->reason, r->status, sl) && r->reason[sl] == ':')
                fprintf(f, "- %s on %s: %s\n", t->plugins[p], t->devices[d], r->reason);
            else
                fprintf(f, "- %s on %s: %s%s%s\n", t->plugins[p], t->devices[d], r->status,
                        r->reason[0] ? ": " : "", r->reason);
        }
    fprintf(f, "\n");
}

// --- the published figures -----------------------------------------------------------------------------
static const kh_task_info *task_info(void *ctx, const char *task) {
    kh_host *h = ctx;
    char err[1024];
    kh_module *m = kh_modules_find(&h->mods, KH_MODULE_TASK, task, kh_host_api_get(), err, sizeof err);
    return m && m->task && m->task->info ? m->task->info() : NULL;
}

static void print_published(FILE *f, kh_host *h, int host_ok, const kh_report_task *t) {
    if (!host_ok) return;
    char err[1024];
    kh_module *m = kh_modules_find(&h->mods, KH_MODULE_TASK, t->name, kh_host_api_get(), err, sizeof err);
    const kh_task_info *info = m && m->task && m->task->info ? m->task->info() : NULL;
    if (!info || !KH_HAS_MEMBER(kh_task_info, info->struct_size, published) || info->n_published <= 0 ||
        !info->published) {
        fprintf(f, "Published figures: none for %s (%s).\n\n", t->name,
                !m ? err : !info ? "the task module gives no info" : "the task module lists none");
        return;
    }
    /* Backends and devices in the order the module lists them (the seed's own order). */
    const char *be[16], *dv[16];
    int nb = 0, nv = 0;
    for (int i = 0; i < info->n_published; i++) {
        const kh_published *p = &info->published[i];
        if (!p->backend || !p->device) continue;
        if (in_list(be, nb, p->backend) < 0 && nb < 16) be[nb++] = p->backend;
        if (in_list(dv, nv, p->device) < 0 && nv < 16) dv[nv++] = p->device;
    }
    fprintf(f, "Published by the Keras backend benchmark (%s / s per epoch):\n\n| backend |",
            info->metric ? info->metric : "metric");
    for (int d = 0; d < nv; d++) fprintf(f, " %s |", dv[d]);
    fprintf(f, "\n|---|");
    for (int d = 0; d < nv; d++) fprintf(f, "---:|");
    fprintf(f, "\n");
    for (int b = 0; b < nb; b++) {
        fprintf(f, "| %s |", be[b]);
        for (int d = 0; d < nv; d++) {
            const kh_published *hit = NULL;
            for (int i = 0; i < info->n_published && !hit; i++) {
                const kh_published *p = &info->published[i];
                if (p->backend && p->device && !strcmp(p->backend, be[b]) && !strcmp(p->device, dv[d])) hit = p;
            }
            if (!hit || (hit->metric < 0 && hit->s_per_epoch < 0)) {
                fprintf(f, " |");
                continue;
            }
            if (hit->metric >= 0)
                fprintf(f, " %.4f / ", hit->metric);
            else
                fprintf(f, " - / ");
            if (hit->s_per_epoch >= 0)
                fprintf(f, "%.1f |", hit->s_per_epoch);
            else
                fprintf(f, "- |");
        }
        fprintf(f, "\n");
    }
    fprintf(f, "\n");
}

// --- the command ----------------------------------------------------------------------------------------
static void report_usage(FILE *f) {
    fprintf(f,
            "usage: khost report DIR [--svg FILE] [--html FILE] [--published]\n"
            "Tables (markdown) of accuracy and time per epoch (with model-compile time, cold / warm, where the\n"
            "records have it) from DIR/<task>/*.json, per task.\n"
            "  --svg FILE     also write a bar chart of time per epoch\n"
            "  --html FILE    also write one self-contained HTML page: tables, charts, learning curves,\n"
            "                 published figures, environment, unfinished cells (open it in any browser)\n"
            "  --published    also show the original benchmark's figures (from the task modules)\n"
            "Exit status: 0; 8 when DIR cannot be read, holds no records, a file was skipped or the chart\n"
            "cannot be written.\n");
}

int kh_cmd_report(int argc, char **argv) {
    const char *dir = NULL, *svg = NULL, *html = NULL;
    int published = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            report_usage(stdout);
            return KH_EXIT_OK;
        } else if (!strcmp(a, "--published")) {
            published = 1;
        } else if (!strcmp(a, "--svg")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "khost: report: --svg needs a file name\n");
                return KH_EXIT_USAGE;
            }
            svg = argv[++i];
        } else if (!strncmp(a, "--svg=", 6)) {
            svg = a + 6;
        } else if (!strcmp(a, "--html")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "khost: report: --html needs a file name\n");
                return KH_EXIT_USAGE;
            }
            html = argv[++i];
        } else if (!strncmp(a, "--html=", 7)) {
            html = a + 7;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "khost: report: unknown option '%s' (khost report --help lists them)\n", a);
            return KH_EXIT_USAGE;
        } else if (!dir) {
            dir = a;
        } else {
            fprintf(stderr, "khost: report: one results folder expected, got '%s' and '%s'\n", dir, a);
            return KH_EXIT_USAGE;
        }
    }
    if (!dir || (svg && !*svg) || (html && !*html)) {
        report_usage(stderr);
        return KH_EXIT_USAGE;
    }

    reader rd = {0};
    names sub = {0};
    int rc = KH_EXIT_OK;
    if (list_dir(dir, 1, &sub) != 0) {
        fprintf(stderr, "khost: report: %s: cannot read: %s\n", dir, strerror(errno));
        names_free(&sub);
        return KH_EXIT_IO;
    }
    int oom = read_folder(&rd, dir) != 0;
    for (int i = 0; i < sub.n && !oom; i++) {
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, sub.v[i]) >= sizeof path) continue;
        oom = read_folder(&rd, path) != 0;
    }
    names_free(&sub);
    if (!oom) oom = read_slurm_plans(&rd, dir) != 0;
    kh_report rep;
    if (oom || report_build(&rep, rd.recs, rd.n) != 0) {
        fprintf(stderr, "khost: report: %s: out of memory\n", dir);
        if (oom) {
            for (int i = 0; i < rd.n; i++) kh_record_free(&rd.recs[i]);
            free(rd.recs);
        } else {
            report_free(&rep);
        }
        return KH_EXIT_IO;
    }
    if (rep.n_recs == 0) {
        fprintf(stderr, "khost: report: %s: no result records (expected %s/<task>/<plugin>__<device>.json, "
                        "written by khost run or khost matrix)\n", dir, dir);
        report_free(&rep);
        return KH_EXIT_IO;
    }

    kh_host h;
    int host_ok = 0;
    if (published || html) {
        /* report gets no host; the registry tells where the task modules (and their figures) are. */
        host_ok = kh_host_open(&h, "khost") == KH_EXIT_OK;
    }
    printf("# khost benchmark report\n\n");
    if (published && !host_ok)
        printf("Published figures unavailable: the registry could not be opened (the error is on stderr).\n\n");
    for (int t = 0; t < rep.n_tasks; t++) {
        print_task(stdout, &rep.tasks[t]);
        if (published) print_published(stdout, &h, host_ok, &rep.tasks[t]);
    }
    if (html) {
        char err[4400];
        if (kh_report_html(&rep, host_ok ? task_info : NULL, &h, html, err, sizeof err) != 0) {
            fprintf(stderr, "khost: report: %s\n", err);
            rc = KH_EXIT_IO;
        }
    }
    if (published || html) kh_host_close(&h);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "khost: report: cannot write the report: %s\n", strerror(errno));
        rc = KH_EXIT_IO;
    }

    if (svg) {
        char err[4400];
        if (kh_report_svg(&rep, svg, err, sizeof err) != 0) {
            fprintf(stderr, "khost: report: %s\n", err);
            rc = KH_EXIT_IO;
        }
    }
    if (rd.skipped) {
        fprintf(stderr, "khost: report: %d file(s) skipped\n", rd.skipped);
        rc = KH_EXIT_IO;
    }
    report_free(&rep);
    return rc;
}
