/* cpu/onednn.c — engine, stream, scratchpad and checked primitive wrappers for the oneDNN path.
 *
 * Threads: Debian's libdnnl runs its primitives on OpenMP (libgomp). Each execute first sets the calling
 * thread's OpenMP team size to the session's thread count (omp_set_num_threads only writes a per-thread
 * setting, and khost may drive a model from any thread), so oneDNN uses exactly the cores the device was
 * given. Nothing else runs meanwhile: cntk's pool workers are parked (blocked on their condition variable,
 * cntk_pool_park) while the caller is inside a primitive, and OpenBLAS is single-threaded (cntk_open), so
 * there is one runnable thread per core. Between primitives libgomp's workers spin briefly before they sleep; OMP_WAIT_POLICY=passive
 * (read by libgomp when it loads) makes them sleep at once.
 */
#include <omp.h>
#include <string.h>

#include <oneapi/dnnl/dnnl_debug.h>

#include "cpu/onednn.h"

kh_status cntk_dnnl_fail(cntk_cpu_model *m, const cntk_cpu_layer *L, const char *op, const char *what,
                         dnnl_status_t st) {
    if (!L) return cntk_fail(m->s, KH_ERR_INTERNAL, op, "oneDNN %s: %s", what, dnnl_status2str(st));
    return cntk_layer_fail(m->s, st == dnnl_out_of_memory ? KH_ERR_NOMEM : KH_ERR_INTERNAL, L->p->spec.kind,
                           L->p->index, op, "oneDNN %s: %s", what, dnnl_status2str(st));
}

kh_status cntk_dnnl_open(cntk_cpu_model *m) {
    cntk_dnnl *d = cntk_alloc(m->s, sizeof *d);
    if (!d) return cntk_fail(m->s, KH_ERR_NOMEM, "compile", "out of host memory for the oneDNN state");
    m->dnnl = d;
    d->threads = m->s->base.threads > 0 ? m->s->base.threads : 1;
    CNTK_DNNL_TRY(m, NULL, "compile", "engine", dnnl_engine_create(&d->eng, dnnl_cpu, 0));
    CNTK_DNNL_TRY(m, NULL, "compile", "stream", dnnl_stream_create(&d->strm, d->eng, dnnl_stream_default_flags));
    return KH_OK;
}

int cntk_dnnl_joins(const cntk_cpu_model *m) {
    for (int32_t i = 0; i < m->plan->n_layers; i++)
        if (m->plan->layers[i].spec.kind == KH_LAYER_CONV2D) return 1;
    return 0;
}

kh_status cntk_dnnl_finish(cntk_cpu_model *m) {
    cntk_dnnl *d = m->dnnl;
    if (d->scratch_bytes == 0) return KH_OK;
    d->scratch = cntk_alloc(m->s, d->scratch_bytes);
    if (!d->scratch)
        return cntk_fail(m->s, KH_ERR_NOMEM, "compile", "out of host memory for the oneDNN scratchpad (%zu bytes)",
                         d->scratch_bytes);
    return KH_OK;
}

void cntk_dnnl_close(cntk_cpu_model *m) {
    cntk_dnnl *d = m->dnnl;
    if (!d) return;
    if (d->strm) dnnl_stream_destroy(d->strm);
    if (d->eng) dnnl_engine_destroy(d->eng);
    cntk_free(m->s, d->scratch);
    cntk_free(m->s, d);
    m->dnnl = NULL;
}

kh_status cntk_dnnl_attr(cntk_cpu_model *m, const cntk_cpu_layer *L, dnnl_primitive_attr_t *attr) {
    *attr = NULL;
    CNTK_DNNL_TRY(m, L, "compile", "attributes", dnnl_primitive_attr_create(attr));
    CNTK_DNNL_TRY(m, L, "compile", "scratchpad mode", dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user));
    return KH_OK;
}

kh_status cntk_dnnl_prim(cntk_cpu_model *m, const cntk_cpu_layer *L, const char *name,
                         const_dnnl_primitive_desc_t pd, cntk_dprim *out) {
    out->name = name;
    CNTK_DNNL_TRY(m, L, "compile", name, dnnl_primitive_create(&out->p, pd));
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t bytes = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (bytes == 0) return KH_OK;
    if (bytes > m->dnnl->scratch_bytes) m->dnnl->scratch_bytes = bytes;
    return cntk_dnnl_mem(m, L, smd, DNNL_MEMORY_NONE, &out->scratch);
}

