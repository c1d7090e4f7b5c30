/* cpu/onednn_arg.c — a primitive's arguments in the layout oneDNN chose for them (cntk_darg, cpu/onednn.h),
 * and primitive descriptors with the plugin's attributes, for every oneDNN layer. */
#include <string.h>

#include "cpu/onednn.h"

kh_status cntk_darg_setup(cntk_cpu_model *m, const cntk_cpu_layer *L, const char *name, int output,
                          const dnnl_memory_desc_t *user, const dnnl_memory_desc_t *want, const cntk_darg *like,
                          cntk_darg *a) {
    a->md = *want;
    if (dnnl_memory_desc_equal(user, want)) return cntk_dnnl_mem(m, L, want, DNNL_MEMORY_NONE, &a->mem);
    if (like && like->buf && dnnl_memory_desc_equal(&like->md, want)) {
        a->alias = 1;
        return cntk_dnnl_mem(m, L, want, like->buf, &a->mem);
    }
    kh_status st = cntk_dnnl_buffer(m, L, want, &a->buf, &a->mem);
    if (st != KH_OK) return st;
    return output ? cntk_dnnl_reorder(m, L, name, want, user, &a->r) : cntk_dnnl_reorder(m, L, name, user, want, &a->r);
}

void cntk_darg_free(cntk_cpu_model *m, cntk_darg *a) {
    cntk_dnnl_reorder_free(&a->r);
    if (a->mem) dnnl_memory_destroy(a->mem);
    cntk_free(m->s, a->buf);
    memset(a, 0, sizeof *a);
}

kh_status cntk_darg_bind(cntk_cpu_model *m, const cntk_cpu_layer *L, const cntk_darg *a, const void *user,
                         int reorder) {
    if (a->alias) return KH_OK;
    if (a->buf) return reorder ? cntk_dnnl_reorder_run(m, L, &a->r, (void *)user, a->buf) : KH_OK;
    CNTK_DNNL_TRY(m, L, "step", "memory handle", dnnl_memory_set_data_handle(a->mem, (void *)user));
    return KH_OK;
}
kh_status cntk_darg_in(cntk_cpu_model *m, const cntk_cpu_layer *L, const cntk_darg *a, const void *user) {
    return cntk_darg_bind(m, L, a, user, 1);
}
kh_status cntk_darg_out(cntk_cpu_model *m, const cntk_cpu_layer *L, const cntk_darg *a, void *user) {
    return a->buf ? cntk_dnnl_reorder_run(m, L, &a->r, a->buf, user) : KH_OK;
}

kh_status cntk_dnnl_pd(cntk_cpu_model *m, const cntk_cpu_layer *L, const char *name, const_dnnl_op_desc_t d,
                       const_dnnl_primitive_desc_t hint, int post_relu, dnnl_primitive_desc_t *pd) {
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    kh_status st = cntk_dnnl_attr(m, L, &attr);
    dnnl_status_t ds = dnnl_success;
    if (st == KH_OK && post_relu) {
        ds = dnnl_post_ops_create(&po);
        if (ds == dnnl_success) ds = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f);
        if (ds == dnnl_success) ds = dnnl_primitive_attr_set_post_ops(attr, po);
        if (ds != dnnl_success) st = cntk_dnnl_fail(m, L, "compile", name, ds);
    }
    if (st == KH_OK) {
        ds = dnnl_primitive_desc_create(pd, d, attr, m->dnnl->eng, hint);
        if (ds != dnnl_success) st = cntk_dnnl_fail(m, L, "compile", name, ds);
    }
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return st;
}

kh_status cntk_darg_native(cntk_cpu_model *m, const cntk_cpu_layer *L, cntk_darg *a) {
    dnnl_memory_desc_t md = a->md;
    cntk_darg_free(m, a);
    a->md = md;
    return cntk_dnnl_mem(m, L, &md, DNNL_MEMORY_NONE, &a->mem);
}


int64_t cntk_dnnl_channel_block(const dnnl_memory_desc_t *md) {
    if (md->ndims != 4 || md->format_kind != dnnl_blocked || md->offset0 != 0) return 0;
    for (int k = 0; k < 4; k++)
        if (md->padded_dims[k] != md->dims[k] || md->padded_offsets[k] != 0) return 0;
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    int64_t C = md->dims[1], H = md->dims[2], W = md->dims[3], cb = 1;
    if (b->inner_nblks == 1 && b->inner_idxs[0] == 1) cb = b->inner_blks[0];
    else if (b->inner_nblks != 0) return 0;
    if (cb < 1 || C % cb) return 0;
    return b->strides[0] == C * H * W && b->strides[1] == H * W * cb && b->strides[2] == W * cb && b->strides[3] == cb
               ? cb
               : 0;
}
