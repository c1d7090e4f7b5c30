/* core/results/steps.h — change points in a series of measurements (results/steps.c): asv's step detection, the
 * penalised piecewise-constant fit of airspeed velocity (asv.step_detect, 0.6.4), ported to C and checked
 * against asv's own output (tests/history).
 *
 * Why this method: it fits the whole series at once (a regression is a level that stays, not one noisy
 * point), its L1 fit with weighted medians is robust to the outliers a shared machine produces, it needs no
 * noise level given (the penalty is chosen by an information criterion on the series itself), and it is
 * deterministic (E-divisive means needs a permutation test, so its answers move from run to run).
 *
 * The fit minimises gamma * (number of jumps) + sum_i w_i |y_i - mu(segment of i)|, by dynamic programming over
 * windows of at most 20 points followed by merging neighbours while that lowers the cost and moving each
 * boundary to its best place; gamma is picked by a golden-section search on log gamma minimising
 * 4 ln(n)/n * segments + ln(sigma_0 + residual), the residual allowing for correlated noise. */
#ifndef KHOST_CORE_STEPS_H
#define KHOST_CORE_STEPS_H

typedef struct kh_step {
    int left, right;  /* the segment is points [left, right) */
    double value;     /* its weighted median */
    double min;       /* the smallest point in it */
    double err;       /* its mean absolute deviation from value */
} kh_step;

/* Segments of y[0..n) (w: relative weights, NULL for all 1) into steps (room for n). The number of steps, or
 * -1 when out of memory. */
int kh_steps_detect(const double *y, const double *w, int n, kh_step *steps);

/* A regression: an upward step (larger is worse: times). before is the last point of the better level, after the
 * first of the worse one; value_before that level, best_after the best level after it. */
typedef struct kh_regression {
    int before, after;
    double value_before, best_after;
} kh_regression;

/* asv's detect_regressions: upward steps larger than their segments' errors and threshold (relative) that
 * explain why the latest level is worse than the best. Fills regs (room for n_steps); returns their number;
 * *latest and *best get the last and the best levels. */
int kh_steps_regressions(const kh_step *steps, int n_steps, double threshold, int min_size, kh_regression *regs,
                         double *latest, double *best);
#endif
