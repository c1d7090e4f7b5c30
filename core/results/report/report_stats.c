/* core/results/report/report_stats.c — the uncertainty in `khost report`'s tables: a time as the median over a cell's
 * repetitions with its bootstrap CI, the factor to the fastest backend of a device with its CI paired by
 * round ("≈" where that CI contains 1: not significant), the time-per-step table (records with samples) and
 * the warnings of noisy cells. A cell of one repetition (every older result set) gets "—" for each interval:
 * one process says nothing about the next. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results/report/report.h"

static int is_ok(const kh_cell_record *r) { return r && !strcmp(r->status, "ok"); }

/* The cell's value of a kind: the median over its repetitions (epoch: each one's mean epoch time, so one
 * repetition gives the record's mean_epoch_s), NAN when none. */
static double cell_value(const kh_report_task *t, int i, int kind) {
    const kh_cell_record *r = t->cells[i];
    const kh_cell_stats *s = t->stats ? t->stats[i] : NULL;
    if (!is_ok(r)) return NAN;
    const kh_rep_stats *rs = s ? (kind ? &s->step : &s->epoch) : NULL;
    if (rs && rs->n > 0) return rs->s.median;
    return kind == 0 && isfinite(r->mean_epoch_s) && r->mean_epoch_s > 0 ? r->mean_epoch_s : NAN;
}

double kh_report_cell_time(const kh_report_task *t, int i, int kind, kh_ci *ci) {
    const kh_cell_stats *s = t->stats ? t->stats[i] : NULL;
    const kh_rep_stats *rs = s ? (kind ? &s->step : &s->epoch) : NULL;
    double v = cell_value(t, i, kind);
    ci->lo = ci->hi = NAN;
    if (isfinite(v) && rs && rs->n > 0) *ci = rs->ci;
    return v;
}

void kh_report_fmt_time_ci(double v, const kh_ci *ci, double scale, char *buf, size_t n) {
    char a[32], lo[32], hi[32];
    kh_report_fmt_seconds(v * scale, a, sizeof a);
    if (!ci || !isfinite(ci->lo) || !isfinite(ci->hi)) {
        snprintf(buf, n, "%s [—]", a);
        return;
    }
    kh_report_fmt_seconds(ci->lo * scale, lo, sizeof lo);
    kh_report_fmt_seconds(ci->hi * scale, hi, sizeof hi);
    snprintf(buf, n, "%s [%s, %s]", a, lo, hi);
}

/* The ratio of cell me's value to cell other's (same kind) with its CI paired by round; NAN bounds when
 * either has fewer than two repetitions. */
static void no_ci(kh_ci *ci) {
    ci->lo = ci->hi = NAN;
    ci->resamples = KH_STATS_RESAMPLES;
    ci->seed = KH_STATS_SEED;
    ci->level = KH_STATS_LEVEL;
}

static void ratio_ci(const kh_report_task *t, int me, int other, int kind, double *factor, kh_ci *ci) {
    no_ci(ci);
    *factor = cell_value(t, me, kind) / cell_value(t, other, kind);
    const kh_cell_stats *a = t->stats ? t->stats[me] : NULL, *b = t->stats ? t->stats[other] : NULL;
    if (!a || !b) return;
    int cap = a->n_reps; /* at most one pair per repetition of a, even when rounds repeat */
    if (cap < 2 || b->n_reps < 2) return;
    double *x = malloc((size_t)cap * sizeof *x), *y = malloc((size_t)cap * sizeof *y);
    if (x && y) {
        int n = kh_cell_stats_pairs(a, b, kind, x, y);
        double r;
        kh_ci c;
        if (n >= 2 && kh_stats_ratio_paired(x, y, n, KH_STATS_RESAMPLES, KH_STATS_SEED, KH_STATS_LEVEL, &r, &c) == 0)
            *ci = c; /* the interval of the paired rounds; the factor itself stays the ratio of the cells' medians */
    }
    free(x);
    free(y);
}

/* The fastest row of device d with a value of this kind (only reference rows when refs_only); -1 if none. */
static int fastest_row(const kh_report_task *t, int d, int kind, int refs_only) {
    int best = -1;
    double bv = INFINITY;
    for (int q = 0; q < t->np; q++) {
        int i = q * t->nd + d;
        double x = cell_value(t, i, kind); /* finite only for a finished record */
        if (!isfinite(x) || (refs_only && !kh_report_is_reference(t->cells[i]))) continue;
        if (x < bv) bv = x, best = i;
    }
    return best;
}

