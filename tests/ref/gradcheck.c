/* tests/ref/gradcheck.c — the finite-difference checker shared by the reference kit's tests. */
#include "gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

double gc_h = GC_H;

double gc_rel_err(const double *a, const double *num, int64_t n) {
    double maxdiff = 0.0, scale = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(a[i] - num[i]);
        if (!(d <= maxdiff)) maxdiff = d; // NaN propagates as a failure
        if (fabs(num[i]) > scale) scale = fabs(num[i]);
    }
    return maxdiff / (scale + 1e-30);
}

void gc_numeric(double *num, double *x, int64_t n, gc_objective f, void *ctx) {
    for (int64_t i = 0; i < n; i++) {
        double keep = x[i];
        x[i] = keep + gc_h;
        double fp = f(ctx);
        x[i] = keep - gc_h;
        double fm = f(ctx);
        x[i] = keep;
        num[i] = (fp - fm) / (2.0 * gc_h);
    }
}

int gc_check(const char *label, gc_objective f, void *ctx, const gc_tensor *ts, int nt, double tol) {
    int failed = 0;
    for (int k = 0; k < nt; k++) {
        const gc_tensor *t = &ts[k];
        double *num = gc_alloc(t->n), *bad = gc_alloc(t->n);
        gc_numeric(num, t->x, t->n, f, ctx);
        double err = gc_rel_err(t->g, num, t->n);
        double scale = 0.0;
        int64_t at = 0;
        for (int64_t i = 0; i < t->n; i++) {
            if (fabs(num[i]) > scale) scale = fabs(num[i]), at = i;
        }
        int pass = err <= tol;
        printf("  %-40s %-28s max_rel_err %.3e (scale %.1e)  tol %.0e  %s\n", label, t->name, err, scale, tol,
               pass ? "PASS" : "FAIL");
        CHECK(pass, "%s/%s: analytic vs numerical gradient err %.3e > %.0e", label, t->name, err, tol);
        // a zero gradient would make the sensitivity checks vacuous
        CHECK(scale > 1e-8, "%s/%s: gradient is (numerically) zero, the check proves nothing", label, t->name);
        // sensitivity: a 1% scale error and a single wrong element must both be flagged
        for (int64_t i = 0; i < t->n; i++) bad[i] = t->g[i] * 1.01;
        double err_scaled = gc_rel_err(bad, num, t->n);
        for (int64_t i = 0; i < t->n; i++) bad[i] = t->g[i];
        bad[(at * 7 + 3) % t->n] += 1e-3 * scale;
        double err_elem = gc_rel_err(bad, num, t->n);
        CHECK(err_scaled > tol && err_elem > tol, "%s/%s: checker not sensitive (scaled %.3e, element %.3e)", label,
              t->name, err_scaled, err_elem);
        failed += !pass;
        free(num);
        free(bad);
    }
    return failed;
}

void gc_fill(double *x, int64_t n, kh_rng *r, double lo, double hi) {
    for (int64_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * kh_rng_uniform(r);
}

double *gc_alloc(int64_t n) {
    double *p = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (!p) {
        fprintf(stderr, "test setup: out of memory\n");
        exit(2);
    }
    return p;
}

double gc_dot(const double *r, const double *y, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += r[i] * y[i];
    return s;
}

int64_t gc_range(kh_rng *r, int64_t lo, int64_t hi) { return lo + (int64_t)kh_rng_below(r, (uint64_t)(hi - lo + 1)); }
