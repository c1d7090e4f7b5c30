/* cuda/rnnmap.c — see cuda/rnnmap.h. Pure C, host memory only: compiled into the plugin and
 * straight into the CPU unit test. */
#include "cuda/rnnmap.h"

#include <stdio.h>
#include <string.h>

#include "khost/kit/status.h"

static const char *const gate_name[4] = {"i", "f", "c", "o"};

static int region_present(const cntk_rnn_region *r) { return r->off >= 0 && r->rows > 0; }

/* Last float touched + 1 */
static int64_t region_end(const cntk_rnn_region *r) { return r->off + (r->rows - 1) * r->ld + r->cols; }

static int regions_overlap(const cntk_rnn_region *a, const cntk_rnn_region *b) {
    /* exact test on rows: strided matrices may interleave legally, so compare every row pair's spans only
     * when the bounding ranges meet (cheap for the sizes involved) */
    if (region_end(a) <= b->off || region_end(b) <= a->off) return 0;
    for (int64_t i = 0; i < a->rows; i++) {
        int64_t a0 = a->off + i * a->ld, a1 = a0 + a->cols;
        for (int64_t j = 0; j < b->rows; j++) {
            int64_t b0 = b->off + j * b->ld, b1 = b0 + b->cols;
            if (a0 < b1 && b0 < a1) return 1;
        }
    }
    return 0;
}

kh_status cntk_rnn_layout_check(const cntk_rnn_layout *L, char *err, size_t errlen) {
    if (L->dirs < 1 || L->dirs > 2 || L->in < 1 || L->u < 1 || L->space < 1)
        return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "rnn layout: bad sizes (dirs %d, in %lld, u %lld, space %lld)",
                       L->dirs, (long long)L->in, (long long)L->u, (long long)L->space);
    const cntk_rnn_region *all[2 * 2 * CNTK_RNN_LIN];
    int n_all = 0;
    for (int d = 0; d < L->dirs; d++)
        for (int g = 0; g < CNTK_RNN_LIN; g++) {
            const cntk_rnn_region *m = &L->mat[d][g], *b = &L->bias[d][g];
            int64_t want_cols = g < 4 ? L->in : L->u;
            const char *what = g < 4 ? "input" : "recurrent";
            if (!region_present(m))
                return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "rnn layout: dir %d %s matrix of gate %s missing", d,
                               what, gate_name[g % 4]);
            if (m->rows != L->u || m->cols != want_cols || m->ld < m->cols)
                return kh_errf(err, errlen, KH_ERR_UNSUPPORTED,
                               "rnn layout: dir %d %s matrix of gate %s is %lld x %lld (ld %lld), expected %lld x %lld",
                               d, what, gate_name[g % 4], (long long)m->rows, (long long)m->cols, (long long)m->ld,
                               (long long)L->u, (long long)want_cols);
            if (region_end(m) > L->space)
                return kh_errf(err, errlen, KH_ERR_UNSUPPORTED,
                               "rnn layout: dir %d %s matrix of gate %s ends at %lld, beyond the space (%lld)", d,
                               what, gate_name[g % 4], (long long)region_end(m), (long long)L->space);
            all[n_all++] = m;
            if (!region_present(b)) {
                if (g < 4)
                    return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "rnn layout: dir %d input bias of gate %s missing",
                                   d, gate_name[g]);
                continue;
            }
            if (b->rows != L->u || b->cols != 1)
                return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "rnn layout: dir %d %s bias of gate %s is %lld x %lld",
                               d, what, gate_name[g % 4], (long long)b->rows, (long long)b->cols);
            if (region_end(b) > L->space)
                return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "rnn layout: dir %d %s bias of gate %s beyond the space",
                               d, what, gate_name[g % 4]);
            all[n_all++] = b;
        }
    for (int a = 0; a < n_all; a++)
        for (int b = a + 1; b < n_all; b++)
            if (regions_overlap(all[a], all[b]))
                return kh_errf(err, errlen, KH_ERR_UNSUPPORTED, "rnn layout: regions at %lld and %lld overlap",
                               (long long)all[a]->off, (long long)all[b]->off);
    return KH_OK;
}

