/* kit/ref/embedding.c — reference Embedding: a row gather; backward scatter-adds into the table
 * (repeated indices accumulate, as TensorFlow's IndexedSlices do when applied). */
#include <string.h>

#include "khost/kit/ref.h"

kh_status kh_ref_embedding_forward(double *out, const int32_t *idx, const double *table, int64_t N, int64_t V,
                                   int64_t D) {
    // out (N, D), idx (N), table (V, D)
    for (int64_t n = 0; n < N; n++) {
        // Keras on TensorFlow fails on an out-of-range index; never read outside the table
        if (idx[n] < 0 || idx[n] >= V) return KH_ERR_INVALID;
        memcpy(out + n * D, table + (int64_t)idx[n] * D, (size_t)D * sizeof(double));
    }
    return KH_OK;
}

void kh_ref_embedding_backward(double *dtable, const double *dout, const int32_t *idx, int64_t N, int64_t D) {
    // dtable (V, D) +=, dout (N, D), idx (N)
    for (int64_t n = 0; n < N; n++) {
        double *row = dtable + (int64_t)idx[n] * D;
        const double *g = dout + n * D;
        for (int64_t j = 0; j < D; j++) row[j] += g[j];
    }
}