int kh_report_factor(const kh_report_task *t, int p, int d, int kind, double *factor, kh_ci *ci) {
    int me = p * t->nd + d, best = fastest_row(t, d, kind, 0);
    no_ci(ci);
    *factor = NAN;
    if (!isfinite(cell_value(t, me, kind)) || best < 0) return -1;
    if (best == me || cell_value(t, me, kind) == cell_value(t, best, kind)) {
        *factor = 1;
        return 1;
    }
    ratio_ci(t, me, best, kind, factor, ci);
    return 0;
}

/* The cell of the fastest reference row that row p on device d is compared with (no interval computed yet);
 * -1 when p is a reference itself, has no value, or the device has no reference row with one. */
static int reference_cell(const kh_report_task *t, int p, int d, int kind) {
    int me = p * t->nd + d, ref = fastest_row(t, d, kind, 1);
    if (ref < 0 || !isfinite(cell_value(t, me, kind)) || kh_report_is_reference(t->cells[me])) return -1;
    return ref;
}

int kh_report_vs_reference(const kh_report_task *t, int p, int d, int kind, double *factor, kh_ci *ci) {
    int ref = reference_cell(t, p, d, kind);
    no_ci(ci);
    *factor = NAN;
    if (ref < 0) return -1;
    ratio_ci(t, p * t->nd + d, ref, kind, factor, ci);
    return ref / t->nd;
}

/* "**245.5 [240.1, 250.3] (1.0x)**", "262.0 [—] (1.9x [—])", "101.3 [99.0, 104.2] (1.02x [0.97, 1.08] ≈)". */
void kh_report_fmt_time_cell(const kh_report_task *t, int p, int d, int kind, char *buf, size_t n) {
    int i = p * t->nd + d;
    const kh_cell_stats *s = t->stats ? t->stats[i] : NULL;
    const kh_rep_stats *rs = s ? (kind ? &s->step : &s->epoch) : NULL;
    double factor;
    kh_ci fci;
    int fastest = kh_report_factor(t, p, d, kind, &factor, &fci);
    char tm[96];
    kh_report_fmt_time_ci(cell_value(t, i, kind), rs && rs->n ? &rs->ci : NULL, kind ? 1000 : 1, tm, sizeof tm);
    if (fastest == 1) {
        snprintf(buf, n, "**%s (1.0x)**", tm);
        return;
    }
    /* two decimals near 1, where "1.0x" would hide the difference the interval is about */
    int prec = factor < 1.095 ? 2 : 1;
    char f1[32], lo[32], hi[32];
    snprintf(f1, sizeof f1, "%.*f", prec, factor);
    if (!isfinite(fci.lo)) {
        snprintf(buf, n, "%s (%sx [—])", tm, f1);
        return;
    }
    snprintf(lo, sizeof lo, "%.*f", prec, fci.lo);
    snprintf(hi, sizeof hi, "%.*f", prec, fci.hi);
    snprintf(buf, n, "%s (%sx [%s, %s]%s)", tm, f1, lo, hi, fci.lo <= 1 && 1 <= fci.hi ? " ≈" : "");
}

int kh_report_fmt_vs_reference(const kh_report_task *t, int p, int d, char *buf, size_t n) {
    double x;
    kh_ci c;
    int ref = kh_report_vs_reference(t, p, d, 1, &x, &c);
    if (ref < 0) snprintf(buf, n, "—");
    else if (isfinite(c.lo))
        snprintf(buf, n, "%.2fx [%.2f, %.2f]%s vs %s", x, c.lo, c.hi, c.lo <= 1 && 1 <= c.hi ? " ≈" : "", t->plugins[ref]);
    else snprintf(buf, n, "%.2fx [—] vs %s", x, t->plugins[ref]);
    return ref;
}

int kh_report_has_vs_reference(const kh_report_task *t, int p) {
    int any = 0; /* which rows have a comparison needs no interval: no bootstrap here */
    for (int q = p < 0 ? 0 : p; q < (p < 0 ? t->np : p + 1) && !any; q++)
        for (int d = 0; d < t->nd && !any; d++) any = reference_cell(t, q, d, 1) >= 0;
    return any;
}

/* Each backend's time per step against the fastest reference row of its device (what a user would run
 * instead), when the task has both. */
static void print_vs_reference(FILE *f, const kh_report_task *t) {
    if (!kh_report_has_vs_reference(t, -1)) return;
    fprintf(f, "\n%s:\n\n", kh_report_vs_reference_title);
    kh_report_md_head(f, t);
    for (int p = 0; p < t->np; p++) {
        if (!kh_report_has_vs_reference(t, p)) continue;
        kh_report_md_label(f, t, p);
        for (int d = 0; d < t->nd; d++) {
            char cell[192];
            kh_report_fmt_vs_reference(t, p, d, cell, sizeof cell);
            fprintf(f, " %s |", cell);
        }
        fprintf(f, "\n");
    }
}

