/* core/results/report/report_seeds.c — the report's section on accuracy across seeds and time to target, for a task
 * whose cells were trained from several seeds (matrix --seeds N: repetition k is seed k).
 *
 * Per backend (and reference row) and device: the number of seeds, the final metric's mean, sample sd, 95 %
 * t-interval over the seeds and min–max; the epochs and the time to the task's target, median and range over
 * the seeds, and how many never reached it; and MLPerf's convergence check — a row whose median epochs to
 * target lie outside [min, max] of the other rows' epochs on that device from the same seeds is marked, in
 * either direction, with a sentence saying what that means. The statistics are results/seedstats.h's.
 * A seed is the unit: a cell's repetitions are grouped by seed, and a seed counts once, by its first finished
 * repetition (its first one when none finished); a record that names no seed is left out. A task none of whose
 * cells has two seeds gets no section, so a result set of one seed per cell reports exactly as before. Markdown
 * (kh_report_print_seeds) and HTML (kh_report_html_seeds) say the same. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results/report/report.h"
#include "results/seedstats.h"

#define LEVEL 0.95

/* One seed of a cell, as its repetition recorded it. */
typedef struct seed_run {
    uint64_t seed;
    int ok, order;             /* finished; its place among the cell's repetitions */
    double metric, ttt, target;
    int ett, target_is_max;    /* epochs to target: KH_TARGET_* (results.h) */
    const char *metric_name;
} seed_run;

/* One row: a backend (or reference row) on one device. */
typedef struct seed_cell {
    int p, d;
    seed_run *s; int n, n_ok;  /* one per distinct seed, by seed */
    int n_unknown;             /* finished seeds that say nothing of the target (older records, no target) */
    kh_seed_spread acc;
    kh_to_target ett, ttt;
    int conv;                  /* the convergence check: -1 faster, +1 slower than all the others, 0 neither */
    double conv_median, conv_lo, conv_hi;
    uint64_t *shared; int n_shared; /* the seeds it was compared on */
} seed_cell;

typedef struct seed_table {
    seed_cell *c; int n;
    const seed_run *any_target; /* a run that names the task's target (its value, direction and metric) */
} seed_table;

static int cmp_run(const void *a, const void *b) {
    const seed_run *x = a, *y = b;
    if (x->seed != y->seed) return x->seed < y->seed ? -1 : 1;
    if (x->ok != y->ok) return y->ok - x->ok; /* a finished repetition stands for its seed */
    return x->order - y->order;
}

/* Whether run r says where the target was reached: a finished seed with a target and its epoch (or null). */
static int knows_target(const seed_run *r) {
    return r->ok && r->ett != KH_TARGET_UNKNOWN && isfinite(r->target);
}

/* A known run's epochs (or time) to target; INFINITY when it never reached it. */
static double ett_value(const seed_run *r) { return r->ett > 0 ? r->ett : INFINITY; }
static double ttt_value(const seed_run *r) { return r->ett > 0 ? (isfinite(r->ttt) ? r->ttt : NAN) : INFINITY; }

/* The index of seed in c when c's run of it says where the target was reached; -1 otherwise. */
static int seed_index(const seed_cell *c, uint64_t seed) {
    int lo = 0, hi = c->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (c->s[mid].seed < seed) lo = mid + 1;
        else hi = mid;
    }
    return lo < c->n && c->s[lo].seed == seed && knows_target(&c->s[lo]) ? lo : -1;
}

