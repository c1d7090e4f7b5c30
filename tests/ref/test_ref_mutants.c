/* tests/ref/test_ref_mutants.c — the gradient checks must catch real formula mistakes, not only a scaled
 * gradient: each case computes a deliberately wrong analytic gradient (a typical bug) and asserts that the
 * finite-difference comparison of gradcheck.c rejects it (error > GC_TOL), while the correct gradient of the
 * same case passes. Mutants: a missing activation derivative, softmax treated element-wise, 'same' padding
 * on the wrong side, an LSTM run backward in the wrong direction, Bidirectional halves swapped, the loss
 * gradient without the 1/batch factor, an embedding scatter that overwrites repeated rows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "khost/kit/ref.h"
#include "testutil.h"

typedef struct ctx {
    void (*fwd)(struct ctx *);
    double *x, *w, *out, *r, *h[2], *c[2], *g[2], *W[2], *Uw[2], *b[2];
    int32_t *idx;
    int64_t B, T, C, U, OC, nout;
    int act;
    kh_conv2d_dims d;
} ctx;

static double objective(void *v) {
    ctx *c = v;
    c->fwd(c);
    return gc_dot(c->r, c->out, c->nout);
}

// Correct gradient passes, mutant fails.
static void expect(const char *name, ctx *c, double *x, int64_t n, const double *good, const double *bad) {
    double *num = gc_alloc(n);
    gc_numeric(num, x, n, objective, c);
    double eg = gc_rel_err(good, num, n), eb = gc_rel_err(bad, num, n);
    printf("  %-44s correct %.2e  mutant %.2e\n", name, eg, eb);
    CHECK(eg <= GC_TOL, "%s: the correct gradient must pass (%.3e)", name, eg);
    CHECK(eb > GC_TOL, "%s: the mutant must be rejected (%.3e)", name, eb);
    free(num);
}

static void dense_fwd(ctx *c) { kh_ref_dense_forward(c->out, c->x, c->w, NULL, c->B, c->C, c->OC, c->act); }
static void act_fwd(ctx *c) { kh_ref_activation_forward(c->out, c->x, c->B, c->C, c->act); }
static void conv_fwd(ctx *c) { kh_ref_conv2d_forward(c->out, c->x, c->w, NULL, &c->d, KH_ACT_LINEAR); }
static void lstm_fwd(ctx *c) {
    kh_ref_lstm_forward(c->out, c->h[0], c->c[0], c->g[0], c->x, c->W[0], c->Uw[0], c->b[0], c->B, c->T, c->C, c->U, 1, 0);
}
static void bilstm_fwd(ctx *c) {
    const double *W[2] = {c->W[0], c->W[1]}, *Uw[2] = {c->Uw[0], c->Uw[1]}, *b[2] = {c->b[0], c->b[1]};
    kh_ref_bilstm_forward(c->out, c->h, c->c, c->g, c->x, W, Uw, b, c->B, c->T, c->C, c->U, 0);
}
static void loss_fwd(ctx *c) {
    kh_ref_activation_forward(c->h[0], c->x, c->B, c->C, KH_ACT_SOFTMAX);
    c->out[0] = kh_ref_cce_forward(c->h[0], c->idx, c->B, c->C);
}
static void emb_fwd(ctx *c) { (void)kh_ref_embedding_forward(c->out, c->idx, c->w, c->B, c->U, c->C); }

static void setup(ctx *c, kh_rng *r, int64_t nx, int64_t nw, int64_t nout) {
    c->x = gc_alloc(nx), c->w = gc_alloc(nw), c->out = gc_alloc(nout), c->r = gc_alloc(nout);
    c->nout = nout;
    gc_fill(c->x, nx, r, -1, 1), gc_fill(c->w, nw, r, -0.7, 0.7), gc_fill(c->r, nout, r, -1, 1);
}

static void release(ctx *c) {
    free(c->x), free(c->w), free(c->out), free(c->r), free(c->idx);
    for (int d = 0; d < 2; d++) free(c->h[d]), free(c->c[d]), free(c->g[d]), free(c->W[d]), free(c->Uw[d]), free(c->b[d]);
    memset(c, 0, sizeof *c);
}

int main(void) {
    kh_rng r;
    kh_rng_seed(&r, 31337);
    ctx c = {0};

    // Dense tanh whose backward forgets the activation derivative
    c.fwd = dense_fwd, c.B = 3, c.C = 4, c.OC = 5, c.act = KH_ACT_TANH;
    setup(&c, &r, 12, 20, 15);
    double *gx = gc_alloc(12), *gw = gc_alloc(20), *bx = gc_alloc(12), *bw = gc_alloc(20);
    dense_fwd(&c);
    CHECK(kh_ref_dense_backward(gx, gw, NULL, c.r, c.out, c.x, c.w, 3, 4, 5, KH_ACT_TANH) == KH_OK, "dense");
    CHECK(kh_ref_dense_backward(bx, bw, NULL, c.r, c.out, c.x, c.w, 3, 4, 5, KH_ACT_LINEAR) == KH_OK, "dense");
    expect("dense: activation derivative missing", &c, c.w, 20, gw, bw);
    free(gx), free(gw), free(bx), free(bw);
    release(&c);

    // softmax backward written element-wise, y (1 - y) dy
    c.fwd = act_fwd, c.B = 2, c.C = 5, c.act = KH_ACT_SOFTMAX;
    setup(&c, &r, 10, 1, 10);
    double good[10], bad[10];
    act_fwd(&c);
    kh_ref_activation_backward(good, c.r, c.out, 2, 5, KH_ACT_SOFTMAX);
    for (int i = 0; i < 10; i++) bad[i] = c.out[i] * (1 - c.out[i]) * c.r[i];
    expect("softmax: Jacobian taken as diagonal", &c, c.x, 10, good, bad);
    release(&c);

    // 'same' 2x2 conv: backward with the odd padding pixel before instead of after
    c.fwd = conv_fwd;
    CHECK(kh_conv2d_geometry(&c.d, 1, 5, 5, 2, 2, 2, 3, 1, 1, KH_PAD_SAME) == KH_OK, "geometry");
    setup(&c, &r, 50, 24, 75);
    double *cgx = gc_alloc(50), *cgw = gc_alloc(24), *cbx = gc_alloc(50), *cbw = gc_alloc(24);
    conv_fwd(&c);
    kh_conv2d_dims wrong = c.d;
    wrong.pad_top = wrong.pad_left = 1;
    CHECK(kh_ref_conv2d_backward(cgx, cgw, NULL, c.r, c.out, c.x, c.w, &c.d, KH_ACT_LINEAR) == KH_OK, "conv");
    CHECK(kh_ref_conv2d_backward(cbx, cbw, NULL, c.r, c.out, c.x, c.w, &wrong, KH_ACT_LINEAR) == KH_OK, "conv");
    expect("conv2d same: padding on the wrong side (input)", &c, c.x, 50, cgx, cbx);
    expect("conv2d same: padding on the wrong side (kernel)", &c, c.w, 24, cgw, cbw);
    free(cgx), free(cgw), free(cbx), free(cbw);
    release(&c);

    // LSTM: backward through time in the wrong direction (reverse flag mismatch)
    c.fwd = lstm_fwd, c.B = 2, c.T = 4, c.C = 3, c.U = 2;
    setup(&c, &r, 24, 1, 16);
    c.W[0] = gc_alloc(24), c.Uw[0] = gc_alloc(16), c.b[0] = gc_alloc(8);
    gc_fill(c.W[0], 24, &r, -0.7, 0.7), gc_fill(c.Uw[0], 16, &r, -0.7, 0.7), gc_fill(c.b[0], 8, &r, -0.5, 0.5);
    c.h[0] = gc_alloc(16), c.c[0] = gc_alloc(16), c.g[0] = gc_alloc(64);
    double *lgW = gc_alloc(24), *lgU = gc_alloc(16), *lgb = gc_alloc(8), *lbW = gc_alloc(24), *lbU = gc_alloc(16), *lbb = gc_alloc(8);
    lstm_fwd(&c);
    CHECK(kh_ref_lstm_backward(NULL, lgW, lgU, lgb, c.r, c.h[0], c.c[0], c.g[0], c.x, c.W[0], c.Uw[0], 2, 4, 3, 2, 1, 0) == KH_OK, "lstm");
    CHECK(kh_ref_lstm_backward(NULL, lbW, lbU, lbb, c.r, c.h[0], c.c[0], c.g[0], c.x, c.W[0], c.Uw[0], 2, 4, 3, 2, 1, 1) == KH_OK, "lstm");
    expect("lstm: backward runs time the wrong way", &c, c.Uw[0], 16, lgU, lbU);
    free(lgW), free(lgU), free(lgb), free(lbW), free(lbU), free(lbb);
    release(&c);

    // Bidirectional: the two halves of dout swapped
    c.fwd = bilstm_fwd, c.B = 2, c.T = 3, c.C = 2, c.U = 2;
    setup(&c, &r, 12, 1, 8);
    for (int d = 0; d < 2; d++) {
        c.W[d] = gc_alloc(16), c.Uw[d] = gc_alloc(16), c.b[d] = gc_alloc(8);
        gc_fill(c.W[d], 16, &r, -0.7, 0.7), gc_fill(c.Uw[d], 16, &r, -0.7, 0.7), gc_fill(c.b[d], 8, &r, -0.5, 0.5);
        c.h[d] = gc_alloc(12), c.c[d] = gc_alloc(12), c.g[d] = gc_alloc(48);
    }
    double *dW[2] = {gc_alloc(16), gc_alloc(16)}, *dU[2] = {gc_alloc(16), gc_alloc(16)}, *db[2] = {gc_alloc(8), gc_alloc(8)};
    double *gxx = gc_alloc(12), *bxx = gc_alloc(12), rs[8];
    bilstm_fwd(&c);
    const double *W[2] = {c.W[0], c.W[1]}, *Uw[2] = {c.Uw[0], c.Uw[1]};
    const double *h[2] = {c.h[0], c.h[1]}, *cc[2] = {c.c[0], c.c[1]}, *g[2] = {c.g[0], c.g[1]};
    CHECK(kh_ref_bilstm_backward(gxx, dW, dU, db, c.r, h, cc, g, c.x, W, Uw, 2, 3, 2, 2, 0) == KH_OK, "bilstm");
    for (int n = 0; n < 2; n++)
        for (int u = 0; u < 2; u++) rs[n * 4 + u] = c.r[n * 4 + 2 + u], rs[n * 4 + 2 + u] = c.r[n * 4 + u];
    CHECK(kh_ref_bilstm_backward(bxx, dW, dU, db, rs, h, cc, g, c.x, W, Uw, 2, 3, 2, 2, 0) == KH_OK, "bilstm");
    expect("bilstm: forward/backward halves swapped", &c, c.x, 12, gxx, bxx);
    for (int d = 0; d < 2; d++) free(dW[d]), free(dU[d]), free(db[d]);
    free(gxx), free(bxx);
    release(&c);

    // categorical cross-entropy: gradient of the sum instead of the mean
    c.fwd = loss_fwd, c.B = 3, c.C = 4;
    setup(&c, &r, 12, 1, 1);
    c.r[0] = 1.0;
    c.h[0] = gc_alloc(12);
    c.idx = calloc(3, sizeof(int32_t));
    if (!c.idx) return 2;
    c.idx[0] = 1, c.idx[1] = 3, c.idx[2] = 0;
    double lg[12], lb[12];
    loss_fwd(&c);
    kh_ref_cce_backward(lg, c.h[0], c.idx, 3, 4);
    for (int i = 0; i < 12; i++) lb[i] = lg[i] * 3;
    expect("cce: sum instead of mean over the batch", &c, c.x, 12, lg, lb);
    release(&c);

    // embedding: scatter that overwrites repeated rows instead of adding
    c.fwd = emb_fwd, c.B = 5 /* indices */, c.U = 3 /* vocabulary */, c.C = 2;
    setup(&c, &r, 1, 6, 10);
    c.idx = calloc(5, sizeof(int32_t));
    if (!c.idx) return 2;
    const int32_t ids[5] = {0, 2, 0, 1, 0};
    memcpy(c.idx, ids, sizeof ids);
    double eg[6] = {0}, eb[6] = {0};
    kh_ref_embedding_backward(eg, c.r, c.idx, 5, 2);
    for (int n = 0; n < 5; n++)
        for (int j = 0; j < 2; j++) eb[c.idx[n] * 2 + j] = c.r[n * 2 + j];
    expect("embedding: repeated rows overwritten", &c, c.w, 6, eg, eb);
    release(&c);

    return kh_test_finish("test_ref_mutants");
}
