/* th_profile.c — kh_backend_api.profile (ABI 1.1) on the cpu: seconds per node of the training function, summed
 * per model layer (kh_gnode.attr.layer; phases 0-1 forward, 2 backward, 3 the Apply ops: the layer's optimizer
 * time) and per op kind, as tensorflow's executor reports them.
 *
 * How it is free when not profiling: the code generator emits the training function a second time, as its
 * profiling variant (th_emit_env.profile: the same statements with a clock read between nodes, entry
 * th_main_prof), and this file builds that variant through the generated-code cache on the first profile call of
 * a model. Compiling a model builds th_main exactly as before (the same source, so the same cache entry and the
 * same machine code); the only trace in the ordinary step is th_cpu_run's one branch per call on
 * th_model.prof_node_s, which is set only while profile times its steps. The rows, and each row's backward split
 * into its input and weight gradient, are kit/graph/profile_fill.c's, as tensorflow's.
 *
 * Nodes run one after another (a node's OpenMP loops join before the next starts), so the node intervals are
 * disjoint parts of each step and the rows add up to at most total_s; other_s is the rest (the loss and metrics,
 * nodes of no layer, staging the batch, the runtime's checks, the clock reads). A fused Elemwise node counts for
 * the layer of the node its chain ends in. The variant is compiled separately, so the compiler may schedule
 * across nodes differently than in th_main: its times are the profiling variant's, close to but not the same
 * code as an ordinary step's. The GPU path does not profile (its kernels are asynchronous; timing them per
 * layer needs CUDA events around each plan entry, not written): KH_ERR_UNSUPPORTED there. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "th.h"
#include "th_emit.h"
#include "khost/kit/clock.h"
#include "khost/kit/profile.h"
#include "khost/kit/status.h"

/* Emit and build the training function's profiling variant (once per model). */
static kh_status build_variant(th_model *m) {
    if (m->prof_run) return KH_OK;
    th_fn_unit *u = &m->fn[KH_GFN_TRAIN];
    int64_t scratch = 0;
    th_emit_env env = {.g = &u->g, .plan = &u->plan, .mg = &m->rt.mg, .fn = KH_GFN_TRAIN, .scratch_floats = &scratch,
                       .profile = 1};
    th_sb src = {0};
    char why[512];
    kh_status st = th_emit_c(&env, &src, why, sizeof why);
    if (st == KH_OK && scratch > m->scratch_floats) /* the same nodes as th_main: never more scratch */
        st = kh_errf(why, sizeof why, KH_ERR_INTERNAL, "the profiling variant needs %lld scratch floats, th_main %lld",
                     (long long)scratch, (long long)m->scratch_floats);
    if (st != KH_OK) {
        th_sb_free(&src);
        return th_fail(m->s, st, "profile", "train function's profiling variant: %s", why);
    }
    int hit = 0;
    double cc_s = 0, load_s = 0;
    void *dl = NULL, *sym = NULL;
    st = th_build_sym(m->s, src.s, src.len, "train (profiling variant)", "th_main_prof", &dl, &sym, &hit, &cc_s,
                      &load_s);
    th_sb_free(&src);
    if (st != KH_OK) {
        if (dl) dlclose(dl);
        return st;
    }
    th_log(m->s, KH_LOG_INFO, "profile: the train function's profiling variant %s (cc %.2f s, load %.3f s)",
           hit ? "came from the cache" : "was compiled", cc_s, load_s);
    m->prof_dl = dl;
    memcpy(&m->prof_run, &sym, sizeof m->prof_run);
    return KH_OK;
}

/* nodes that do work: storage ops (variables, inputs, views) take no time */
static int node_works(const void *ctx, int32_t node) {
    return !th_em_storage_op(((const kh_graph *)ctx)->nodes[node].op);
}

kh_status th_api_profile(kh_bmodel *b, const kh_tensor *x, const kh_tensor *y, int32_t warmup, int32_t steps,
                         kh_profile *out) {
    if (!b) return KH_ERR_INVALID;
    th_model *m = (th_model *)kh_grt_model_of(b);
    if (!x || !y || !out || steps < 1 || warmup < 0 || out->cap_rows < 0 || (out->cap_rows > 0 && !out->rows))
        return th_fail(m->s, KH_ERR_INVALID, "profile", "missing x, y or out, or steps < 1");
    if (m->s->rt.dev.kind != KH_DEVICE_CPU || m->cuda)
        return th_fail(m->s, KH_ERR_UNSUPPORTED, "profile",
                       "per-layer profiling is implemented on cpu only (the GPU path's kernels run asynchronously; "
                       "timing them per layer would need CUDA events around each launch, which theano does not have)");
    th_fn_unit *u = &m->fn[KH_GFN_TRAIN];
    if (!u->run || u->g.n_nodes == 0)
        return th_fail(m->s, KH_ERR_INVALID, "profile", "the model has no training function");
    kh_status st = build_variant(m);
    if (st != KH_OK) return st;
    double *t = calloc((size_t)u->g.n_nodes + 1, sizeof *t);
    if (!t) return th_fail(m->s, KH_ERR_NOMEM, "profile", "out of host memory");
    /* warm-up through the variant too (its code is cold), untimed: its node times are dropped */
    m->prof_node_s = t;
    for (int32_t i = 0; i < warmup && st == KH_OK; i++) st = kh_grt_train_batch(b, x, y);
    memset(t, 0, ((size_t)u->g.n_nodes + 1) * sizeof *t);
    double total = 0;
    if (st == KH_OK) {
        double t0 = kh_now();
        for (int32_t i = 0; i < steps && st == KH_OK; i++) st = kh_grt_train_batch(b, x, y);
        if (st == KH_OK) st = kh_grt_host_sync(&m->rt); /* the cpu executor is synchronous: nothing to wait for */
        total = kh_now() - t0;
    }
    m->prof_node_s = NULL;
    if (st == KH_OK &&
        kh_graph_profile_fill(&u->g, node_works, &u->g, m->layer_kinds, m->rt.mg.shapes.n_layers, t, steps, total,
                              out) != KH_OK)
        st = th_fail(m->s, KH_ERR_NOMEM, "profile", "out of host memory");
    free(t);
    return st;
}
