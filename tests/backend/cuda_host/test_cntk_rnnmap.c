/* tests/backend/cuda_host/test_cntk_rnnmap.c — the Keras <-> cuDNN LSTM weight mapping (plugins/cntk/cuda/rnnmap.c)
 * on the CPU, with synthetic layouts standing in for what cudnnGetRNNWeightParams reports:
 *   1. a hand example: which Keras numbers land in which gate matrix (the transposition and the gate order);
 *   2. cuDNN-like packing (per direction: 8 matrices then 8 biases), uni- and bidirectional, double bias;
 *   3. scattered regions: shuffled order, row strides wider than the rows, gaps, single-bias layout;
 * each checked element by element against the formula, round-tripped, with untouched gaps verified, plus
 * the recurrent-bias ranges and the layout checker's refusals. Runs everywhere (ctest label "cntk"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/rnnmap.h"
#include "khost/kit/rng.h"
#include "testutil.h"

#define SENTINEL 12345.0f

static float *fvec(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(float)); }

static void fill(float *v, int64_t n, kh_rng *r) {
    for (int64_t i = 0; i < n; i++) v[i] = (float)(kh_rng_uniform(r) * 2.0 - 1.0);
}

/* cuDNN-like: per direction 8 matrices (4 input u x in, 4 recurrent u x u), then 8 biases of u */
static void layout_packed(cntk_rnn_layout *L, int dirs, int64_t in, int64_t u, int double_bias) {
    memset(L, 0, sizeof *L);
    L->dirs = dirs, L->in = in, L->u = u;
    int64_t off = 0;
    for (int d = 0; d < dirs; d++) {
        for (int g = 0; g < 8; g++) {
            int64_t cols = g < 4 ? in : u;
            L->mat[d][g] = (cntk_rnn_region){off, u, cols, cols};
            off += u * cols;
        }
        for (int g = 0; g < 8; g++) {
            if (g >= 4 && !double_bias) {
                L->bias[d][g] = (cntk_rnn_region){-1, 0, 0, 0};
                continue;
            }
            L->bias[d][g] = (cntk_rnn_region){off, u, 1, 1};
            off += u;
        }
    }
    L->space = off;
}

/* scattered: the 32 regions in a shuffled order, matrices with ld = cols + pad, random gaps */
static void layout_scattered(cntk_rnn_layout *L, int dirs, int64_t in, int64_t u, int double_bias, kh_rng *r) {
    memset(L, 0, sizeof *L);
    L->dirs = dirs, L->in = in, L->u = u;
    int64_t order[32];
    int n = 0;
    for (int d = 0; d < dirs; d++)
        for (int k = 0; k < 16; k++) order[n++] = d * 16 + k;
    kh_rng_shuffle_i64(r, order, n);
    int64_t off = (int64_t)kh_rng_below(r, 5);
    for (int i = 0; i < n; i++) {
        int d = (int)(order[i] / 16), k = (int)(order[i] % 16);
        if (k < 8) {
            int64_t cols = k < 4 ? in : u, ld = cols + (int64_t)kh_rng_below(r, 3);
            L->mat[d][k] = (cntk_rnn_region){off, u, cols, ld};
            off += (u - 1) * ld + cols;
        } else {
            int g = k - 8;
            if (g >= 4 && !double_bias) {
                L->bias[d][g] = (cntk_rnn_region){-1, 0, 0, 0};
                continue;
            }
            L->bias[d][g] = (cntk_rnn_region){off, u, 1, 1};
            off += u;
        }
        off += (int64_t)kh_rng_below(r, 4); /* gap */
    }
    L->space = off + 3;
}

