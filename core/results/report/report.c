/* core/results/report/report.c — `khost report DIR [--svg FILE] [--html FILE] [--published] [--mixed]`: the benchmark's tables from stored records.
 *
 * Reads DIR/<task>/<name>.json (and DIR/<name>.json, so one task's folder works too), one record per cell
 * (the .rep<k> records of a cell's repetitions are read as one, their statistics kept beside: cellstats.h),
 * groups the records by task and prints, per task, the accuracy table (the record's metric: val_acc, or loss
 * for text generation) and the time-per-epoch table (per repetition the mean over all epochs, the seed's
 * definition; the median over repetitions) as markdown, backends as rows and devices as columns. A time cell
 * is "245.5 [240.1, 250.3] (2.6x [2.5, 2.7])": the bootstrap CI, the factor to the fastest finished cell of
 * its column (which is bold) with its CI paired by round, "≈" where that contains 1, "[—]" for one run
 * (report_stats.c; also the time-per-step table and the measurement warnings); beside each device's time column, when some record there has one, its model-compile time
 * ("cold / warm" for backends with a generated-code cache, one time for the others, "—" unknown) with the
 * explanation under the table; a third table gives each finished cell's achieved GFLOP/s and fraction of the roofline when
 * the records carry them. Reference rows (tools/reference) are labelled. Cells that did not finish show their
 * status; cells of a Slurm array name their array task and node (the records' slurm_* environment), and a cell
 * a Slurm plan under DIR/slurm/ lists without a record shows "missing". A task whose cells were trained from several
 * seeds (matrix --seeds) adds the section on accuracy across seeds and epochs to target (report_seeds.c). Everything
 * is sorted, so the output depends only on the records (the tests compare it byte for byte).
 * A task's device column whose records come from different machines or builds (report_mixed.c) would print
 * factors between times that do not compare: the command refuses it, naming the task, the column and each
 * backend's machine or build, and reports nothing; --mixed reports it with a "Note: mixed: ..." line under the
 * task (and on the page).
 * Exit status: 0; KH_EXIT_USAGE for a bad command line; KH_EXIT_UNCOMPARABLE when a column mixes machines or
 * builds and --mixed was not given; KH_EXIT_IO when DIR cannot be read, holds no record, a file had to be
 * skipped (malformed: named on stderr, the rest is still reported) or the SVG cannot be written.
 */
