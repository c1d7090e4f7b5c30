/* core/results/report/report.h — the results model `khost report` builds (records grouped by task, sorted), shared by the
 * markdown tables (report.c), the SVG chart (report_svg.c) and the page (report_html.c); read and built by
 * report_model.c. Internal to the core. */
#ifndef KHOST_CORE_REPORT_H
#define KHOST_CORE_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "base/escape.h"
#include "khost/task.h"
#include "results/cellstats.h"
#include "results/results.h"

typedef struct kh_report_task {
    const char *name;
    const char **plugins; int np;          /* sorted by name */
    const char **devices; int nd;          /* cpu first, then cuda:N by N, then the rest by name */
    const kh_cell_record **cells;          /* [plugin * nd + device], NULL where no record */
    const kh_cell_stats **stats;           /* the same grid: the cell's repetitions, NULL where unknown */
} kh_report_task;

/* A cell's repetitions, keyed as its record (task, plugin, device). */
typedef struct kh_report_cstats {
    char task[64], plugin[64], device[32];
    kh_cell_stats st;
} kh_report_cstats;

typedef struct kh_report {
    kh_cell_record *recs; int n_recs;
    kh_report_task *tasks; int n_tasks;    /* sorted by name */
    kh_report_cstats *cstats; int n_cstats;
} kh_report;

/* Cell i's time of kind 0 (epoch, s) or 1 (step, s) as the tables give it — the median over its repetitions —
 * and its bootstrap CI in *ci (NAN bounds for one repetition); NAN when the cell did not finish. */
double kh_report_cell_time(const kh_report_task *t, int i, int kind, kh_ci *ci);
/* A time with its interval, as the tables print it: "245.5 [240.1, 250.3]", "[—]" without one. */
void kh_report_fmt_time_ci(double v, const kh_ci *ci, double scale, char *buf, size_t n);
/* The factor of cell (p, d) to the fastest cell of device d by value kind (0 epoch, 1 step) and its bootstrap
 * CI paired by round; returns 1 when the cell is the fastest, 0 otherwise, -1 when it has no value. */
int kh_report_factor(const kh_report_task *t, int p, int d, int kind, double *factor, kh_ci *ci);
/* Row p's time on device d against the fastest reference row there (kh_report_is_reference), with the CI
 * paired by round: returns that reference's row, or -1 when p is a reference, has no value or there is none. */
int kh_report_vs_reference(const kh_report_task *t, int p, int d, int kind, double *factor, kh_ci *ci);
/* That comparison as a table cell, "0.80x [0.78, 0.82] vs keras3-tensorflow" ("—" without one); returns as
 * kh_report_vs_reference. has: whether row p (every row: p < 0) has one anywhere. The tables' title. */
int kh_report_fmt_vs_reference(const kh_report_task *t, int p, int d, char *buf, size_t n);
int kh_report_has_vs_reference(const kh_report_task *t, int p);
extern const char *const kh_report_vs_reference_title;
/* A time-table cell of kind 0 (epoch, s) or 1 (step, ms): time [CI] (factor [CI], "≈" when not significant),
 * bold for the fastest. */
void kh_report_fmt_time_cell(const kh_report_task *t, int p, int d, int kind, char *buf, size_t n);
/* Each finished cell's point under its hierarchical roofline, when some record names its level (report_roofline.c). */
void kh_report_roofline_points(FILE *f, const kh_report_task *t);
/* The time-per-step table, when some record of the task has per-step samples (report_stats.c). */
void kh_report_print_steps(FILE *f, const kh_report_task *t);
/* The peak-memory table (peak RSS; the backend's device memory where it counts it), when any record has one
 * (report_memory.c). */
void kh_report_print_memory(FILE *f, const kh_report_task *t);
/* The HTML page's strip plots of per-step samples per backend, one per device (report_strip.c). */
void kh_report_html_strips(FILE *f, const kh_report_task *t);
/* The HTML page's time-per-step table and measurement warnings (report_strip.c). */
void kh_report_html_steps(FILE *f, const kh_report_task *t);
/* Failed repetitions, noisy cells and outliers of a task. */
void kh_report_print_warnings(FILE *f, const kh_report_task *t);
/* Accuracy across seeds and epochs and time to target with the convergence check, when some cell of the task
 * was trained from two seeds or more (report_seeds.c); nothing otherwise. Markdown and the page's section. */
void kh_report_print_seeds(FILE *f, const kh_report_task *t);
void kh_report_html_seeds(FILE *f, const kh_report_task *t);

