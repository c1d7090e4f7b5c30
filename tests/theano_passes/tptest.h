/* tests/theano_passes/tptest.h — helpers for the tests of theano's graph passes (plugins/theano/passes/):
 * building small graphs by hand, running one pass through th_rw, and the float64 equivalence check that every
 * pass test ends with — the original and the rewritten graph evaluated by kh_graph_eval_ref on the same random
 * feeds, variables, optimizer slots and dropout keys, every node the rewrite maps compared with its image, and
 * the variables the Apply ops updated compared at the end. */
#ifndef KHOST_TESTS_TPTEST_H
#define KHOST_TESTS_TPTEST_H

#include <stdint.h>

#include "khost/kit/graph.h"
#include "th_passes.h"

// --- building ---------------------------------------------------------------------------------------------------
/* kh_graph_add; a refused node is a CHECK failure that names g->err (and returns -1). */
int32_t tp_add(kh_graph *g, uint32_t op, const int32_t *in, int32_t n_in, const kh_gattr *a);
/* A batched Input (dims[0] must be g->max_batch), a Variable (layer, slot), a Zeros of the given shape. */
int32_t tp_input(kh_graph *g, int32_t id, uint32_t dtype, const int64_t *dims, int32_t rank);
int32_t tp_var(kh_graph *g, int32_t layer, int32_t slot, const int64_t *dims, int32_t rank);
int32_t tp_zeros(kh_graph *g, const int64_t *dims, int32_t rank, int batched);
/* A Reshape to an explicit shape (batched when x is). */
int32_t tp_reshape(kh_graph *g, int32_t x, const int64_t *dims, int32_t rank);
/* outputs[k] = node, flagged KH_GVAL_OUTPUT. */
void tp_output(kh_graph *g, int k, int32_t node);
/* An Elemwise node over `in` running program `e`. */
int32_t tp_elemwise(kh_graph *g, const kh_gexpr *e, const int32_t *in, int32_t n_in);

#define TP_IN(...) (const int32_t[]){__VA_ARGS__}, (int32_t)(sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t))
#define TP_DIMS(...) (const int64_t[]){__VA_ARGS__}, (int32_t)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
#define TP1(g, op, x) tp_add((g), (op), TP_IN(x), NULL)
#define TP2(g, op, x, y) tp_add((g), (op), TP_IN(x, y), NULL)

// --- reading ----------------------------------------------------------------------------------------------------
int32_t tp_count(const kh_graph *g, uint32_t op);
/* The ops of g as "add 3, relu 2, ..." (for messages). */
const char *tp_ops(const kh_graph *g);
/* Input j of node i (-2 when there is no such node or input, so a missing node fails a comparison). */
static inline int32_t tp_in(const kh_graph *g, int32_t i, int j) {
    return i >= 0 && i < g->n_nodes && j >= 0 && j < g->nodes[i].n_in ? kh_graph_inputs(g, i)[j] : -2;
}
/* Fusion's result form: every Elemwise within KH_GEXPR_MAX_IN / KH_GEXPR_MAX_OPS, and no element-wise node
 * outside one (but an AddN too wide for one program). */
int tp_fused_form(const kh_graph *g);
/* Print the graph to stderr (after a failure). */
void tp_dump(const kh_graph *g, const char *title);

// --- rewriting --------------------------------------------------------------------------------------------------
/* One pass from src into dst (released by the caller); map[src node] = dst node or -1. A failure is a CHECK
 * failure naming the pass's error. */
kh_status tp_pass(th_pass_fn fn, const kh_graph *src, kh_graph *dst, int32_t *map, int32_t *changed);

// --- equivalence ------------------------------------------------------------------------------------------------
typedef struct tp_opts {
    int64_t n;            /* batch rows (<= max_batch) */
    uint64_t seed;        /* feeds, variables, slots; also the dropout key */
    int64_t index_below;  /* i32 X inputs: indices in [0, index_below) */
    int64_t label_below;  /* labels in [0, label_below) */
    kh_optimizer_spec opt;
    double lr;            /* the step's learning rate (0: opt.lr) */
    double tol;           /* largest relative error allowed (1e-12 unless set) */
    int quiet;            /* no per-graph line */
} tp_opts;
tp_opts tp_default_opts(void);

typedef struct tp_equiv_result {
    double max_err;   /* over every compared node and variable */
    int32_t nodes;    /* mapped nodes compared */
    int32_t vars;     /* variables (and slots) compared after the Apply ops */
    int32_t worst;    /* original node of max_err (-1: a variable) */
    int ok;
} tp_equiv_result;

/* Evaluate a and b (b = a rewritten, map: a node -> b node or -1) on the same inputs and compare every mapped
 * node (same element count, values within o->tol relative to the original's largest magnitude; NaN and inf
 * must match exactly) and every variable and optimizer slot after the run. `what` names the graph in failures. */
tp_equiv_result tp_equiv(const kh_graph *a, const kh_graph *b, const int32_t *map, const tp_opts *o,
                         const char *what);

/* The largest relative difference of two float64 arrays: max |x - y| / max(max |y|, 1e-12); positions where
 * both are NaN, or both the same infinity, count as equal; one NaN is +inf. */
double tp_rel_err(const double *x, const double *y, int64_t n);

#endif
