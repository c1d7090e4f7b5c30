/* core/results/steps.c — asv's step detection in C (steps.h). Each function follows the one of asv.step_detect
 * (0.6.4) it is named after, with the weighted median of asv's compiled RangeMedian, which is what asv runs. */
#include "results/steps.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct pair {
    double y, w;
} pair;

typedef struct fit {
    const double *y, *w;
    int n;
    pair *tmp; /* scratch for medians: n pairs */
} fit;

static int cmp_pair(const void *a, const void *b) {
    const pair *x = a, *y = b;
    if (x->y != y->y) return x->y < y->y ? -1 : 1;
    return (x->w > y->w) - (x->w < y->w);
}

/* mu(l, r) and dist(l, r) of points l..r inclusive: the weighted median and the weighted L1 distance to it. */
static void mu_dist(fit *f, int l, int r, double *mu, double *dist) {
    int m = r - l + 1;
    if (m <= 0) {
        *mu = 0, *dist = 0;
        return;
    }
    for (int i = 0; i < m; i++) f->tmp[i] = (pair){f->y[l + i], f->w[l + i]};
    qsort(f->tmp, (size_t)m, sizeof *f->tmp, cmp_pair);
    double mid = 0, wsum = 0;
    for (int i = 0; i < m; i++) mid += f->tmp[i].w;
    mid /= 2;
    int i = 0;
    for (; i < m; i++) {
        wsum += f->tmp[i].w;
        if (wsum >= mid) break;
    }
    if (i < m) {
        *mu = f->tmp[i].y;
        if (wsum == mid && i + 1 < m) *mu = (f->tmp[i + 1].y + *mu) / 2;
    } else {
        *mu = f->tmp[m - 1].y;
    }
    double d = 0;
    for (int k = l; k <= r; k++) d += f->w[k] * fabs(f->y[k] - *mu);
    *dist = d;
}

static double dist_of(fit *f, int l, int r) {
    double mu, d;
    mu_dist(f, l, r, &mu, &d);
    return d;
}

/* A solution: k segments, right bounds (exclusive), values and distances. */
typedef struct sol {
    int k;
    int *right;
    double *value, *dist;
} sol;

/* solve_potts with min_size 1 over the whole series, windows of at most max_size. */
static int solve_potts(fit *f, double gamma, int max_size, sol *s) {
    int n = f->n;
    if (1 >= n) {
        s->k = 1;
        s->right[0] = n;
        mu_dist(f, 0, n - 1, &s->value[0], &s->dist[0]);
        return 0;
    }
    double *B = malloc(((size_t)n + 1) * sizeof *B);
    int *p = malloc((size_t)n * sizeof *p);
    if (!B || !p) {
        free(B), free(p);
        return -1;
    }
    B[0] = -gamma;
    for (int r = 0; r < n; r++) {
        B[r + 1] = INFINITY;
        int a = r + 1 - max_size > 0 ? r + 1 - max_size : 0, b = r + 1; /* min_size 1 */
        for (int l = a; l < b; l++) {
            double c = B[l] + gamma + dist_of(f, l, r);
            if (c <= B[r + 1]) {
                B[r + 1] = c;
                p[r] = l - 1;
            }
        }
    }
    int k = 0, r = n - 1, l = p[r];
    while (r >= 0) { /* segments from the right */
        s->right[k] = r + 1;
        mu_dist(f, l + 1, r, &s->value[k], &s->dist[k]);
        k++;
        r = l;
        if (r >= 0) l = p[r];
    }
    for (int i = 0; i < k / 2; i++) { /* left to right */
        int tr = s->right[i];
        s->right[i] = s->right[k - 1 - i], s->right[k - 1 - i] = tr;
        double tv = s->value[i];
        s->value[i] = s->value[k - 1 - i], s->value[k - 1 - i] = tv;
        double td = s->dist[i];
        s->dist[i] = s->dist[k - 1 - i], s->dist[k - 1 - i] = td;
    }
    s->k = k;
    free(B), free(p);
    return 0;
}

