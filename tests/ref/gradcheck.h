/* tests/ref/gradcheck.h — central finite differences in float64 for the reference kit's gradient checks.
 *
 * A check perturbs each element of a buffer by +-h, re-evaluates a scalar objective (sum of a random
 * upstream gradient times the layer output, or a loss), and compares the numerical gradient with the
 * analytic one using err = max_i |analytic_i - numeric_i| / (max_i |numeric_i| + 1e-30).
 * Every comparison also proves the checker is sensitive: the analytic gradient scaled by 1.01, and with one
 * element moved by 1e-3 of the tensor's scale, must both be flagged. */
#ifndef KHOST_TESTS_GRADCHECK_H
#define KHOST_TESTS_GRADCHECK_H

#include <stdint.h>

#include "khost/kit/rng.h"

#define GC_H 1e-6   /* default finite-difference step: inputs and weights are O(1) */
extern double gc_h; /* the step in use (GC_H unless a test changes it) */
#define GC_TOL 1e-6 /* float64 central differences reach ~1e-9 here; 1e-6 leaves margin, and any real bug
                       (a wrong sign, a missing term, a 1% scale) is >= 1e-3 */

typedef double (*gc_objective)(void *ctx);

typedef struct gc_tensor {
    const char *name;
    double *x;        /* the buffer the objective reads: perturbed in place, restored after */
    const double *g;  /* the analytic gradient of the objective w.r.t. x */
    int64_t n;
} gc_tensor;

/* Max relative error as defined above. */
double gc_rel_err(const double *a, const double *num, int64_t n);
/* Numerical gradient of f w.r.t. x (n) into num (n). */
void gc_numeric(double *num, double *x, int64_t n, gc_objective f, void *ctx);
/* Compare every tensor's analytic gradient with finite differences; CHECKs and prints one line per tensor:
 * "label/name  err  tol  PASS". Returns the number of tensors that failed. */
int gc_check(const char *label, gc_objective f, void *ctx, const gc_tensor *ts, int nt, double tol);

/* Fill with uniform values in [lo, hi). */
void gc_fill(double *x, int64_t n, kh_rng *r, double lo, double hi);
double *gc_alloc(int64_t n); /* zeroed; exits the test on failure */
/* sum_i r_i * y_i */
double gc_dot(const double *r, const double *y, int64_t n);
/* A random integer in [lo, hi]. */
int64_t gc_range(kh_rng *r, int64_t lo, int64_t hi);

#endif
