/* khost/kit/profile.h — what a backend's profile call (kh_backend_api.profile) shares: the input and weight
 * gradient split of a row (ABI 1.5) and the closing figures (kit/base/profile_grad.c), and for graph backends the
 * rows filled from the per-node seconds of a training graph (kit/graph/profile_fill.c). */
#ifndef KHOST_KIT_PROFILE_H
#define KHOST_KIT_PROFILE_H

#include <stdint.h>

#include "khost/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Write row i's split (seconds; -1 leaves a member unsplit) where the host gave grads (ABI 1.5) and its element
 * size covers the member; nothing otherwise (an older host, or i outside the host's rows). */
void kh_profile_set_grad(kh_profile *p, int32_t row, double input_s, double weight_s);

/* The profile's closing figures: steps timed, their wall time, and other_s, the part of it in no layer row
 * (total_s less in_layers_s, the layer rows' seconds; never below 0). */
void kh_profile_close(kh_profile *p, int32_t steps, double total_s, double in_layers_s);

/* A graph backend's profile from the seconds each node of its training graph took over `steps` timed steps
 * (node_s[i] for node i; a node for which works(ctx, i) is 0, a view or a variable, is left out): one row per
 * model layer in layer order, named by layer_kinds (n_layers of them), then one row per op kind, each with
 * forward (phases 0-1), backward (2) and update (3) seconds and its nodes as calls; other_s is total_s less the
 * layer rows. Every row's backward is split (kh_profile_set_grad): a backward node is weight gradient when it forms
 * or carries a weight's gradient and only updates read it. */
struct kh_graph;
kh_status kh_graph_profile_fill(const struct kh_graph *g, int (*works)(const void *ctx, int32_t node),
                                const void *ctx, const uint32_t *layer_kinds, int32_t n_layers, const double *node_s,
                                int32_t steps, double total_s, kh_profile *out);

#ifdef __cplusplus
}
#endif
#endif
