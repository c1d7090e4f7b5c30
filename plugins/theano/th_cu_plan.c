/* th_cu_plan.c — the launch plan's helpers (th_cuda_plan.h): where a node's value lives on the device, grids,
 * argument sizes and entry names, shared by the CUDA dialect (th_dialect_cuda.c), the runner and the CUBIN check. */
#include <stdlib.h>
#include <string.h>

#include "th_cuda_plan.h"

kh_status th_cu_value(const th_emit_env *env, int32_t i, th_cu_ref *r) {
    const kh_graph *g = env->g;
    const kh_gplan *p = env->plan;
    *r = (th_cu_ref){TH_CU_NONE, 0, 0, 0};
    for (int hops = 0; i >= 0 && i < g->n_nodes && hops <= g->n_nodes; hops++) {
        const kh_gnode *nd = &g->nodes[i];
        if (nd->op == KH_GOP_RESHAPE) {
            i = kh_graph_inputs(g, i)[0];
            continue;
        }
        if (p->e[i].inplace_of >= 0) {
            i = p->e[i].inplace_of;
            continue;
        }
        const kh_gplan_entry *e = &p->e[i];
        switch (e->store) {
        case KH_GSTORE_ARENA: r->base = TH_CU_ARENA, r->offset = e->offset; return KH_OK;
        case KH_GSTORE_VARIABLE:
            r->base = TH_CU_VAR;
            r->index = kh_model_graphs_var(env->mg, nd->attr.layer, nd->attr.slot);
            return r->index >= 0 ? KH_OK : KH_ERR_INTERNAL;
        case KH_GSTORE_FEED: r->base = TH_CU_FEED, r->index = nd->attr.input_id; return KH_OK;
        case KH_GSTORE_PERSISTENT: r->base = TH_CU_PERSISTENT, r->index = (int32_t)e->offset; return KH_OK;
        default: return KH_ERR_INTERNAL;
        }
    }
    return KH_ERR_INTERNAL;
}

void th_cu_plan_free(th_cu_plan *p) {
    free(p->v);
    memset(p, 0, sizeof *p);
}

int64_t th_cu_grid(const th_cu_launch *e, int64_t n) {
    if (e->kind != TH_CUL_KERNEL || e->block <= 0) return 0;
    if (e->fixed_grid > 0) return e->fixed_grid;
    int64_t t = th_cu_eval(e->threads, n);
    if (t <= 0) return 0;
    int64_t g = (t + e->block - 1) / e->block;
    return g > TH_CU_GRID_CAP ? TH_CU_GRID_CAP : g;
}

size_t th_cu_arg_size(uint32_t kind) {
    switch (kind) {
    case TH_CUARG_LR: case TH_CUARG_STEP: return 4;
    default: return 8;
    }
}

const char *th_cu_entry_library(uint32_t kind) {
    switch (kind) {
    case TH_CUL_KERNEL: return "kernel";
    case TH_CUL_GEMM: return "cublas";
    case TH_CUL_CONV: return "cudnn";
    case TH_CUL_MEMSET: return "memset";
    case TH_CUL_LOOP: return "loop";
    default: return "none";
    }
}
