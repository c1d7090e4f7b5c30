/* core/cli/history.h — one series of `khost history`, as computed (cmd_history.c) and drawn into its page
 * (history_page.c). */
#ifndef KHOST_CORE_HISTORY_H
#define KHOST_CORE_HISTORY_H

#include <stdio.h>

#include "results/stats.h"
#include "results/steps.h"

typedef struct kh_hist_rev {
    const char *name, *first; /* the revision (7 digits and any suffix) and when it was first measured */
    double *x;                /* its repetitions' values, seconds */
    const char **where;       /* each repetition's record files ("<set>/<task>/<file>", space-separated) */
    int n;
    double median;
    kh_ci ci;
} kh_hist_rev;

typedef struct kh_hist_change {
    int after;        /* the change lies between revision after - 1 and after (0-based) */
    double change;    /* the later level over the earlier, minus 1 */
    kh_ci ci;         /* of the ratio of the two levels' repetitions */
    const char *what; /* "slower", "faster", "not significant", "below the threshold" */
    int regression;   /* one of asv's regressions: it leaves the latest level above the best */
    char confirm[800]; /* --confirm's outcome, "" when not asked */
} kh_hist_change;

typedef struct kh_hist_series {
    const char *task, *plugin, *device, *kind, *machine;
    const char *order; /* how the revisions are ordered, in words */
    kh_hist_rev *revs;
    int n_revs;
    const kh_step *steps;
    int n_steps;
    const kh_hist_change *changes;
    int n_changes;
} kh_hist_series;

/* --confirm: the khost of each revision's build, and how to run them side by side. */
typedef struct kh_hist_build {
    const char *rev, *khost;
} kh_hist_build;
typedef struct kh_hist_confirm {
    const char *self;           /* this khost, for the comparison */
    const kh_hist_build *builds;
    int n_builds;
    int rounds, steps;          /* rounds of the two builds alternating; timed steps of each run */
    double timeout_s;
} kh_hist_confirm;
/* Run the builds of the revisions on either side of change c, alternating first and second over the rounds
 * (one fresh `khost run` each, --epochs 1 --steps S after 5 warm-up steps, as `repetition k of N` so the
 * comparison pairs them by round), compare them, and write into out whether the change is confirmed (the
 * comparison finds it in the same direction), refuted or inconclusive, with the side-by-side figure and where
 * the records are. */
void kh_history_confirm(const kh_hist_confirm *cf, const kh_hist_series *s, const kh_hist_change *c, char *out,
                        size_t n);

/* The page: a self-contained HTML file, every text escaped; one section per series with a chart (revision
 * medians, their CI band, the levels, the change points) whose points link to their revision's row, which
 * lists the revision's record files. */
void kh_history_page_begin(FILE *f, const char *src, int n_series, int n_records, double threshold_pct);
void kh_history_page_series(FILE *f, const kh_hist_series *s, int index);
void kh_history_page_end(FILE *f);
#endif
