/* core/results/stats.c — descriptive statistics, modified Z-score outliers and seeded bootstrap intervals
 * (definitions in stats.h). */
#include "results/stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double kh_stats_quantile_sorted(const double *s, int n, double p) {
    if (n < 1) return NAN;
    if (p <= 0) return s[0];
    if (p >= 1) return s[n - 1];
    double h = (n - 1) * p;
    int lo = (int)floor(h);
    if (lo >= n - 1) return s[n - 1];
    return s[lo] + (h - lo) * (s[lo + 1] - s[lo]);
}

static double *sorted_copy(const double *x, int n) {
    double *s = malloc((size_t)n * sizeof *s);
    if (!s) return NULL;
    memcpy(s, x, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return s;
}

double kh_stats_median(const double *x, int n) {
    if (n < 1) return NAN;
    double *s = sorted_copy(x, n);
    if (!s) return NAN;
    double m = kh_stats_quantile_sorted(s, n, 0.5);
    free(s);
    return m;
}

int kh_stats_summary(const double *x, int n, kh_summary *o) {
    o->n = 0;
    o->mean = o->sd = o->median = o->q1 = o->q3 = o->iqr = o->mad = o->min = o->max = o->cv = NAN;
    if (n < 1) return -1;
    double *s = sorted_copy(x, n);
    if (!s) return -1;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += s[i];
    double mean = sum / n, ss = 0;
    for (int i = 0; i < n; i++) ss += (s[i] - mean) * (s[i] - mean);
    o->n = n;
    o->mean = mean;
    o->sd = n > 1 ? sqrt(ss / (n - 1)) : 0.0;
    o->median = kh_stats_quantile_sorted(s, n, 0.5);
    o->q1 = kh_stats_quantile_sorted(s, n, 0.25);
    o->q3 = kh_stats_quantile_sorted(s, n, 0.75);
    o->iqr = o->q3 - o->q1;
    o->min = s[0];
    o->max = s[n - 1];
    o->cv = mean != 0 ? o->sd / mean : NAN;
    for (int i = 0; i < n; i++) s[i] = fabs(s[i] - o->median);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    o->mad = kh_stats_quantile_sorted(s, n, 0.5);
    free(s);
    return 0;
}

int kh_stats_outliers(const double *x, int n, double *m, int *flag) {
    if (n < 1) return -1;
    kh_summary s;
    if (kh_stats_summary(x, n, &s) != 0) return -1;
    double scale = 0;
    if (s.mad > 0) {
        scale = s.mad / 0.6745;
    } else {
        double mean_ad = 0;
        for (int i = 0; i < n; i++) mean_ad += fabs(x[i] - s.median);
        mean_ad /= n;
        scale = 1.253314 * mean_ad;
    }
    int count = 0;
    for (int i = 0; i < n; i++) {
        double z = scale > 0 ? (x[i] - s.median) / scale : 0.0;
        int out = fabs(z) > KH_STATS_OUTLIER_Z;
        if (m) m[i] = z;
        if (flag) flag[i] = out;
        count += out;
    }
    return count;
}

/* The generator's step, inlined into the resampling loops (which keep their state in a register). */
static inline uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

uint64_t kh_stats_splitmix64(uint64_t *state) { return splitmix64(state); }

/* An index in [0, n): the modulo bias is below n / 2^64, far under anything a bootstrap resolves. */
static inline int draw(uint64_t *st, int n) { return (int)(splitmix64(st) % (uint64_t)n); }

static void ci_init(kh_ci *ci, int resamples, uint64_t seed, double level) {
    ci->lo = ci->hi = NAN;
    ci->resamples = resamples;
    ci->seed = seed;
    ci->level = level;
}

/* The percentile interval of `stat` (B values, sorted in place). */
static void ci_from(double *stat, int b, kh_ci *ci) {
    qsort(stat, (size_t)b, sizeof *stat, cmp_double);
    double a = (1 - ci->level) / 2;
    ci->lo = kh_stats_quantile_sorted(stat, b, a);
    ci->hi = kh_stats_quantile_sorted(stat, b, 1 - a);
}

/* A sample sorted once (v) with each value's rank (rank[i]: the position of x[i] in v), so the median of a
 * resample is read from how often each rank was drawn: O(n) per resample instead of a sort, the same value. */
typedef struct ranked {
    double *v;
    int *rank;
} ranked;

typedef struct ranked_pair {
    double v;
    int i;
} ranked_pair;

static int cmp_ranked(const void *a, const void *b) {
    return cmp_double(&((const ranked_pair *)a)->v, &((const ranked_pair *)b)->v);
}

static int ranked_init(ranked *r, const double *x, int n) {
    ranked_pair *p = malloc((size_t)n * sizeof *p);
    r->v = malloc((size_t)n * sizeof *r->v);
    r->rank = malloc((size_t)n * sizeof *r->rank);
    if (!p || !r->v || !r->rank) {
        free(p);
        return -1;
    }
    for (int i = 0; i < n; i++) p[i] = (ranked_pair){x[i], i};
    qsort(p, (size_t)n, sizeof *p, cmp_ranked);
    for (int k = 0; k < n; k++) {
        r->v[k] = p[k].v;
        r->rank[p[k].i] = k;
    }
    free(p);
    return 0;
}

static void ranked_free(ranked *r) {
    free(r->v);
    free(r->rank);
}

/* The median (kh_stats_quantile_sorted's interpolation) of a resample of n values of x given as the number of
 * draws of each rank, count[n]. */
static double counted_median(const ranked *x, const int *count, int n) {
    double h = (n - 1) * 0.5;
    int lo = (int)floor(h), k = 0, seen = count[0];
    while (seen <= lo) seen += count[++k];
    double vlo = x->v[k];
    if (lo >= n - 1 || h == lo) return vlo;
    while (seen <= lo + 1) seen += count[++k];
    return vlo + (h - lo) * (x->v[k] - vlo);
}

/* One bootstrap's data (b and nb: the second sample of a ratio) and the scratch and draw state a resample
 * statistic works with. */
typedef struct boot {
    ranked a, b;
    int na, nb;
    int *idx;   /* max(na, nb) resample indices */
    int *count; /* max(na, nb) draws per rank */
    uint64_t st;
} boot;

/* The statistic of one resample, drawn from bs->st. */
typedef double (*boot_stat)(boot *bs);

/* The median of x's resample idx[0..n) (draws of positions), from how often each rank was drawn. */
static double median_of_draws(const ranked *x, const int *restrict idx, int n, int *restrict count) {
    const int *restrict rank = x->rank;
    memset(count, 0, (size_t)n * sizeof *count);
    for (int i = 0; i < n; i++) count[rank[idx[i]]]++;
    return counted_median(x, count, n);
}

/* The median of a resample of x (n values) drawn with replacement; its draws are kept in bs->idx when keep (a
 * paired ratio reads the other sample at the same positions). Otherwise each draw is counted as it is made:
 * one pass, no index array to write and read back. The loops keep the state in a local and
 * restrict pointers, so a count's store does not reload them. */
static double draw_median(boot *bs, const ranked *x, int n, int keep) {
    int *restrict idx = bs->idx, *restrict count = bs->count;
    const int *restrict rank = x->rank;
    uint64_t st = bs->st;
    if (keep) {
        for (int i = 0; i < n; i++) idx[i] = draw(&st, n);
        bs->st = st;
        return median_of_draws(x, idx, n, count);
    }
    memset(count, 0, (size_t)n * sizeof *count);
    for (int i = 0; i < n; i++) count[rank[draw(&st, n)]]++;
    bs->st = st;
    return counted_median(x, count, n);
}

static double median_of_a(boot *bs) { return draw_median(bs, &bs->a, bs->na, 0); }

/* Paired samples resample whole pairs: one draw of indices for both. */
static double paired_ratio(boot *bs) {
    double ra = draw_median(bs, &bs->a, bs->na, 1);
    return ra / median_of_draws(&bs->b, bs->idx, bs->na, bs->count);
}

static double unpaired_ratio(boot *bs) {
    double ra = draw_median(bs, &bs->a, bs->na, 0);
    double rb = draw_median(bs, &bs->b, bs->nb, 0);
    return ra / rb;
}

/* The percentile interval of `stat` over `resamples` resamples drawn from seed (ci's level); 0 ok, -1 out of
 * memory. */
static int bootstrap(boot_stat stat_of, const double *a, int na, const double *b, int nb, int resamples, uint64_t seed,
                     kh_ci *ci) {
    int m = na > nb ? na : nb;
    boot bs = {.na = na, .nb = nb, .st = seed};
    double *stat = malloc((size_t)resamples * sizeof *stat);
    bs.idx = malloc((size_t)m * sizeof *bs.idx);
    bs.count = malloc((size_t)m * sizeof *bs.count);
    int ok_a = ranked_init(&bs.a, a, na) == 0, ok_b = !b || ranked_init(&bs.b, b, nb) == 0;
    int rc = -1;
    if (stat && bs.idx && bs.count && ok_a && ok_b) {
        for (int r = 0; r < resamples; r++) stat[r] = stat_of(&bs);
        ci_from(stat, resamples, ci);
        rc = 0;
    }
    ranked_free(&bs.a);
    ranked_free(&bs.b);
    free(stat);
    free(bs.idx);
    free(bs.count);
    return rc;
}

int kh_stats_median_ci(const double *x, int n, int resamples, uint64_t seed, double level, kh_ci *ci) {
    ci_init(ci, resamples, seed, level);
    if (n < 2 || resamples < 2) return 0;
    return bootstrap(median_of_a, x, n, NULL, 0, resamples, seed, ci);
}

/* The ratio of the medians of a and b into *ratio; 0 when both have one, -1 when a median is NaN. */
static int median_ratio(const double *a, int na, const double *b, int nb, double *ratio) {
    *ratio = NAN;
    if (na < 1 || nb < 1) return 0;
    double ma = kh_stats_median(a, na), mb = kh_stats_median(b, nb);
    if (isnan(ma) || isnan(mb)) return -1;
    *ratio = ma / mb;
    return 0;
}

int kh_stats_ratio_paired(const double *a, const double *b, int n, int resamples, uint64_t seed, double level,
                          double *ratio, kh_ci *ci) {
    ci_init(ci, resamples, seed, level);
    if (median_ratio(a, n, b, n, ratio) != 0) return -1;
    if (n < 2 || resamples < 2) return 0;
    return bootstrap(paired_ratio, a, n, b, n, resamples, seed, ci);
}

int kh_stats_ratio_unpaired(const double *a, int na, const double *b, int nb, int resamples, uint64_t seed,
                            double level, double *ratio, kh_ci *ci) {
    ci_init(ci, resamples, seed, level);
    if (median_ratio(a, na, b, nb, ratio) != 0) return -1;
    if (na < 2 || nb < 2 || resamples < 2) return 0;
    return bootstrap(unpaired_ratio, a, na, b, nb, resamples, seed, ci);
}

int kh_stats_warnings(const double *x, int n, double cv_threshold, char *text, size_t textlen) {
    if (text && textlen) text[0] = 0;
    if (n < 2) return 0;
    kh_summary s;
    if (kh_stats_summary(x, n, &s) != 0) return -1;
    int *flag = malloc((size_t)n * sizeof *flag);
    if (!flag) return -1;
    if (kh_stats_outliers(x, n, NULL, flag) < 0) {
        free(flag);
        return -1;
    }
    int bits = 0;
    size_t used = 0;
    if (isfinite(s.cv) && s.cv > cv_threshold) {
        bits |= KH_STATS_WARN_CV;
        if (text && used < textlen)
            used += (size_t)snprintf(text + used, textlen - used,
                                     "CV %.1f %% over the %d repetitions exceeds %.1f %%: the machine was noisy",
                                     100 * s.cv, n, 100 * cv_threshold);
    }
    if (flag[0]) {
        bits |= KH_STATS_WARN_FIRST_OUTLIER;
        if (text && used < textlen)
            used += (size_t)snprintf(text + used, textlen - used,
                                     "%sthe first repetition is an outlier (modified Z-score above %.1f): warm-up "
                                     "effects reach across processes (file cache, clock boost)",
                                     used ? "; " : "", KH_STATS_OUTLIER_Z);
    }
    free(flag);
    return bits;
}
