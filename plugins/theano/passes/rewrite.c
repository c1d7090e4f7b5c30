/* passes/rewrite.c — building one graph from another: the mechanics every pass shares. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "th_passes.h"

kh_status th_rw_begin(th_rw *r, const kh_graph *src, kh_graph *dst) {
    memset(r, 0, sizeof *r);
    r->src = src;
    r->dst = dst;
    kh_status st = kh_graph_init(dst, src->max_batch);
    if (st != KH_OK) return st;
    r->map = malloc(((size_t)src->n_nodes + 1) * sizeof *r->map);
    if (!r->map) return KH_ERR_NOMEM;
    for (int32_t i = 0; i < src->n_nodes; i++) r->map[i] = -1;
    dst->keep_forward = src->keep_forward;
    return KH_OK;
}

static int32_t failed(th_rw *r, const char *what) {
    if (r->st == KH_OK) {
        r->st = KH_ERR_INTERNAL;
        snprintf(r->err, sizeof r->err, "%s: %s", what, r->dst->err);
    }
    return -1;
}

int32_t th_rw_add(th_rw *r, uint32_t op, const int32_t *in, int32_t n_in, const kh_gattr *a, uint32_t dtype,
                  int32_t rank, const int64_t *dims, uint32_t flags, int32_t phase) {
    if (r->st != KH_OK) return -1;
    int32_t id = kh_graph_add(r->dst, op, in, n_in, a, dtype, rank, dims, flags);
    if (id < 0) return failed(r, kh_gop_name(op));
    r->dst->nodes[id].phase = phase;
    return id;
}

int32_t th_rw_copy(th_rw *r, int32_t i, const int32_t *in, int32_t n_in) {
    if (r->st != KH_OK) return -1;
    const kh_gnode *nd = &r->src->nodes[i];
    int32_t buf[64], *mapped = buf;
    if (!in) {
        n_in = nd->n_in;
        if (n_in > 64 && !(mapped = malloc((size_t)n_in * sizeof *mapped))) return failed(r, "out of memory");
        const int32_t *si = kh_graph_inputs(r->src, i);
        for (int j = 0; j < n_in; j++) {
            mapped[j] = r->map[si[j]];
            if (mapped[j] < 0) {
                if (mapped != buf) free(mapped);
                snprintf(r->dst->err, sizeof r->dst->err, "node %d reads node %d, which was not built", i, si[j]);
                return failed(r, kh_gop_name(nd->op));
            }
        }
        in = mapped;
    }
    kh_gattr a = nd->attr;
    if (a.shape_of >= 0) {
        a.shape_of = r->map[a.shape_of];
        if (a.shape_of < 0) { /* the shape's node is gone: keep its shape with a Zeros-free stand-in */
            snprintf(r->dst->err, sizeof r->dst->err, "node %d takes its shape from a removed node", i);
            if (mapped != buf) free(mapped);
            return failed(r, kh_gop_name(nd->op));
        }
    }
    if (nd->op == KH_GOP_ELEMWISE) {
        a.expr = kh_graph_add_expr(r->dst, &r->src->exprs[nd->attr.expr]);
        if (a.expr < 0) {
            if (mapped != buf) free(mapped);
            return failed(r, "elemwise");
        }
    }
    int32_t id = th_rw_add(r, nd->op, in, n_in, &a, nd->dtype, nd->rank, nd->dims, nd->flags, nd->phase);
    if (mapped != buf) free(mapped);
    if (id >= 0) r->dst->nodes[id].flags |= nd->flags & (KH_GVAL_OUTPUT | KH_GVAL_PERSISTENT);
    return id;
}

int32_t th_rw_zeros(th_rw *r, int32_t i) {
    const kh_gnode *nd = &r->src->nodes[i];
    return th_rw_add(r, KH_GOP_ZEROS, NULL, 0, NULL, nd->dtype, nd->rank, nd->dims, nd->flags & KH_GVAL_BATCHED,
                     nd->phase);
}

kh_status th_rw_end(th_rw *r, int32_t *total, int32_t n_total) {
    if (r->st != KH_OK) return r->st;
    kh_graph *d = r->dst;
    d->n_outputs = r->src->n_outputs;
    for (int k = 0; k < 8; k++) {
        int32_t o = r->src->outputs[k];
        d->outputs[k] = o >= 0 ? r->map[o] : -1;
        if (o >= 0 && d->outputs[k] < 0) {
            snprintf(r->err, sizeof r->err, "output %d (node %d) was removed", k, o);
            return r->st = KH_ERR_INTERNAL;
        }
    }
    for (int32_t i = 0; i < r->src->n_nodes; i++) {
        int32_t j = r->map[i];
        if (j >= 0 && (r->src->nodes[i].flags & KH_GVAL_OUTPUT)) d->nodes[j].flags |= KH_GVAL_OUTPUT;
    }
    for (int32_t k = 0; total && k < n_total; k++) total[k] = total[k] >= 0 ? r->map[total[k]] : -1;
    free(r->map);
    r->map = NULL;
    return KH_OK;
}

void th_rw_abort(th_rw *r) {
    free(r->map);
    r->map = NULL;
    kh_graph_release(r->dst);
}
