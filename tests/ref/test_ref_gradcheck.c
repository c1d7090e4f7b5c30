/* tests/ref/test_ref_gradcheck.c — every reference layer's analytic gradients (input and weights) against
 * float64 central finite differences, on several random shapes per layer and option (conv 'same'/'valid'
 * and strides, every activation, LSTM return_sequences both ways and reversed, Bidirectional LSTM).
 * Objective: L = sum(r * out) with a random upstream gradient r, so backward(dout = r) must equal dL/d.
 * Also checks the llm.c accumulation contract: a second backward doubles parameter gradients (+=) and
 * leaves activation gradients unchanged (overwrite). Tolerance GC_TOL (gradcheck.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "khost/kit/ref.h"
#include "khost/kit/status.h"
#include "khost/kit/rng.h"
#include "testutil.h"

#define MAXW 6

typedef struct lctx {
    void (*fwd)(struct lctx *c);
    void (*bwd)(struct lctx *c);
    double *out, *r;            // (nout) output and upstream gradient
    int64_t nout;
    double *x, *dx;             // (nx) input and its gradient (dx NULL: no input gradient, e.g. indices)
    int64_t nx;
    double *w[MAXW], *dw[MAXW]; // (nw[k]) parameters and gradients
    int64_t nw[MAXW];
    int nparam;
    // layer options and sizes
    int64_t B, T, C, U, OC;
    int act, rs, rev;
    double rate;
    uint8_t *mask;
    int32_t *idx;
    kh_conv2d_dims d;
    double *h[2], *cs[2], *gates[2];
} lctx;

static double objective(void *p) {
    lctx *c = p;
    c->fwd(c);
    return gc_dot(c->r, c->out, c->nout);
}

// Run backward twice and check += / overwrite, then finite differences on input and every parameter.
static void run_case(const char *label, lctx *c) {
    for (int k = 0; k < c->nparam; k++) memset(c->dw[k], 0, (size_t)c->nw[k] * sizeof(double));
    c->fwd(c);
    c->bwd(c);
    double *dw1[MAXW] = {0}, *dx1 = NULL;
    for (int k = 0; k < c->nparam; k++) {
        dw1[k] = gc_alloc(c->nw[k]);
        memcpy(dw1[k], c->dw[k], (size_t)c->nw[k] * sizeof(double));
    }
    if (c->dx) {
        dx1 = gc_alloc(c->nx);
        memcpy(dx1, c->dx, (size_t)c->nx * sizeof(double));
    }
    c->bwd(c);
    int acc_ok = 1;
    for (int k = 0; k < c->nparam; k++)
        for (int64_t i = 0; i < c->nw[k]; i++) acc_ok &= fabs(c->dw[k][i] - 2.0 * dw1[k][i]) <= 1e-12 * (1.0 + fabs(dw1[k][i]));
    if (c->dx)
        for (int64_t i = 0; i < c->nx; i++) acc_ok &= c->dx[i] == dx1[i];
    CHECK(acc_ok, "%s: parameter gradients must accumulate and input gradients overwrite", label);

    gc_tensor ts[MAXW + 1];
    int nt = 0;
    if (c->dx) ts[nt++] = (gc_tensor){"d_input", c->x, dx1, c->nx};
    static const char *names[MAXW] = {"d_w0", "d_w1", "d_w2", "d_w3", "d_w4", "d_w5"};
    for (int k = 0; k < c->nparam; k++) ts[nt++] = (gc_tensor){names[k], c->w[k], dw1[k], c->nw[k]};
    gc_check(label, objective, c, ts, nt, GC_TOL);
    for (int k = 0; k < c->nparam; k++) free(dw1[k]);
    free(dx1);
}

static void setup_io(lctx *c, kh_rng *r, int64_t nx, int64_t nout, int want_dx) {
    c->nx = nx;
    c->x = gc_alloc(nx);
    gc_fill(c->x, nx, r, -1.0, 1.0);
    c->dx = want_dx ? gc_alloc(nx) : NULL;
    c->nout = nout;
    c->out = gc_alloc(nout);
    c->r = gc_alloc(nout);
    gc_fill(c->r, nout, r, -1.0, 1.0);
}

static void add_param(lctx *c, kh_rng *r, int64_t n, double scale) {
    int k = c->nparam++;
    c->nw[k] = n;
    c->w[k] = gc_alloc(n);
    c->dw[k] = gc_alloc(n);
    gc_fill(c->w[k], n, r, -scale, scale);
}

static void free_ctx(lctx *c) {
    free(c->out), free(c->r), free(c->x), free(c->dx), free(c->mask), free(c->idx);
    for (int k = 0; k < MAXW; k++) free(c->w[k]), free(c->dw[k]);
    for (int d = 0; d < 2; d++) free(c->h[d]), free(c->cs[d]), free(c->gates[d]);
    memset(c, 0, sizeof *c);
}

// --- Dense --------------------------------------------------------------------------------------------------
static void dense_fwd(lctx *c) { kh_ref_dense_forward(c->out, c->x, c->w[0], c->w[1], c->B, c->C, c->OC, c->act); }
static void dense_bwd(lctx *c) {
    kh_status st = kh_ref_dense_backward(c->dx, c->dw[0], c->dw[1], c->r, c->out, c->x, c->w[0], c->B, c->C, c->OC, c->act);
    CHECK(st == KH_OK, "dense backward status");
}
static void test_dense(kh_rng *r) {
    for (int act = 0; act < KH_ACT_END; act++) {
        for (int rep = 0; rep < 2; rep++) {
            lctx c = {0};
            c.fwd = dense_fwd, c.bwd = dense_bwd, c.act = act;
            c.B = gc_range(r, 1, 4), c.C = gc_range(r, 1, 6), c.OC = gc_range(r, act == KH_ACT_SOFTMAX ? 2 : 1, 6);
            setup_io(&c, r, c.B * c.C, c.B * c.OC, 1);
            add_param(&c, r, c.C * c.OC, 1.0);
            add_param(&c, r, c.OC, 0.5);
            char label[96];
            snprintf(label, sizeof label, "dense %s B%lld C%lld OC%lld", kh_activation_name((uint32_t)act),
                     (long long)c.B, (long long)c.C, (long long)c.OC);
            run_case(label, &c);
            free_ctx(&c);
        }
    }
}

// --- Activation ---------------------------------------------------------------------------------------------
static void act_fwd(lctx *c) { kh_ref_activation_forward(c->out, c->x, c->B, c->C, c->act); }
static void act_bwd(lctx *c) { kh_ref_activation_backward(c->dx, c->r, c->out, c->B, c->C, c->act); }
static void test_activation(kh_rng *r) {
    for (int act = 0; act < KH_ACT_END; act++) {
        for (int rep = 0; rep < 2; rep++) {
            lctx c = {0};
            c.fwd = act_fwd, c.bwd = act_bwd, c.act = act;
            c.B = gc_range(r, 1, 5), c.C = gc_range(r, 2, 7);
            setup_io(&c, r, c.B * c.C, c.B * c.C, 1);
            gc_fill(c.x, c.nx, r, -3.0, 3.0);
            char label[96];
            snprintf(label, sizeof label, "activation %s rows%lld C%lld", kh_activation_name((uint32_t)act),
                     (long long)c.B, (long long)c.C);
            run_case(label, &c);
            free_ctx(&c);
        }
    }
}

// --- Dropout, Flatten, GlobalAveragePooling1D -------------------------------------------------------------
static void drop_fwd(lctx *c) { kh_ref_dropout_forward(c->out, c->mask, c->x, c->nx, c->rate); }
static void drop_bwd(lctx *c) { kh_ref_dropout_backward(c->dx, c->r, c->mask, c->nx, c->rate); }
static void flat_fwd(lctx *c) { kh_ref_flatten_forward(c->out, c->x, c->nx); }
static void flat_bwd(lctx *c) { kh_ref_flatten_backward(c->dx, c->r, c->nx); }
static void gap_fwd(lctx *c) { kh_ref_gap1d_forward(c->out, c->x, c->B, c->T, c->C); }
static void gap_bwd(lctx *c) { kh_ref_gap1d_backward(c->dx, c->r, c->B, c->T, c->C); }
static void test_simple(kh_rng *r) {
    static const double rates[3] = {0.0, 0.25, 0.5};
    for (int k = 0; k < 3; k++) {
        lctx c = {0};
        c.fwd = drop_fwd, c.bwd = drop_bwd, c.rate = rates[k];
        int64_t n = gc_range(r, 8, 40);
        setup_io(&c, r, n, n, 1);
        c.mask = calloc((size_t)n, 1);
        if (!c.mask) exit(2);
        kh_ref_dropout_mask(c.mask, n, c.rate, r);
        char label[96];
        snprintf(label, sizeof label, "dropout rate %.2f N%lld", c.rate, (long long)n);
        run_case(label, &c);
        free_ctx(&c);
    }
    for (int k = 0; k < 2; k++) {
        lctx c = {0};
        c.fwd = flat_fwd, c.bwd = flat_bwd;
        int64_t n = gc_range(r, 4, 30);
        setup_io(&c, r, n, n, 1);
        run_case("flatten", &c);
        free_ctx(&c);
    }
    for (int k = 0; k < 3; k++) {
        lctx c = {0};
        c.fwd = gap_fwd, c.bwd = gap_bwd;
        c.B = gc_range(r, 1, 3), c.T = gc_range(r, 1, 6), c.C = gc_range(r, 1, 5);
        setup_io(&c, r, c.B * c.T * c.C, c.B * c.C, 1);
        char label[96];
        snprintf(label, sizeof label, "gap1d B%lld T%lld C%lld", (long long)c.B, (long long)c.T, (long long)c.C);
        run_case(label, &c);
        free_ctx(&c);
    }
}

// --- Conv2D and MaxPooling2D -------------------------------------------------------------------------------
static void conv_fwd(lctx *c) { kh_ref_conv2d_forward(c->out, c->x, c->w[0], c->w[1], &c->d, c->act); }
static void conv_bwd(lctx *c) {
    kh_status st = kh_ref_conv2d_backward(c->dx, c->dw[0], c->dw[1], c->r, c->out, c->x, c->w[0], &c->d, c->act);
    CHECK(st == KH_OK, "conv2d backward status");
}
static void pool_fwd(lctx *c) { kh_ref_maxpool2d_forward(c->out, c->x, &c->d); }
static void pool_bwd(lctx *c) { kh_ref_maxpool2d_backward(c->dx, c->r, c->x, &c->d); }

static void test_conv(kh_rng *r) {
    // kernel h, w, stride h, w, padding, activation
    static const int cfg[][6] = {
        {3, 3, 1, 1, KH_PAD_VALID, KH_ACT_RELU}, {3, 3, 1, 1, KH_PAD_SAME, KH_ACT_RELU},
        {2, 2, 1, 1, KH_PAD_SAME, KH_ACT_LINEAR}, /* odd total padding: the extra row goes after */
        {2, 3, 1, 1, KH_PAD_VALID, KH_ACT_TANH},  {3, 3, 2, 2, KH_PAD_SAME, KH_ACT_SIGMOID},
        {3, 2, 2, 1, KH_PAD_VALID, KH_ACT_LINEAR}, {1, 1, 1, 1, KH_PAD_SAME, KH_ACT_RELU},
        {3, 3, 1, 1, KH_PAD_SAME, KH_ACT_SOFTMAX}, /* softmax over channels: fused-activation plumbing */
    };
    for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        lctx c = {0};
        c.fwd = conv_fwd, c.bwd = conv_bwd, c.act = cfg[k][5];
        int64_t B = gc_range(r, 1, 2), H = gc_range(r, 4, 7), W = gc_range(r, 4, 7), C = gc_range(r, 1, 3);
        int64_t OC = gc_range(r, 2, 3);
        kh_status st = kh_conv2d_geometry(&c.d, B, H, W, C, cfg[k][0], cfg[k][1], OC, cfg[k][2], cfg[k][3], cfg[k][4]);
        CHECK(st == KH_OK, "conv geometry");
        setup_io(&c, r, B * H * W * C, B * c.d.OH * c.d.OW * OC, 1);
        add_param(&c, r, (int64_t)cfg[k][0] * cfg[k][1] * C * OC, 0.7);
        add_param(&c, r, OC, 0.3);
        char label[96];
        snprintf(label, sizeof label, "conv2d %dx%d s%d%d %s %s %lldx%lldx%lld", cfg[k][0], cfg[k][1], cfg[k][2],
                 cfg[k][3], cfg[k][4] ? "same" : "valid", kh_activation_name((uint32_t)cfg[k][5]), (long long)H,
                 (long long)W, (long long)C);
        run_case(label, &c);
        free_ctx(&c);
    }
}