#define _GNU_SOURCE /* strdup, open_memstream */
#include "results/report/report.h"
#include "results/history.h"
#include "results/resultsdb.h"
#include "guard/outpath.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/exitcodes.h"
#include "modules/host_api.h"
#include "modules/host.h"
#include "sched/slurm/slurm.h"

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
            fprintf(f, "%s %s on %s = ", any ? ";" : "Slurm array tasks:", t->plugins[p], t->devices[d]);
            kh_esc_md(f, aj);
            fputc('_', f);
            kh_esc_md(f, at ? at : "?");
            if (node && *node) {
                fputs(" on ", f);
                kh_esc_md(f, node);
            }
            any = 1;
        }
    if (any) fprintf(f, ".\n\n");
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
    int levels = 0; /* records since the hierarchical roofline name the level each was held to */
    for (int i = 0; i < t->np * t->nd; i++) levels |= is_ok(t->cells[i]) && t->cells[i]->roofline_level[0];
    fprintf(f, "\nAchieved GFLOP/s (model FLOPs per epoch / mean epoch time; %% of the device's roofline%s):\n\n",
            levels ? " at the memory level the training step's working set lives in, the level named" : "");
    kh_report_md_head(f, t);
    for (int p = 0; p < t->np; p++) {
        kh_report_md_label(f, t, p);
        for (int d = 0; d < t->nd; d++) {
            const kh_cell_record *r = t->cells[p * t->nd + d];
            if (!is_ok(r) || !isfinite(r->gflops)) fprintf(f, " %s |", is_ok(r) ? "n/a" : unfinished(r));
            else if (isfinite(r->roofline_fraction) && r->roofline_level[0])
                fprintf(f, " %.3g (%.1f%% of %s) |", r->gflops, 100 * r->roofline_fraction, r->roofline_level);
            else if (isfinite(r->roofline_fraction)) fprintf(f, " %.3g (%.1f%%) |", r->gflops, 100 * r->roofline_fraction);
            else fprintf(f, " %.3g |", r->gflops);
        }
        fprintf(f, "\n");
    }
    warn_roofline(f, t);
    kh_report_roofline_points(f, t);
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
        fprintf(f, "%s %s = ", d ? ";" : "", t->devices[d]);
        kh_esc_md(f, name ? name : "unknown");
        if (!strcmp(t->devices[d], "cpu") && threads) {
            fputs(" (", f);
            kh_esc_md(f, threads);
            fputs(" threads)", f);
        }
    }
    fprintf(f, ".\n\n");
    /* A column of different machines or builds shares the table only for its accuracy: with --mixed (without it
     * the command refused, kh_cmd_report) say so, and for which backends, rather than print factors silently. */
    for (int d = 0; d < t->nd; d++) {
        char list[2048];
        int what = kh_report_mixed(t, d, list, sizeof list);
        if (what <= 0) continue;
        fprintf(f, "Note: mixed: the %s column holds records from %s (", t->devices[d], kh_report_mixed_what(what));
        kh_esc_md(f, list);
        fprintf(f, "): its times and factors do not compare the backends.\n\n");
    }
    /* The FP32 math of each column (--math): TF32 and strict FP32 times are different questions. */
    char math[512];
    int any_math = 0;
    for (int d = 0; d < t->nd; d++) {
        kh_report_math(t, d, math, sizeof math);
        if (!math[0]) continue;
        fprintf(f, "%s%s = ", any_math++ ? "; " : "FP32 math: ", t->devices[d]);
        kh_esc_md(f, math);
    }
    if (any_math) fprintf(f, ".\n\n");
    for (int d = 0; d < t->nd; d++)
        if (kh_report_math(t, d, math, sizeof math)) {
            fprintf(f, "Note: the %s column mixes math modes, ", t->devices[d]);
            kh_esc_md(f, math + strlen("mixed "));
            fputs(": its times and factors do not compare the backends at one precision.\n\n", f);
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
    else {
        kh_esc_md(f, metric);
        fputs(":\n\n", f);
    }
    kh_report_md_head(f, t);
    for (int p = 0; p < t->np; p++) {
        kh_report_md_label(f, t, p);
        for (int d = 0; d < t->nd; d++) {
            const kh_cell_record *r = t->cells[p * t->nd + d];
            if (is_ok(r) && isfinite(r->metric_value))
                fprintf(f, " %.4f |", r->metric_value);
            else
                fprintf(f, " %s |", is_ok(r) ? "n/a" : unfinished(r));
        }
        fprintf(f, "\n");
    }
    kh_report_print_seeds(f, t);

    /* Time per epoch, and beside each device's column its compile times when any record there has them. */
    int any_compile = 0;
    for (int d = 0; d < t->nd; d++) any_compile |= kh_report_has_compile(t, d);
    fprintf(f, "\nTime per epoch (s, median over repetitions of each repetition's mean over all epochs "
               "[95 %% bootstrap CI]; factor to the fastest on each device [95 %% CI, paired by round]; ≈ = not "
               "significant)%s:\n\n", any_compile ? "; model-compile time (s, cold / warm)" : "");
    fprintf(f, "| backend |");
    for (int d = 0; d < t->nd; d++) {
        fprintf(f, " %s |", t->devices[d]);
        if (kh_report_has_compile(t, d)) fprintf(f, " %s compile cold/warm |", t->devices[d]);
    }
    fprintf(f, "\n|---|");
    for (int d = 0; d < t->nd; d++) fprintf(f, "%s", kh_report_has_compile(t, d) ? "---:|---:|" : "---:|");
    fprintf(f, "\n");
    for (int p = 0; p < t->np; p++) {
        kh_report_md_label(f, t, p);
        for (int d = 0; d < t->nd; d++) {
            const kh_cell_record *r = t->cells[p * t->nd + d];
            char cc[96] = "";
            if (kh_report_has_compile(t, d)) kh_report_fmt_compile(r, cc, sizeof cc);
            if (!is_ok(r) || !isfinite(r->mean_epoch_s) || r->mean_epoch_s <= 0) {
                fprintf(f, " %s |", is_ok(r) ? "n/a" : unfinished(r));
                if (cc[0]) fprintf(f, " %s |", cc);
                continue;
            }
            char s[256];
            kh_report_fmt_time_cell(t, p, d, 0, s, sizeof s);
            fprintf(f, " %s |", s);
            if (cc[0]) fprintf(f, " %s |", cc);
        }
        fprintf(f, "\n");
    }
    if (any_compile) fprintf(f, "\n%s\n", kh_report_compile_note);
    kh_report_print_steps(f, t);
    kh_report_print_protocol(f, t, 0); /* under the table against the references, when there is one */
    kh_report_print_memory(f, t);
    kh_report_print_warnings(f, t);

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
            fprintf(f, "- %s on %s: ", t->plugins[p], t->devices[d]);
            if (!(r->reason[0] && !strncmp(r->reason, r->status, sl) && r->reason[sl] == ':'))
                fprintf(f, "%s%s", r->status, r->reason[0] ? ": " : "");
            kh_esc_md(f, r->reason);
            fputc('\n', f);
        }
    fprintf(f, "\n");
}

