/* core/results/seedstats.c — statistics across seeds (seedstats.h): the Student t quantile, the spread of a
 * value over seeds with its t-interval, the median epochs (or time) to target, the convergence check. */
#include "results/seedstats.h"

#include <math.h>
#include <stdlib.h>

#define PI 3.14159265358979323846

/* P(|T| <= t) for T Student-t with df degrees of freedom (Abramowitz & Stegun 26.7.3 for odd df, 26.7.4 for
 * even): a finite series in cos^2 of theta = atan(t / sqrt(df)). */
static double t_two_sided(double t, int df) {
    double th = atan(t / sqrt((double)df)), c2 = cos(th) * cos(th), s = sin(th);
    double sum = 1, term = 1;
    if (df % 2) {
        if (df == 1) return 2 * th / PI;
        for (int k = 2; k <= df - 3; k += 2) {
            term *= (double)k / (k + 1) * c2;
            sum += term;
        }
        return 2 / PI * (th + s * cos(th) * sum);
    }
    for (int k = 1; k <= df - 3; k += 2) {
        term *= (double)k / (k + 1) * c2;
        sum += term;
    }
    return s * sum;
}

double kh_t_quantile(double level, int df) {
    if (df < 1 || !(level > 0 && level < 1)) return NAN;
    double lo = 0, hi = 1;
    while (t_two_sided(hi, df) < level && hi < 1e12) lo = hi, hi *= 2;
    while (hi - lo > 1e-12 * (1 + hi)) {
        double mid = 0.5 * (lo + hi);
        if (t_two_sided(mid, df) < level) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

void kh_seed_spread_of(const double *x, int n, double level, kh_seed_spread *s) {
    s->n = 0;
    s->mean = s->sd = s->min = s->max = s->lo = s->hi = NAN;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(x[i])) continue;
        if (!s->n || x[i] < s->min) s->min = x[i];
        if (!s->n || x[i] > s->max) s->max = x[i];
        sum += x[i];
        s->n++;
    }
    if (!s->n) return;
    s->mean = sum / s->n;
    if (s->n < 2) return;
    double ss = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(x[i])) ss += (x[i] - s->mean) * (x[i] - s->mean);
    s->sd = sqrt(ss / (s->n - 1));
    double half = kh_t_quantile(level, s->n - 1) * s->sd / sqrt((double)s->n);
    s->lo = s->mean - half;
    s->hi = s->mean + half;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void kh_to_target_of(const double *v, int n, kh_to_target *o) {
    o->n = o->n_never = 0;
    o->median = o->min = o->max = NAN;
    double *s = malloc((size_t)(n > 0 ? n : 1) * sizeof *s);
    for (int i = 0; i < n; i++) {
        if (isnan(v[i])) continue;
        if (isinf(v[i])) o->n_never++;
        else {
            if (isnan(o->min) || v[i] < o->min) o->min = v[i];
            if (isnan(o->max) || v[i] > o->max) o->max = v[i];
        }
        if (s) s[o->n] = v[i];
        o->n++;
    }
    if (!o->n) {
        free(s);
        return;
    }
    if (2 * o->n_never >= o->n) { /* a middle value is a seed that never reached it */
        o->median = INFINITY;
    } else if (s) { /* the middle values are finite: never-reached seeds sort after them */
        qsort(s, (size_t)o->n, sizeof *s, cmp_double);
        o->median = o->n % 2 ? s[o->n / 2] : 0.5 * (s[o->n / 2 - 1] + s[o->n / 2]);
    }
    free(s); /* out of memory: the counts and the range stand, the median stays NAN (unknown) */
}

int kh_convergence_check(double median, const double *others, int n, double *lo, double *hi) {
    *lo = *hi = NAN;
    for (int i = 0; i < n; i++) {
        if (!isfinite(others[i])) continue;
        if (isnan(*lo) || others[i] < *lo) *lo = others[i];
        if (isnan(*hi) || others[i] > *hi) *hi = others[i];
    }
    if (isnan(*lo) || isnan(median)) return 0;
    return median < *lo ? -1 : median > *hi ? 1 : 0;
}