/* The cell's seeds from its repetitions; 0, or -1 out of memory. */
static int cell_runs(const kh_cell_stats *st, seed_cell *c) {
    if (!st || st->n_reps == 0) return 0;
    c->s = malloc((size_t)st->n_reps * sizeof *c->s);
    if (!c->s) return -1;
    int n = 0;
    for (int i = 0; i < st->n_reps; i++) { /* a record without a seed cannot stand for one */
        const kh_rep *r = &st->reps[i];
        if (r->seed_known)
            c->s[n++] = (seed_run){.seed = r->seed, .ok = !strcmp(r->status, "ok") && !r->impossible[0],
                                   .order = i, .metric = r->metric, .ttt = r->time_to_target_s,
                                   .target = r->target, .ett = r->epochs_to_target,
                                   .target_is_max = r->target_is_max, .metric_name = r->metric_name};
    }
    if (n) qsort(c->s, (size_t)n, sizeof *c->s, cmp_run);
    for (int i = 0; i < n; i++) /* the first of each seed's run of repetitions */
        if (i == 0 || c->s[i].seed != c->s[i - 1].seed) c->s[c->n++] = c->s[i];
    return 0;
}

/* Spread, epochs and time to target of one cell. -1 out of memory. */
static int cell_stats(seed_cell *c) {
    double *m = malloc((size_t)(c->n ? c->n : 1) * sizeof *m), *e = malloc((size_t)(c->n ? c->n : 1) * sizeof *e),
           *tt = malloc((size_t)(c->n ? c->n : 1) * sizeof *tt);
    if (!m || !e || !tt) {
        free(m), free(e), free(tt);
        return -1;
    }
    int nm = 0, ne = 0;
    for (int i = 0; i < c->n; i++) {
        const seed_run *r = &c->s[i];
        if (!r->ok) continue;
        c->n_ok++;
        m[nm++] = r->metric;
        if (!knows_target(r)) {
            c->n_unknown++;
            continue;
        }
        e[ne] = ett_value(r);
        tt[ne++] = ttt_value(r);
    }
    kh_seed_spread_of(m, nm, LEVEL, &c->acc);
    kh_to_target_of(e, ne, &c->ett);
    kh_to_target_of(tt, ne, &c->ttt);
    free(m), free(e), free(tt);
    return 0;
}

/* MLPerf's convergence check of cell c against every other row of its device, on the seeds both have. */
static int cell_check(seed_table *tb, seed_cell *c) {
    c->conv_median = c->conv_lo = c->conv_hi = NAN;
    int cap = 0;
    for (int j = 0; j < tb->n; j++)
        if (tb->c[j].d == c->d && &tb->c[j] != c) cap += tb->c[j].n;
    if (!cap || !c->n) return 0;
    double *others = malloc((size_t)cap * sizeof *others), *mine = malloc((size_t)c->n * sizeof *mine);
    char *used = calloc((size_t)c->n, 1);
    c->shared = malloc((size_t)c->n * sizeof *c->shared);
    if (!others || !mine || !used || !c->shared) {
        free(others), free(mine), free(used);
        return -1;
    }
    int no = 0, nm = 0;
    for (int j = 0; j < tb->n; j++) {
        const seed_cell *o = &tb->c[j];
        if (o->d != c->d || o == c) continue;
        for (int i = 0; i < o->n; i++) {
            const seed_run *r = &o->s[i];
            int at = knows_target(r) ? seed_index(c, r->seed) : -1;
            if (at < 0) continue;
            others[no++] = ett_value(r);
            used[at] = 1; /* a seed c shares with the others */
        }
    }
    for (int i = 0; i < c->n; i++)
        if (used[i]) {
            mine[nm++] = ett_value(&c->s[i]);
            c->shared[c->n_shared++] = c->s[i].seed;
        }
    if (nm) {
        kh_to_target t;
        kh_to_target_of(mine, nm, &t);
        c->conv_median = t.median;
        c->conv = kh_convergence_check(t.median, others, no, &c->conv_lo, &c->conv_hi);
    }
    free(others), free(mine), free(used);
    return 0;
}

static void table_free(seed_table *tb) {
    for (int i = 0; i < tb->n; i++) free(tb->c[i].s), free(tb->c[i].shared);
    free(tb->c);
    memset(tb, 0, sizeof *tb);
}