// --- the published figures -----------------------------------------------------------------------------
static const kh_task_info *task_info(void *ctx, const char *task) {
    kh_host *h = ctx;
    char err[1024];
    kh_module *m = kh_modules_find_named(&h->mods, KH_MODULE_TASK, task, kh_host_api_get(), err, sizeof err);
    return m && m->task && m->task->info ? m->task->info() : NULL;
}

static void print_published(FILE *f, kh_host *h, int host_ok, const kh_report_task *t) {
    if (!host_ok) return;
    char err[1024];
    kh_module *m = kh_modules_find_named(&h->mods, KH_MODULE_TASK, t->name, kh_host_api_get(), err, sizeof err);
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
        if (kh_report_index(be, nb, p->backend) < 0 && nb < 16) be[nb++] = p->backend;
        if (kh_report_index(dv, nv, p->device) < 0 && nv < 16) dv[nv++] = p->device;
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
            "usage: khost report DIR [--svg FILE] [--html FILE] [--published] [--mixed]\n"
            "Tables (markdown) of accuracy and time per epoch (with model-compile time, cold / warm, where the\n"
            "records have it) from DIR/<task>/*.json, per task. Times are medians over a cell's repetitions\n"
            "(.rep<k>.json) with a bootstrap 95 %% CI, factors with a CI paired by round (\"≈\": not\n"
            "significant); records with per-step samples add a time-per-step table; one run shows [—].\n"
            "Cells trained from several seeds (matrix --seeds N) add accuracy across seeds (mean, sd, 95 %%\n"
            "t-interval) and epochs and time to target, with MLPerf's convergence check.\n"
            "  --svg FILE     also write a bar chart of time per epoch\n"
            "  --html FILE    also write one self-contained HTML page: tables, charts, learning curves,\n"
            "                 published figures, environment, unfinished cells (open it in any browser)\n"
            "  --published    also show the original benchmark's figures (from the task modules)\n"
            "  --mixed        report a task whose device column holds records of different machines (CPU model\n"
            "                 and cpu_isa; a CUDA device's name) or builds (khost version and git revision),\n"
            "                 marked \"Note: mixed: ...\"; without it such a column is refused (exit 9)\n"
            "Exit status: 0; 8 when DIR cannot be read, holds no records, a file was skipped or the chart\n"
            "cannot be written; 9 when a column mixes machines or builds and --mixed was not given.\n");
}

/* An output file option, "NAME FILE" or "NAME=FILE", at argv[*i]: 1 with the file in *out (and *i past it),
 * 0 when argv[*i] is another option, -1 with a message when the file name is missing. */
static int file_option(const char *name, int argc, char **argv, int *i, const char **out) {
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0) return 0;
    if (a[n] && a[n] != '=') return 0;
    if (a[n] == '=') *out = a + n + 1;
    else *out = *i + 1 < argc ? argv[++*i] : NULL;
    if (!*out || !**out) {
        fprintf(stderr, "khost: report: %s needs a file name%s\n", name, *out ? ", not an empty one" : "");
        return -1;
    }
    return 1;
}

