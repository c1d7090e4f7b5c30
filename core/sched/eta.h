/* core/sched/eta.h — the matrix's estimate of its remaining time (sched/eta.c): each cell still to run is
 * expected to take what it took earlier in this run, else what the results database says it took on this
 * machine, else the mean of the cells done so far. */
#ifndef KHOST_CORE_ETA_H
#define KHOST_CORE_ETA_H

typedef struct kh_eta kh_eta;

/* n_cells cells, each run `rounds` times. NULL when out of memory. */
kh_eta *kh_eta_new(int n_cells, int rounds);
void kh_eta_free(kh_eta *e);
/* Cell k's wall time from the database's history (seconds), before it has run here. */
void kh_eta_prior(kh_eta *e, int k, double wall_s);
/* Cell k ran here in wall_s seconds. */
void kh_eta_done(kh_eta *e, int k, double wall_s);
/* Seconds left after position pos of round `round` (1-based), whose cells run in order[0..n_cells); NAN when
 * nothing is known yet. n_run, n_db, n_mean: how many of the remaining cells were estimated each way. */
double kh_eta_left(const kh_eta *e, const int *order, int pos, int round, int *n_run, int *n_db, int *n_mean);
/* "1 h 05 min", "12 min", "40 s" */
void kh_eta_format(double s, char *buf, int n);
#endif