static void check_layout(const char *name, const cntk_rnn_layout *L, kh_rng *r) {
    char err[256];
    kh_status st = cntk_rnn_layout_check(L, err, sizeof err);
    CHECK(st == KH_OK, "%s: layout check: %s", name, err);
    if (st != KH_OK) return;
    int64_t in = L->in, u = L->u;
    float *space = fvec(L->space), *canon[6] = {0}, *back = fvec(in * 4 * u > u * 4 * u ? in * 4 * u : u * 4 * u);
    for (int64_t i = 0; i < L->space; i++) space[i] = SENTINEL;
    for (int d = 0; d < L->dirs; d++) /* recurrent biases start non-zero: packing the bias must clear them */
        for (int g = 4; g < 8; g++)
            if (L->bias[d][g].off >= 0)
                for (int64_t k = 0; k < u; k++) space[L->bias[d][g].off + k] = 7.0f;
    for (int s = 0; s < 3 * L->dirs; s++) {
        canon[s] = fvec(cntk_rnn_slot_numel(L, s));
        fill(canon[s], cntk_rnn_slot_numel(L, s), r);
        cntk_rnn_pack_slot(L, s, canon[s], space);
    }
    /* element by element against the formula */
    int bad = 0;
    for (int d = 0; d < L->dirs; d++)
        for (int g = 0; g < 4; g++) {
            const cntk_rnn_region *wi = &L->mat[d][g], *wr = &L->mat[d][4 + g], *bi = &L->bias[d][g],
                                  *br = &L->bias[d][4 + g];
            for (int64_t k = 0; k < u; k++) {
                for (int64_t j = 0; j < in; j++)
                    bad += space[wi->off + k * wi->ld + j] != canon[3 * d][j * 4 * u + g * u + k];
                for (int64_t j = 0; j < u; j++)
                    bad += space[wr->off + k * wr->ld + j] != canon[3 * d + 1][j * 4 * u + g * u + k];
                bad += space[bi->off + k] != canon[3 * d + 2][g * u + k];
                if (br->off >= 0) bad += space[br->off + k] != 0.0f;
            }
        }
    CHECK(bad == 0, "%s: %d elements differ from W_cudnn[g][k][j] = kernel[j][g*u + k]", name, bad);
    /* everything outside the regions is untouched */
    uint8_t *mark = calloc((size_t)L->space, 1);
    for (int d = 0; d < L->dirs; d++)
        for (int g = 0; g < 8; g++) {
            const cntk_rnn_region *mr = &L->mat[d][g], *b = &L->bias[d][g];
            for (int64_t k = 0; k < mr->rows; k++)
                for (int64_t j = 0; j < mr->cols; j++) mark[mr->off + k * mr->ld + j] = 1;
            if (b->off >= 0)
                for (int64_t k = 0; k < b->rows; k++) mark[b->off + k] = 1;
        }
    int touched = 0;
    for (int64_t i = 0; i < L->space; i++) touched += !mark[i] && space[i] != SENTINEL;
    CHECK(touched == 0, "%s: %d gap elements were written", name, touched);
    free(mark);
    /* round trip */
    for (int s = 0; s < 3 * L->dirs; s++) {
        int64_t n = cntk_rnn_slot_numel(L, s);
        cntk_rnn_unpack_slot(L, s, space, back);
        int diff = 0;
        for (int64_t i = 0; i < n; i++) diff += back[i] != canon[s][i];
        CHECK(diff == 0, "%s: slot %d round trip: %d differ", name, s, diff);
    }
    /* the effective bias is input + recurrent bias */
    if (L->bias[0][4].off >= 0) {
        space[L->bias[0][4].off] = 0.25f;
        cntk_rnn_unpack_slot(L, 2, space, back);
        CHECK(fabsf(back[0] - (canon[2][0] + 0.25f)) < 1e-6f, "%s: bias = input + recurrent (%g vs %g)", name, back[0],
              canon[2][0] + 0.25f);
    }
    /* recurrent-bias ranges cover exactly the recurrent biases */
    int64_t off[8], len[8];
    int nr = cntk_rnn_rec_bias_ranges(L, off, len, 8);
    int64_t covered = 0, want = 0;
    for (int i = 0; i < nr; i++) {
        covered += len[i];
        for (int64_t k = 0; k < len[i]; k++) {
            int hit = 0;
            for (int d = 0; d < L->dirs; d++)
                for (int g = 4; g < 8; g++) {
                    const cntk_rnn_region *b = &L->bias[d][g];
                    hit += b->off >= 0 && off[i] + k >= b->off && off[i] + k < b->off + b->rows;
                }
            CHECK(hit == 1, "%s: range %d element %lld is not a recurrent bias", name, i, (long long)k);
        }
        if (i > 0) CHECK(off[i] > off[i - 1] + len[i - 1], "%s: ranges %d and %d not merged or unsorted", name, i - 1, i);
    }
    for (int d = 0; d < L->dirs; d++)
        for (int g = 4; g < 8; g++) want += L->bias[d][g].off >= 0 ? u : 0;
    CHECK(nr >= 0 && covered == want, "%s: recurrent-bias ranges cover %lld of %lld", name, (long long)covered,
          (long long)want);
    for (int s = 0; s < 6; s++) free(canon[s]);
    free(space);
    free(back);
}