void cntk_dnnl_prim_free(cntk_dprim *p) {
    if (p->p) dnnl_primitive_destroy(p->p);
    if (p->scratch) dnnl_memory_destroy(p->scratch);
    p->p = NULL;
    p->scratch = NULL;
}

kh_status cntk_dnnl_run(cntk_cpu_model *m, const cntk_cpu_layer *L, const cntk_dprim *p, int nargs,
                        dnnl_exec_arg_t *args) {
    cntk_dnnl *d = m->dnnl;
    if (p->scratch) {
        CNTK_DNNL_TRY(m, L, "step", p->name, dnnl_memory_set_data_handle(p->scratch, d->scratch));
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, p->scratch};
    }
    omp_set_num_threads(d->threads);
    cntk_pool_park(m->s->pool);
    CNTK_DNNL_TRY(m, L, "step", p->name, dnnl_primitive_execute(p->p, d->strm, nargs, args));
    CNTK_DNNL_TRY(m, L, "step", p->name, dnnl_stream_wait(d->strm));
    return KH_OK;
}

kh_status cntk_dnnl_mem(cntk_cpu_model *m, const cntk_cpu_layer *L, const dnnl_memory_desc_t *md, void *handle,
                        dnnl_memory_t *out) {
    CNTK_DNNL_TRY(m, L, "compile", "memory", dnnl_memory_create(out, md, m->dnnl->eng, handle));
    return KH_OK;
}

kh_status cntk_dnnl_buffer(cntk_cpu_model *m, const cntk_cpu_layer *L, const dnnl_memory_desc_t *md,
                           void **buf, dnnl_memory_t *out) {
    size_t bytes = dnnl_memory_desc_get_size(md);
    *buf = cntk_alloc(m->s, bytes); /* zeroed: padded blocked layouts expect zeros in the padding */
    if (!*buf)
        return cntk_layer_fail(m->s, KH_ERR_NOMEM, L->p->spec.kind, L->p->index, "compile",
                               "out of host memory for a oneDNN buffer (%zu bytes)", bytes);
    return cntk_dnnl_mem(m, L, md, *buf, out);
}

kh_status cntk_dnnl_reorder(cntk_cpu_model *m, const cntk_cpu_layer *L, const char *name,
                            const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to, cntk_dreorder *out) {
    memset(out, 0, sizeof *out);
    if (dnnl_memory_desc_equal(from, to)) return KH_OK;
    dnnl_primitive_attr_t attr;
    kh_status st = cntk_dnnl_attr(m, L, &attr);
    dnnl_primitive_desc_t pd = NULL;
    if (st == KH_OK) {
        dnnl_status_t ds = dnnl_reorder_primitive_desc_create(&pd, from, m->dnnl->eng, to, m->dnnl->eng, attr);
        if (ds != dnnl_success) st = cntk_dnnl_fail(m, L, "compile", name, ds);
    }
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (st == KH_OK) st = cntk_dnnl_prim(m, L, name, pd, &out->r);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (st == KH_OK) st = cntk_dnnl_mem(m, L, from, DNNL_MEMORY_NONE, &out->from);
    if (st == KH_OK) st = cntk_dnnl_mem(m, L, to, DNNL_MEMORY_NONE, &out->to);
    return st;
}

kh_status cntk_dnnl_reorder_run(cntk_cpu_model *m, const cntk_cpu_layer *L, const cntk_dreorder *r,
                                void *src, void *dst) {
    if (!r->r.p) return KH_OK;
    CNTK_DNNL_TRY(m, L, "step", r->r.name, dnnl_memory_set_data_handle(r->from, src));
    CNTK_DNNL_TRY(m, L, "step", r->r.name, dnnl_memory_set_data_handle(r->to, dst));
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_FROM, r->from}, {DNNL_ARG_TO, r->to}};
    return cntk_dnnl_run(m, L, &r->r, 2, args);
}

void cntk_dnnl_reorder_free(cntk_dreorder *r) {
    cntk_dnnl_prim_free(&r->r);
    if (r->from) dnnl_memory_destroy(r->from);
    if (r->to) dnnl_memory_destroy(r->to);
    memset(r, 0, sizeof *r);
}
