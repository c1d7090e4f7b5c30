/* passes/pipeline.c — the order the passes run in, and what each did (nodes before and after, rewrites, time:
 * `khost describe --plugin theano` and the compile log show it). Canonicalisation and constant folding first
 * (they expose duplicates), then merging, dead code, and last the fusions, which see the final graph. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "th_passes.h"
#include "khost/kit/clock.h"


typedef struct pass_def {
    const char *name;
    th_pass_fn fn;
} pass_def;

static const pass_def g_order[] = {
    {"canonicalize", th_pass_canon}, {"constant-fold", th_pass_constfold}, {"merge", th_pass_merge},
    {"dead-code", th_pass_dce},      {"fuse-elemwise", th_pass_fuse},
};

static kh_status copy_graph(const kh_graph *in, kh_graph *out, int32_t *map, char *err, size_t errlen) {
    th_rw r;
    kh_status st = th_rw_begin(&r, in, out);
    for (int32_t i = 0; st == KH_OK && i < in->n_nodes; i++) r.map[i] = th_rw_copy(&r, i, NULL, 0);
    if (st == KH_OK) memcpy(map, r.map, (size_t)in->n_nodes * sizeof *map);
    if (st == KH_OK) st = th_rw_end(&r, NULL, 0);
    if (st != KH_OK) {
        snprintf(err, errlen, "theano: copying the graph: %s", r.err);
        th_rw_abort(&r);
    }
    return st;
}

kh_status th_optimize(const kh_graph *in, int level, kh_graph *out, int32_t *map, th_opt_report *rep, char *err,
                      size_t errlen) {
    memset(rep, 0, sizeof *rep);
    kh_status st = copy_graph(in, out, map, err, errlen);
    if (st != KH_OK || level <= 0) return st;
    for (size_t p = 0; p < sizeof g_order / sizeof g_order[0]; p++) {
        kh_graph next;
        th_rw r;
        double t0 = kh_now();
        int32_t changed = 0;
        st = th_rw_begin(&r, out, &next);
        if (st == KH_OK) st = g_order[p].fn(&r, &changed);
        if (st == KH_OK) st = th_rw_end(&r, map, in->n_nodes);
        if (st != KH_OK) {
            snprintf(err, errlen, "theano: pass %s: %s", g_order[p].name, r.err[0] ? r.err : "failed");
            th_rw_abort(&r);
            kh_graph_release(out);
            return st;
        }
        if (rep->n < TH_MAX_PASS_RUNS) {
            th_pass_run *pr = &rep->run[rep->n++];
            pr->name = g_order[p].name;
            pr->nodes_before = out->n_nodes;
            pr->nodes_after = next.n_nodes;
            pr->changed = changed;
            pr->seconds = kh_now() - t0;
        }
        kh_graph_release(out);
        *out = next;
    }
    return KH_OK;
}
