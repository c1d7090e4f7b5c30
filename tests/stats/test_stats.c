/* tests/stats/test_stats.c — core/results/stats.c against numpy/scipy (fixtures.json, made by make_fixtures.py), the
 * fixture comparison rejecting deliberately wrong formulas, and the bootstrap intervals by their properties
 * (they cannot match numpy's RNG): determinism per seed, a different seed giving another interval, the
 * interval holding the median, width shrinking with n, and coverage of a known median over many seeds. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results/stats.h"
#include "testutil.h"

typedef int (*summary_fn)(const double *x, int n, kh_summary *s);

/* Deliberately wrong formulas: the fixture comparison must reject each. */
static int bad_median_is_mean(const double *x, int n, kh_summary *s) {
    int rc = kh_stats_summary(x, n, s);
    s->median = s->mean;
    return rc;
}
static int bad_sd_divides_by_n(const double *x, int n, kh_summary *s) {
    int rc = kh_stats_summary(x, n, s);
    s->sd *= sqrt((double)(n - 1) / n);
    s->cv = s->sd / s->mean;
    return rc;
}
static int bad_quartile_lower(const double *x, int n, kh_summary *s) { /* numpy's method="lower" */
    int rc = kh_stats_summary(x, n, s);
    double *v = malloc((size_t)n * sizeof *v);
    if (!v) return -1;
    memcpy(v, x, (size_t)n * sizeof *v);
    for (int i = 1; i < n; i++) /* insertion sort: n is small */
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j]; v[j] = v[j - 1]; v[j - 1] = t;
        }
    s->q1 = v[(int)floor((n - 1) * 0.25)];
    s->q3 = v[(int)floor((n - 1) * 0.75)];
    s->iqr = s->q3 - s->q1;
    free(v);
    return rc;
}
static int bad_mad_scaled(const double *x, int n, kh_summary *s) { /* scipy's scale="normal" */
    int rc = kh_stats_summary(x, n, s);
    s->mad *= 1.482602218505602;
    return rc;
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}
static int close_to(double a, double b) { return fabs(a - b) <= 1e-12 + 1e-10 * fabs(b); }

static double *array_of(const cJSON *o, const char *k, int *n) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, k), *e;
    *n = cJSON_GetArraySize(a);
    double *x = calloc((size_t)(*n > 0 ? *n : 1), sizeof *x);
    int i = 0;
    if (x) cJSON_ArrayForEach(e, a) x[i++] = cJSON_IsNumber(e) ? e->valuedouble : (cJSON_IsTrue(e) ? 1 : 0);
    return x;
}

/* Number of fixture values fn gets wrong (quiet: the perturbation checks expect some). */
static int fixture_mismatches(const cJSON *cases, summary_fn fn, int verbose) {
    int bad = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const char *name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
        int n;
        double *x = array_of(c, "x", &n);
        kh_summary s;
        if (!x || fn(x, n, &s) != 0) {
            bad++;
            free(x);
            continue;
        }
        struct { const char *k; double v; } got[] = {
            {"mean", s.mean}, {"sd", s.sd}, {"median", s.median}, {"q1", s.q1}, {"q3", s.q3},
            {"iqr", s.iqr}, {"mad", s.mad}, {"min", s.min}, {"max", s.max}, {"cv", s.cv}};
        for (size_t i = 0; i < sizeof got / sizeof got[0]; i++)
            if (!close_to(got[i].v, num(c, got[i].k))) {
                bad++;
                if (verbose) fprintf(stderr, "  %s: %s = %.17g, numpy %.17g\n", name, got[i].k, got[i].v, num(c, got[i].k));
            }
        free(x);
    }
    return bad;
}