/* merge_pieces: neighbours merged while that lowers the cost, then each boundary moved to its best place. */
static void merge_pieces(fit *f, double gamma, sol *s, int max_size) {
    int *right = s->right;
    for (;;) {
        double min_change = 0;
        int min_j = s->k, l = 0;
        for (int j = 1; j < s->k; j++) {
            if (min_j < j - 2) break;
            double change = dist_of(f, l, right[j] - 1) -
                            (dist_of(f, l, right[j - 1] - 1) + dist_of(f, right[j - 1], right[j] - 1) + gamma);
            if (change <= min_change) {
                min_change = change;
                min_j = j - 1;
            }
            l = right[j - 1];
        }
        if (min_j >= s->k) break;
        memmove(&right[min_j], &right[min_j + 1], (size_t)(s->k - min_j - 1) * sizeof *right);
        s->k--;
    }
    int l = 0;
    for (int j = 1; j < s->k; j++) {
        double prev = dist_of(f, l, right[j - 1] - 1) + dist_of(f, right[j - 1], right[j] - 1);
        int new_off = 0;
        for (int off = -max_size; off <= max_size; off++) {
            if (right[j - 1] + off - 1 < l || right[j - 1] + off > right[j] - 1 || off == 0) continue;
            double score = dist_of(f, l, right[j - 1] + off - 1) + dist_of(f, right[j - 1] + off, right[j] - 1);
            if (score < prev) {
                new_off = off;
                prev = score;
            }
        }
        right[j - 1] += new_off;
        l = right[j - 1];
    }
    l = 0;
    for (int j = 0; j < s->k; j++) {
        mu_dist(f, l, right[j] - 1, &s->value[j], &s->dist[j]);
        l = right[j];
    }
}

static int solve_potts_approx(fit *f, double gamma, sol *s) {
    const int max_size = 20; /* asv: min_size < 10 */
    if (solve_potts(f, gamma, max_size, s) != 0) return -1;
    merge_pieces(f, gamma, s, max_size);
    return 0;
}

/* |E_0| w_0 + sum_{j>0} |E_j - rho E_{j-1}| w_j: the residual allowing for correlated noise. */
static double sigma_star(const fit *f, const sol *s, double rho) {
    double e_prev = f->y[0] - s->value[0], sum = fabs(e_prev) * f->w[0];
    int l = 1;
    for (int j = 0; j < s->k; j++) {
        for (int i = l; i < s->right[j]; i++) {
            double e = f->y[i] - s->value[j];
            sum += fabs(e - rho * e_prev) * f->w[i];
            e_prev = e;
        }
        l = s->right[j];
    }
    return sum;
}

typedef double (*objective)(void *ctx, double x);

static double golden_search(objective fn, void *ctx, double a, double b, double xatol, double ftol) {
    const double ratio = 2 / (1 + sqrt(5));
    double x0 = (ratio * a - (1 - ratio) * b) / (2 * ratio - 1); /* expand_bounds: f is evaluated at a and b */
    double x3 = (ratio * b - (1 - ratio) * a) / (2 * ratio - 1);
    double x1 = ratio * x0 + (1 - ratio) * x3, x2 = (1 - ratio) * x0 + ratio * x3;
    double f1 = fn(ctx, x1), f2 = fn(ctx, x2), f0 = fmax(fabs(f1), fabs(f2));
    while (!(fabs(x0 - x3) < xatol || fabs(f1 - f2) < ftol * f0)) {
        if (f2 < f1) {
            x0 = x1, x1 = x2, x2 = ratio * x1 + (1 - ratio) * x3;
            f1 = f2, f2 = fn(ctx, x2);
        } else {
            x3 = x2, x2 = x1, x1 = ratio * x2 + (1 - ratio) * x0;
            f2 = f1, f1 = fn(ctx, x1);
        }
    }
    return f2 < f1 ? x2 : x1;
}

typedef struct autogamma {
    fit *f;
    double gamma0, beta, best_obj;
    sol cur, best;
    int oom;
} autogamma;

static double rho_objective(void *ctx, double rho) {
    autogamma *g = ctx;
    return sigma_star(g->f, &g->cur, rho);
}

static void sol_copy(sol *dst, const sol *src) {
    dst->k = src->k;
    memcpy(dst->right, src->right, (size_t)src->k * sizeof *src->right);
    memcpy(dst->value, src->value, (size_t)src->k * sizeof *src->value);
    memcpy(dst->dist, src->dist, (size_t)src->k * sizeof *src->dist);
}

