/* kit/graph/plan.c — the memory plan of one graph function, computed once at compile time.
 *
 * Storage: variables and Apply results live in the variables; Inputs in the caller's staged feed; GatherGrad
 * accumulators in persistent buffers; Reshape is a view of its input; everything else gets an offset in one
 * arena. Liveness runs over the node order (a topological order): a buffer is free after the last node that
 * reads it or any view of it; outputs the caller reads stay live to the end. An element-wise node writes into
 * its input's buffer when that buffer has no other reader (so no concurrent reader can exist). Other buffers
 * are placed first-fit among the buffers live at that point (the ggml-alloc / onnxruntime planner idea).
 *
 * Apply ops write their variable in place, so each also waits for every other reader of that variable.
 *
 * Reuse and a parallel executor: a buffer placed over memory that earlier values used must not be written
 * while those values are still being read by a node running concurrently. The plan therefore adds control
 * edges from every reader of the earlier occupant to the new producer; the executor counts them like data
 * edges. Readers precede the producer in the node order, so the edges never form a cycle.
 */
#include <stdlib.h>
#include <string.h>

#include "khost/kit/graph.h"

typedef struct blk {
    int64_t off, size;
    int32_t root; /* buffer id (a node id) */
} blk;

typedef struct pctx {
    const kh_graph *g;
    kh_gplan *p;
    int32_t *root;      /* buffer root per node */
    int32_t *last_use;  /* per root: last node position reading it (or n for outputs) */
    int32_t *readers_n; /* per root: readers over all views */
    int32_t *off, *cons;
    blk *live;          /* sorted by offset */
    int32_t n_live;
    blk *freed;         /* released regions not yet overwritten */
    int32_t n_freed, cap_freed;
    int32_t cap_ctrl;
    kh_status st;
} pctx;

static int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) & ~(a - 1); }

static void add_ctrl(pctx *c, int32_t from, int32_t to) {
    if (c->st != KH_OK || from == to) return;
    kh_gplan *p = c->p;
    if (p->n_ctrl == c->cap_ctrl) {
        int32_t nc = c->cap_ctrl ? c->cap_ctrl * 2 : 256;
        int32_t *a = realloc(p->ctrl_from, (size_t)nc * sizeof *a);
        if (a) p->ctrl_from = a;
        int32_t *b = a ? realloc(p->ctrl_to, (size_t)nc * sizeof *b) : NULL;
        if (b) p->ctrl_to = b;
        if (!a || !b) {
            c->st = KH_ERR_NOMEM;
            return;
        }
        c->cap_ctrl = nc;
    }
    p->ctrl_from[p->n_ctrl] = from;
    p->ctrl_to[p->n_ctrl] = to;
    p->n_ctrl++;
}

/* Every node that wrote buffer `root` (its producer, in-place successors) or read it (through any view) must
 * finish before `to` starts. */
static void order_after_readers(pctx *c, int32_t root, int32_t to) {
    const kh_graph *g = c->g;
    int32_t stop = c->last_use[root] < to ? c->last_use[root] + 1 : to;
    for (int32_t v = root; v < g->n_nodes && v < stop; v++) {
        if (c->root[v] != root) continue;
        if (g->nodes[v].op != KH_GOP_RESHAPE) add_ctrl(c, v, to);
        for (int32_t k = c->off[v]; k < c->off[v + 1]; k++)
            if (c->cons[k] < to && c->root[c->cons[k]] != root) add_ctrl(c, c->cons[k], to);
    }
}

static void push_freed(pctx *c, blk b) {
    if (c->n_freed == c->cap_freed) {
        int32_t nc = c->cap_freed ? c->cap_freed * 2 : 64;
        blk *f = realloc(c->freed, (size_t)nc * sizeof *f);
        if (!f) {
            c->st = KH_ERR_NOMEM;
            return;
        }
        c->freed = f;
        c->cap_freed = nc;
    }
    c->freed[c->n_freed++] = b;
}

