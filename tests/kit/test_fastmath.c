/* tests/kit/test_fastmath.c — khost/kit/fastmath.h against double-precision libm, over the whole float range.
 *
 * Sweeps every 64th float bit pattern in each function's interesting range (~2 million points each; all
 * values near 0 are covered as well), measures the error in ulps of the exact result rounded to float, and
 * asserts the bound the header promises. Also the edge behaviour the backends rely on: NaN propagates,
 * large arguments saturate instead of overflowing to garbage, the sigmoid and tanh built on top stay in
 * range. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "khost/kit/fastmath.h"
#include "khost/kit/formulas.h"
#include "testutil.h"

/* ulps between a and the float nearest to the exact value ref */
static double ulp_err(float a, double ref) {
    float r = (float)ref;
    double ulp = (double)nextafterf(fabsf(r), INFINITY) - (double)fabsf(r);
    return fabs((double)a - ref) / ulp;
}

/* every `step`-th float from lo to hi (both finite, lo < hi) */
static double sweep(float (*f)(float), double (*ref)(double), float lo, float hi, int step, float *worst_x) {
    double worst = 0;
    for (float x = lo; x < hi;) {
        double e = ulp_err(f(x), ref((double)x));
        if (e > worst) worst = e, *worst_x = x;
        uint32_t u = kh_float_to_bits(x);
        /* walk the bit patterns: up for positive x, down (towards -0) for negative */
        if (x < 0) {
            u = u > (uint32_t)step + 0x80000000u ? u - (uint32_t)step : 0x80000000u;
            x = kh_bits_to_float(u);
            if (x == 0.0f) x = kh_bits_to_float(1); /* cross zero */
        } else {
            x = kh_bits_to_float(u + (uint32_t)step);
        }
    }
    return worst;
}

static float fexp(float x) { return kh_expf_fast(x); }
static float ftanh(float x) { return kh_tanhf_fast(x); }
static float fsig(float x) { return kh_sigmoid(x); }
static double dsig(double x) { return 1.0 / (1.0 + exp(-x)); }

static void test_accuracy(void) {
    float wx = 0;
    double e = sweep(fexp, exp, -87.0f, 88.0f, 64, &wx);
    printf("kh_expf_fast: worst %.2f ulp at x = %.9g\n", e, (double)wx);
    CHECK(e < 2.0, "kh_expf_fast: %.2f ulp at x = %.9g (bound 2)", e, (double)wx);
    e = sweep(ftanh, tanh, -20.0f, 20.0f, 64, &wx);
    printf("kh_tanhf_fast: worst %.2f ulp at x = %.9g\n", e, (double)wx);
    CHECK(e < 3.5, "kh_tanhf_fast: %.2f ulp at x = %.9g (bound 3.5)", e, (double)wx);
    /* the sigmoid used by every backend, now built on kh_expf_fast */
    e = sweep(fsig, dsig, -80.0f, 30.0f, 64, &wx);
    printf("kh_sigmoid (float): worst %.2f ulp at x = %.9g\n", e, (double)wx);
    CHECK(e < 4.0, "kh_sigmoid (float): %.2f ulp at x = %.9g (bound 4)", e, (double)wx);
    /* tiny arguments: tanh(x) == x to float precision, exp(x) == 1 */
    CHECK(kh_tanhf_fast(1e-30f) == 1e-30f && kh_tanhf_fast(-1e-30f) == -1e-30f, "tanh of tiny x");
    CHECK(kh_expf_fast(0.0f) == 1.0f && kh_expf_fast(-1e-30f) == 1.0f, "exp(0)");
}

static void test_edges(void) {
    CHECK(isnan(kh_expf_fast(NAN)) && isnan(kh_tanhf_fast(NAN)) && isnan(kh_sigmoid(NAN)), "NaN must propagate");
    float big = kh_expf_fast(1000.0f), small = kh_expf_fast(-1000.0f);
    CHECK(isfinite(big) && big > 1e38f, "exp(1000) saturates finite and huge: %g", (double)big);
    CHECK(small >= 0.0f && small < 1e-37f, "exp(-1000) is ~0: %g", (double)small);
    CHECK(kh_expf_fast(INFINITY) > 1e38f && kh_expf_fast(-INFINITY) < 1e-37f, "exp(+-inf)");
    CHECK(kh_tanhf_fast(INFINITY) == 1.0f && kh_tanhf_fast(-INFINITY) == -1.0f, "tanh(+-inf)");
    CHECK(kh_tanhf_fast(9.0f) == 1.0f && kh_tanhf_fast(-9.0f) == -1.0f, "tanh saturates to +-1");
    CHECK(kh_sigmoid(-200.0f) >= 0.0f && kh_sigmoid(-200.0f) < 1e-37f && kh_sigmoid(200.0f) == 1.0f,
          "sigmoid saturates in range");
    /* the two tanh pieces meet without a step at the switch point */
    float below = kh_tanhf_fast(nextafterf(0.4f, 0.0f)), at = kh_tanhf_fast(0.4f);
    CHECK(at >= below && at - below < 3e-7f, "tanh continuous at 0.4: %.9g -> %.9g", (double)below, (double)at);
}

int main(void) {
    test_accuracy();
    test_edges();
    return kh_test_finish("test_fastmath");
}
