/* core/modules/layer_abi.h — kh_layer_spec arrays across modules built with other element sizes: the host
 * reads a task's layers at the task's size and hands a backend its layers at the backend's size
 * (kh_module_desc.layer_spec_size, ABI rule 7). */
#ifndef KHOST_CORE_LAYER_ABI_H
#define KHOST_CORE_LAYER_ABI_H

#include <stddef.h>

#include "khost/khost.h"
#include "modules/module.h"

/* The element size a descriptor declares (KH_LAYER_SPEC_SIZE_1_0 before ABI 1.3 or when 0); -1 with a message
 * naming the file when it is smaller than the 1.0 layout or implausibly large. */
int kh_desc_layer_spec_size(const char *file, const kh_module_desc *d, uint32_t *out, char *err, size_t errlen);

/* A model spec whose layers array the host owns. */
typedef struct kh_spec_buf {
    kh_model_spec spec;
    void *layers; /* n_layers elements of elem_size bytes */
    size_t elem_size;
} kh_spec_buf;

/* in's layers (in_size bytes each) as elements of out_size bytes in out: members the smaller layout lacks are
 * 0 (their defaults); a non-zero member beyond out_size cannot be passed on and is KH_ERR_UNSUPPORTED with
 * "layer N uses members an ABI of M-byte layers does not have". */
kh_status kh_spec_repack(const kh_model_spec *in, size_t in_size, size_t out_size, kh_spec_buf *out, char *err,
                         size_t errlen);
void kh_spec_buf_free(kh_spec_buf *b);

/* task->model(d) read into the host's layout (sizeof(kh_layer_spec)). On failure err says why. */
kh_status kh_task_model(const kh_module *task, kh_tdata *d, kh_spec_buf *out, char *err, size_t errlen);
/* backend->compile with spec (host layout) repacked to the backend's layer size when it differs. */
kh_status kh_backend_compile(const kh_module *backend, kh_bsession *s, const kh_model_spec *spec,
                             const kh_compile_opts *opts, kh_bmodel **out, char *err, size_t errlen);

#endif