static void test_pool(kh_rng *r) {
    static const int cfg[][5] = {
        {2, 2, 2, 2, KH_PAD_VALID}, {3, 3, 2, 2, KH_PAD_SAME}, {2, 2, 1, 1, KH_PAD_VALID}, {2, 3, 2, 3, KH_PAD_SAME},
    };
    for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        lctx c = {0};
        c.fwd = pool_fwd, c.bwd = pool_bwd;
        int64_t B = gc_range(r, 1, 2), H = gc_range(r, 4, 7), W = gc_range(r, 4, 7), C = gc_range(r, 1, 3);
        kh_status st = kh_conv2d_geometry(&c.d, B, H, W, C, cfg[k][0], cfg[k][1], C, cfg[k][2], cfg[k][3], cfg[k][4]);
        CHECK(st == KH_OK, "pool geometry");
        setup_io(&c, r, B * H * W * C, B * c.d.OH * c.d.OW * C, 1);
        char label[96];
        snprintf(label, sizeof label, "maxpool2d %dx%d s%d%d %s %lldx%lldx%lld", cfg[k][0], cfg[k][1], cfg[k][2],
                 cfg[k][3], cfg[k][4] ? "same" : "valid", (long long)H, (long long)W, (long long)C);
        run_case(label, &c);
        free_ctx(&c);
    }
}