/* The task's rows, devices in the tables' order and backends within each; 1 when some row has two seeds
 * (the section is printed), 0 when none has, -1 out of memory (said on stderr). */
static int table_build(const kh_report_task *t, seed_table *tb) {
    memset(tb, 0, sizeof *tb);
    if (!t->stats) return 0;
    int several = 0;
    if (!(tb->c = calloc((size_t)t->np * (size_t)t->nd + 1, sizeof *tb->c))) goto oom;
    for (int d = 0; d < t->nd; d++)
        for (int p = 0; p < t->np; p++) {
            seed_cell *c = &tb->c[tb->n];
            c->p = p, c->d = d;
            if (cell_runs(t->stats[p * t->nd + d], c) != 0) goto oom;
            if (!c->n) { /* no record of it names a seed: the slot is reused */
                free(c->s);
                memset(c, 0, sizeof *c);
                continue;
            }
            tb->n++;
            several |= c->n > 1;
        }
    if (!several) {
        table_free(tb);
        return 0;
    }
    for (int i = 0; i < tb->n; i++) {
        if (cell_stats(&tb->c[i]) != 0 || cell_check(tb, &tb->c[i]) != 0) goto oom;
        for (int k = 0; k < tb->c[i].n && !tb->any_target; k++)
            if (knows_target(&tb->c[i].s[k])) tb->any_target = &tb->c[i].s[k];
    }
    return 1;
oom:
    fprintf(stderr, "khost: report: %s: out of memory: no section on accuracy across seeds\n", t->name);
    table_free(tb);
    return -1;
}

// --- formatting -----------------------------------------------------------------------------------------
/* A list of seeds: "7–9" when consecutive, else "7, 9, 12" (the first six, then "…"). */
static void fmt_seed_list(const uint64_t *s, int n, char *buf, size_t len) {
    int consecutive = 1;
    for (int i = 1; i < n; i++) consecutive &= s[i] == s[i - 1] + 1;
    if (n > 1 && consecutive) {
        snprintf(buf, len, "%llu–%llu", (unsigned long long)s[0], (unsigned long long)s[n - 1]);
        return;
    }
    size_t u = 0;
    buf[0] = 0;
    for (int i = 0; i < n && i < 6 && u < len; i++)
        u += (size_t)snprintf(buf + u, len - u, "%s%llu", i ? ", " : "", (unsigned long long)s[i]);
    if (n > 6 && u < len) snprintf(buf + u, len - u, ", …");
}

/* "3 (7–9)", or "2 of 3 (7–9; 1 did not finish)". */
static void fmt_seeds(const seed_cell *c, char *buf, size_t len) {
    uint64_t v[8];
    int k = 0;
    for (int i = 0; i < c->n && k < 7; i++) v[k++] = c->s[i].seed;
    char list[200];
    if (c->n <= 7) fmt_seed_list(v, k, list, sizeof list);
    else {
        uint64_t ends[2] = {c->s[0].seed, c->s[c->n - 1].seed};
        int consecutive = c->s[c->n - 1].seed - c->s[0].seed == (uint64_t)(c->n - 1);
        if (consecutive) fmt_seed_list(ends, 2, list, sizeof list);
        else fmt_seed_list(v, 7, list, sizeof list);
    }
    if (c->n_ok == c->n) snprintf(buf, len, "%d (%s)", c->n, list);
    else snprintf(buf, len, "%d of %d (%s; %d did not finish)", c->n_ok, c->n, list, c->n - c->n_ok);
}

