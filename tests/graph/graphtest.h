/* tests/graph/graphtest.h — helpers for the graph layer's tests (see graphtest.c). */
#ifndef KHOST_TESTS_GRAPHTEST_H
#define KHOST_TESTS_GRAPHTEST_H

#include <stdint.h>

#include "khost/kit/graph.h"

/* float64 variables (and two optimizer slots each) of a lowered model, random in [-0.4, 0.4). */
typedef struct gt_store {
    const kh_model_graphs *mg;
    int32_t n;
    double **w;
    double **slot[2];
} gt_store;

int gt_store_init(gt_store *s, const kh_model_graphs *mg, uint64_t seed);
void gt_store_free(gt_store *s);
/* An interpreter environment reading and updating the store. */
kh_graph_ref_env gt_env(gt_store *s);
/* Every node's value in float64 for a batch of n (NULL after a CHECK failure). */
double **gt_eval(const kh_graph *g, int64_t n, const kh_graph_ref_env *env);
void gt_values_free(const kh_graph *g, double **v);
/* max |a - b| / max |b| */
double gt_rel_err(const double *a, const double *b, int64_t n);

#endif
