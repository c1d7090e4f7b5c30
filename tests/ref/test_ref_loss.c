/* tests/ref/test_ref_loss.c — the reference losses and accuracy.
 * Gradients: d(mean loss)/d(logits) of categorical cross-entropy through softmax and binary cross-entropy
 * through sigmoid against float64 central differences (tolerance GC_TOL, several shapes), including the
 * clipped regime where Keras's gradient is exactly zero. Values: hand-computed losses (-log p, clipping to
 * [1e-7, 1 - 1e-7]) to 1e-15 relative — tight enough to catch a clip done in float precision — and accuracy
 * rules (argmax takes the first maximum; binary 0.5 counts as class 0). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gradcheck.h"
#include "khost/kit/ref.h"
#include "testutil.h"

typedef struct lossctx {
    double *z, *p; // (B, C) logits and probabilities
    int32_t *y;    // (B)
    int64_t B, C;
    int binary;
} lossctx;

static double loss_of_logits(void *v) {
    lossctx *c = v;
    if (c->binary) {
        kh_ref_activation_forward(c->p, c->z, c->B, 1, KH_ACT_SIGMOID);
        return kh_ref_bce_forward(c->p, c->y, c->B);
    }
    kh_ref_activation_forward(c->p, c->z, c->B, c->C, KH_ACT_SOFTMAX);
    return kh_ref_cce_forward(c->p, c->y, c->B, c->C);
}

static void grad_case(kh_rng *r, int binary, int64_t B, int64_t C) {
    lossctx c = {0};
    c.binary = binary, c.B = B, c.C = binary ? 1 : C;
    c.z = gc_alloc(B * c.C), c.p = gc_alloc(B * c.C);
    double *g = gc_alloc(B * c.C);
    c.y = calloc((size_t)B, sizeof(int32_t));
    if (!c.y) exit(2);
    gc_fill(c.z, B * c.C, r, -3, 3);
    for (int64_t n = 0; n < B; n++) c.y[n] = (int32_t)gc_range(r, 0, binary ? 1 : C - 1);
    loss_of_logits(&c);
    if (binary) kh_ref_bce_backward(g, c.p, c.y, B);
    else kh_ref_cce_backward(g, c.p, c.y, B, C);
    char label[64];
    snprintf(label, sizeof label, "%s B%lld C%lld", binary ? "sigmoid+bce" : "softmax+cce", (long long)B,
             (long long)c.C);
    gc_tensor t = {"d_logits", c.z, g, B * c.C};
    gc_check(label, loss_of_logits, &c, &t, 1, GC_TOL);
    free(c.z), free(c.p), free(g), free(c.y);
}

// Where the clip binds the loss is flat: the analytic gradient must be exactly zero, like Keras's graph.
static void test_clipped(void) {
    double z[3] = {40, 0, 0}, p[3], g[3];
    int32_t y = 0;
    kh_ref_activation_forward(p, z, 1, 3, KH_ACT_SOFTMAX);
    double l = kh_ref_cce_forward(p, &y, 1, 3);
    CHECK(fabs(l + log(1 - 1e-7)) < 1e-20, "cce clipped at 1 - 1e-7: %.17g", l);
    kh_ref_cce_backward(g, p, &y, 1, 3);
    CHECK(g[0] == 0 && g[1] == 0 && g[2] == 0, "cce gradient zero where p_true > 1 - eps");
    y = 1; // p_true ~ 4e-18 < 1e-7
    l = kh_ref_cce_forward(p, &y, 1, 3);
    CHECK(fabs(l + log(1e-7)) < 1e-14, "cce clipped at 1e-7: %.17g", l);
    kh_ref_cce_backward(g, p, &y, 1, 3);
    CHECK(g[0] == 0 && g[1] == 0 && g[2] == 0, "cce gradient zero where p_true < eps");

    double zb = 40, pb, gb;
    int32_t yb = 0;
    kh_ref_activation_forward(&pb, &zb, 1, 1, KH_ACT_SIGMOID);
    l = kh_ref_bce_forward(&pb, &yb, 1);
    // Keras evaluates log(1 - clip(p)) with clip(p) = 1 - 1e-7 in floating point: the same expression here
    CHECK(fabs(l + log(1.0 - (1.0 - 1e-7))) < 1e-14, "bce clipped: %.17g", l);
    kh_ref_bce_backward(&gb, &pb, &yb, 1);
    CHECK(gb == 0, "bce gradient zero where clipped");
}

static void test_values(void) {
    const double p[6] = {0.2, 0.5, 0.3, 0.6, 0.1, 0.3};
    const int32_t y[2] = {1, 2};
    double want = (-log(0.5) - log(0.3)) / 2;
    double got = kh_ref_cce_forward(p, y, 2, 3);
    // 1e-15: a clip evaluated in float would be off by ~1e-8 here
    CHECK(fabs(got - want) <= 1e-15 * fabs(want), "cce mean over the batch: %.17g vs %.17g", got, want);
    const double q[4] = {0.8, 0.8, 0.25, 1.0};
    const int32_t yb[4] = {1, 0, 0, 0};
    want = (-log(0.8) - log(1.0 - 0.8) - log(1.0 - 0.25) - log(1.0 - (1.0 - 1e-7))) / 4;
    got = kh_ref_bce_forward(q, yb, 4);
    CHECK(fabs(got - want) <= 1e-14 * fabs(want), "bce mean with clipping: %.17g vs %.17g", got, want);

    const double pa[9] = {0.4, 0.4, 0.2, 0.1, 0.2, 0.7, 0.3, 0.3, 0.4};
    const int32_t ya[3] = {1, 2, 2};
    CHECK(kh_ref_accuracy_categorical(pa, ya, 3, 3) == 2, "argmax takes the first maximum (row 0 predicts 0)");
    const double pb[4] = {0.5, 0.5, 0.50001, 0.2};
    const int32_t yb2[4] = {0, 1, 1, 0};
    CHECK(kh_ref_accuracy_binary(pb, yb2, 4) == 3, "binary: 0.5 rounds to 0");
}

int main(void) {
    kh_rng r;
    kh_rng_seed(&r, 11);
    for (int k = 0; k < 4; k++) grad_case(&r, 0, gc_range(&r, 1, 5), gc_range(&r, 2, 7));
    grad_case(&r, 0, 3, 2);
    for (int k = 0; k < 3; k++) grad_case(&r, 1, gc_range(&r, 1, 8), 1);
    test_clipped();
    test_values();
    return kh_test_finish("test_ref_loss");
}