const char *const kh_report_vs_reference_title =
    "Against the fastest reference (time per step: ratio of medians to the fastest reference row of the device "
    "[95 % CI, paired by round]; below 1.00x = faster than it; ≈ = not significant)";

/* The time-per-step table (ms) when some finished cell of the task has per-step samples. */
void kh_report_print_steps(FILE *f, const kh_report_task *t) {
    int any = 0;
    for (int i = 0; i < t->np * t->nd; i++) any |= isfinite(cell_value(t, i, 1));
    if (!any) return;
    fprintf(f, "\nTime per step (ms, median over repetitions of each repetition's median step [95 %% bootstrap CI]; "
               "factor to the fastest on each device [95 %% CI, paired by round]; ≈ = not significant):\n\n");
    kh_report_md_head(f, t);
    for (int p = 0; p < t->np; p++) {
        kh_report_md_label(f, t, p);
        for (int d = 0; d < t->nd; d++) {
            const kh_cell_record *r = t->cells[p * t->nd + d];
            char cell[256];
            if (!isfinite(cell_value(t, p * t->nd + d, 1))) {
                fputc(' ', f);
                kh_esc_md(f, is_ok(r) ? "—" : r ? r->status : "");
                fputs(" |", f);
                continue;
            }
            kh_report_fmt_time_cell(t, p, d, 1, cell, sizeof cell);
            fprintf(f, " %s |", cell);
        }
        fprintf(f, "\n");
    }
    print_vs_reference(f, t);
}

/* Cells of several repetitions: repetitions that failed or were taken under noise, cells whose repetitions vary more
 * than KH_STATS_CV_WARN or whose first repetition is an outlier; outliers are listed, never dropped. */
void kh_report_print_warnings(FILE *f, const kh_report_task *t) {
    int any = 0;
    for (int p = 0; p < t->np; p++)
        for (int d = 0; d < t->nd; d++) {
            const kh_cell_stats *s = t->stats ? t->stats[p * t->nd + d] : NULL;
            if (!s || s->n_reps < 2) continue; /* one run: "Did not finish" already says what happened */
            const kh_rep_stats *rs = s->step.n ? &s->step : &s->epoch;
            int unsynced = s->step.n && !strcmp(s->step_sync, "none"), noisy = 0;
            for (int i = 0; i < s->n_reps; i++) noisy += kh_rep_noisy(&s->reps[i]);
            if (!s->n_failed && !rs->warn && !rs->n_outliers && !unsynced && !noisy) continue;
            if (!any) fprintf(f, "\nMeasurement warnings:\n\n");
            any = 1;
            fprintf(f, "- %s on %s (%s times, %d repetition%s):", t->plugins[p], t->devices[d],
                    s->step.n ? "step" : "epoch", s->n_reps, s->n_reps == 1 ? "" : "s");
            const char *sep = " ";
            if (s->n_failed) {
                fprintf(f, "%s%d did not finish (", sep, s->n_failed);
                for (int i = 0, k = 0; i < s->n_reps; i++)
                    if (strcmp(s->reps[i].status, "ok")) {
                        fprintf(f, "%s#%d ", k++ ? ", " : "", s->reps[i].index);
                        kh_esc_md(f, s->reps[i].status);
                    }
                fprintf(f, "), not counted");
                sep = "; ";
            }
            if (rs->warnings[0]) fprintf(f, "%s%s", sep, rs->warnings), sep = "; ";
            if (unsynced)
                fprintf(f, "%sstep times taken without synchronising the device (the backend cannot): a step's "
                           "time may belong to its neighbour", sep), sep = "; ";
            if (noisy) { /* the machine was busy with something else, or its hypervisor stole time, meanwhile */
                fprintf(f, "%s%d taken under noise (other processes above %.2g cores or steal above %.0f %%):", sep,
                        noisy, KH_NOISE_OTHER_CORES, KH_NOISE_STEAL_PCT);
                for (int i = 0; i < s->n_reps; i++)
                    if (kh_rep_noisy(&s->reps[i]))
                        fprintf(f, " #%d (others %.2f cores, steal %.1f %%)", s->reps[i].index, s->reps[i].other_cores,
                                isfinite(s->reps[i].steal_pct) ? s->reps[i].steal_pct : 0.0);
                sep = "; ";
            }
            if (rs->n_outliers) {
                fprintf(f, "%soutliers kept (|modified Z| > %.1f):", sep, KH_STATS_OUTLIER_Z);
                for (int i = 0; i < s->n_reps; i++) {
                    const kh_rep *r = &s->reps[i];
                    if (s->step.n ? r->step_outlier : r->epoch_outlier)
                        fprintf(f, " #%d (Z %.1f)", r->index, s->step.n ? r->step_z : r->epoch_z);
                }
            }
            fprintf(f, ".\n");
        }
}
