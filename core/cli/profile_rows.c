/* core/cli/profile_rows.c — a backend's profile (kh_backend_api.profile) checked and printed.
 *
 * The check: the rows are written into host memory by a module, so nothing of them is read before the counts,
 * names and times are known to be what backend.h promises (a row count past the host's array would make the
 * printing read past it; a NaN would print as a figure).
 * The table: each layer row with FLOPs (kit/base/flops.c: the model's forward and backward per sample, x the
 * batch) shows its achieved GFLOP/s over its forward + backward time; a model with Conv2D layers gets the
 * convolutions' FLOPs per step over their time per step as a share of the device's FP32 peak (on the cpu the
 * calibrated SGEMM peak, devices/peak.h), by part where the backend split its gradients (ABI 1.5); and every
 * layer with FLOPs is shown part by part (forward, input gradient, weight gradient) against its floor, the
 * part's FLOPs at that peak. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/profile_rows.h"
#include "devices/peak.h"

kh_profile_grad *kh_prof_grads_new(int32_t cap) {
    kh_profile_grad *g = malloc(((size_t)(cap > 0 ? cap : 0) + 1) * sizeof *g);
    for (int32_t i = 0; g && i < cap; i++) g[i].input_s = g[i].weight_s = -1;
    return g;
}

static int bad_time(double t) { return !isfinite(t) || t < 0; }

/* the split of row i as the host reads it (grad_size is the host's own: the backend cannot change it) */
static const kh_profile_grad *grad_of(const kh_profile *pr, int32_t i) {
    return pr->grads ? (const kh_profile_grad *)pr->grads + i : NULL;
}

static int split(const kh_profile_grad *g) { return g && g->input_s >= 0 && g->weight_s >= 0; }

static int check_row(const kh_profile *pr, int32_t i, int32_t n_layers, char *why, size_t n) {
    const kh_profile_row *r = &pr->rows[i];
    if (!memchr(r->what, 0, sizeof r->what))
        return snprintf(why, n, "row %d: 'what' is not terminated within its %zu bytes", i, sizeof r->what), -1;
    if (r->layer < -1 || r->layer >= n_layers)
        return snprintf(why, n, "row %d (%s): layer %d, the model has %d", i, r->what, r->layer, n_layers), -1;
    const char *bad = bad_time(r->forward_s)    ? "forward_s"
                      : bad_time(r->backward_s) ? "backward_s"
                      : bad_time(r->optimizer_s) ? "optimizer_s"
                      : r->calls < 0             ? "calls"
                                                 : NULL;
    if (bad) return snprintf(why, n, "row %d (%s): %s is not a time or count >= 0", i, r->what, bad), -1;
    const kh_profile_grad *g = grad_of(pr, i);
    if (!g || (g->input_s == -1 && g->weight_s == -1)) return 0;
    if (bad_time(g->input_s) || bad_time(g->weight_s))
        return snprintf(why, n, "row %d (%s): the gradient split (input_s %g, weight_s %g) is neither two times "
                        ">= 0 nor unsplit (-1, -1)", i, r->what, g->input_s, g->weight_s), -1;
    /* the two are parts of backward_s, measured by the same clock: a rounding's worth over it at most */
    if (g->input_s + g->weight_s > r->backward_s * (1 + 1e-9) + 1e-12)
        return snprintf(why, n, "row %d (%s): input_s %.9g + weight_s %.9g s is more than backward_s %.9g s", i,
                        r->what, g->input_s, g->weight_s, r->backward_s), -1;
    return 0;
}

int kh_prof_check(const kh_profile *pr, int32_t cap_rows, int32_t n_layers, int32_t steps, char *why, size_t n) {
    if (pr->n_rows < 0 || pr->n_rows > cap_rows)
        return snprintf(why, n, "n_rows %d outside the %d rows the host gave", pr->n_rows, cap_rows), -1;
    if (pr->steps != steps) return snprintf(why, n, "steps %d, %d were asked for", pr->steps, steps), -1;
    if (bad_time(pr->total_s) || bad_time(pr->other_s))
        return snprintf(why, n, "total_s %g or other_s %g is not a time >= 0", pr->total_s, pr->other_s), -1;
    for (int32_t i = 0; i < pr->n_rows; i++)
        if (check_row(pr, i, n_layers, why, n) != 0) return -1;
    return 0;
}