// --- Embedding ------------------------------------------------------------------------------------------------
static void emb_fwd(lctx *c) {
    kh_status st = kh_ref_embedding_forward(c->out, c->idx, c->w[0], c->B * c->T, c->U, c->C);
    (void)st;
}
static void emb_bwd(lctx *c) { kh_ref_embedding_backward(c->dw[0], c->r, c->idx, c->B * c->T, c->C); }
static void test_embedding(kh_rng *r) {
    for (int k = 0; k < 3; k++) {
        lctx c = {0};
        c.fwd = emb_fwd, c.bwd = emb_bwd;
        c.B = gc_range(r, 1, 3), c.T = gc_range(r, 2, 6), c.U = gc_range(r, 2, 5) /* vocabulary */, c.C = gc_range(r, 1, 4);
        setup_io(&c, r, 1, c.B * c.T * c.C, 0);
        add_param(&c, r, c.U * c.C, 0.05);
        c.idx = calloc((size_t)(c.B * c.T), sizeof(int32_t));
        if (!c.idx) exit(2);
        // a small vocabulary guarantees repeated indices: the scatter must accumulate them
        for (int64_t i = 0; i < c.B * c.T; i++) c.idx[i] = (int32_t)gc_range(r, 0, c.U - 1);
        c.idx[0] = 0, c.idx[c.B * c.T - 1] = 0;
        char label[96];
        snprintf(label, sizeof label, "embedding V%lld D%lld N%lld", (long long)c.U, (long long)c.C,
                 (long long)(c.B * c.T));
        run_case(label, &c);
        free_ctx(&c);
    }
}