/* in = 2, u = 1: kernel [2, 4] = [[1, 2, 3, 4], [5, 6, 7, 8]] (row j = input j, columns gates i f c o) */
static void test_hand_example(void) {
    cntk_rnn_layout L;
    layout_packed(&L, 1, 2, 1, 1);
    float space[64], kernel[8] = {1, 2, 3, 4, 5, 6, 7, 8}, rec[4] = {9, 10, 11, 12}, bias[4] = {-1, -2, -3, -4};
    for (int i = 0; i < 64; i++) space[i] = SENTINEL;
    CHECK(L.space <= 64, "space %lld", (long long)L.space);
    cntk_rnn_pack_slot(&L, 0, kernel, space);
    cntk_rnn_pack_slot(&L, 1, rec, space);
    cntk_rnn_pack_slot(&L, 2, bias, space);
    const float want_w[4][2] = {{1, 5}, {2, 6}, {3, 7}, {4, 8}}; /* gate g: (1 x 2) row [K[0][g], K[1][g]] */
    for (int g = 0; g < 4; g++) {
        CHECK(space[L.mat[0][g].off] == want_w[g][0] && space[L.mat[0][g].off + 1] == want_w[g][1],
              "gate %d input matrix [%g %g], want [%g %g]", g, space[L.mat[0][g].off], space[L.mat[0][g].off + 1],
              want_w[g][0], want_w[g][1]);
        CHECK(space[L.mat[0][4 + g].off] == rec[g], "gate %d recurrent %g", g, space[L.mat[0][4 + g].off]);
        CHECK(space[L.bias[0][g].off] == bias[g], "gate %d input bias %g", g, space[L.bias[0][g].off]);
        CHECK(space[L.bias[0][4 + g].off] == 0.0f, "gate %d recurrent bias %g", g, space[L.bias[0][4 + g].off]);
    }
}

static void test_refusals(void) {
    char err[256];
    cntk_rnn_layout L;
    layout_packed(&L, 2, 3, 2, 1);
    CHECK(cntk_rnn_layout_check(&L, err, sizeof err) == KH_OK, "good layout: %s", err);
    cntk_rnn_layout b = L;
    b.mat[1][2].cols = 2; /* input matrix with the wrong width */
    CHECK(cntk_rnn_layout_check(&b, err, sizeof err) == KH_ERR_UNSUPPORTED && strstr(err, "gate c"), "wrong dims: %s",
          err);
    b = L;
    b.mat[0][5].off = b.mat[0][4].off + 1; /* overlaps its neighbour */
    CHECK(cntk_rnn_layout_check(&b, err, sizeof err) == KH_ERR_UNSUPPORTED && strstr(err, "overlap"), "overlap: %s",
          err);
    b = L;
    b.space -= 1; /* the last bias sticks out */
    CHECK(cntk_rnn_layout_check(&b, err, sizeof err) == KH_ERR_UNSUPPORTED && strstr(err, "beyond"), "bounds: %s", err);
    b = L;
    b.bias[1][0] = (cntk_rnn_region){-1, 0, 0, 0}; /* input bias missing */
    CHECK(cntk_rnn_layout_check(&b, err, sizeof err) == KH_ERR_UNSUPPORTED && strstr(err, "missing"), "missing: %s",
          err);
    b = L;
    b.mat[0][1].ld = 1; /* row stride narrower than the row */
    CHECK(cntk_rnn_layout_check(&b, err, sizeof err) == KH_ERR_UNSUPPORTED, "narrow ld: %s", err);
}

int main(void) {
    kh_rng r;
    kh_rng_seed(&r, 20240501);
    test_hand_example();
    test_refusals();
    const struct { int dirs; int64_t in, u; } sizes[] = {{1, 3, 2}, {2, 5, 3}, {1, 57, 8}, {2, 16, 7}, {2, 1, 1}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        cntk_rnn_layout L;
        char name[96];
        for (int db = 0; db <= 1; db++) {
            layout_packed(&L, sizes[i].dirs, sizes[i].in, sizes[i].u, db);
            snprintf(name, sizeof name, "packed dirs=%d in=%lld u=%lld %s", sizes[i].dirs, (long long)sizes[i].in,
                     (long long)sizes[i].u, db ? "double-bias" : "single-bias");
            check_layout(name, &L, &r);
            for (int rep = 0; rep < 3; rep++) {
                layout_scattered(&L, sizes[i].dirs, sizes[i].in, sizes[i].u, db, &r);
                snprintf(name, sizeof name, "scattered#%d dirs=%d in=%lld u=%lld %s", rep, sizes[i].dirs,
                         (long long)sizes[i].in, (long long)sizes[i].u, db ? "double-bias" : "single-bias");
                check_layout(name, &L, &r);
            }
        }
    }
    return kh_test_finish("test_cntk_rnnmap");
}