/* Place buffer `root` of `size` bytes for producer node `at`. */
static int64_t place(pctx *c, int32_t root, int64_t size, int32_t at) {
    int64_t pos = 0;
    int32_t k = 0;
    for (; k < c->n_live; k++) {
        if (c->live[k].off - pos >= size) break;
        int64_t end = c->live[k].off + c->live[k].size;
        if (end > pos) pos = end;
    }
    memmove(c->live + k + 1, c->live + k, (size_t)(c->n_live - k) * sizeof *c->live);
    c->live[k] = (blk){pos, size, root};
    c->n_live++;
    if (pos + size > c->p->arena_bytes) c->p->arena_bytes = pos + size;
    /* order after the earlier occupants of [pos, pos + size) */
    for (int32_t i = 0; i < c->n_freed; i++) {
        blk f = c->freed[i];
        if (f.off >= pos + size || f.off + f.size <= pos) continue;
        order_after_readers(c, f.root, at);
        /* the overlapped part is now ordered; keep the rest */
        c->freed[i] = c->freed[--c->n_freed];
        i--;
        if (f.off < pos) push_freed(c, (blk){f.off, pos - f.off, f.root});
        if (f.off + f.size > pos + size) push_freed(c, (blk){pos + size, f.off + f.size - pos - size, f.root});
    }
    return pos;
}

static void release(pctx *c, int32_t root) {
    for (int32_t k = 0; k < c->n_live; k++)
        if (c->live[k].root == root) {
            push_freed(c, c->live[k]);
            memmove(c->live + k, c->live + k + 1, (size_t)(c->n_live - k - 1) * sizeof *c->live);
            c->n_live--;
            return;
        }
}

void kh_gplan_free(kh_gplan *p) {
    if (!p) return;
    free(p->e);
    free(p->ctrl_from);
    free(p->ctrl_to);
    free(p->persistent_bytes);
    memset(p, 0, sizeof *p);
}

static uint32_t store_of(const kh_gnode *n) {
    switch (n->op) {
    case KH_GOP_VARIABLE: case KH_GOP_APPLY_GRADIENT_DESCENT: case KH_GOP_APPLY_RMSPROP: case KH_GOP_APPLY_ADAM:
    case KH_GOP_APPLY_ADADELTA: return KH_GSTORE_VARIABLE;
    case KH_GOP_INPUT: return KH_GSTORE_FEED;
    case KH_GOP_GATHER_GRAD: return KH_GSTORE_PERSISTENT;
    default: return KH_GSTORE_ARENA;
    }
}

