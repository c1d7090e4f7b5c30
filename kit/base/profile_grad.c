/* kit/base/profile_grad.c — what every backend's profile call writes the same way: a row's input and weight
 * gradient seconds (ABI 1.5), written at the element size the host allocated (a host built against a later minor
 * may have appended members, an older one has no grads at all: its kh_profile ends before them), and the
 * closing figures. */
#include <stddef.h>

#include "khost/kit/profile.h"

void kh_profile_set_grad(kh_profile *p, int32_t row, double input_s, double weight_s) {
    if (!p || !KH_HAS_MEMBER(kh_profile, p->struct_size, grad_size) || !p->grads || row < 0 || row >= p->cap_rows ||
        p->grad_size % _Alignof(kh_profile_grad) != 0)
        return;
    kh_profile_grad *g = (kh_profile_grad *)(void *)((char *)p->grads + (size_t)row * p->grad_size);
    if (KH_HAS_MEMBER(kh_profile_grad, p->grad_size, input_s)) g->input_s = input_s;
    if (KH_HAS_MEMBER(kh_profile_grad, p->grad_size, weight_s)) g->weight_s = weight_s;
}

void kh_profile_close(kh_profile *p, int32_t steps, double total_s, double in_layers_s) {
    p->steps = steps;
    p->total_s = total_s;
    p->other_s = total_s > in_layers_s ? total_s - in_layers_s : 0;
}
