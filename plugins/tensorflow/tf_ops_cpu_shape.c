/* tf_ops_cpu_shape.c — CPU kernels that move data: Slice, Concat, Reverse (the unrolled recurrences and
 * Bidirectional), Mean and its gradient (GlobalAveragePooling1D), Gather and its gradient (Embedding),
 * Dropout and its gradient (counter-based masks), Zeros. Reshape is a view and has no kernel. */
#include <string.h>

#include "khost/kit/counter_rng.h"
#include "tf.h"
#include "tf_ops_cpu.h"

/* (outer, len, inner) of node x around `axis`, for a batch of n */
static void around(tf_run *r, const kh_gnode *x, int axis, int64_t *outer, int64_t *len, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int d = 0; d < axis; d++) *outer *= (d == 0 && (x->flags & KH_GVAL_BATCHED)) ? r->n : x->dims[d];
    *len = x->dims[axis];
    for (int d = axis + 1; d < x->rank; d++) *inner *= x->dims[d];
}

static kh_status k_slice(tf_run *r, int32_t i) {
    const kh_gattr *t = &tf_node(r, i)->attr;
    int64_t outer, len, inner;
    around(r, tf_in_node(r, i, 0), t->axis, &outer, &len, &inner);
    const float *a = tf_in(r, i, 0);
    float *y = tf_out(r, i);
    size_t run = (size_t)(t->size * inner) * sizeof *y;
    for (int64_t o = 0; o < outer; o++) memcpy(y + o * t->size * inner, a + (o * len + t->begin) * inner, run);
    return KH_OK;
}

static kh_status k_concat(tf_run *r, int32_t i) {
    const kh_gnode *nd = tf_node(r, i);
    int64_t outer, len, inner, pos = 0;
    around(r, nd, nd->attr.axis, &outer, &len, &inner);
    float *y = tf_out(r, i);
    for (int k = 0; k < nd->n_in; k++) {
        int64_t lk = tf_in_node(r, i, k)->dims[nd->attr.axis];
        const float *a = tf_in(r, i, k);
        for (int64_t o = 0; o < outer; o++)
            memcpy(y + (o * len + pos) * inner, a + o * lk * inner, (size_t)(lk * inner) * sizeof *y);
        pos += lk;
    }
    return KH_OK;
}

static kh_status k_reverse(tf_run *r, int32_t i) {
    int64_t outer, len, inner;
    around(r, tf_in_node(r, i, 0), tf_node(r, i)->attr.axis, &outer, &len, &inner);
    const float *a = tf_in(r, i, 0);
    float *y = tf_out(r, i);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t l = 0; l < len; l++)
            memcpy(y + (o * len + l) * inner, a + (o * len + len - 1 - l) * inner, (size_t)inner * sizeof *y);
    return KH_OK;
}

static kh_status k_mean(tf_run *r, int32_t i) {
    int64_t outer, len, inner;
    around(r, tf_in_node(r, i, 0), tf_node(r, i)->attr.axis, &outer, &len, &inner);
    const float *a = tf_in(r, i, 0);
    float *y = tf_out(r, i);
    float inv = 1.0f / (float)len;
    for (int64_t o = 0; o < outer; o++) {
        float *yo = y + o * inner;
        memset(yo, 0, (size_t)inner * sizeof *yo);
        for (int64_t l = 0; l < len; l++) {
            const float *ar = a + (o * len + l) * inner;
            for (int64_t k = 0; k < inner; k++) yo[k] += ar[k];
        }
        for (int64_t k = 0; k < inner; k++) yo[k] *= inv;
    }
    return KH_OK;
}

static kh_status k_mean_grad(tf_run *r, int32_t i) {
    int64_t outer, len, inner;
    around(r, tf_node(r, i), tf_node(r, i)->attr.axis, &outer, &len, &inner);
    const float *a = tf_in(r, i, 0);
    float *y = tf_out(r, i);
    float inv = 1.0f / (float)len;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t l = 0; l < len; l++) {
            float *yr = y + (o * len + l) * inner;
            const float *ar = a + o * inner;
            for (int64_t k = 0; k < inner; k++) yr[k] = ar[k] * inv;
        }
    return KH_OK;
}