kh_status kh_graph_plan(const kh_graph *g, int64_t align, kh_gplan *p) {
    memset(p, 0, sizeof *p);
    if (align < 16 || (align & (align - 1))) return KH_ERR_INVALID;
    int32_t n = g->n_nodes;
    pctx c = {.g = g, .p = p, .st = KH_OK};
    p->n_nodes = n;
    p->e = calloc((size_t)n + 1, sizeof *p->e);
    c.root = malloc(((size_t)n + 1) * sizeof *c.root);
    c.last_use = malloc(((size_t)n + 1) * sizeof *c.last_use);
    c.readers_n = calloc((size_t)n + 1, sizeof *c.readers_n);
    c.live = malloc(((size_t)n + 1) * sizeof *c.live);
    int32_t *persistent = malloc(((size_t)n + 1) * sizeof *persistent);
    if (!p->e || !c.root || !c.last_use || !c.readers_n || !c.live || !persistent ||
        kh_graph_consumers(g, &c.off, &c.cons) != KH_OK) {
        c.st = KH_ERR_NOMEM;
        goto done;
    }
    /* views (vroot) and their readers */
    int32_t *vroot = malloc(((size_t)n + 1) * sizeof *vroot);
    if (!vroot) {
        c.st = KH_ERR_NOMEM;
        goto done;
    }
    for (int32_t i = 0; i < n; i++) {
        const kh_gnode *nd = &g->nodes[i];
        vroot[i] = nd->op == KH_GOP_RESHAPE ? vroot[kh_graph_inputs(g, i)[0]] : i;
        c.last_use[i] = i;
        p->e[i].inplace_of = -1;
        p->e[i].bytes = kh_graph_numel(g, i, g->max_batch) * 4;
    }
    for (int32_t i = 0; i < n; i++) {
        const int32_t *in = kh_graph_inputs(g, i);
        for (int j = 0; j < g->nodes[i].n_in; j++) {
            int32_t r = vroot[in[j]];
            c.readers_n[r]++;
            if (i > c.last_use[r]) c.last_use[r] = i;
        }
    }
    for (int32_t i = 0; i < n; i++) {
        const kh_gnode *nd = &g->nodes[i];
        if ((nd->flags & KH_GVAL_OUTPUT) || (g->keep_forward && nd->phase == 0)) c.last_use[vroot[i]] = n;
    }
    /* buffers: a view shares its input's; an element-wise node takes over the buffer of an input value that
     * nobody else reads */
    for (int32_t i = 0; i < n; i++) {
        const kh_gnode *nd = &g->nodes[i];
        const int32_t *in = kh_graph_inputs(g, i);
        c.root[i] = i;
        if (nd->op == KH_GOP_RESHAPE) {
            c.root[i] = c.root[in[0]];
            continue;
        }
        if (store_of(nd) != KH_GSTORE_ARENA || (nd->flags & KH_GVAL_OUTPUT)) continue;
        for (int j = 0; j < nd->n_in; j++) {
            if (!kh_gop_inplace_ok(nd->op, j)) continue;
            int32_t r = vroot[in[j]];
            const kh_gnode *rn = &g->nodes[r];
            int dup = 0; /* the same value twice (x * x) counts as one reader but must not be overwritten */
            for (int k = 0; k < nd->n_in; k++)
                if (k != j && vroot[in[k]] == r) dup = 1;
            if (dup || c.readers_n[r] != 1 || c.last_use[r] != i || store_of(rn) != KH_GSTORE_ARENA ||
                rn->op == KH_GOP_ZEROS || p->e[r].bytes != p->e[i].bytes)
                continue;
            if (g->keep_forward && rn->phase == 0 && nd->phase != 0) continue;
            c.root[i] = c.root[r];
            p->e[i].inplace_of = in[j];
            break;
        }
    }
    /* a buffer's last use: the latest over every value living in it */
    for (int32_t i = 0; i < n; i++) {
        int32_t b = c.root[i];
        if (b != i && c.last_use[vroot[i]] > c.last_use[b]) c.last_use[b] = c.last_use[vroot[i]];
    }
    free(vroot);
    /* buckets of roots by release position */
    int32_t *rel_head = malloc(((size_t)n + 2) * sizeof *rel_head), *rel_next = malloc(((size_t)n + 1) * sizeof *rel_next);
    if (!rel_head || !rel_next) {
        free(rel_head);
        free(rel_next);
        c.st = KH_ERR_NOMEM;
        goto done;
    }
    for (int32_t i = 0; i <= n; i++) rel_head[i] = -1;
    for (int32_t i = 0; i < n; i++) p->naive_bytes += align_up(p->e[i].bytes, align);
    for (int32_t i = 0; i < n && c.st == KH_OK; i++) {
        const kh_gnode *nd = &g->nodes[i];
        kh_gplan_entry *e = &p->e[i];
        uint32_t st = store_of(nd);
        if (c.root[i] != i) { /* a view, or in place */
            int32_t inplace_of = e->inplace_of; /* e is p->e[i]: keep its own before copying the root's */
            *e = p->e[c.root[i]];
            e->inplace_of = inplace_of;
            e->bytes = kh_graph_numel(g, i, g->max_batch) * 4;
        } else if (st == KH_GSTORE_ARENA) {
            e->store = KH_GSTORE_ARENA;
            e->offset = place(&c, i, align_up(e->bytes > 0 ? e->bytes : align, align), i);
            int32_t lu = c.last_use[i];
            rel_next[i] = rel_head[lu];
            rel_head[lu] = i;
        } else if (st == KH_GSTORE_PERSISTENT) {
            e->store = KH_GSTORE_PERSISTENT;
            e->offset = p->n_persistent;
            persistent[p->n_persistent++] = i;
        } else {
            e->store = st;
        }
        for (int32_t r = rel_head[i]; r >= 0; r = rel_next[r]) release(&c, r);
    }
    free(rel_head);
    free(rel_next);
    /* an Apply op updates its variable in place: it waits for every other reader of that variable */
    for (int32_t i = 0; i < n && c.st == KH_OK; i++) {
        if (store_of(&g->nodes[i]) != KH_GSTORE_VARIABLE || g->nodes[i].op == KH_GOP_VARIABLE) continue;
        int32_t var = kh_graph_inputs(g, i)[0];
        for (int32_t k = c.off[var]; k < c.off[var + 1]; k++)
            if (c.cons[k] != i) add_ctrl(&c, c.cons[k], i);
    }
    if (c.st == KH_OK && p->n_persistent > 0) {
        p->persistent_bytes = malloc((size_t)p->n_persistent * sizeof *p->persistent_bytes);
        if (!p->persistent_bytes) c.st = KH_ERR_NOMEM;
        for (int32_t k = 0; c.st == KH_OK && k < p->n_persistent; k++) p->persistent_bytes[k] = p->e[persistent[k]].bytes;
    }
done:
    free(c.root);
    free(c.last_use);
    free(c.readers_n);
    free(c.live);
    free(c.freed);
    free(c.off);
    free(c.cons);
    free(persistent);
    if (c.st != KH_OK) kh_gplan_free(p);
    return c.st;
}