/* Each column of different machines or builds, named on stderr: their count, or -1 out of memory. */
static int refuse_mixed(const kh_report *rep) {
    int bad = 0;
    for (int i = 0; i < rep->n_tasks; i++)
        for (int d = 0; d < rep->tasks[i].nd; d++) {
            const kh_report_task *t = &rep->tasks[i];
            char list[2048];
            int what = kh_report_mixed(t, d, list, sizeof list);
            if (what < 0) return -1;
            if (!what) continue;
            fprintf(stderr, "khost: report: task %s, column %s: records from %s (", t->name, t->devices[d],
                    kh_report_mixed_what(what));
            kh_esc_line(stderr, list);
            fputs("): their times do not compare; khost report --mixed reports them anyway, marked\n", stderr);
            bad++;
        }
    return bad;
}

/* A database's report page ends with the history of its records (results/history.h): a chart per series. A
 * folder has no history. */
static void history_section(FILE *f, void *ctx) {
    const char *src = ctx;
    char file[4096], err[4400];
    const char *filters = kh_db_source(src, file, sizeof file);
    if (!filters) return;
    kh_db *db = kh_db_open(file, KH_DB_READ, err, sizeof err);
    kh_history *h = db ? kh_history_load(db, filters, NULL, NULL, err, sizeof err) : NULL;
    kh_db_close(db);
    if (!h) {
        kh_esc_msg("khost: report: warning: no history on the page: ", err);
        return;
    }
    fputs("<section class=\"history\" id=\"history\"><h2>History</h2>\n", f);
    kh_history_page_style(f);
    kh_history_page_intro(f, src, kh_history_n_series(h), kh_history_n_records(h), 5);
    for (int i = 0; i < kh_history_n_series(h); i++) {
        kh_hist_series s;
        if (kh_history_series(h, i, 0.05, NULL, &s) != 0) {
            fputs("khost: report: warning: out of memory: the history on the page is cut short\n", stderr);
            break;
        }
        kh_history_page_series(f, &s, i + 1);
        kh_hist_series_free(&s);
    }
    fputs("</section>\n", f);
    kh_history_free(h);
}

int kh_cmd_report(int argc, char **argv) {
    const char *dir = NULL, *svg = NULL, *html = NULL;
    int published = 0, mixed = 0, got;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            report_usage(stdout);
            return KH_EXIT_OK;
        } else if (!strcmp(a, "--published")) {
            published = 1;
        } else if (!strcmp(a, "--mixed")) {
            mixed = 1;
        } else if ((got = file_option("--svg", argc, argv, &i, &svg)) ||
                   (got = file_option("--html", argc, argv, &i, &html))) {
            if (got < 0) return KH_EXIT_USAGE;
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

    kh_report rep;
    int skipped = 0, lrc = kh_report_load(dir, &rep, &skipped);
    if (lrc != 0) {
        if (lrc == -1) fprintf(stderr, "khost: report: %s: cannot read: %s\n", dir, strerror(errno));
        else if (lrc == -2) fprintf(stderr, "khost: report: %s: out of memory\n", dir); /* -3: said already */
        return KH_EXIT_IO;
    }
    int rc = KH_EXIT_OK;
    if (rep.n_recs == 0) {
        fprintf(stderr, "khost: report: %s: no result records (expected %s/<task>/<plugin>__<device>.json, "
                        "written by khost run or khost matrix)\n", dir, dir);
        kh_report_free(&rep);
        return KH_EXIT_IO;
    }

    int bad = mixed ? 0 : refuse_mixed(&rep);
    if (bad != 0) {
        if (bad < 0) fprintf(stderr, "khost: report: %s: out of memory\n", dir);
        kh_report_free(&rep);
        return bad < 0 ? KH_EXIT_IO : KH_EXIT_UNCOMPARABLE;
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
        if (kh_outpath_check(html, err, sizeof err) != 0 ||
            kh_report_html(&rep, host_ok ? task_info : NULL, &h, history_section, (void *)dir, html, err, sizeof err) != 0) {
            kh_esc_msg("khost: report: ", err);
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
        if (kh_outpath_check(svg, err, sizeof err) != 0 || kh_report_svg(&rep, svg, err, sizeof err) != 0) {
            kh_esc_msg("khost: report: ", err);
            rc = KH_EXIT_IO;
        }
    }
    if (skipped) {
        fprintf(stderr, "khost: report: %d file(s) skipped\n", skipped);
        rc = KH_EXIT_IO;
    }
    kh_report_free(&rep);
    return rc;
}
