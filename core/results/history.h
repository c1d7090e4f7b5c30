/* core/results/history.h — each cell's series across revisions from a results database (results/history.c): one
 * series per backend x task x device x machine x kind of time, each revision's median and CI, the levels and
 * change points (results/steps.h) and a CI for each change. `khost history` prints, draws and confirms them;
 * `khost report DB --html` draws them too. */
#ifndef KHOST_CORE_HISTORY_H
#define KHOST_CORE_HISTORY_H

#include "results/resultsdb.h"
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
    int after;         /* the change lies between revision after - 1 and after (0-based) */
    double change;     /* the later level over the earlier, minus 1 */
    kh_ci ci;          /* of the ratio of the two levels' repetitions */
    const char *what;  /* "slower", "faster", "not significant", "below the threshold" */
    int regression;    /* one of asv's regressions: it leaves the latest level above the best */
    int significant;   /* above the threshold and its CI excludes no change */
    char confirm[800]; /* `history --confirm`'s outcome, "" when not asked */
} kh_hist_change;

typedef struct kh_hist_series {
    const char *task, *plugin, *device, *kind, *machine;
    const char *order; /* how the revisions are ordered, in words */
    kh_hist_rev *revs;
    int n_revs;
    kh_step *steps;
    int n_steps;
    kh_hist_change *changes;
    int n_changes;
    void *own[6]; /* what kh_hist_series_free releases */
} kh_hist_series;

/* A repository's commits oldest first, by their first 7 digits (the caller reads them: git rev-list). */
typedef struct kh_git_order {
    char (*rev)[8];
    int n;
} kh_git_order;

typedef struct kh_history kh_history;
/* The ok records of db matching filters (a source's text after "FILE:"; NULL for none), of task and plugin
 * when given, as series. NULL with err. */
kh_history *kh_history_load(kh_db *db, const char *filters, const char *task, const char *plugin, char *err,
                            size_t errlen);
int kh_history_n_series(const kh_history *h);
int kh_history_n_records(const kh_history *h);
/* Series i computed (threshold: the smallest change called one, relative; git: commit order, or NULL). 0 ok,
 * -1 out of memory. */
int kh_history_series(const kh_history *h, int i, double threshold, const kh_git_order *git, kh_hist_series *s);
void kh_hist_series_free(kh_hist_series *s);
void kh_history_free(kh_history *h);

/* The page's parts (results/report/history_page.c): a self-contained HTML page, every text escaped; a section per
 * series with a chart (revision medians, their CI band, the levels, the change points) whose points link to
 * their revision's row, which lists the revision's record files. begin/end make a page of their own; a
 * section alone goes into another page (report's). */
#include <stdio.h>
void kh_history_page_begin(FILE *f, const char *src, int n_series, int n_records, double threshold_pct);
void kh_history_page_intro(FILE *f, const char *src, int n_series, int n_records, double threshold_pct);
void kh_history_page_style(FILE *f);
void kh_history_page_series(FILE *f, const kh_hist_series *s, int index);
void kh_history_page_end(FILE *f);
#endif