// --- LSTM and Bidirectional(LSTM) ---------------------------------------------------------------------------
static void lstm_fwd(lctx *c) {
    kh_ref_lstm_forward(c->out, c->h[0], c->cs[0], c->gates[0], c->x, c->w[0], c->w[1], c->w[2], c->B, c->T, c->C,
                        c->U, c->rs, c->rev);
}
static void lstm_bwd(lctx *c) {
    kh_status st = kh_ref_lstm_backward(c->dx, c->dw[0], c->dw[1], c->dw[2], c->r, c->h[0], c->cs[0], c->gates[0],
                                        c->x, c->w[0], c->w[1], c->B, c->T, c->C, c->U, c->rs, c->rev);
    CHECK(st == KH_OK, "lstm backward status");
}
static void bilstm_fwd(lctx *c) {
    const double *W[2] = {c->w[0], c->w[3]}, *Uw[2] = {c->w[1], c->w[4]}, *b[2] = {c->w[2], c->w[5]};
    kh_ref_bilstm_forward(c->out, c->h, c->cs, c->gates, c->x, W, Uw, b, c->B, c->T, c->C, c->U, c->rs);
}
static void bilstm_bwd(lctx *c) {
    const double *W[2] = {c->w[0], c->w[3]}, *Uw[2] = {c->w[1], c->w[4]};
    double *dW[2] = {c->dw[0], c->dw[3]}, *dU[2] = {c->dw[1], c->dw[4]}, *db[2] = {c->dw[2], c->dw[5]};
    const double *h[2] = {c->h[0], c->h[1]}, *cs[2] = {c->cs[0], c->cs[1]}, *g[2] = {c->gates[0], c->gates[1]};
    kh_status st = kh_ref_bilstm_backward(c->dx, dW, dU, db, c->r, h, cs, g, c->x, W, Uw, c->B, c->T, c->C, c->U, c->rs);
    CHECK(st == KH_OK, "bilstm backward status");
}
static void lstm_case(kh_rng *r, int bi, int rs, int rev) {
    lctx c = {0};
    c.fwd = bi ? bilstm_fwd : lstm_fwd, c.bwd = bi ? bilstm_bwd : lstm_bwd, c.rs = rs, c.rev = rev;
    c.B = gc_range(r, 1, 3), c.T = gc_range(r, 2, 5), c.C = gc_range(r, 1, 4), c.U = gc_range(r, 1, 4); // T >= 2: U gets a gradient
    int64_t width = (bi ? 2 : 1) * c.U;
    setup_io(&c, r, c.B * c.T * c.C, c.B * (rs ? c.T : 1) * width, 1);
    for (int d = 0; d < (bi ? 2 : 1); d++) {
        add_param(&c, r, c.C * 4 * c.U, 0.6);
        add_param(&c, r, c.U * 4 * c.U, 0.6);
        add_param(&c, r, 4 * c.U, 0.4);
        c.h[d] = gc_alloc(c.B * c.T * c.U);
        c.cs[d] = gc_alloc(c.B * c.T * c.U);
        c.gates[d] = gc_alloc(c.B * c.T * 4 * c.U);
    }
    char label[96];
    snprintf(label, sizeof label, "%s rs%d%s B%lld T%lld C%lld U%lld", bi ? "bilstm" : "lstm", rs,
             rev ? " reversed" : "", (long long)c.B, (long long)c.T, (long long)c.C, (long long)c.U);
    run_case(label, &c);
    free_ctx(&c);
}
static void test_lstm(kh_rng *r) {
    for (int rep = 0; rep < 2; rep++) {
        for (int rs = 0; rs < 2; rs++) {
            for (int rev = 0; rev < 2; rev++) lstm_case(r, 0, rs, rev);
            lstm_case(r, 1, rs, 0);
        }
    }
}

int main(void) {
    kh_rng r;
    kh_rng_seed(&r, 20240601);
    test_dense(&r);
    test_activation(&r);
    test_simple(&r);
    test_conv(&r);
    test_pool(&r);
    test_embedding(&r);
    test_lstm(&r);
    return kh_test_finish("test_ref_gradcheck");
}