/* "5 (1–5)", "never (4)", "4", "—"; seconds as the tables print them. */
static void fmt_to_target(const kh_to_target *t, int seconds, char *buf, size_t len) {
    if (t->n == 0) {
        snprintf(buf, len, "—");
        return;
    }
    char m[32], lo[32], hi[32];
    if (isinf(t->median)) snprintf(m, sizeof m, "never");
    else if (seconds) kh_report_fmt_seconds(t->median, m, sizeof m);
    else snprintf(m, sizeof m, "%g", t->median);
    if (isnan(t->min)) {
        snprintf(buf, len, "%s", m);
        return;
    }
    if (seconds) kh_report_fmt_seconds(t->min, lo, sizeof lo), kh_report_fmt_seconds(t->max, hi, sizeof hi);
    else snprintf(lo, sizeof lo, "%g", t->min), snprintf(hi, sizeof hi, "%g", t->max);
    if (t->min == t->max) snprintf(buf, len, "%s (%s)", m, lo);
    else snprintf(buf, len, "%s (%s–%s)", m, lo, hi);
}

/* "val_acc ≥ 0.95" from a run that names the target. */
static void fmt_target(const seed_run *r, char *buf, size_t len) {
    snprintf(buf, len, "%s %s %g", r->metric_name[0] ? r->metric_name : "metric", r->target_is_max ? "≤" : "≥",
             r->target);
}

/* A number with four decimals, "—" when unknown. */
static void fmt4(double v, char *buf, size_t len) {
    if (isfinite(v)) snprintf(buf, len, "%.4f", v);
    else snprintf(buf, len, "—");
}

/* The cells of a row, each as text (markdown and HTML escape them their own way: only the metric's name, in
 * `never`, is a record's text). */
typedef struct seed_texts {
    char seeds[300], mean[32], sd[32], ci[80], range[80], ett[160], ttt[120], never[320];
} seed_texts;

static void row_texts(const seed_cell *c, seed_texts *x) {
    fmt_seeds(c, x->seeds, sizeof x->seeds);
    fmt4(c->acc.mean, x->mean, sizeof x->mean);
    fmt4(c->acc.sd, x->sd, sizeof x->sd);
    if (isfinite(c->acc.lo)) snprintf(x->ci, sizeof x->ci, "[%.4f, %.4f]", c->acc.lo, c->acc.hi);
    else snprintf(x->ci, sizeof x->ci, "—");
    if (c->acc.n) snprintf(x->range, sizeof x->range, "%.4f–%.4f", c->acc.min, c->acc.max);
    else snprintf(x->range, sizeof x->range, "—");
    fmt_to_target(&c->ett, 0, x->ett, sizeof x->ett);
    if (c->conv) {
        size_t u = strlen(x->ett);
        snprintf(x->ett + u, sizeof x->ett - u, " ⚠ %s than all others", c->conv > 0 ? "slower" : "faster");
    }
    fmt_to_target(&c->ttt, 1, x->ttt, sizeof x->ttt);
    x->never[0] = 0;
    size_t u = 0;
    const seed_run *tr = NULL;
    for (int i = 0; i < c->n && !tr; i++)
        if (knows_target(&c->s[i])) tr = &c->s[i];
    if (c->ett.n_never && tr) {
        char tg[96];
        fmt_target(tr, tg, sizeof tg);
        u = (size_t)snprintf(x->never, sizeof x->never, "%d of %d seeds never reached the target (%s)", c->ett.n_never,
                             c->ett.n, tg);
    }
    if (c->n_unknown && u < sizeof x->never)
        snprintf(x->never + u, sizeof x->never - u, "%s%d seed%s without epochs to target (no target, or a record from "
                 "before them)", u ? "; " : "", c->n_unknown, c->n_unknown == 1 ? "" : "s");
}

