/* core/results/compare.h — what `khost compare BASE NEW` computes (core/cli/cmd_compare.c prints it): two result
 * folders read cell by cell (task x backend x device, its repetition records: cellstats.h) and a verdict per
 * cell (docs/PERFORMANCE.md, "How khost measures").
 *
 * The value compared is each repetition's median step time where both sides have samples, else each
 * repetition's mean epoch time. The change is median(NEW) / median(BASE) - 1 with a percentile bootstrap CI
 * (the two sets resampled independently: they are separate runs, not rounds of one). Verdicts:
 *   missing       the cell is in one set only, or one side has no finished repetition
 *   inconclusive  fewer than 2 finished repetitions on a side: no interval can be formed (or other settings,
 *                 or times that cannot be true)
 *   faster/slower the whole verdict interval of the change lies beyond the noise threshold (criterion's rule:
 *                 the interval, not only the point estimate, must clear the band of changes nobody would act on)
 *   unchanged     otherwise: the interval contains 0 (not significant), or it reaches into [-noise, +noise]
 *   too noisy to tell
 *                 instead of the three above, when the machine's noise exceeds the effect asked about:
 *                 (1) the verdict interval's half-width is wider than the effect asked about — --fail-above PCT
 *                 when given (but never below the noise threshold: changes inside the band are never called),
 *                 else the noise threshold — and the interval does not settle the question anyway: the cell
 *                 would be "unchanged", or "slower" by no more than --fail-above (a "faster" cell, and a cell
 *                 slower than --fail-above, keep their verdict: their intervals clear the band on their side);
 *                 (2) a majority of either side's finished repetitions were taken under noise (kh_rep_noisy, the
 *                 report's rule): their times say what the load did as much as what the build did, so no
 *                 verdict of the cell stands.
 * The verdict interval is Bonferroni-adjusted over the m cells compared (level 1 - 0.05 / m), so a rerun of the
 * same build calls any cell faster or slower with at most 5 % probability; the tables show the 95 % CI. */
#ifndef KHOST_CORE_COMPARE_H
#define KHOST_CORE_COMPARE_H

#include <stddef.h>

#include "results/cellstats.h"
#include "results/stats.h"

typedef enum { KH_V_FASTER, KH_V_SLOWER, KH_V_UNCHANGED, KH_V_NOISY, KH_V_INCONCLUSIVE, KH_V_MISSING, KH_V_N } kh_verdict;
extern const char *const kh_verdict_name[KH_V_N];

/* One cell of a side: its task ("" for a one-task folder), its file base ("cntk__cpu") and repetitions. */
typedef struct kh_cmp_cell {
    char task[128], base[256];
    kh_cell_stats st;
} kh_cmp_cell;

/* One result folder (or database source) and its cells, sorted by task and base. */
typedef struct kh_cmp_side {
    const char *dir;
    kh_cmp_cell *c; int n, cap;
} kh_cmp_side;

/* Read s->dir's cells (warnings about skipped files on stderr): 0, or -1 with err naming the folder or file. */
int kh_cmp_side_scan(kh_cmp_side *s, char *err, size_t errlen);
void kh_cmp_side_free(kh_cmp_side *s);

/* How verdicts are reached: the noise band (%), the gate (--fail-above), and the level of the verdict interval
 * over the m cells compared (kh_cmp_fill sets m and level). */
typedef struct kh_cmp_rule {
    double noise;
    int have_fail;
    double fail_above;
    int m;
    double level;
} kh_cmp_rule;

typedef struct kh_cmp_row {
    const char *task, *base;  /* the side cell's */
    int kind;                 /* 0 epoch, 1 step */
    int nb, nn;               /* finished repetitions */
    double mb, mn;            /* medians */
    double ratio;
    kh_ci ci;                 /* 95 %: what the tables show */
    kh_ci vci;                /* at the verdict's level (Bonferroni over the cells compared) */
    double halfwidth;         /* of vci, in percent of the change: 100 (hi - lo) / 2; NAN without one */
    kh_verdict v;
    int fails;                /* slower by more than --fail-above */
    int both;                 /* the cell is in both sets */
    int cannot;               /* in both sets, but not comparable: the gate (--fail-above) fails on it */
    char why[320];
} kh_cmp_row;

/* One row per cell of either side (BASE's order, then what only NEW has) into rows (s[0].n + s[1].n long):
 * first at 95 % to count the m cells an interval can be formed for, then at the family-wise level. Returns the
 * number of rows; ru->m and ru->level are set. */
int kh_cmp_fill(const kh_cmp_side s[2], kh_cmp_rule *ru, kh_cmp_row *rows);
/* "plugin__cuda0" -> plugin "plugin", device "cuda:0". */
void kh_cmp_split_base(const char *base, char *plugin, size_t pn, char *device, size_t dn);
/* A JSON cell {"task", "plugin", "device"} for a row, appended to the array cells; NULL when out of memory. */
struct cJSON;
struct cJSON *kh_cmp_json_cell(struct cJSON *cells, const char *task, const char *base);
#endif