static kh_status k_gather(tf_run *r, int32_t i) {
    const kh_gnode *tab = tf_in_node(r, i, 0);
    int64_t V = tab->dims[0], D = tab->dims[1], n = tf_numel(r, kh_graph_inputs(r->f->g, i)[1]);
    const float *t = tf_in(r, i, 0);
    const int32_t *idx = (const int32_t *)tf_in(r, i, 1);
    float *y = tf_out(r, i);
    for (int64_t k = 0; k < n; k++) {
        if (idx[k] < 0 || idx[k] >= V)
            return tf_run_fail(r, i, KH_ERR_INVALID, "index %d at position %lld outside [0, %lld)", idx[k], (long long)k,
                               (long long)V);
        memcpy(y + k * D, t + (int64_t)idx[k] * D, (size_t)D * sizeof *y);
    }
    return KH_OK;
}

/* The accumulator is zero on entry (zeroed at compile, and its Apply op clears the rows it consumed). */
static kh_status k_gather_grad(tf_run *r, int32_t i) {
    int64_t D = tf_node(r, i)->dims[1], n = tf_numel(r, kh_graph_inputs(r->f->g, i)[0]);
    const int32_t *idx = (const int32_t *)tf_in(r, i, 0);
    const float *dy = tf_in(r, i, 1);
    float *g = tf_out(r, i);
    for (int64_t k = 0; k < n; k++) {
        float *row = g + (int64_t)idx[k] * D;
        const float *d = dy + k * D;
        for (int64_t j = 0; j < D; j++) row[j] += d[j];
    }
    return KH_OK;
}

typedef struct drop {
    const float *a;
    float *y;
    uint64_t key;
    float rate, scale;
} drop;

static void drop_range(void *v, int64_t b, int64_t e, int slot) {
    (void)slot;
    const drop *d = v;
    /* locals, so the compiler knows the stores cannot change them: the loop vectorises (64-bit multiplies) */
    const uint64_t key = d->key;
    const float rate = d->rate, scale = d->scale;
    const float *a = d->a;
    float *y = d->y;
    for (int64_t k = b; k < e; k++) y[k] = kh_dropout_keep(key, (uint64_t)k, rate) ? a[k] * scale : 0.0f;
}

/* Dropout and its gradient are the same masked scaling: the gradient recomputes the forward's mask. */
static kh_status k_dropout(tf_run *r, int32_t i) {
    const kh_gattr *t = &tf_node(r, i)->attr;
    drop d = {tf_in(r, i, 0), tf_out(r, i), kh_crng_key(r->m->rt.seed, r->drop_key_counter, (uint64_t)t->salt), t->rate,
              (float)(1.0 / (1.0 - (double)t->rate))};
    tf_ew_for(r, tf_numel(r, i), drop_range, &d);
    return KH_OK;
}

static kh_status k_zeros(tf_run *r, int32_t i) {
    memset(tf_out(r, i), 0, (size_t)tf_numel(r, i) * sizeof(float));
    return KH_OK;
}

tf_kernel tf_cpu_kernel_shape(uint32_t op) {
    switch (op) {
    case KH_GOP_SLICE: return k_slice;
    case KH_GOP_CONCAT: return k_concat;
    case KH_GOP_REVERSE: return k_reverse;
    case KH_GOP_MEAN: return k_mean;
    case KH_GOP_MEAN_GRAD: return k_mean_grad;
    case KH_GOP_GATHER: return k_gather;
    case KH_GOP_GATHER_GRAD: return k_gather_grad;
    case KH_GOP_DROPOUT: case KH_GOP_DROPOUT_GRAD: return k_dropout;
    case KH_GOP_ZEROS: return k_zeros;
    default: return NULL;
    }
}
