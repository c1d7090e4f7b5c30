/* core/results/stats.h — the statistics of khost's timings (docs/PERFORMANCE.md, "How khost measures").
 *
 * Plain functions over arrays of doubles; no state, no I/O. The unit they are given is the caller's choice;
 * khost gives them one value per repetition (each repetition is its own process, so its values are
 * independent), never the per-step samples of one process, which are autocorrelated and would make every
 * interval too narrow.
 *
 * Definitions (the unit tests compare each with numpy/scipy, tests/stats/make_fixtures.py):
 *   mean, sd              arithmetic mean; sample standard deviation (divisor n - 1; 0 for n = 1)
 *   quantile(p)           linear interpolation between order statistics (Hyndman & Fan type 7, numpy's
 *                         default method="linear"): h = (n - 1) p, x[floor h] + (h - floor h)(x[floor h + 1] - x[floor h])
 *   median, q1, q3, iqr   quantile(0.5), quantile(0.25), quantile(0.75), q3 - q1
 *   mad                   median(|x - median|), unscaled (scipy.stats.median_abs_deviation, scale=1)
 *   cv                    sd / mean (NAN when the mean is 0)
 *   modified Z-score      M = 0.6745 (x - median) / mad (Iglewicz & Hoaglin); an outlier when |M| > 3.5.
 *                         When mad is 0 (more than half the values equal) M = (x - median) / (1.253314 meanAD),
 *                         meanAD the mean absolute deviation from the median; when that is 0 too, M = 0.
 *   bootstrap CI          percentile interval: `resamples` resamples with replacement from a seeded
 *                         splitmix64 stream, the statistic of each, and the quantiles (1 -+ level) / 2 of
 *                         those (type 7). The same seed and data give the same interval on every machine.
 */
#ifndef KHOST_CORE_STATS_H
#define KHOST_CORE_STATS_H

#include <stddef.h>
#include <stdint.h>

#define KH_STATS_RESAMPLES 10000           /* bootstrap resamples used by report, compare and the summaries */
#define KH_STATS_SEED UINT64_C(0x6b686f7374) /* their seed ("khost"); recorded wherever an interval is */
#define KH_STATS_LEVEL 0.95
#define KH_STATS_OUTLIER_Z 3.5             /* Iglewicz & Hoaglin's threshold on |M| */
#define KH_STATS_CV_WARN 0.05              /* a cell whose repetitions vary more than this is flagged */

typedef struct kh_summary {
    int n;
    double mean, sd, median, q1, q3, iqr, mad, min, max, cv;
} kh_summary;

typedef struct kh_ci {
    double lo, hi;         /* NAN when not computable (fewer than 2 values) */
    int resamples;
    uint64_t seed;
    double level;
} kh_ci;

/* Quantile p in [0, 1] of an ascending array (type 7). NAN when n < 1. */
double kh_stats_quantile_sorted(const double *sorted, int n, double p);
/* Median of an unsorted array (not modified). NAN when n < 1 or out of memory. */
double kh_stats_median(const double *x, int n);
/* Every descriptive statistic at once. -1 when n < 1 or out of memory (s is then all NAN, n = 0). */
int kh_stats_summary(const double *x, int n, kh_summary *s);

/* Modified Z-score of each value into m[n] (may be NULL) and the outlier flag into flag[n] (may be NULL);
 * returns the number of outliers, -1 when n < 1 or out of memory. */
int kh_stats_outliers(const double *x, int n, double *m, int *flag);

/* Bootstrap CI of the median of x. -1 when out of memory; n < 2 gives 0 with lo = hi = NAN. */
int kh_stats_median_ci(const double *x, int n, int resamples, uint64_t seed, double level, kh_ci *ci);
/* The ratio of medians median(a) / median(b) of two series paired by index (a[i] and b[i] from the same
 * round): each resample draws n indices and takes both series' values at them, so the drift of the machine
 * common to a round cancels. -1 when out of memory; n < 2 gives the ratio with lo = hi = NAN. */
int kh_stats_ratio_paired(const double *a, const double *b, int n, int resamples, uint64_t seed, double level,
                          double *ratio, kh_ci *ci);
/* The same for two independent series (two result sets): each resampled on its own. */
int kh_stats_ratio_unpaired(const double *a, int na, const double *b, int nb, int resamples, uint64_t seed,
                            double level, double *ratio, kh_ci *ci);

/* Warnings about a cell's repetitions (x in the order they ran): */
#define KH_STATS_WARN_CV 1            /* cv above cv_threshold */
#define KH_STATS_WARN_FIRST_OUTLIER 2 /* the first repetition is a modified-Z outlier (warm caches, turbo) */
/* The KH_STATS_WARN_ bits; with text != NULL also a sentence per warning ("" when none). -1 out of memory. */
int kh_stats_warnings(const double *x, int n, double cv_threshold, char *text, size_t textlen);

/* One splitmix64 step (the bootstrap's stream), exposed for the tests. */
uint64_t kh_stats_splitmix64(uint64_t *state);
#endif