static void test_fixtures(const cJSON *root) {
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases"), *c;
    CHECK(cJSON_GetArraySize(cases) >= 8, "fixture cases: %d", cJSON_GetArraySize(cases));
    CHECK(fixture_mismatches(cases, kh_stats_summary, 1) == 0, "kh_stats_summary disagrees with numpy/scipy");
    /* the comparison itself must catch wrong formulas */
    CHECK(fixture_mismatches(cases, bad_median_is_mean, 0) > 0, "median computed as the mean went unnoticed");
    CHECK(fixture_mismatches(cases, bad_sd_divides_by_n, 0) > 0, "sd with divisor n went unnoticed");
    CHECK(fixture_mismatches(cases, bad_quartile_lower, 0) > 0, "quartiles by method=lower went unnoticed");
    CHECK(fixture_mismatches(cases, bad_mad_scaled, 0) > 0, "a normal-scaled MAD went unnoticed");

    cJSON_ArrayForEach(c, cases) {
        const char *name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
        int n, nz, nf;
        double *x = array_of(c, "x", &n), *z = array_of(c, "modified_z", &nz), *fl = array_of(c, "outlier", &nf);
        double *m = calloc((size_t)n, sizeof *m);
        int *flag = calloc((size_t)n, sizeof *flag);
        CHECK(x && z && fl && m && flag && nz == n && nf == n, "%s: fixture arrays", name);
        if (x && z && fl && m && flag && nz == n && nf == n) {
            int count = kh_stats_outliers(x, n, m, flag), want = 0;
            for (int i = 0; i < n; i++) {
                want += fl[i] != 0;
                CHECK(fabs(m[i] - z[i]) <= 1e-9 + 1e-9 * fabs(z[i]), "%s: modified Z[%d] %.12g vs %.12g", name, i, m[i], z[i]);
                CHECK(flag[i] == (fl[i] != 0), "%s: outlier flag [%d]", name, i);
            }
            CHECK(count == want, "%s: %d outliers, scipy %d", name, count, want);
            /* the type-7 quantile at other points than the quartiles */
            double *s = malloc((size_t)n * sizeof *s);
            if (s) {
                memcpy(s, x, (size_t)n * sizeof *s);
                for (int i = 1; i < n; i++)
                    for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
                        double t = s[j]; s[j] = s[j - 1]; s[j - 1] = t;
                    }
                CHECK(close_to(kh_stats_quantile_sorted(s, n, 0.1), num(c, "p10")), "%s: p10", name);
                CHECK(close_to(kh_stats_quantile_sorted(s, n, 0.9), num(c, "p90")), "%s: p90", name);
                free(s);
            }
            CHECK(close_to(kh_stats_median(x, n), num(c, "median")), "%s: kh_stats_median", name);
        }
        free(x); free(z); free(fl); free(m); free(flag);
    }
    const cJSON *ratios = cJSON_GetObjectItemCaseSensitive(root, "ratios");
    cJSON_ArrayForEach(c, ratios) {
        int na, nb;
        double *a = array_of(c, "a", &na), *b = array_of(c, "b", &nb), r;
        kh_ci ci;
        CHECK(a && b && na == nb, "ratio fixture");
        if (a && b && na == nb) {
            CHECK(kh_stats_ratio_paired(a, b, na, 2000, 1, 0.95, &r, &ci) == 0, "paired ratio");
            CHECK(close_to(r, num(c, "ratio")), "paired ratio %.12g vs numpy %.12g", r, num(c, "ratio"));
            CHECK(ci.lo <= r && r <= ci.hi, "paired ratio inside its CI [%g, %g]", ci.lo, ci.hi);
            CHECK(kh_stats_ratio_unpaired(a, na, b, nb, 2000, 1, 0.95, &r, &ci) == 0, "unpaired ratio");
            CHECK(close_to(r, num(c, "ratio")), "unpaired ratio");
        }
        free(a);
        free(b);
    }
}

