/* kit/ref/flatten.c — reference Flatten: row-major NHWC storage already is Keras's channels_last
 * flattening order, so both passes are copies (kept as functions so every layer kind has its pair). */
#include <string.h>

#include "khost/kit/ref.h"

void kh_ref_flatten_forward(double *out, const double *inp, int64_t N) {
    // out (N), inp (N): N = batch * per-sample elements
    if (N > 0 && out != inp) memmove(out, inp, (size_t)N * sizeof(double));
}

void kh_ref_flatten_backward(double *dinp, const double *dout, int64_t N) {
    if (N > 0 && dinp != dout) memmove(dinp, dout, (size_t)N * sizeof(double));
}