/* Seconds as the tables print them: one decimal from 1 s up (as the seed's README), 3 significant
 * digits below (smoke runs would otherwise all read 0.0). */
void kh_report_fmt_seconds(double s, char *buf, size_t n);
/* Model-compile time (ABI 1.2 records): 1 when some record of device column d has compile_s, so older
 * result sets get no column of dashes. */
int kh_report_has_compile(const kh_report_task *t, int d);
/* A compile cell: "cold / warm" for a backend with a generated-code cache (hit or miss; an unknown side is
 * "—"), compile_s alone for the others, "—" when the record does not say. */
void kh_report_fmt_compile(const kh_cell_record *r, char *buf, size_t n);
/* The explanation printed with a table that has a compile column. */
extern const char kh_report_compile_note[];
/* Device order of the tables and chart (strcmp-like). */
int kh_report_cmp_device(const char *a, const char *b);
/* The time-per-epoch chart as a self-contained SVG, written atomically. 0 ok, else err names the file. */
int kh_report_svg(const kh_report *rep, const char *path, char *err, size_t errlen);
/* The task module's info (published figures), or NULL when the module is not available. */
typedef const kh_task_info *(*kh_report_info_fn)(void *ctx, const char *task);
/* The self-contained HTML page, written atomically. extra (may be NULL) writes sections of its own after the
 * tasks' (the history of a database's records). 0 ok, else err names the file. */
int kh_report_html(const kh_report *rep, kh_report_info_fn info_of, void *ctx, void (*extra)(FILE *, void *),
                   void *extra_ctx, const char *path, char *err, size_t errlen);
/* DIR's records (DIR/<task>/ and DIR itself) and the cells its Slurm plans list without one, grouped and
 * sorted (report_model.c): 0 ok (*skipped: malformed files, each named on stderr), -1 DIR unreadable
 * (errno), -2 out of memory. kh_report_free releases it. */
int kh_report_load(const char *dir, kh_report *rep, int *skipped);
void kh_report_free(kh_report *rep);
/* The index of string x in v[0..n), -1 when absent. */
int kh_report_index(const char **v, int n, const char *x);
/* s escaped, then its note between open and close when it has one ("fp32 (why)", "error: reason"). */
void kh_report_esc_note(FILE *f, const char *s, const char *open, const char *note, const char *close);
/* A row of tools/reference (environment key "reference"), not a khost backend. */
int kh_report_is_reference(const kh_cell_record *r);
/* The pieces every per-device table shares. Markdown: the header (a backend column, one per device) and a
 * row's first cell (the backend, marked "(reference)" for tools/reference rows). HTML: the <thead> with the
 * first column's heading. */
void kh_report_md_head(FILE *f, const kh_report_task *t);
/* For a task with reference rows: each row's warm-up, timed steps and step boundary, as markdown or (html) a
 * table of the page, and a warning when the rows were not timed alike. report_protocol.c. */
void kh_report_print_protocol(FILE *f, const kh_report_task *t, int html);
void kh_report_md_label(FILE *f, const kh_report_task *t, int p);
void kh_report_html_head(FILE *f, const kh_report_task *t, const char *first);
/* The FP32 math of device column d (records' "math"): "fp32" or "tf32" when every record that says it agrees,
 * "mixed (cntk: tf32; tensorflow: fp32)" when they differ, "" when none says (records before --math).
 * Returns 1 when mixed. */
int kh_report_math(const kh_report_task *t, int d, char *buf, size_t n);
/* Whether device column d of t holds records (and repetitions) of different machines or builds
 * (results/identity.h; fields a record lacks differ from nothing, a reference row has no build): the
 * KH_REPORT_MIXED_ bits, 0 when not, -1 out of memory; list gets each backend's machine, build or both, by what
 * differs ("cntk: AMD EPYC (avx2); tensorflow: Intel(R) Xeon(R) Processor (avx512)"). report_mixed.c. */
#define KH_REPORT_MIXED_MACHINES 1
#define KH_REPORT_MIXED_BUILDS 2
int kh_report_mixed(const kh_report_task *t, int d, char *list, size_t n);
/* "different machines", "different builds", "different machines and builds". */
const char *kh_report_mixed_what(int what);
/* `khost report DIR [--svg FILE] [--html FILE] [--published] [--mixed]`: argv[0] is "report". A KH_EXIT_ code. */
int kh_cmd_report(int argc, char **argv);
#endif
