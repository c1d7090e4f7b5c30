/* tests/seeds/test_seedstats.c — the statistics across seeds (results/seedstats.h): Student t quantiles against
 * published values (checked by integrating the t density), the mean, sd and t-interval of a planted set, the
 * to-target median with seeds that never reached the target counted as later than all, and the convergence
 * check in both directions. */
#include <math.h>
#include <stdio.h>

#include "results/seedstats.h"
#include "testutil.h"

static void test_t_quantile(void) {
    static const struct { double level; int df; double t; } known[] = {
        {0.95, 1, 12.706204736174707}, {0.95, 2, 4.302652729749464},  {0.95, 3, 3.182446305284263},
        {0.95, 4, 2.776445105197799},  {0.95, 9, 2.262157162740992},  {0.95, 29, 2.045229642132703},
        {0.95, 1000, 1.962339080826}, {0.99, 5, 4.032142983557536},  {0.5, 1, 1.0}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "t(%g, df %d)", known[i].level, known[i].df);
        CHECK_CLOSE(kh_t_quantile(known[i].level, known[i].df), known[i].t, 1e-9, 0, what);
    }
    CHECK(isnan(kh_t_quantile(0.95, 0)) && isnan(kh_t_quantile(1.0, 3)) && isnan(kh_t_quantile(0, 3)),
          "no quantile for df 0 or a level outside (0, 1)");
}

static void test_spread(void) {
    const double x[] = {0.90, NAN, 0.92, 0.97};
    kh_seed_spread s;
    kh_seed_spread_of(x, 4, 0.95, &s);
    CHECK(s.n == 3, "NAN left out: n %d", s.n);
    CHECK_CLOSE(s.mean, 0.93, 1e-12, 0, "mean");
    CHECK_CLOSE(s.sd, 0.03605551275463986, 1e-12, 0, "sd (n - 1)");
    CHECK_CLOSE(s.lo, 0.8404331410497041, 1e-9, 0, "t-interval low");
    CHECK_CLOSE(s.hi, 1.019566858950296, 1e-9, 0, "t-interval high");
    CHECK(s.min == 0.90 && s.max == 0.97, "min %g max %g", s.min, s.max);
    kh_seed_spread_of(x, 1, 0.95, &s);
    CHECK(s.n == 1 && s.mean == 0.90 && isnan(s.sd) && isnan(s.lo) && isnan(s.hi), "one seed: no sd, no interval");
    kh_seed_spread_of(x + 1, 1, 0.95, &s);
    CHECK(s.n == 0 && isnan(s.mean), "no value");
}

static void test_to_target(void) {
    kh_to_target o;
    const double a[] = {3, 2, INFINITY, 5};
    kh_to_target_of(a, 3, &o);
    CHECK(o.n == 3 && o.n_never == 1 && o.median == 3 && o.min == 2 && o.max == 3,
          "{3, 2, never}: median 3 (never is the largest), range 2-3: n %d never %d median %g", o.n, o.n_never,
          o.median);
    kh_to_target_of(a, 4, &o);
    CHECK(o.n == 4 && o.n_never == 1 && o.median == 4 && o.min == 2 && o.max == 5, "{3, 2, never, 5}: median %g",
          o.median);
    const double b[] = {INFINITY, 4, INFINITY, NAN};
    kh_to_target_of(b, 4, &o);
    CHECK(o.n == 3 && o.n_never == 2 && isinf(o.median) && o.min == 4 && o.max == 4, "most never: median never (%g)",
          o.median);
    const double c[] = {INFINITY, 4};
    kh_to_target_of(c, 2, &o);
    CHECK(isinf(o.median), "half never: the median is never (%g)", o.median);
    const double d[] = {INFINITY, INFINITY};
    kh_to_target_of(d, 2, &o);
    CHECK(isinf(o.median) && isnan(o.min) && isnan(o.max), "all never: no range");
    kh_to_target_of(d, 0, &o);
    CHECK(o.n == 0 && isnan(o.median), "no seed");
}

static void test_convergence(void) {
    const double others[] = {3, 4, INFINITY, NAN, 5};
    double lo, hi;
    CHECK(kh_convergence_check(4, others, 5, &lo, &hi) == 0 && lo == 3 && hi == 5, "4 in [3, 5]: [%g, %g]", lo, hi);
    CHECK(kh_convergence_check(5, others, 5, &lo, &hi) == 0, "the bounds are inside");
    CHECK(kh_convergence_check(6, others, 5, &lo, &hi) == 1, "6 above [3, 5]: slower than all");
    CHECK(kh_convergence_check(INFINITY, others, 5, &lo, &hi) == 1, "never: slower than all");
    CHECK(kh_convergence_check(2.5, others, 5, &lo, &hi) == -1, "2.5 below [3, 5]: faster than all");
    const double none[] = {INFINITY, NAN};
    CHECK(kh_convergence_check(9, none, 2, &lo, &hi) == 0 && isnan(lo) && isnan(hi), "nothing to compare with");
}

int main(void) {
    test_t_quantile();
    test_spread();
    test_to_target();
    test_convergence();
    return kh_test_finish("seedstats");
}
