/* core/results/cellstats.h — a cell's repetitions and their statistics, read from its records.
 *
 * A cell (plugin x task x device) is the set of its repetition records: <out>/<task>/<plugin>__<device>.rep<k>.json
 * (khost matrix --repeat N), or, when there is none, the classic <plugin>__<device>.json of a single run,
 * which counts as one repetition. The statistics take one value per repetition, because repetitions are
 * separate processes and so independent, while the per-step samples of one process are autocorrelated
 * (docs/PERFORMANCE.md, "How khost measures"):
 *   epoch value  the repetition's mean epoch time (its record's mean_epoch_s, the seed's definition)
 *   step value   the median of the repetition's samples.step_s (records v2; absent in v1: NAN)
 * Repetitions whose status is not "ok" are kept in the list with their status and never enter a statistic.
 * Each repetition also carries its seed, final metric and epochs to target, for the statistics across seeds
 * (seedstats.h) when a cell's repetitions are its seeds (matrix --seeds N).
 */
#ifndef KHOST_CORE_CELLSTATS_H
#define KHOST_CORE_CELLSTATS_H

#include <stddef.h>
#include <stdint.h>

#include "base/cpuload.h"

#include "results/cellfiles.h"
#include "results/identity.h"
#include "results/stats.h"

/* What a repetition was measured with; -1 / "" where its record does not say. Two cells measured with
 * different settings cannot be compared. */
typedef struct kh_rep_settings {
    int64_t batch_size, train_samples, warmup_steps, steps_per_epoch;
    char math[8];
} kh_rep_settings;

typedef struct kh_rep {
    int index;                 /* k of .rep<k>; 1 for a classic record */
    int round;                 /* repeat.round, else index */
    char status[16];
    double epoch_s, step_s;    /* NAN when the repetition did not finish or has no samples */
    double epoch_z, step_z;    /* modified Z-score among the cell's finished repetitions (NAN: none) */
    int epoch_outlier, step_outlier;
    double *steps; int n_steps; /* samples.step_s as recorded */
    char file[256];            /* the record's file name */
    int record_version;        /* its "khost_record" (above KH_RECORD_VERSION: from a newer khost) */
    kh_rep_settings set;
    char impossible[160];      /* why an "ok" record's times cannot be true (then it counts as not finished) */
    double other_cores, steal_pct, noise_window_s; /* the machine's load while it ran (cell/noise.h); NAN: none */
    kh_identity id;            /* the machine and build that measured it (identity.h) */
    /* what it trained to (the statistics across seeds, seedstats.h): its seed, its final metric (NAN unless
     * ok), the task's target and the first epoch that reached it (KH_TARGET_* of results.h) with that
     * epoch's elapsed time (NAN when none) */
    uint64_t seed;
    int seed_known;            /* 0: the record has no "seed" (it cannot be told apart by seed) */
    char metric_name[16];
    double metric, target, time_to_target_s;
    int target_is_max, epochs_to_target;
} kh_rep;

/* 1 when the repetition was measured under noise: other processes took more than KH_NOISE_OTHER_CORES cores or the
 * hypervisor stole more than KH_NOISE_STEAL_PCT %, over a window of at least KH_NOISE_MIN_WINDOW_S (cell/noise.h). */
int kh_rep_noisy(const kh_rep *r);
#define KH_NOISE_OTHER_CORES KH_CPULOAD_BUSY_CORES
#define KH_NOISE_STEAL_PCT KH_CPULOAD_BUSY_STEAL_PCT
#define KH_NOISE_MIN_WINDOW_S 1.0

/* Statistics of one value kind over the finished repetitions. */
typedef struct kh_rep_stats {
    int n;                     /* repetitions with a value; 0: none (all fields NAN) */
    kh_summary s;
    kh_ci ci;                  /* bootstrap CI of the median (NAN bounds when n < 2) */
    int n_outliers;
    int warn;                  /* KH_STATS_WARN_ bits */
    char warnings[512];
} kh_rep_stats;

typedef struct kh_cell_stats {
    kh_rep *reps; int n_reps;  /* by index */
    int n_failed;              /* repetitions whose status is not ok */
    int n_impossible;          /* "ok" repetitions whose times cannot be true (kh_rep.impossible) */
    kh_rep_stats epoch, step;
    char step_sync[16];        /* the first sample-carrying record's samples.step_sync ("" unknown) */
    int rep_file;              /* the record that stands for the cell (its first ok repetition, else its
                                  first): index into reps */
} kh_cell_stats;

/* Read the repetitions of the cell whose files are dir/<base>[.rep<k>].json and compute its statistics.
 * 0 ok (n_reps may be 0: no record), -1 with err naming the file and the field. */
int kh_cell_stats_load(const char *dir, const char *base, kh_cell_stats *c, char *err, size_t errlen);
/* The same for the cell whose files are the run of l (dir read once, cellfiles.h) that starts at first (-1: no
 * file, n_reps 0); with_ci 0 leaves the medians' bootstrap CIs unknown (NAN), for a reader that needs none. */
int kh_cell_stats_load_run(const char *dir, const kh_cell_files *l, int first, int with_ci, kh_cell_stats *c,
                           char *err, size_t errlen);
void kh_cell_stats_free(kh_cell_stats *c);
/* The per-round values of two cells (kind 0 epoch, 1 step) matched by round, into a[] and b[] (each at
 * least x->n_reps long: every repetition of x pairs with at most one of y); returns the number of pairs. */
int kh_cell_stats_pairs(const kh_cell_stats *x, const kh_cell_stats *y, int kind, double *a, double *b);
/* The first repetition of c whose record is impossible, or NULL. */
const kh_rep *kh_cell_stats_impossible(const kh_cell_stats *c);
/* 0 when the settings of a and b agree where both records say; else 1 with "batch_size 128 and 64" in why. */
int kh_rep_settings_differ(const kh_rep_settings *a, const kh_rep_settings *b, char *why, size_t n);
/* The values of one kind, finished repetitions only, in index order, into v[n_reps]; returns their count. */
int kh_cell_stats_values(const kh_cell_stats *c, int kind, double *v);

/* Read the repetitions of <out>/<task>/<plugin>__<device> and write their statistics and warnings to
 * <out>/<task>/<plugin>__<device>.stats.json (atomically). 0 ok; -1 with err (no record, unreadable record,
 * write failure). The matrix calls it after a cell's last repetition. */
int kh_stats_write_cell_summary(const char *out_dir, const char *task, const char *plugin, const char *device,
                                char *err, size_t errlen);
#endif