int64_t cntk_rnn_slot_numel(const cntk_rnn_layout *L, int slot) {
    switch (slot % 3) {
    case 0: return L->in * 4 * L->u;
    case 1: return L->u * 4 * L->u;
    default: return 4 * L->u;
    }
}

/* Matrix of linear layer `lin` <-> columns [g*u, (g+1)*u) of a canonical [rows_c, 4u] matrix. */
static void move_matrix(const cntk_rnn_region *m, int g, int64_t u, float *space, float *canon, int to_space) {
    int64_t four_u = 4 * u;
    for (int64_t k = 0; k < m->rows; k++)     /* unit k of gate g */
        for (int64_t j = 0; j < m->cols; j++) { /* input (or h) feature j */
            float *s = space + m->off + k * m->ld + j;
            float *c = canon + j * four_u + (int64_t)g * u + k;
            if (to_space)
                *s = *c;
            else
                *c = *s;
        }
}

void cntk_rnn_pack_slot(const cntk_rnn_layout *L, int slot, const float *canon, float *space) {
    int d = slot / 3, kind = slot % 3;
    int64_t u = L->u;
    for (int g = 0; g < 4; g++) {
        if (kind == 0) {
            move_matrix(&L->mat[d][g], g, u, space, (float *)canon, 1);
        } else if (kind == 1) {
            move_matrix(&L->mat[d][4 + g], g, u, space, (float *)canon, 1);
        } else {
            const cntk_rnn_region *bi = &L->bias[d][g], *br = &L->bias[d][4 + g];
            for (int64_t k = 0; k < u; k++) space[bi->off + k] = canon[(int64_t)g * u + k];
            if (region_present(br))
                for (int64_t k = 0; k < u; k++) space[br->off + k] = 0.0f;
        }
    }
}

void cntk_rnn_unpack_slot(const cntk_rnn_layout *L, int slot, const float *space, float *canon) {
    int d = slot / 3, kind = slot % 3;
    int64_t u = L->u;
    for (int g = 0; g < 4; g++) {
        if (kind == 0) {
            move_matrix(&L->mat[d][g], g, u, (float *)space, canon, 0);
        } else if (kind == 1) {
            move_matrix(&L->mat[d][4 + g], g, u, (float *)space, canon, 0);
        } else {
            const cntk_rnn_region *bi = &L->bias[d][g], *br = &L->bias[d][4 + g];
            for (int64_t k = 0; k < u; k++) {
                float v = space[bi->off + k];
                if (region_present(br)) v += space[br->off + k];
                canon[(int64_t)g * u + k] = v;
            }
        }
    }
}

int cntk_rnn_rec_bias_ranges(const cntk_rnn_layout *L, int64_t *off, int64_t *len, int max) {
    int n = 0;
    /* collect, sort by offset (at most 8 entries: insertion sort), merge adjacent */
    int64_t o[2 * 4], l[2 * 4];
    int k = 0;
    for (int d = 0; d < L->dirs; d++)
        for (int g = 4; g < CNTK_RNN_LIN; g++) {
            const cntk_rnn_region *b = &L->bias[d][g];
            if (!region_present(b)) continue;
            int64_t bo = b->off, bl = b->rows;
            int at = k++;
            while (at > 0 && o[at - 1] > bo) {
                o[at] = o[at - 1];
                l[at] = l[at - 1];
                at--;
            }
            o[at] = bo;
            l[at] = bl;
        }
    for (int i = 0; i < k; i++) {
        if (n > 0 && off[n - 1] + len[n - 1] == o[i]) {
            len[n - 1] += l[i];
            continue;
        }
        if (n == max) return -1;
        off[n] = o[i];
        len[n] = l[i];
        n++;
    }
    return n;
}
