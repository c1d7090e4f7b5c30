/* core/modules/layer_abi.c — repacking kh_layer_spec arrays between the element sizes of the host and of
 * each module (see layer_abi.h). A repack is a copy of the common prefix of every element plus zeros, so a
 * module built against an older model.h reads exactly the members it knows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modules/layer_abi.h"

_Static_assert(sizeof(kh_layer_spec) >= KH_LAYER_SPEC_SIZE_1_0, "kh_layer_spec only ever grows");

#define LAYER_SPEC_SIZE_MAX 4096u /* far beyond any layout the ABI will grow to: a garbage value */

int kh_desc_layer_spec_size(const char *file, const kh_module_desc *d, uint32_t *out, char *err, size_t errlen) {
    uint32_t v = 0;
    if (KH_HAS_MEMBER(kh_module_desc, d->struct_size, layer_spec_size)) v = d->layer_spec_size;
    if (v == 0) v = KH_LAYER_SPEC_SIZE_1_0;
    if (v < KH_LAYER_SPEC_SIZE_1_0 || v > LAYER_SPEC_SIZE_MAX) {
        snprintf(err, errlen, "%s: descriptor layer_spec_size %u is not a kh_layer_spec size (%u to %u bytes)", file,
                 (unsigned)v, (unsigned)KH_LAYER_SPEC_SIZE_1_0, LAYER_SPEC_SIZE_MAX);
        return -1;
    }
    *out = v;
    return 0;
}

kh_status kh_spec_repack(const kh_model_spec *in, size_t in_size, size_t out_size, kh_spec_buf *out, char *err,
                         size_t errlen) {
    memset(out, 0, sizeof *out);
    out->spec = *in;
    out->elem_size = out_size;
    out->spec.layers = NULL;
    if (in->n_layers < 0 || (in->n_layers > 0 && !in->layers)) {
        snprintf(err, errlen, "model spec: %d layers but %s", (int)in->n_layers,
                 in->n_layers < 0 ? "a negative count" : "no layer array");
        return KH_ERR_INVALID;
    }
    size_t n = (size_t)in->n_layers;
    out->layers = calloc(n + 1, out_size);
    if (!out->layers) {
        snprintf(err, errlen, "model spec: out of memory for %zu layers", n);
        return KH_ERR_NOMEM;
    }
    size_t common = in_size < out_size ? in_size : out_size;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *src = (const unsigned char *)in->layers + i * in_size;
        memcpy((unsigned char *)out->layers + i * out_size, src, common);
        for (size_t b = common; b < in_size; b++)
            if (src[b]) {
                snprintf(err, errlen, "layer %zu uses members an ABI of %zu-byte layers does not have (byte %zu is set)",
                         i, out_size, b);
                kh_spec_buf_free(out);
                return KH_ERR_UNSUPPORTED;
            }
    }
    out->spec.layers = out->layers;
    return KH_OK;
}

void kh_spec_buf_free(kh_spec_buf *b) {
    if (!b) return;
    free(b->layers);
    b->layers = NULL;
    b->spec.layers = NULL;
}

kh_status kh_task_model(const kh_module *task, kh_tdata *d, kh_spec_buf *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    kh_model_spec raw;
    memset(&raw, 0, sizeof raw);
    raw.struct_size = sizeof raw;
    if (task->task->model(d, &raw) != KH_OK) {
        const char *why = task->task->last_error ? task->task->last_error(d) : NULL;
        snprintf(err, errlen, "%s", why && *why ? why : "the task's model() failed without a message");
        return KH_ERR_INVALID;
    }
    return kh_spec_repack(&raw, task->layer_spec_size, sizeof(kh_layer_spec), out, err, errlen);
}

kh_status kh_backend_compile(const kh_module *backend, kh_bsession *s, const kh_model_spec *spec,
                             const kh_compile_opts *opts, kh_bmodel **out, char *err, size_t errlen) {
    if (backend->layer_spec_size == sizeof(kh_layer_spec)) return backend->backend->compile(s, spec, opts, out);
    kh_spec_buf b;
    kh_status st = kh_spec_repack(spec, sizeof(kh_layer_spec), backend->layer_spec_size, &b, err, errlen);
    if (st != KH_OK) {
        *out = NULL;
        return st;
    }
    st = backend->backend->compile(s, &b.spec, opts, out); /* the spec need not outlive the call */
    kh_spec_buf_free(&b);
    return st;
}
