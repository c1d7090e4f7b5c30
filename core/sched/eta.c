/* core/sched/eta.c — the matrix's remaining time (eta.h). */
#include "sched/eta.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

struct kh_eta {
    int n, rounds;
    double *prior; /* per cell: the database's wall time, NAN when unknown */
    double *sum;   /* per cell: wall times here, summed */
    int *count;
    double all_sum;
    int all_count;
};

kh_eta *kh_eta_new(int n_cells, int rounds) {
    kh_eta *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->n = n_cells, e->rounds = rounds;
    e->prior = malloc((size_t)(n_cells + 1) * sizeof *e->prior);
    e->sum = calloc((size_t)n_cells + 1, sizeof *e->sum);
    e->count = calloc((size_t)n_cells + 1, sizeof *e->count);
    if (!e->prior || !e->sum || !e->count) {
        kh_eta_free(e);
        return NULL;
    }
    for (int k = 0; k < n_cells; k++) e->prior[k] = NAN;
    return e;
}

void kh_eta_free(kh_eta *e) {
    if (!e) return;
    free(e->prior), free(e->sum), free(e->count);
    free(e);
}

void kh_eta_prior(kh_eta *e, int k, double wall_s) {
    if (e && k >= 0 && k < e->n && isfinite(wall_s) && wall_s >= 0) e->prior[k] = wall_s;
}

void kh_eta_done(kh_eta *e, int k, double wall_s) {
    if (!e || k < 0 || k >= e->n || !isfinite(wall_s) || wall_s < 0) return;
    e->sum[k] += wall_s, e->count[k]++;
    e->all_sum += wall_s, e->all_count++;
}

/* One cell's expected wall time and how it was found (0 this run, 1 the database, 2 the mean, -1 unknown). */
static double expect(const kh_eta *e, int k, int *how) {
    if (e->count[k]) return *how = 0, e->sum[k] / e->count[k];
    if (isfinite(e->prior[k])) return *how = 1, e->prior[k];
    if (e->all_count) return *how = 2, e->all_sum / e->all_count;
    return *how = -1, NAN;
}

double kh_eta_left(const kh_eta *e, const int *order, int pos, int round, int *n_run, int *n_db, int *n_mean) {
    *n_run = *n_db = *n_mean = 0;
    if (!e) return NAN;
    double left = 0;
    int unknown = 0;
    for (int r = round; r <= e->rounds; r++)
        for (int p = r == round ? pos + 1 : 0; p < e->n; p++) {
            int how, k = r == round ? order[p] : p; /* later rounds: every cell once, in whatever order */
            double x = expect(e, k, &how);
            if (how < 0) unknown++;
            else left += x, *(how == 0 ? n_run : how == 1 ? n_db : n_mean) += 1;
        }
    return unknown ? NAN : left;
}

void kh_eta_format(double s, char *buf, int n) {
    if (!isfinite(s)) snprintf(buf, (size_t)n, "unknown");
    else if (s >= 3600) snprintf(buf, (size_t)n, "%d h %02d min", (int)(s / 3600), (int)fmod(s / 60, 60));
    else if (s >= 60) snprintf(buf, (size_t)n, "%d min", (int)lround(s / 60));
    else snprintf(buf, (size_t)n, "%d s", (int)lround(s));
}