/* GFLOP/s of `flops` per step done in `seconds` per step; 0 when there is no time to divide by. */
static double gflops_of(double flops, double seconds) { return seconds > 0 ? flops / seconds / 1e9 : 0; }

static const kh_layer_flops *flops_of(const kh_prof_flops *f, int32_t layer) {
    return f->layer && layer >= 0 && layer < f->n_layers ? &f->layer[layer] : NULL;
}

/* The layer's forward + backward FLOPs per training step (0: none counted). */
static double layer_step_flops(const kh_prof_flops *f, int32_t layer) {
    const kh_layer_flops *lf = flops_of(f, layer);
    return lf ? (lf->forward + lf->backward) * (double)f->batch : 0;
}

static int is_conv(const kh_prof_flops *f, const kh_profile_row *r) {
    return r->layer >= 0 && r->layer < f->n_layers && f->spec->layers[r->layer].kind == KH_LAYER_CONV2D;
}

static const char *peak_name(const kh_prof_flops *f) { return f->dev->kind == KH_DEVICE_CPU ? "SGEMM" : "FP32"; }

/* The convolutions' share of the peak by part, where every conv row was split: FLOP-weighted per part. */
static void print_conv_parts(const kh_profile *pr, const kh_prof_flops *f, double steps, double peak) {
    double fl[3] = {0}, s[3] = {0};
    for (int32_t i = 0; i < pr->n_rows; i++) {
        const kh_profile_row *r = &pr->rows[i];
        if (!is_conv(f, r)) continue;
        const kh_profile_grad *g = grad_of(pr, i);
        if (!split(g)) return;
        const kh_layer_flops *lf = flops_of(f, r->layer);
        double b = (double)f->batch;
        fl[0] += lf->forward * b, fl[1] += lf->input_grad * b, fl[2] += lf->weight_grad * b;
        s[0] += r->forward_s / steps, s[1] += g->input_s / steps, s[2] += g->weight_s / steps;
    }
    static const char *part[3] = {"forward", "input gradient", "weight gradient"};
    printf("  by part:");
    for (int k = 0; k < 3; k++) {
        if (fl[k] > 0 && s[k] > 0) printf(" %s %.1f %%%s", part[k], 100 * gflops_of(fl[k], s[k]) / peak, k < 2 ? "," : "");
        else printf(" %s -%s", part[k], k < 2 ? "," : "");
    }
    printf(" of the peak\n");
}

/* The convolutions' share of the peak: their FLOPs per step over their profiled forward + backward seconds per
 * step (FLOP-weighted: one ratio of sums, not a mean of the layers' ratios). Nothing when the model has none. */
static void print_conv_share(const kh_profile *pr, const kh_prof_flops *f, double steps, const kh_peak *pk, int have) {
    double flops = 0, secs = 0;
    int convs = 0;
    for (int32_t i = 0; i < pr->n_rows; i++) {
        const kh_profile_row *r = &pr->rows[i];
        if (!is_conv(f, r)) continue;
        convs++;
        flops += layer_step_flops(f, r->layer);
        secs += (r->forward_s + r->backward_s) / steps;
    }
    if (!convs || flops <= 0) return;
    if (secs <= 0) {
        printf("conv layers: no time measured in them\n");
        return;
    }
    double g = gflops_of(flops, secs);
    if (!have) {
        printf("conv layers: %.1f GFLOP/s (FLOP-weighted over forward and both gradients); the device's peak is "
               "unknown: %s\n", g, pk->source);
        return;
    }
    printf("conv layers: %.1f GFLOP/s, %.1f %% of the %.1f GFLOP/s %s peak (FLOP-weighted over forward and both "
           "gradients)\n", g, 100 * g / pk->gflops, pk->gflops, peak_name(f));
    print_conv_parts(pr, f, steps, pk->gflops);
    /* where the peak came from: a calibration taken beside other work understates the machine */
    printf("  peak: %s\n", pk->source);
}

