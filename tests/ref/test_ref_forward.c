/* tests/ref/test_ref_forward.c — forward semantics of the reference layers against independent code.
 * Finite differences prove a backward matches its forward, not that the forward is Keras's; these checks pin
 * the forward passes: hand-computed Dense and softmax values, Conv2D against a naive convolution over an
 * explicitly padded input (TensorFlow's 'same': the odd padding pixel goes after), kernel layout
 * [kh, kw, cin, cout], pooling windows and the first-maximum rule, Embedding gathers and range checks, the
 * LSTM against a scalar re-implementation with gate order i, f, c, o, and Bidirectional against two LSTMs on
 * the sequence and its explicit reversal. Each comparison is exact to 1e-12 unless stated. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "khost/kit/ref.h"
#include "testutil.h"

static double max_abs_diff(const double *a, const double *b, int64_t n) {
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(a[i] - b[i]));
    return isnan(m) ? INFINITY : m;
}

static void test_dense_values(void) {
    const double x[2] = {1, 2}, w[6] = {1, 2, 3, 4, 5, 6}, b[3] = {0.5, -1, -20};
    double y[3];
    kh_ref_dense_forward(y, x, w, b, 1, 2, 3, KH_ACT_LINEAR);
    CHECK(y[0] == 9.5 && y[1] == 11 && y[2] == -5, "dense linear %g %g %g", y[0], y[1], y[2]);
    kh_ref_dense_forward(y, x, w, b, 1, 2, 3, KH_ACT_RELU);
    CHECK(y[0] == 9.5 && y[1] == 11 && y[2] == 0, "dense relu");
}

static void test_activation_values(void) {
    double x[6] = {1, 2, 3, 1000, 1000, -1000}, y[6];
    kh_ref_activation_forward(y, x, 2, 3, KH_ACT_SOFTMAX);
    double s = exp(1) + exp(2) + exp(3);
    CHECK(fabs(y[0] - exp(1) / s) < 1e-15 && fabs(y[2] - exp(3) / s) < 1e-15, "softmax values");
    CHECK(y[3] == 0.5 && y[4] == 0.5 && y[5] == 0.0, "softmax of large logits is finite: %g %g %g", y[3], y[4], y[5]);
    double z[4] = {-800, 800, 0, 2}, q[4];
    kh_ref_activation_forward(q, z, 1, 4, KH_ACT_SIGMOID);
    CHECK(q[0] == 0.0 && q[1] == 1.0 && q[2] == 0.5 && fabs(q[3] - 1 / (1 + exp(-2))) < 1e-15, "sigmoid values");
    kh_ref_activation_forward(q, z, 1, 4, KH_ACT_TANH);
    CHECK(q[0] == -1.0 && fabs(q[3] - tanh(2)) < 1e-15, "tanh values");
}

// A naive convolution: pad explicitly (TensorFlow's rule), then a 'valid' strided correlation.
static void naive_conv(double *out, const double *x, const double *w, const double *b, int64_t B, int64_t H,
                       int64_t W, int64_t C, int64_t KH, int64_t KW, int64_t OC, int64_t SH, int64_t SW, int same,
                       int64_t *OHp, int64_t *OWp) {
    int64_t OH = same ? (H + SH - 1) / SH : (H - KH) / SH + 1, OW = same ? (W + SW - 1) / SW : (W - KW) / SW + 1;
    int64_t pt = 0, pl = 0, PH = H, PW = W;
    if (same) {
        int64_t th = (OH - 1) * SH + KH - H, tw = (OW - 1) * SW + KW - W;
        th = th < 0 ? 0 : th, tw = tw < 0 ? 0 : tw;
        pt = th / 2, pl = tw / 2, PH = H + th, PW = W + tw;
    }
    double *p = gc_alloc(B * PH * PW * C);
    for (int64_t n = 0; n < B; n++)
        for (int64_t i = 0; i < H; i++)
            for (int64_t j = 0; j < W; j++)
                for (int64_t c = 0; c < C; c++) p[((n * PH + i + pt) * PW + j + pl) * C + c] = x[((n * H + i) * W + j) * C + c];
    for (int64_t n = 0; n < B; n++)
        for (int64_t i = 0; i < OH; i++)
            for (int64_t j = 0; j < OW; j++)
                for (int64_t o = 0; o < OC; o++) {
                    double acc = b[o];
                    for (int64_t a = 0; a < KH; a++)
                        for (int64_t e = 0; e < KW; e++)
                            for (int64_t c = 0; c < C; c++)
                                acc += p[((n * PH + i * SH + a) * PW + j * SW + e) * C + c] * w[((a * KW + e) * C + c) * OC + o];
                    out[((n * OH + i) * OW + j) * OC + o] = acc;
                }
    free(p);
    *OHp = OH, *OWp = OW;
}

static void test_conv_values(kh_rng *r) {
    // 'same' 2x2 on 4x4 of 1..16, one channel, kernel of ones: padding goes after, so the top-left output
    // sees a full window and the bottom-right sees only x[3][3]
    double x[16], w[4] = {1, 1, 1, 1}, b[1] = {0}, y[16];
    for (int i = 0; i < 16; i++) x[i] = i + 1;
    kh_conv2d_dims d;
    CHECK(kh_conv2d_geometry(&d, 1, 4, 4, 1, 2, 2, 1, 1, 1, KH_PAD_SAME) == KH_OK, "geometry");
    CHECK(d.OH == 4 && d.OW == 4 && d.pad_top == 0 && d.pad_left == 0 && d.pad_bottom == 1 && d.pad_right == 1,
          "same 2x2 geometry");
    kh_ref_conv2d_forward(y, x, w, b, &d, KH_ACT_LINEAR);
    CHECK(y[0] == 1 + 2 + 5 + 6 && y[15] == 16 && y[3] == 4 + 8, "same 2x2 padding after: %g %g %g", y[0], y[15], y[3]);
    CHECK(kh_conv2d_geometry(&d, 1, 5, 5, 1, 3, 3, 1, 2, 2, KH_PAD_SAME) == KH_OK && d.OH == 3 && d.pad_top == 1,
          "same 3x3 stride 2 on 5: out 3, pad 1");
    CHECK(kh_conv2d_geometry(&d, 1, 6, 6, 1, 3, 3, 1, 2, 2, KH_PAD_SAME) == KH_OK && d.OH == 3 && d.pad_top == 0 &&
              d.pad_bottom == 1,
          "same 3x3 stride 2 on 6: out 3, total pad 1 goes after");
    CHECK(kh_conv2d_geometry(&d, 1, 7, 4, 1, 3, 2, 1, 1, 1, KH_PAD_VALID) == KH_OK && d.pad_bottom == 0 &&
              d.pad_right == 0,
          "valid: no padding after");
    CHECK(kh_conv2d_geometry(&d, 1, 2, 5, 1, 3, 3, 1, 1, 1, KH_PAD_VALID) == KH_ERR_INVALID, "valid window too big");

    static const int cfg[][5] = {{3, 3, 1, 1, 0}, {3, 3, 1, 1, 1}, {2, 2, 1, 1, 1}, {3, 3, 2, 2, 1}, {2, 3, 2, 1, 0},
                                 {4, 4, 3, 3, 1}};
    for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        int64_t B = 2, H = gc_range(r, 5, 8), W = gc_range(r, 5, 8), C = gc_range(r, 1, 3), OC = gc_range(r, 1, 4);
        double *xi = gc_alloc(B * H * W * C), *wk = gc_alloc(cfg[k][0] * cfg[k][1] * C * OC), *bi = gc_alloc(OC);
        gc_fill(xi, B * H * W * C, r, -1, 1);
        gc_fill(wk, cfg[k][0] * cfg[k][1] * C * OC, r, -1, 1);
        gc_fill(bi, OC, r, -1, 1);
        double *ya = gc_alloc(B * H * W * OC), *yb = gc_alloc(B * H * W * OC);
        int64_t OH, OW;
        naive_conv(yb, xi, wk, bi, B, H, W, C, cfg[k][0], cfg[k][1], OC, cfg[k][2], cfg[k][3], cfg[k][4], &OH, &OW);
        CHECK(kh_conv2d_geometry(&d, B, H, W, C, cfg[k][0], cfg[k][1], OC, cfg[k][2], cfg[k][3], cfg[k][4]) == KH_OK,
              "geometry");
        CHECK(d.OH == OH && d.OW == OW, "conv output size %lldx%lld vs %lldx%lld", (long long)d.OH, (long long)d.OW,
              (long long)OH, (long long)OW);
        kh_ref_conv2d_forward(ya, xi, wk, bi, &d, KH_ACT_LINEAR);
        CHECK(max_abs_diff(ya, yb, B * OH * OW * OC) < 1e-12, "conv2d %dx%d s%d %s vs naive padded convolution",
              cfg[k][0], cfg[k][1], cfg[k][2], cfg[k][4] ? "same" : "valid");
        free(xi), free(wk), free(bi), free(ya), free(yb);
    }
}

static void test_pool_values(void) {
    // 4x4 one channel; window (0,0) holds a tie 5, 5 -> the gradient goes to the first (row-major)
    const double x[16] = {5, 5, 1, 2, 0, 1, 3, 9, -1, -2, 7, 7, -3, -4, 7, 8};
    double y[4], dx[16], dy[4] = {1, 2, 3, 4};
    kh_conv2d_dims d;
    CHECK(kh_conv2d_geometry(&d, 1, 4, 4, 1, 2, 2, 1, 2, 2, KH_PAD_VALID) == KH_OK, "pool geometry");
    kh_ref_maxpool2d_forward(y, x, &d);
    CHECK(y[0] == 5 && y[1] == 9 && y[2] == -1 && y[3] == 8, "maxpool values %g %g %g %g", y[0], y[1], y[2], y[3]);
    kh_ref_maxpool2d_backward(dx, dy, x, &d);
    CHECK(dx[0] == 1 && dx[1] == 0, "tie: gradient to the first maximum only");
    CHECK(dx[7] == 2 && dx[8] == 3 && dx[15] == 4 && dx[10] == 0 && dx[14] == 0, "maxpool routing");
    double sum = 0;
    for (int i = 0; i < 16; i++) sum += dx[i];
    CHECK(sum == 10, "maxpool gradient mass");
    // 'same' 2x2 stride 2 on 3x3: the last row/column windows see only real pixels (padding never wins)
    const double z[9] = {-5, -6, -7, -8, -9, -1, -2, -3, -4};
    double q[4];
    CHECK(kh_conv2d_geometry(&d, 1, 3, 3, 1, 2, 2, 1, 2, 2, KH_PAD_SAME) == KH_OK && d.OH == 2, "same pool geometry");
    kh_ref_maxpool2d_forward(q, z, &d);
    CHECK(q[0] == -5 && q[1] == -1 && q[2] == -2 && q[3] == -4, "same pooling ignores padding: %g %g %g %g", q[0], q[1],
          q[2], q[3]);
}

static void test_embedding_values(void) {
    const double table[6] = {1, 2, 3, 4, 5, 6}; // (3, 2)
    const int32_t idx[4] = {2, 0, 2, 1};
    double out[8], dt[6] = {0};
    CHECK(kh_ref_embedding_forward(out, idx, table, 4, 3, 2) == KH_OK, "embedding ok");
    CHECK(out[0] == 5 && out[1] == 6 && out[2] == 1 && out[7] == 4, "embedding gather");
    const double dout[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    kh_ref_embedding_backward(dt, dout, idx, 4, 2);
    CHECK(dt[4] == 2 && dt[0] == 1 && dt[2] == 1, "embedding scatter-add accumulates repeats");
    const int32_t bad[2] = {1, 3};
    CHECK(kh_ref_embedding_forward(out, bad, table, 2, 3, 2) == KH_ERR_INVALID, "out-of-range index refused");
    const int32_t neg[1] = {-1};
    CHECK(kh_ref_embedding_forward(out, neg, table, 1, 3, 2) == KH_ERR_INVALID, "negative index refused");
}

static double sig(double v) { return 1.0 / (1.0 + exp(-v)); }

// A scalar LSTM written from Keras 2's recurrent.py: z = x W + h U + b; i, f, c, o quarters.
static void scalar_lstm(double *hs, const double *x, const double *W, const double *Uw, const double *b, int64_t T,
                        int64_t C, int64_t U) {
    double h[8] = {0}, c[8] = {0}, z[32];
    for (int64_t t = 0; t < T; t++) {
        for (int64_t k = 0; k < 4 * U; k++) {
            z[k] = b[k];
            for (int64_t j = 0; j < C; j++) z[k] += x[t * C + j] * W[j * 4 * U + k];
            for (int64_t j = 0; j < U; j++) z[k] += h[j] * Uw[j * 4 * U + k];
        }
        for (int64_t u = 0; u < U; u++) {
            double i = sig(z[u]), f = sig(z[U + u]), g = tanh(z[2 * U + u]), o = sig(z[3 * U + u]);
            c[u] = f * c[u] + i * g;
            h[u] = o * tanh(c[u]);
            hs[t * U + u] = h[u];
        }
    }
}

static void test_lstm_values(kh_rng *r) {
    const int64_t B = 2, T = 4, C = 3, U = 2;
    double *x = gc_alloc(B * T * C), *W = gc_alloc(C * 4 * U), *Uw = gc_alloc(U * 4 * U), *b = gc_alloc(4 * U);
    gc_fill(x, B * T * C, r, -1, 1), gc_fill(W, C * 4 * U, r, -1, 1), gc_fill(Uw, U * 4 * U, r, -1, 1);
    gc_fill(b, 4 * U, r, -1, 1);
    double *h = gc_alloc(B * T * U), *c = gc_alloc(B * T * U), *g = gc_alloc(B * T * 4 * U);
    double *seq = gc_alloc(B * T * U), *last = gc_alloc(B * U), *want = gc_alloc(T * U);
    kh_ref_lstm_forward(seq, h, c, g, x, W, Uw, b, B, T, C, U, 1, 0);
    kh_ref_lstm_forward(last, h, c, g, x, W, Uw, b, B, T, C, U, 0, 0);
    for (int64_t n = 0; n < B; n++) {
        scalar_lstm(want, x + n * T * C, W, Uw, b, T, C, U);
        CHECK(max_abs_diff(seq + n * T * U, want, T * U) < 1e-14, "lstm sequence vs scalar Keras LSTM");
        CHECK(max_abs_diff(last + n * U, want + (T - 1) * U, U) < 1e-14, "lstm last step");
    }

    // Bidirectional: forward half = LSTM(x); backward half = LSTM(reverse(x)) re-reversed (sequences) or its
    // last step (the state after consuming x[0])
    double *W2 = gc_alloc(C * 4 * U), *U2 = gc_alloc(U * 4 * U), *b2 = gc_alloc(4 * U);
    gc_fill(W2, C * 4 * U, r, -1, 1), gc_fill(U2, U * 4 * U, r, -1, 1), gc_fill(b2, 4 * U, r, -1, 1);
    double *hh[2] = {gc_alloc(B * T * U), gc_alloc(B * T * U)}, *cc[2] = {gc_alloc(B * T * U), gc_alloc(B * T * U)};
    double *gg[2] = {gc_alloc(B * T * 4 * U), gc_alloc(B * T * 4 * U)};
    const double *Ws[2] = {W, W2}, *Us[2] = {Uw, U2}, *bs[2] = {b, b2};
    double *bseq = gc_alloc(B * T * 2 * U), *blast = gc_alloc(B * 2 * U), *xr = gc_alloc(T * C), *wr = gc_alloc(T * U);
    kh_ref_bilstm_forward(bseq, hh, cc, gg, x, Ws, Us, bs, B, T, C, U, 1);
    kh_ref_bilstm_forward(blast, hh, cc, gg, x, Ws, Us, bs, B, T, C, U, 0);
    for (int64_t n = 0; n < B; n++) {
        scalar_lstm(want, x + n * T * C, W, Uw, b, T, C, U);
        for (int64_t t = 0; t < T; t++) memcpy(xr + t * C, x + (n * T + T - 1 - t) * C, (size_t)C * sizeof(double));
        scalar_lstm(wr, xr, W2, U2, b2, T, C, U);
        int ok = 1;
        for (int64_t t = 0; t < T; t++)
            for (int64_t u = 0; u < U; u++) {
                ok &= fabs(bseq[(n * T + t) * 2 * U + u] - want[t * U + u]) < 1e-14;
                ok &= fabs(bseq[(n * T + t) * 2 * U + U + u] - wr[(T - 1 - t) * U + u]) < 1e-14;
            }
        CHECK(ok, "bilstm sequences: forward first, backward re-reversed to real time");
        ok = 1;
        for (int64_t u = 0; u < U; u++) {
            ok &= fabs(blast[n * 2 * U + u] - want[(T - 1) * U + u]) < 1e-14;
            ok &= fabs(blast[n * 2 * U + U + u] - wr[(T - 1) * U + u]) < 1e-14;
        }
        CHECK(ok, "bilstm last: forward's last step, backward's last processed step");
    }
    free(x), free(W), free(Uw), free(b), free(h), free(c), free(g), free(seq), free(last), free(want);
    free(W2), free(U2), free(b2), free(bseq), free(blast), free(xr), free(wr);
    for (int d = 0; d < 2; d++) free(hh[d]), free(cc[d]), free(gg[d]);
}

static void test_gap_dropout_values(kh_rng *r) {
    const double x[6] = {1, 2, 3, 4, 5, 9}; // (1, 3, 2)
    double y[2];
    kh_ref_gap1d_forward(y, x, 1, 3, 2);
    CHECK(y[0] == 3 && y[1] == 5, "gap1d mean over time");
    enum { N = 200000 };
    uint8_t *mask = malloc(N);
    double *in = gc_alloc(N), *out = gc_alloc(N);
    if (!mask) exit(2);
    for (int i = 0; i < N; i++) in[i] = 1.0;
    kh_ref_dropout_mask(mask, N, 0.3, r);
    kh_ref_dropout_forward(out, mask, in, N, 0.3);
    int64_t kept = 0, scaled = 1;
    for (int i = 0; i < N; i++) {
        kept += mask[i];
        scaled &= mask[i] ? fabs(out[i] - 1 / 0.7) < 1e-15 : out[i] == 0.0;
    }
    CHECK(fabs((double)kept / N - 0.7) < 0.005, "dropout keeps 1 - rate: %g", (double)kept / N);
    CHECK(scaled, "inverted dropout scales kept values by 1 / (1 - rate)");
    kh_ref_dropout_forward(out, NULL, in, N, 0.3);
    CHECK(out[0] == 1.0 && out[N - 1] == 1.0, "no mask: identity");
    free(mask), free(in), free(out);
}

int main(void) {
    kh_rng r;
    kh_rng_seed(&r, 7);
    test_dense_values();
    test_activation_values();
    test_conv_values(&r);
    test_pool_values();
    test_embedding_values();
    test_lstm_values(&r);
    test_gap_dropout_values(&r);
    return kh_test_finish("test_ref_forward");
}