static double gamma_objective(void *ctx, double x) {
    autogamma *g = ctx;
    if (g->oom || solve_potts_approx(g->f, g->gamma0 * exp(x), &g->cur) != 0) {
        g->oom = 1;
        return INFINITY;
    }
    double rho = golden_search(rho_objective, g, -1, 1, 0.05, 1e-8);
    const sol *s = &g->cur;
    double sigma0;
    if (s->k > 2) {
        sigma0 = INFINITY;
        for (int j = 0; j + 1 < s->k; j++) sigma0 = fmin(sigma0, fabs(s->value[j + 1] - s->value[j]));
        sigma0 *= 0.1;
    } else {
        sigma0 = INFINITY;
        for (int j = 0; j < s->k; j++) sigma0 = fmin(sigma0, fabs(s->value[j]));
        sigma0 *= 0.001;
    }
    sigma0 = fmax(1e-300, sigma0);
    double obj = g->beta * s->k + log(sigma0 + sigma_star(g->f, s, rho));
    if (obj < g->best_obj) {
        g->best_obj = obj;
        sol_copy(&g->best, s);
    }
    return obj;
}

static int sol_alloc(sol *s, int n) {
    s->right = malloc((size_t)n * sizeof *s->right);
    s->value = malloc((size_t)n * sizeof *s->value);
    s->dist = malloc((size_t)n * sizeof *s->dist);
    s->k = 0;
    return s->right && s->value && s->dist ? 0 : -1;
}

static void sol_free(sol *s) { free(s->right), free(s->value), free(s->dist); }

int kh_steps_detect(const double *y, const double *w, int n, kh_step *steps) {
    if (n <= 0) return 0;
    double *ones = NULL;
    if (!w) {
        if (!(ones = malloc((size_t)n * sizeof *ones))) return -1;
        for (int i = 0; i < n; i++) ones[i] = 1.0;
        w = ones;
    }
    fit f = {y, w, n, malloc((size_t)n * sizeof(pair))};
    autogamma g = {.f = &f, .beta = 4 * log((double)n) / n, .best_obj = INFINITY};
    int rc = f.tmp && sol_alloc(&g.cur, n) == 0 && sol_alloc(&g.best, n) == 0 ? 0 : -1;
    if (rc == 0) {
        g.gamma0 = dist_of(&f, 0, n - 1);
        if (g.gamma0 == 0) g.gamma0 = 1.0; /* no variance at all */
        double a = log(0.1 / n);
        golden_search(gamma_objective, &g, a, 0.0, fabs(a) * 0.1, 0);
        if (g.oom) rc = -1;
    }
    int k = rc == 0 ? g.best.k : -1;
    for (int j = 0, l = 0; j < k; j++) {
        int r = g.best.right[j];
        double mn = INFINITY;
        for (int i = l; i < r; i++) mn = fmin(mn, y[i]);
        steps[j] = (kh_step){l, r, g.best.value[j], mn, fabs(g.best.dist[j] / (r - l))};
        l = r;
    }
    sol_free(&g.cur), sol_free(&g.best);
    free(f.tmp), free(ones);
    return k;
}

int kh_steps_regressions(const kh_step *steps, int n_steps, double threshold, int min_size, kh_regression *regs,
                         double *latest, double *best) {
    *latest = *best = NAN;
    if (n_steps <= 0) return 0;
    int n = 0, prev_l = -1, have_short = 0;
    double last_v = steps[n_steps - 1].value, best_v = last_v, tbest_v = last_v, tbest_err = steps[n_steps - 1].err;
    double short_v = 0, short_err = 0;
    for (int i = n_steps - 1; i >= 0; i--) {
        const kh_step *s = &steps[i];
        double tstep = fmax(fmax(s->err, tbest_err), threshold * s->value);
        if (tbest_v > s->value + tstep) {
            if (s->right - s->left < min_size) { /* a short interval: accepted on condition */
                have_short = 1;
                short_v = tbest_v, short_err = tbest_err;
            }
            regs[n++] = (kh_regression){s->right - 1, prev_l, s->value, best_v};
            tbest_v = s->value;
            tbest_err = s->err;
        } else if (have_short) {
            if (short_v <= s->value + tstep) { /* the level is back where it was: the short one was noise */
                n--;
                tbest_v = short_v, tbest_err = short_err;
            }
            have_short = 0;
        }
        prev_l = s->left;
        if (s->value < best_v) best_v = s->value;
    }
    for (int i = 0; i < n / 2; i++) {
        kh_regression t = regs[i];
        regs[i] = regs[n - 1 - i], regs[n - 1 - i] = t;
    }
    if (n) *latest = last_v, *best = best_v;
    return n;
}