/* One part of a layer against its floor: the part's FLOPs per step at the peak. */
static void print_part(const kh_profile_row *r, const char *part, double s_per_step, double flops, double peak) {
    printf("  %-6d %-12s %-16s %10.3f", r->layer, r->what, part, s_per_step * 1e3);
    if (flops > 0) {
        double floor_s = flops / (peak * 1e9);
        printf(" %10.3f %9.1f\n", floor_s * 1e3, s_per_step > 0 ? 100 * floor_s / s_per_step : 0);
    } else {
        printf(" %10s %9s\n", "-", "-");
    }
}

static void print_floors(const kh_profile *pr, const kh_prof_flops *f, double steps, double peak) {
    int any = 0;
    double b = (double)f->batch;
    for (int32_t i = 0; i < pr->n_rows; i++) {
        const kh_profile_row *r = &pr->rows[i];
        const kh_layer_flops *lf = flops_of(f, r->layer);
        if (!lf || lf->forward <= 0) continue;
        if (!any)
            printf("\nagainst the floor (a part's FLOPs at the %.1f GFLOP/s %s peak):\n  %-6s %-12s %-16s %10s %10s %9s\n",
                   peak, peak_name(f), "layer", "kind", "part", "ms", "floor ms", "% peak");
        any = 1;
        print_part(r, "forward", r->forward_s / steps, lf->forward * b, peak);
        const kh_profile_grad *g = grad_of(pr, i);
        if (split(g)) {
            print_part(r, "input gradient", g->input_s / steps, lf->input_grad * b, peak);
            print_part(r, "weight gradient", g->weight_s / steps, lf->weight_grad * b, peak);
        } else {
            print_part(r, "backward", r->backward_s / steps, lf->backward * b, peak);
        }
    }
}

void kh_prof_print(const kh_profile *pr, const char *backend, const char *task, const char *dev, int64_t batch,
                   int64_t warmup, const kh_prof_flops *f) {
    double steps = pr->steps > 0 ? pr->steps : 1, ms = 1e3 / steps;
    printf("khost profile: %s x %s x %s, batch %lld, %d steps after %lld warm-up: %.3f ms per step\n\n", backend, task,
           dev, (long long)batch, pr->steps, (long long)warmup, pr->total_s * ms);
    printf("%-6s %-12s %12s %12s %12s %7s %9s\n", "layer", "kind", "forward ms", "backward ms", "update ms", "share",
           "GFLOP/s");
    for (int32_t i = 0; i < pr->n_rows; i++) {
        const kh_profile_row *r = &pr->rows[i];
        if (r->layer < 0) continue;
        double all = r->forward_s + r->backward_s + r->optimizer_s;
        printf("%-6d %-12s %12.3f %12.3f %12.3f %6.1f%%", r->layer, r->what, r->forward_s * ms, r->backward_s * ms,
               r->optimizer_s * ms, pr->total_s > 0 ? 100 * all / pr->total_s : 0);
        /* achieved GFLOP/s of the layer's forward and backward, where it has FLOPs (optimizer work excluded) */
        double fl = layer_step_flops(f, r->layer), sec = (r->forward_s + r->backward_s) / steps;
        if (fl > 0 && sec > 0) printf(" %9.1f", gflops_of(fl, sec));
        else if (fl > 0) printf(" %9s", "-");
        printf("\n");
    }
    printf("%-19s %12.3f ms in no layer (loss, optimizer steps not attributed to a layer, staging)\n", "other",
           pr->other_s * ms);
    kh_peak pk = {.gflops = 0};
    /* no FLOP count, nothing to hold to the peak: no calibration either */
    int have = f->layer && kh_peak_get(f->dev, &pk) == 0 && pk.gflops > 0;
    print_conv_share(pr, f, steps, &pk, have);
    if (have) print_floors(pr, f, steps, pk.gflops);
    int any = 0;
    for (int32_t i = 0; i < pr->n_rows; i++) {
        const kh_profile_row *r = &pr->rows[i];
        if (r->layer >= 0) continue;
        if (!any)
            printf("\n%-26s %12s %12s %12s %10s\n", "op kind", "forward ms", "backward ms", "apply ms", "ops/step");
        any = 1;
        printf("%-26s %12.3f %12.3f %12.3f %10.1f\n", r->what, r->forward_s * ms, r->backward_s * ms,
               r->optimizer_s * ms, (double)r->calls);
    }
}
