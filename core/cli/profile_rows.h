/* core/cli/profile_rows.h — what `khost profile` does with a backend's kh_profile: checks it against the contract
 * (backend.h; a backend is not trusted to keep it) and prints it, per layer against each part's FLOP floor. */
#ifndef KHOST_CORE_PROFILE_ROWS_H
#define KHOST_CORE_PROFILE_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "khost/backend.h"
#include "khost/kit/flops.h"
#include "khost/model.h"

/* What the FLOP figures of a profile need: the model's per-layer FLOPs per sample (NULL: not counted), the
 * batch, which layers are convolutions, and the device (for its peak). */
typedef struct kh_prof_flops {
    const kh_layer_flops *layer; /* n_layers entries, or NULL */
    int32_t n_layers;
    const kh_model_spec *spec;
    int64_t batch;
    const kh_device *dev;
} kh_prof_flops;

/* The grads array a host hands a backend (ABI 1.5): cap elements, every member -1 (not split); NULL when out of
 * memory. */
kh_profile_grad *kh_prof_grads_new(int32_t cap);

/* 0 when what the backend wrote keeps the contract for `steps` timed steps of a model of n_layers layers: the
 * rows within cap_rows, each row's layer in [-1, n_layers), its name terminated within `what`, every time finite
 * and >= 0, each split either unsplit (-1, -1) or two seconds adding up to no more than the row's backward.
 * Otherwise -1 with why naming the row and the field. */
int kh_prof_check(const kh_profile *pr, int32_t cap_rows, int32_t n_layers, int32_t steps, char *why, size_t n);

/* The table: per layer, then the convolutions' share of the peak, the layers against their floors, and the op
 * kinds of graph backends. */
void kh_prof_print(const kh_profile *pr, const char *backend, const char *task, const char *dev, int64_t batch,
                   int64_t warmup, const kh_prof_flops *f);

#endif