/* The line under the tables for a row the convergence check marks. */
static void conv_line(FILE *f, const kh_report_task *t, const seed_cell *c, int html) {
    char range[64], seeds[200];
    if (c->conv_lo == c->conv_hi) snprintf(range, sizeof range, "%g", c->conv_lo);
    else snprintf(range, sizeof range, "%g–%g", c->conv_lo, c->conv_hi);
    fmt_seed_list(c->shared, c->n_shared, seeds, sizeof seeds);
    fputs(html ? "<p class=\"conv\">" : "- ", f);
    if (isinf(c->conv_median))
        fprintf(f, "⚠ %s on %s did not reach the target on at least half of seeds %s (its median is never), above %s, "
                   "the epochs every other backend and reference row on %s took on those seeds where they reached it: "
                   "it converges more slowly than all of them.", t->plugins[c->p], t->devices[c->d], seeds, range,
                t->devices[c->d]);
    else
        fprintf(f, "⚠ %s on %s reached the target in a median of %g epochs on seeds %s, %s %s, the epochs every "
                   "other backend and reference row on %s took on those seeds where they reached it: it converges %s "
                   "than all of them.", t->plugins[c->p], t->devices[c->d], c->conv_median, seeds,
                c->conv > 0 ? "above" : "below", range, t->devices[c->d], c->conv > 0 ? "more slowly" : "faster");
    fputs(html ? "</p>\n" : "\n", f);
}

static const char conv_meaning[] =
    "A run outside the range of the others (MLPerf's convergence check) trains something else, or the same model "
    "with other numerics: its time to target does not compare with theirs.";

static int is_reference(const kh_report_task *t, int p) {
    for (int d = 0; d < t->nd; d++)
        if (t->cells[p * t->nd + d]) return kh_report_is_reference(t->cells[p * t->nd + d]);
    return 0;
}

static const char intro[] =
    "each seed is its own training run; mean and sample sd over the seeds, 95 % CI = Student t-interval over the "
    "seeds, mean ± t(0.975, n − 1) sd / √n; the table above shows each cell's first finished seed";
static const char to_target_intro[] =
    "median over the seeds, a seed that never reached the target counting as later than all (\"never\" when at "
    "least half did not); the range is over the seeds that reached it. ⚠ marks a row whose median epochs lie "
    "outside the range of every other row on its device from the same seeds (MLPerf's convergence check)";

void kh_report_print_seeds(FILE *f, const kh_report_task *t) {
    seed_table tb;
    if (table_build(t, &tb) != 1) return;
    const char *metric = tb.any_target ? tb.any_target->metric_name : "";
    if (!metric[0])
        for (int i = 0; i < tb.n && !metric[0]; i++) metric = tb.c[i].s[0].metric_name;
    fprintf(f, "\nAccuracy across seeds (");
    kh_esc_md(f, metric[0] ? metric : "the metric");
    fprintf(f, " after the last epoch; ");
    fputs(intro, f);
    fprintf(f, "):\n\n| backend | device | seeds | mean | sd | 95 %% CI (t) | min–max |\n"
               "|---|---|---|---:|---:|---:|---:|\n");
    seed_texts x;
    for (int i = 0; i < tb.n; i++) {
        const seed_cell *c = &tb.c[i];
        row_texts(c, &x);
        fprintf(f, "| %s%s | %s | %s | %s | %s | %s | %s |\n", t->plugins[c->p],
                is_reference(t, c->p) ? " (reference)" : "", t->devices[c->d], x.seeds, x.mean, x.sd, x.ci, x.range);
    }
    if (!tb.any_target) {
        fprintf(f, "\nEpochs to target: none of these records names a target (the task sets none, or they were "
                   "written before epochs to target were recorded).\n");
        table_free(&tb);
        return;
    }
    char tg[96];
    fmt_target(tb.any_target, tg, sizeof tg);
    fprintf(f, "\nEpochs and time to target (");
    kh_esc_md(f, tg);
    fprintf(f, "; ");
    fputs(to_target_intro, f);
    fprintf(f, "):\n\n| backend | device | epochs to target | time to target (s) | never reached |\n"
               "|---|---|---:|---:|---|\n");
    for (int i = 0; i < tb.n; i++) {
        const seed_cell *c = &tb.c[i];
        row_texts(c, &x);
        fprintf(f, "| %s%s | %s | %s | %s | ", t->plugins[c->p], is_reference(t, c->p) ? " (reference)" : "",
                t->devices[c->d], x.ett, x.ttt);
        kh_esc_md(f, x.never);
        fprintf(f, " |\n");
    }
    int flagged = 0;
    for (int i = 0; i < tb.n; i++)
        if (tb.c[i].conv) {
            if (!flagged++) fputc('\n', f);
            conv_line(f, t, &tb.c[i], 0);
        }
    if (flagged) fprintf(f, "\n%s\n", conv_meaning);
    table_free(&tb);
}

