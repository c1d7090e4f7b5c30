/* th_passes.h — theano's graph optimisation: passes that rewrite a graph of the shared IR (khost/kit/graph.h)
 * into an equivalent one, each in its own file. A pass builds a new graph from the old through th_rw (copy a
 * node with its inputs remapped, or map it onto a node already built), so every pass keeps a node map that
 * the model uses to find the probe's gradients and the outputs again. */
#ifndef TH_PASSES_H
#define TH_PASSES_H

#include "khost/kit/graph.h"

/* --- rewriting ------------------------------------------------------------------------------------------ */
typedef struct th_rw {
    const kh_graph *src;
    kh_graph *dst;
    int32_t *map;   /* src node -> dst node (-1: not built) */
    kh_status st;
    char err[256];
} th_rw;

kh_status th_rw_begin(th_rw *r, const kh_graph *src, kh_graph *dst);
/* Copy src node i into dst with inputs mapped (and a new input list when `in` is given); returns its id. */
int32_t th_rw_copy(th_rw *r, int32_t i, const int32_t *in, int32_t n_in);
/* Add a new node to dst (as kh_graph_add), recording failures in r. */
int32_t th_rw_add(th_rw *r, uint32_t op, const int32_t *in, int32_t n_in, const kh_gattr *a, uint32_t dtype,
                  int32_t rank, const int64_t *dims, uint32_t flags, int32_t phase);
/* A Zeros node of src node i's shape. */
int32_t th_rw_zeros(th_rw *r, int32_t i);
/* Outputs, flags and keep_forward carried over; map composed into `total` (lowered -> current), src released
 * by the caller. */
kh_status th_rw_end(th_rw *r, int32_t *total, int32_t n_total);
void th_rw_abort(th_rw *r);

/* --- passes: each rewrites src into dst; *changed counts its rewrites --------------------------------------- */
typedef kh_status (*th_pass_fn)(th_rw *r, int32_t *changed);
kh_status th_pass_dce(th_rw *r, int32_t *changed);        /* dce.c: drop values nothing needed reads */
kh_status th_pass_canon(th_rw *r, int32_t *changed);      /* canon.c: identities (Reshape chains, double Reverse, ...) */
kh_status th_pass_constfold(th_rw *r, int32_t *changed);  /* constfold.c: zeros through the ops they annihilate */
kh_status th_pass_merge(th_rw *r, int32_t *changed);      /* merge.c: one node per distinct computation */
kh_status th_pass_fuse(th_rw *r, int32_t *changed);       /* fuse.c: element-wise chains into Elemwise loops */

/* --- the pipeline ----------------------------------------------------------------------------------------- */
#define TH_MAX_PASS_RUNS 16
typedef struct th_pass_run {
    const char *name;
    int32_t nodes_before, nodes_after, changed;
    double seconds;
} th_pass_run;

typedef struct th_opt_report {
    int32_t n;
    th_pass_run run[TH_MAX_PASS_RUNS];
} th_opt_report;

/* Optimise `in` into `out` (level 0: a copy; 1: every pass). map[in node] = out node or -1. */
kh_status th_optimize(const kh_graph *in, int level, kh_graph *out, int32_t *map, th_opt_report *rep, char *err,
                      size_t errlen);

#endif
