/* core/cli/history_confirm.h — `khost history --confirm` (cli/history_confirm.c): a change re-measured side by side. */
#ifndef KHOST_CORE_HISTORY_CONFIRM_H
#define KHOST_CORE_HISTORY_CONFIRM_H

#include <stdio.h>

#include "results/history.h"

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

#endif