/* A row's first cell on the page: the backend, marked when it is a reference row. */
static void html_label(FILE *f, const kh_report_task *t, int p, int d) {
    fputs("<tr><th>", f);
    kh_esc_xml(f, t->plugins[p]);
    if (is_reference(t, p)) fputs(" <span class=\"ref\">(reference)</span>", f);
    fputs("</th><td class=\"l\">", f);
    kh_esc_xml(f, t->devices[d]);
    fputs("</td>", f);
}

static void html_td(FILE *f, const char *s, const char *cls) {
    fprintf(f, "<td%s%s%s>", cls ? " class=\"" : "", cls ? cls : "", cls ? "\"" : "");
    kh_esc_xml(f, s);
    fputs("</td>", f);
}

void kh_report_html_seeds(FILE *f, const kh_report_task *t) {
    seed_table tb;
    if (table_build(t, &tb) != 1) return;
    fputs("<section class=\"seeds\"><style>section.seeds td.l{text-align:left}section.seeds td.conv,"
          "section.seeds p.conv{color:#a00;font-weight:600}</style>\n<table class=\"seeds\"><caption>Accuracy across "
          "seeds (", f);
    const char *metric = tb.any_target ? tb.any_target->metric_name : tb.c[0].s[0].metric_name;
    kh_esc_xml(f, metric[0] ? metric : "the metric");
    fputs(" after the last epoch; ", f);
    fputs(intro, f);
    fputs(")</caption>\n<thead><tr><th>backend</th><th>device</th><th>seeds</th><th>mean</th><th>sd</th>"
          "<th>95 % CI (t)</th><th>min–max</th></tr></thead>\n<tbody>\n", f);
    seed_texts x;
    for (int i = 0; i < tb.n; i++) {
        const seed_cell *c = &tb.c[i];
        row_texts(c, &x);
        html_label(f, t, c->p, c->d);
        const char *cols[] = {x.seeds, x.mean, x.sd, x.ci, x.range};
        for (int k = 0; k < 5; k++) html_td(f, cols[k], NULL);
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
    if (!tb.any_target) {
        fputs("<p>Epochs to target: none of these records names a target (the task sets none, or they were written "
              "before epochs to target were recorded).</p>\n</section>\n", f);
        table_free(&tb);
        return;
    }
    char tg[96];
    fmt_target(tb.any_target, tg, sizeof tg);
    fputs("<table class=\"to-target\"><caption>Epochs and time to target (", f);
    kh_esc_xml(f, tg);
    fputs("; ", f);
    fputs(to_target_intro, f);
    fputs(")</caption>\n<thead><tr><th>backend</th><th>device</th><th>epochs to target</th><th>time to target (s)"
          "</th><th>never reached</th></tr></thead>\n<tbody>\n", f);
    for (int i = 0; i < tb.n; i++) {
        const seed_cell *c = &tb.c[i];
        row_texts(c, &x);
        html_label(f, t, c->p, c->d);
        html_td(f, x.ett, c->conv ? "conv" : NULL);
        html_td(f, x.ttt, NULL);
        html_td(f, x.never, "l");
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
    int flagged = 0;
    for (int i = 0; i < tb.n; i++)
        if (tb.c[i].conv) conv_line(f, t, &tb.c[i], 1), flagged++;
    if (flagged) fprintf(f, "<p>%s</p>\n", conv_meaning);
    fputs("</section>\n", f);
    table_free(&tb);
}
