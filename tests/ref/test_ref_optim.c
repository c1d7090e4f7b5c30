/* tests/ref/test_ref_optim.c — the reference optimizers against hand-computed values.
 * Three steps on w = [0.5, -1] with fixed gradients, for SGD (decay 0.5), RMSprop (decay 0.1), Adam
 * (decay 0.05, bias correction) and Adadelta (decay 0.2). The expected numbers were computed once with an
 * independent scalar script of the Keras 2 update rules (Python floats; printed to 17 digits) and are also
 * recomputed here by textbook code written out in the test. Tolerance 1e-14 relative (float64 round-off).
 * Sensitivity: the usual mistakes — ignoring decay, counting iterations after the update, dropping Adam's
 * bias correction, a float epsilon of 1e-8 — must each move the result by more than 1e-9. */
#include <math.h>
#include <string.h>

#include "khost/kit/ref.h"
#include "testutil.h"

static const double W0[2] = {0.5, -1.0};
static const double G[3][2] = {{0.1, -0.2}, {-0.3, 0.05}, {0.2, 0.4}};
#define EPS 1e-7

/* Hand-computed (independent script), after steps 1, 2, 3. */
static const double SGD_W[3][2] = {{0.48999999999999999, -0.97999999999999998},
                                   {0.51000000000000001, -0.98333333333333328},
                                   {0.5, -1.0033333333333332}};
static const double RMS_W[3][2] = {{0.46837732339799998, -0.9683772733982372},
                                   {0.49578741808416044, -0.97570292490120247},
                                   {0.48111893358464919, -0.99959485469842857}};
static const double ADAM_W[3][2] = {{0.49900003162177664, -0.99900001581113829},
                                    {0.49947068389911098, -0.99855291012864855},
                                    {0.49945360432132474, -0.9989182026488711}};
static const double ADADELTA_W[3][2] = {{0.4985859278377735, -0.99858582179164024},
                                        {0.50017093922900047, -0.99899989305442782},
                                        {0.49910304686427465, -1.0003058637098732}};

enum { SGD, RMS, ADAM, ADADELTA };

// The kit's path: a schedule per step, then the per-tensor update. `it_shift` and friends inject mistakes.
typedef struct variant {
    int ignore_decay, iter_after, no_bias_correction;
    double eps;
} variant;

static void run_kit(int opt, double lr, double rho_b1, double b2, double decay, variant v, double out[3][2]) {
    double w[2], s1[2] = {0, 0}, s2[2] = {0, 0};
    memcpy(w, W0, sizeof w);
    for (int64_t it = 0; it < 3; it++) {
        int64_t iters = v.iter_after ? it + 1 : it;
        double l = kh_ref_lr_decayed(lr, v.ignore_decay ? 0.0 : decay, iters);
        switch (opt) {
        case SGD: kh_ref_sgd_update(w, G[it], 2, l); break;
        case RMS: kh_ref_rmsprop_update(w, s1, G[it], 2, l, rho_b1, v.eps); break;
        case ADAM: {
            double lt = v.no_bias_correction ? l : kh_ref_adam_lr_t(l, rho_b1, b2, iters);
            kh_ref_adam_update(w, s1, s2, G[it], 2, lt, rho_b1, b2, v.eps);
            break;
        }
        default: kh_ref_adadelta_update(w, s1, s2, G[it], 2, l, rho_b1, v.eps); break;
        }
        memcpy(out[it], w, sizeof w);
    }
}

// Textbook code, written out without the kit.
static void run_textbook(int opt, double lr, double p1, double p2, double decay, double out[3][2]) {
    double w[2] = {W0[0], W0[1]}, a[2] = {0, 0}, b[2] = {0, 0};
    for (int it = 0; it < 3; it++) {
        double l = lr / (1.0 + decay * it);
        for (int k = 0; k < 2; k++) {
            double g = G[it][k];
            if (opt == SGD) {
                w[k] = w[k] - l * g;
            } else if (opt == RMS) {
                a[k] = p1 * a[k] + (1 - p1) * g * g;
                w[k] = w[k] - l * g / (sqrt(a[k]) + EPS);
            } else if (opt == ADAM) {
                double t = it + 1;
                a[k] = p1 * a[k] + (1 - p1) * g;
                b[k] = p2 * b[k] + (1 - p2) * g * g;
                w[k] = w[k] - l * sqrt(1 - pow(p2, t)) / (1 - pow(p1, t)) * a[k] / (sqrt(b[k]) + EPS);
            } else {
                a[k] = p1 * a[k] + (1 - p1) * g * g;
                double u = g * sqrt(b[k] + EPS) / sqrt(a[k] + EPS);
                w[k] = w[k] - l * u;
                b[k] = p1 * b[k] + (1 - p1) * u * u;
            }
        }
        memcpy(out[it], w, sizeof w);
    }
}

static double max_rel(double a[3][2], const double b[3][2]) {
    double m = 0;
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 2; k++) m = fmax(m, fabs(a[i][k] - b[i][k]) / fabs(b[i][k]));
    return isnan(m) ? INFINITY : m;
}

static void check_opt(const char *name, int opt, double lr, double p1, double p2, double decay, const double hand[3][2]) {
    variant ok = {0, 0, 0, EPS};
    double got[3][2], book[3][2];
    run_kit(opt, lr, p1, p2, decay, ok, got);
    run_textbook(opt, lr, p1, p2, decay, book);
    double e1 = max_rel(got, hand), e2 = max_rel(book, hand);
    printf("  %-9s kit vs hand %.2e, textbook vs hand %.2e (tol 1e-14)\n", name, e1, e2);
    CHECK(e1 <= 1e-14, "%s: kit vs hand-computed %.3e", name, e1);
    CHECK(e2 <= 1e-14, "%s: textbook vs hand-computed %.3e", name, e2);
    // sensitivity: each mistake must be visible
    variant bad[4] = {{1, 0, 0, EPS}, {0, 1, 0, EPS}, {0, 0, 1, EPS}, {0, 0, 0, 1e-8}};
    static const char *what[4] = {"decay ignored", "iterations counted after", "no bias correction", "eps 1e-8"};
    for (int k = 0; k < 4; k++) {
        if (k == 2 && opt != ADAM) continue;
        if (k == 3 && opt == SGD) continue; // SGD has no epsilon
        double wrong[3][2];
        run_kit(opt, lr, p1, p2, decay, bad[k], wrong);
        double e = max_rel(wrong, hand);
        CHECK(e > 1e-9, "%s: the test cannot see '%s' (%.3e)", name, what[k], e);
    }
}

int main(void) {
    check_opt("sgd", SGD, 0.1, 0, 0, 0.5, SGD_W);
    check_opt("rmsprop", RMS, 0.01, 0.9, 0, 0.1, RMS_W);
    check_opt("adam", ADAM, 0.001, 0.9, 0.999, 0.05, ADAM_W);
    check_opt("adadelta", ADADELTA, 1.0, 0.95, 0, 0.2, ADADELTA_W);
    // Adam's first step moves each weight by ~lr in the gradient's direction (bias correction at work)
    CHECK(fabs(ADAM_W[0][0] - (0.5 - 0.001)) < 1e-7, "adam first step ~ lr * sign(g)");
    CHECK(fabs(kh_ref_adam_lr_t(1.0, 0.9, 0.999, 0) - sqrt(0.001) / 0.1) < 1e-15, "adam lr_t at t = 1");
    CHECK(kh_ref_lr_decayed(1.0, 0.5, 2) == 0.5, "decay: lr / (1 + decay * iterations)");
    return kh_test_finish("test_ref_optim");
}
