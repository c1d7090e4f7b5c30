/* core/results/aa.h — an A/A comparison: BASE and NEW measured by one build on one machine, so nothing changed
 * between them and what `khost compare` says about them measures the comparison itself (docs/PERFORMANCE.md,
 * "A/A: what this machine can tell").
 *
 * One build on one machine: every finished repetition of both sides names the same build and the same machine
 * (identity.h; each must name both: a record that does not say cannot make a comparison A/A).
 * False-positive rate: the cells called faster or slower / the cells with a verdict (faster, slower, unchanged or
 * too noisy to tell: every cell with an interval, the m of the Bonferroni level). Each such call is false.
 * Smallest detectable change of a cell: the smallest true change whose verdict interval would clear the noise
 * band T. Multiplying every NEW time by k multiplies the ratio's bootstrap interval [lo, hi] by k exactly (the
 * same seed draws the same resamples, and a median scales with its values), so a slowdown is called once
 * k lo > 1 + T and a speed-up once k hi < 1 - T:
 *   slower  100 ((1 + T) / lo - 1) %     faster  100 (1 - (1 - T) / hi) %     detectable  the larger of the two
 * (about T plus the interval's half-width when it is centred on 1). Summarised by its median and its largest
 * over the cells with a verdict. */
#ifndef KHOST_CORE_AA_H
#define KHOST_CORE_AA_H

#include <stddef.h>

#include "results/compare.h"

typedef struct kh_aa {
    int same;                 /* one build on one machine */
    char why[700];            /* when not: the first record that differs or does not say, with its side and file */
    char build[128], machine[200]; /* when same: what they were */
    int with_verdict;         /* cells faster, slower, unchanged or too noisy to tell */
    int false_pos;            /* of those, called faster or slower */
    int too_noisy;            /* of those, too noisy to tell */
    double rate;              /* false_pos / with_verdict; NAN when no cell has a verdict */
    double *slower, *faster, *detect; /* per row, percent; NAN where the row has no verdict interval */
    int n_detect;             /* rows with a detectable change */
    double median, largest;   /* over them; NAN when none */
    int largest_row;          /* -1 when none */
} kh_aa;

/* Whether s[0] and s[1] were measured by one build on one machine: a->same, a->why, a->build, a->machine. */
void kh_aa_identify(const kh_cmp_side s[2], kh_aa *a);
/* The rate and the detectable changes of rows (nr of them, by ru). 0, or -1 out of memory. */
int kh_aa_compute(const kh_cmp_row *rows, int nr, const kh_cmp_rule *ru, kh_aa *a);
void kh_aa_free(kh_aa *a);
/* A cell's detectable change (percent) from its verdict interval [lo, hi] of the ratio and the noise band
 * (percent): the slower and faster bounds above and the larger of them; NAN without an interval. */
double kh_aa_detectable(double lo, double hi, double noise_pct, double *slower, double *faster);
#endif
