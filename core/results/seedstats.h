/* core/results/seedstats.h — statistics across seeds: how far a model's accuracy and its time to target depend
 * on the seed it was trained from (docs/PERFORMANCE.md, "Accuracy across seeds and time to target").
 *
 * One value per seed: each seed is its own process and its own training run, so the values are independent,
 * and a seed is the unit these statistics count (as a repetition is the unit of the timing statistics).
 * Definitions:
 *   mean, sd          arithmetic mean; sample standard deviation (divisor n - 1)
 *   t-interval        mean -+ t(level, n - 1) sd / sqrt(n), t the two-sided Student t quantile with n - 1
 *                     degrees of freedom (it assumes the per-seed values are roughly normal; with few seeds
 *                     it is wide, as it should be); NAN bounds for fewer than 2 values
 *   to-target median  over every seed, a seed that never reached the target counting as later than any that
 *                     did: the median is "never" (INFINITY) when at least half the seeds never reached it; the
 *                     range (min, max) is over the seeds that reached it
 *   convergence check (MLPerf's): a backend's to-target median outside [min, max] of the other rows' per-seed
 *                     values with the same seeds, those that reached it, converges faster or slower than all
 *                     of them: it trains something else, or the same thing with different numerics
 */
#ifndef KHOST_CORE_SEEDSTATS_H
#define KHOST_CORE_SEEDSTATS_H

/* The two-sided Student t quantile: the t with P(|T| <= t) = level (0 < level < 1) for df >= 1 degrees of
 * freedom, from the closed form of the t distribution for whole df (Abramowitz & Stegun 26.7.3/4) by bisection
 * to 1e-12. NAN for df < 1 or a level outside (0, 1). */
double kh_t_quantile(double level, int df);

/* The spread of one value per seed. */
typedef struct kh_seed_spread {
    int n;                      /* values given (NAN ones are left out before) */
    double mean, sd, min, max;  /* NAN when n < 1; sd NAN when n < 2 */
    double lo, hi;              /* the t-interval at the given level; NAN when n < 2 */
} kh_seed_spread;
/* x[n] (finite values; NAN ones are skipped) into s. */
void kh_seed_spread_of(const double *x, int n, double level, kh_seed_spread *s);

/* Epochs (or seconds) to the target, one value per seed: INFINITY for a seed that never reached it, NAN for
 * one that does not say (skipped). */
typedef struct kh_to_target {
    int n, n_never;             /* seeds counted; of them, those that never reached the target */
    double median;              /* INFINITY: "never" (at least half never reached it); NAN when n is 0 */
    double min, max;            /* over the seeds that reached it; NAN when none did */
} kh_to_target;
void kh_to_target_of(const double *v, int n, kh_to_target *o);

/* The convergence check of a median against the others' per-seed values (NAN and INFINITY ones skipped): -1
 * below their minimum (faster than all), +1 above their maximum (slower than all, "never" included), 0 within;
 * the range into lo, hi. 0 with NAN bounds when no other value is finite (nothing to compare with). */
int kh_convergence_check(double median, const double *others, int n, double *lo, double *hi);
#endif