/* A standard normal deviate from the test's own stream (Box-Muller), independent of the bootstrap's use. */
static double normal(uint64_t *st) {
    double u1 = ((kh_stats_splitmix64(st) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = ((kh_stats_splitmix64(st) >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

static void test_bootstrap(void) {
    double x[7] = {2.0, 2.3, 1.9, 2.1, 2.6, 2.05, 2.2};
    kh_ci a, b, c;
    CHECK(kh_stats_median_ci(x, 7, 5000, 42, 0.95, &a) == 0, "median CI");
    CHECK(kh_stats_median_ci(x, 7, 5000, 42, 0.95, &b) == 0, "median CI again");
    CHECK(a.lo == b.lo && a.hi == b.hi, "one seed, one interval: [%g, %g] vs [%g, %g]", a.lo, a.hi, b.lo, b.hi);
    CHECK(a.resamples == 5000 && a.seed == 42 && a.level == 0.95, "the CI records its resamples, seed, level");
    double med = kh_stats_median(x, 7);
    CHECK(a.lo <= med && med <= a.hi && a.lo < a.hi, "CI [%g, %g] holds the median %g", a.lo, a.hi, med);
    CHECK(a.lo >= 1.9 && a.hi <= 2.6, "CI inside the data's range");
    /* a different seed draws other resamples: on continuous data the interval moves */
    double y[40];
    uint64_t st = 7;
    for (int i = 0; i < 40; i++) y[i] = 10 + normal(&st);
    CHECK(kh_stats_median_ci(y, 40, 999, 1, 0.95, &a) == 0 && kh_stats_median_ci(y, 40, 999, 2, 0.95, &b) == 0, "CI");
    CHECK(a.lo != b.lo || a.hi != b.hi, "seeds 1 and 2 gave the same interval [%g, %g]", a.lo, a.hi);
    CHECK(kh_stats_median_ci(x, 1, 100, 1, 0.95, &c) == 0 && isnan(c.lo) && isnan(c.hi), "n = 1: no interval");

    /* width shrinks with n: the mean width over 20 data sets of n = 10 against n = 160 (a 4x larger sample
     * should give about a quarter of the width; require under half) */
    double w_small = 0, w_large = 0;
    for (int rep = 0; rep < 20; rep++) {
        double s[10], l[160];
        for (int i = 0; i < 10; i++) s[i] = normal(&st);
        for (int i = 0; i < 160; i++) l[i] = normal(&st);
        kh_stats_median_ci(s, 10, 1000, (uint64_t)rep, 0.95, &a);
        kh_stats_median_ci(l, 160, 1000, (uint64_t)rep, 0.95, &b);
        w_small += a.hi - a.lo;
        w_large += b.hi - b.lo;
    }
    CHECK(w_large < 0.5 * w_small, "width n=160 %.3g vs n=10 %.3g", w_large / 20, w_small / 20);

    /* coverage: the 95 % interval of the median of N(0, 1) samples (n = 25) must contain 0 in most of 400
     * data sets; the percentile bootstrap of a median is known to come out near nominal, 0.90-0.99 here */
    int hit = 0, trials = 400;
    for (int t = 0; t < trials; t++) {
        double s[25];
        for (int i = 0; i < 25; i++) s[i] = normal(&st);
        kh_stats_median_ci(s, 25, 1000, (uint64_t)t + 100, 0.95, &a);
        hit += a.lo <= 0 && 0 <= a.hi;
    }
    double cover = (double)hit / trials;
    CHECK(cover >= 0.90 && cover <= 0.99, "coverage of the median's 95 %% CI: %.3f", cover);

    /* the paired ratio cancels a drift common to a round; the unpaired one cannot */
    double pa[8], pb[8];
    for (int i = 0; i < 8; i++) {
        double drift = 1 + 0.2 * i; /* the machine slows down round by round */
        pa[i] = 2.0 * drift * (1 + 0.01 * normal(&st));
        pb[i] = 1.0 * drift * (1 + 0.01 * normal(&st));
    }
    double rp, ru;
    kh_ci cp, cu;
    kh_stats_ratio_paired(pa, pb, 8, 4000, 3, 0.95, &rp, &cp);
    kh_stats_ratio_unpaired(pa, 8, pb, 8, 4000, 3, 0.95, &ru, &cu);
    CHECK(cp.lo > 1.9 && cp.hi < 2.1, "paired ratio CI [%g, %g] around 2", cp.lo, cp.hi);
    CHECK(cu.hi - cu.lo > 3 * (cp.hi - cp.lo), "unpaired CI [%g, %g] wider than paired [%g, %g]", cu.lo, cu.hi,
          cp.lo, cp.hi);
}

/* The bootstrap as its definition reads, a sort per resample (the test's own, independent of stats.c's rank
 * counting): the median CI of x and the paired / unpaired median ratios' CIs, from the same draw stream. */
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double sorted_median(const double *x, const int *idx, int n, double *tmp) {
    for (int i = 0; i < n; i++) tmp[i] = x[idx[i]];
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_d);
    return kh_stats_quantile_sorted(tmp, n, 0.5);
}

/* kind 0: median of a; 1: paired ratio; 2: unpaired ratio (n values each) */
static kh_ci plain_bootstrap(int kind, const double *a, const double *b, int n, int resamples, uint64_t seed) {
    double *stat = malloc((size_t)resamples * sizeof *stat), *tmp = malloc((size_t)n * sizeof *tmp);
    int *idx = malloc((size_t)n * sizeof *idx);
    kh_ci ci = {.lo = NAN, .hi = NAN};
    if (!stat || !tmp || !idx) goto out;
    uint64_t st = seed;
    for (int r = 0; r < resamples; r++) {
        for (int i = 0; i < n; i++) idx[i] = (int)(kh_stats_splitmix64(&st) % (uint64_t)n);
        double ma = sorted_median(a, idx, n, tmp);
        if (kind == 2)
            for (int i = 0; i < n; i++) idx[i] = (int)(kh_stats_splitmix64(&st) % (uint64_t)n);
        stat[r] = kind == 0 ? ma : ma / sorted_median(b, idx, n, tmp);
    }
    qsort(stat, (size_t)resamples, sizeof *stat, cmp_d);
    ci.lo = kh_stats_quantile_sorted(stat, resamples, 0.025);
    ci.hi = kh_stats_quantile_sorted(stat, resamples, 0.975);
out:
    free(stat);
    free(tmp);
    free(idx);
    return ci;
}

static void test_bootstrap_matches_definition(void) {
    uint64_t st = 11;
    for (int n = 2; n <= 41; n += 13) {
        double a[41], b[41], r;
        /* ties on purpose: values on a coarse grid */
        for (int i = 0; i < n; i++) a[i] = round(4 * (10 + normal(&st))) / 4, b[i] = round(4 * (9 + normal(&st))) / 4;
        kh_ci got, want;
        CHECK(kh_stats_median_ci(a, n, 3000, 5, 0.95, &got) == 0, "median CI n=%d", n);
        want = plain_bootstrap(0, a, b, n, 3000, 5);
        CHECK(got.lo == want.lo && got.hi == want.hi, "n=%d median CI [%.17g, %.17g], by definition [%.17g, %.17g]", n,
              got.lo, got.hi, want.lo, want.hi);
        CHECK(kh_stats_ratio_paired(a, b, n, 3000, 6, 0.95, &r, &got) == 0, "paired n=%d", n);
        want = plain_bootstrap(1, a, b, n, 3000, 6);
        CHECK(got.lo == want.lo && got.hi == want.hi, "n=%d paired CI [%.17g, %.17g], by definition [%.17g, %.17g]", n,
              got.lo, got.hi, want.lo, want.hi);
        CHECK(kh_stats_ratio_unpaired(a, n, b, n, 3000, 7, 0.95, &r, &got) == 0, "unpaired n=%d", n);
        want = plain_bootstrap(2, a, b, n, 3000, 7);
        CHECK(got.lo == want.lo && got.hi == want.hi, "n=%d unpaired CI [%.17g, %.17g], by definition [%.17g, %.17g]",
              n, got.lo, got.hi, want.lo, want.hi);
    }
}

static void test_warnings(void) {
    char text[512];
    double calm[5] = {1.00, 1.01, 0.99, 1.00, 1.02};
    CHECK(kh_stats_warnings(calm, 5, KH_STATS_CV_WARN, text, sizeof text) == 0 && !text[0], "calm: %s", text);
    double noisy[5] = {1.0, 1.3, 0.8, 1.2, 0.9};
    int w = kh_stats_warnings(noisy, 5, KH_STATS_CV_WARN, text, sizeof text);
    CHECK(w == KH_STATS_WARN_CV && strstr(text, "CV"), "noisy: %d %s", w, text);
    double first[6] = {3.9, 2.51, 2.49, 2.50, 2.52, 2.48};
    w = kh_stats_warnings(first, 6, 10.0, text, sizeof text);
    CHECK(w == KH_STATS_WARN_FIRST_OUTLIER && strstr(text, "first repetition"), "first: %d %s", w, text);
    double last[6] = {2.51, 2.49, 2.50, 2.52, 2.48, 3.9}; /* an outlier that is not the first: no warning */
    CHECK(kh_stats_warnings(last, 6, 10.0, text, sizeof text) == 0, "last outlier: %s", text);
    CHECK(kh_stats_warnings(calm, 1, KH_STATS_CV_WARN, text, sizeof text) == 0, "one repetition");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_stats FIXTURES.json\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    CHECK(f != NULL, "open %s", argv[1]);
    if (!f) return kh_test_finish("stats");
    static char buf[1 << 20];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    cJSON *root = cJSON_Parse(buf);
    CHECK(root != NULL, "parse %s", argv[1]);
    if (root) test_fixtures(root);
    cJSON_Delete(root);
    test_bootstrap();
    test_bootstrap_matches_definition();
    test_warnings();
    return kh_test_finish("stats");
}
