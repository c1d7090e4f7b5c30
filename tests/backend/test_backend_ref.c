/* tests/backend/test_backend_ref.c — the conformance suite: one backend ($KHOST_TEST_PLUGIN, default cntk) on one
 * device ($KHOST_TEST_DEVICE: cpu, the default, or cuda:N; $KHOST_TEST_MATH: fp32, the default, or tf32) against
 * the float64 reference kit (khost/kit/ref.h), through one case list whatever the device, as ggml's
 * test-backend-ops runs one op list on the backend it is given. tests/backend/CMakeLists.txt registers it for
 * every bundled plugin on the cpu and on cuda:0. The cases:
 *   kernel/<k>    one layer kind (activation, padding, input path) at a time: the training-mode forward output,
 *                 the input gradient and every parameter gradient (probes, dropout off), from two backward calls
 *                 after the one forward (backend.h allows it: the second must not see the first's scratch);
 *   model/<m>, bench/<m>  the small models (every layer kind, activation, loss, optimizer and input path: f32,
 *                 NCHW images, embedding indices, one-hot as a row lookup, one-hot expanded) and the six
 *                 benchmark models at a small batch: weights set read back bit-identical, the probes, three training
 *                 steps (a short batch in the middle) comparing the loss, the correct count and every weight,
 *                 an evaluation batch, predict, then the failure paths: an index outside the vocabulary and a
 *                 label outside the classes are KH_ERR_INVALID naming them, and the model trains after them;
 *   dropout_stream/<m>  dropout on, same seed: identical masks, where the backend draws the reference kit's
 *                 stream (cntk on the cpu; tensorflow's counter-based masks are tested in tests/tensorflow);
 *   dropout       dropout on, by its properties: the kept fraction, the inverted scaling, the backward using the
 *                 forward's mask, a new mask for the next forward;
 *   deterministic deterministic = 1 gives bit-identical weights run to run (a conv with asymmetric 'same'
 *                 padding, an embedding backward with many repeated rows);
 *   sync_each     the backend's switch that synchronises and checks after every layer or op (kb_traits) trains
 *                 to the same results;
 *   oom           an impossible allocation is KH_ERR_NOMEM with a message, and the session still trains after it
 *                 (cuda only: on the cpu it would ask the kernel for terabytes);
 *   survives      after all of that, one more model trains to the reference.
 * $KHOST_TEST_CASES (comma-separated substrings) runs the matching cases only. The benchmark models (bench/) run
 * on cuda by default and on the cpu when selected (test_backend_ref_<plugin>_bench: the float64 side takes ten
 * to thirty seconds there, too long for every core type and thread count).
 * Before the device opens (on any machine) it checks its prerequisites — the module loads, the reference kit
 * builds every model — and prints "prerequisites ok" (tools/gpu-check.sh requires that line). Where the module
 * reports the device kind unavailable, every case is printed "not reached" with the reason and the program
 * exits 77 (ctest: Skipped): a case that did not run never counts as passed.
 * Tolerances: float32 against float64, normalised by the reference tensor's largest magnitude (kb_compare); on
 * cuda looser, as cuDNN may pick Winograd/FFT convolutions and reduces in other orders, and looser again with
 * TF32. Outputs are NaN-filled first (and device buffers where the backend can: kb_traits.poison_env) so an
 * element a kernel forgets to write fails. Seeds: fixed on the cpu, from the clock on cuda (printed);
 * $KHOST_TEST_SEED fixes them. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_specs.h"
#include "parity.h"
#include "khost/kit/ref.h"
#include "khost/kit/rng.h"
#include "khost/kit/spec.h"
#include "khost/kit/status.h"
#include "testutil.h"

static kb_backend B;
static uint64_t g_seed; /* 0 on the cpu by default: the seeds below as they are */
static const kb_traits *g_tr;

/* How close each device must come (see the header). */
typedef struct profile {
    double probe_tol, step_tol; /* kb_compare of probes, of weights after steps and predict */
    double loss_rtol;           /* mean loss against the reference: rtol * |ref| + 1e-6 */
    double correct_slack;       /* correct count: a near-tie may round either way in FP32 off the cpu */
    int adaptive;               /* weights of adaptive optimizers compared by compare_stepped */
} profile;
static profile g_p;

static profile profile_of(void) {
    if (!kb_device_is_cuda()) return (profile){2e-5, 2e-4, 1e-5, 0.5, 0};
    int graph = strcmp(kb_plugin_name(), "cntk") != 0; /* tensorflow, theano: the GPU reduces in another order */
    profile p = {1e-4, 1e-3, graph ? 1e-3 : 1e-4, graph ? 1.0 : 0.5, graph};
    if (kb_device_math() == KH_MATH_TF32) { /* inputs rounded to a 10-bit mantissa: not measured on a GPU yet */
        p.probe_tol = 5e-3, p.step_tol = 2e-2, p.loss_rtol = 1e-2, p.correct_slack = 1.0;
    }
    return p;
}

// --- the comparisons ---------------------------------------------------------------------------------------
/* Weights after optimizer steps. SGD is linear in the gradient: within tol. RMSprop, Adam and Adadelta divide
 * each gradient element by its own running magnitude, so an element whose gradient is rounding noise around
 * zero takes a step of up to about lr in a direction the summation order decides. Where the profile says so,
 * every element must lie within tol plus the two sides' own movements (no jump beyond what a step explains),
 * and the elements the reference moved confidently (at least half its largest move in the tensor: a gradient
 * well above the noise) must move the same way, by the same total within 10% — a kernel that does not step,
 * steps the wrong way or at the wrong scale fails. adaptive: 0 SGD, 1 an adaptive optimizer (so compared where
 * the profile says), 2 one on a benchmark model (so compared on every device: their wide layers put elements in
 * that noise on the cpu too, for all three backends alike). */
static void compare_stepped(const char *model, const char *what, const float *dev, const double *ref, const float *w0,
                            int64_t n, int adaptive) {
    if (!adaptive || (adaptive == 1 && !g_p.adaptive)) {
        kb_compare(model, what, dev, ref, n, g_p.step_tol, g_seed);
        return;
    }
    double mx = 1e-3, big = 0.0, mov_d = 0.0, mov_r = 0.0;
    int64_t bad = 0, sure = 0, same = 0;
    for (int64_t i = 0; i < n; i++) {
        if (fabs(ref[i]) > mx) mx = fabs(ref[i]);
        if (fabs(ref[i] - w0[i]) > big) big = fabs(ref[i] - w0[i]);
    }
    for (int64_t i = 0; i < n; i++) {
        double dr = ref[i] - w0[i], dd = (double)dev[i] - w0[i];
        if (isnan(dev[i]) || fabs(dd - dr) > g_p.step_tol * mx + fabs(dr) + fabs(dd)) bad++;
        if (big > 0.0 && fabs(dr) >= 0.5 * big) {
            sure++;
            same += (dr > 0) == (dd > 0);
            mov_r += fabs(dr), mov_d += fabs(dd);
        }
    }
    CHECK(bad == 0, "%s %s: %lld of %lld elements beyond what a step explains (seed %llu)", model, what, (long long)bad,
          (long long)n, (unsigned long long)g_seed);
    CHECK(10 * same >= 9 * sure, "%s %s: %lld of %lld confidently moved elements moved the same way (seed %llu)", model,
          what, (long long)same, (long long)sure, (unsigned long long)g_seed);
    CHECK(mov_r == 0.0 || fabs(mov_d - mov_r) <= 0.1 * mov_r, "%s %s: their movement %.4g vs %.4g (seed %llu)", model,
          what, mov_d, mov_r, (unsigned long long)g_seed);
}

/* The backend's metrics of one phase (read and reset) against the reference's mean loss and correct count. */
static void metrics_equal(const char *name, const char *when, uint32_t phase, kh_bmodel *m, int64_t n, double ref_loss,
                          int64_t ref_correct) {
    kh_metrics a = {NAN, NAN, -1};
    CHECK(B.api->read_metrics(m, phase, &a, 1) == KH_OK, "%s read_metrics: %s", name, B.api->last_error(B.s));
    CHECK(a.samples == n, "%s %s: %lld samples counted, expected %lld", name, when, (long long)a.samples, (long long)n);
    double loss = a.loss_sum / (double)(n > 0 ? n : 1);
    CHECK(fabs(loss - ref_loss) <= g_p.loss_rtol * fabs(ref_loss) + 1e-6, "%s %s mean loss %.9g vs %.9g (seed %llu)",
          name, when, loss, ref_loss, (unsigned long long)g_seed);
    CHECK(fabs(a.correct - (double)ref_correct) < g_p.correct_slack + 1e-9, "%s %s correct %.0f vs %lld", name, when,
          a.correct, (long long)ref_correct);
}

/* The output tensor of a batch of n: NHWC for an image output (the backend converts). */
static kh_tensor out_tensor(const kh_layer_shapes *last, int64_t n, int64_t *dims, float *data) {
    dims[0] = n;
    for (int i = 0; i < 3; i++) dims[i + 1] = last->out_shape[i];
    return kb_tensor(KH_F32, last->out_rank == 3 ? KH_LAYOUT_NHWC : KH_LAYOUT_ANY, last->out_rank + 1, dims, data);
}

// --- a model and its reference, from the same weights ------------------------------------------------------
typedef struct pair {
    const kh_model_spec *sp;
    kh_bmodel *m;
    kh_ref_model *rm;
    float **w0; /* the weights set, per layer and slot */
} pair;

static void pair_free(pair *p) {
    kb_free_weights(p->sp, p->w0);
    if (p->m) B.api->model_free(p->m);
    kh_ref_model_free(p->rm);
    memset(p, 0, sizeof *p);
}

/* Compile sp on the backend and the kit, the same weights into both, and check they read back bit-identical
 * (the layout mappings round-trip). 0; 1 when the backend refuses the model as unsupported (tolerated); -1. */
static int pair_open(pair *p, const kh_model_spec *sp, int max_batch, int deterministic, int unsupported_ok) {
    memset(p, 0, sizeof *p);
    p->sp = sp;
    kh_compile_opts o = {.struct_size = sizeof o, .max_batch = max_batch, .seed = 7, .deterministic = deterministic};
    kh_status st = B.api->compile(B.s, sp, &o, &p->m);
    if (st == KH_ERR_UNSUPPORTED && unsupported_ok) {
        printf("%s: not supported by %s: %s\n", sp->name, kb_plugin_name(), B.api->last_error(B.s));
        p->m = NULL;
        return 1;
    }
    CHECK(st == KH_OK && p->m, "%s compile: %s", sp->name, B.api->last_error(B.s));
    char err[256];
    kh_status rs = kh_ref_model_create(sp, &p->rm, err, sizeof err);
    CHECK(rs == KH_OK, "%s reference: %s", sp->name, err);
    if (st != KH_OK || rs != KH_OK || kb_init_weights(&B, p->m, sp, 99 ^ g_seed, &p->w0) != 0) {
        CHECK(0, "%s: setup failed: %s", sp->name, p->m ? B.api->last_error(B.s) : "");
        pair_free(p);
        return -1;
    }
    const kh_model_shapes *sh = kh_ref_model_shapes(p->rm);
    for (int l = 0; l < sh->n_layers; l++)
        for (int s = 0; s < sh->layers[l].n_params; s++) {
            const kh_param_shape *ps = &sh->layers[l].params[s];
            const float *w = p->w0[l * KH_MAX_SLOTS + s];
            kh_ref_model_set_weight_f32(p->rm, l, s, w, ps->numel);
            float *back = kb_nan_floats(ps->numel);
            kh_tensor tb = kb_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, back);
            CHECK(back && B.api->get_weight(p->m, l, s, &tb) == KH_OK, "%s get_weight %d/%d: %s", sp->name, l, s,
                  B.api->last_error(B.s));
            CHECK(back && !memcmp(back, w, (size_t)ps->numel * sizeof *back), "%s w[%d][%d] (%s) read back as set",
                  sp->name, l, s, ps->name);
            free(back);
        }
    if (!deterministic) kh_ref_model_set_dropout(p->rm, 1, 7); /* the compile seed: cntk draws the kit's stream */
    return 0;
}

/* forward output, input gradient, every parameter gradient, from two backward calls after one forward */
static void probes(pair *p, int64_t n) {
    const kh_model_spec *sp = p->sp;
    kh_rng r;
    kh_rng_seed(&r, 1234 ^ g_seed);
    kb_batch bt;
    kb_make_batch(&bt, sp, n, &r);
    const kh_model_shapes *sh = kh_ref_model_shapes(p->rm);
    const kh_layer_shapes *last = &sh->layers[sh->n_layers - 1];
    int64_t on = n * last->out_numel, od[4];
    float *out = kb_nan_floats(on), *dy = kb_nan_floats(on), *dx = NULL;
    double *dyd = malloc((size_t)(on > 0 ? on : 1) * sizeof(double));
    CHECK(out && dy && dyd, "%s probe buffers", sp->name);
    if (!out || !dy || !dyd) goto done;
    kh_tensor tout = out_tensor(last, n, od, out), tdy = out_tensor(last, n, od, dy);
    CHECK(B.api->forward(p->m, &bt.x_backend, &tout) == KH_OK, "%s forward: %s", sp->name, B.api->last_error(B.s));
    CHECK(kh_ref_model_forward(p->rm, &bt.x_nhwc, 1) == KH_OK, "%s ref forward", sp->name);
    kb_compare(sp->name, "forward output", out, kh_ref_model_output(p->rm, NULL), on, g_p.probe_tol, g_seed);
    kb_fill_uniform(dy, on, -1.0f, 1.0f, &r);
    for (int64_t i = 0; i < on; i++) dyd[i] = dy[i];
    CHECK(kh_ref_model_backward(p->rm, dyd) == KH_OK, "%s ref backward", sp->name);
    kh_tensor tdx, *pdx = NULL;
    for (int pass = 0; pass < 2; pass++) {
        const char *tag = pass ? " (2nd backward)" : "";
        for (int64_t i = 0; i < on; i++) dy[i] = (float)dyd[i]; /* the same dy, whatever the first pass did */
        if (sp->input_dtype == KH_F32) {
            free(dx);
            dx = kb_nan_floats(bt.n * bt.per);
            tdx = bt.x_nhwc; /* ask for NHWC back: the backend converts */
            tdx.data = dx;
            pdx = dx ? &tdx : NULL;
        }
        CHECK(B.api->backward(p->m, &tdy, pdx) == KH_OK, "%s backward%s: %s", sp->name, tag, B.api->last_error(B.s));
        char what[128];
        snprintf(what, sizeof what, "input gradient%s", tag);
        if (dx) kb_compare(sp->name, what, dx, kh_ref_model_input_grad(p->rm), bt.n * bt.per, g_p.probe_tol, g_seed);
        for (int l = 0; l < sh->n_layers; l++)
            for (int s = 0; s < sh->layers[l].n_params; s++) {
                const kh_param_shape *ps = &sh->layers[l].params[s];
                float *g = kb_nan_floats(ps->numel);
                kh_tensor tg = kb_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, g);
                CHECK(g && B.api->get_grad(p->m, l, s, &tg) == KH_OK, "%s get_grad %d/%d: %s", sp->name, l, s,
                      B.api->last_error(B.s));
                snprintf(what, sizeof what, "grad %s[%d].%s%s", kh_layer_kind_name(sp->layers[l].kind), l, ps->name,
                         tag);
                if (g) kb_compare(sp->name, what, g, kh_ref_model_grad(p->rm, l, s), ps->numel, g_p.probe_tol, g_seed);
                free(g);
            }
    }
done:
    free(out), free(dy), free(dyd), free(dx);
    kb_free_batch(&bt);
}

static int synced(kh_bmodel *m) { return !B.api->sync || B.api->sync(m) == KH_OK; }

/* `steps` training steps (the second on a short batch), each compared; then an evaluation batch, predict and,
 * with `refuse`, the refused inputs. */
static void steps(pair *p, const char *name, int max_batch, int nsteps, int refuse, int adaptive_any) {
    const kh_model_spec *sp = p->sp;
    kh_rng r;
    kh_rng_seed(&r, 777 ^ g_seed);
    const kh_model_shapes *sh = kh_ref_model_shapes(p->rm);
    int adaptive = sp->optimizer.kind != KH_OPT_SGD ? 1 + adaptive_any : 0;
    for (int step = 0; step < nsteps; step++) {
        kb_batch bt;
        kb_make_batch(&bt, sp, step == 1 ? (max_batch + 1) / 2 : max_batch, &r);
        int64_t yd[1] = {bt.n};
        kh_tensor ty = kb_tensor(KH_I32, KH_LAYOUT_NC, 1, yd, bt.labels);
        CHECK(B.api->train_batch(p->m, &bt.x_backend, &ty) == KH_OK, "%s train_batch: %s", name, B.api->last_error(B.s));
        double ref_loss = 0;
        int64_t ref_correct = 0;
        CHECK(kh_ref_model_train_step(p->rm, &bt.x_nhwc, bt.labels, &ref_loss, &ref_correct) == KH_OK,
              "%s ref step: %s", name, kh_ref_model_last_error(p->rm));
        char when[32];
        snprintf(when, sizeof when, "step %d", step + 1);
        CHECK(synced(p->m), "%s sync: %s", name, B.api->last_error(B.s));
        metrics_equal(name, when, KH_PHASE_TRAIN, p->m, bt.n, ref_loss, ref_correct);
        for (int l = 0; l < sh->n_layers; l++)
            for (int s = 0; s < sh->layers[l].n_params; s++) {
                const kh_param_shape *ps = &sh->layers[l].params[s];
                float *w = kb_nan_floats(ps->numel);
                kh_tensor tw = kb_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, w);
                CHECK(w && B.api->get_weight(p->m, l, s, &tw) == KH_OK, "%s get_weight", name);
                char what[96];
                snprintf(what, sizeof what, "%s %s[%d].%s", when, kh_layer_kind_name(sp->layers[l].kind), l, ps->name);
                if (w)
                    compare_stepped(name, what, w, kh_ref_model_weight(p->rm, l, s), p->w0[l * KH_MAX_SLOTS + s],
                                    ps->numel, adaptive);
                free(w);
            }
        kb_free_batch(&bt);
    }
    kb_batch bt;
    kb_make_batch(&bt, sp, max_batch > 4 ? 4 : max_batch, &r);
    int64_t yd[1] = {bt.n};
    kh_tensor ty = kb_tensor(KH_I32, KH_LAYOUT_NC, 1, yd, bt.labels);
    CHECK(B.api->eval_batch(p->m, &bt.x_backend, &ty) == KH_OK, "%s eval: %s", name, B.api->last_error(B.s));
    double ref_loss = 0;
    int64_t ref_correct = 0;
    CHECK(kh_ref_model_forward(p->rm, &bt.x_nhwc, 0) == KH_OK, "%s ref eval forward", name);
    kh_ref_model_loss(p->rm, bt.labels, &ref_loss, &ref_correct);
    CHECK(synced(p->m), "%s sync: %s", name, B.api->last_error(B.s));
    metrics_equal(name, "eval", KH_PHASE_EVAL, p->m, bt.n, ref_loss, ref_correct);
    if (refuse) {
        const kh_layer_shapes *last = &sh->layers[sh->n_layers - 1];
        int64_t on = bt.n * last->out_numel, od[4];
        float *y = kb_nan_floats(on);
        kh_tensor tp = out_tensor(last, bt.n, od, y);
        CHECK(y && B.api->predict(p->m, &bt.x_backend, &tp) == KH_OK, "%s predict: %s", name, B.api->last_error(B.s));
        if (y) kb_compare(name, "predict", y, kh_ref_model_output(p->rm, NULL), on, g_p.step_tol, g_seed);
        free(y);
        /* bad input is refused on the host while staging, and the model still trains */
        if (bt.x_backend.dtype == KH_I32) { /* an expanded one-hot input carries no index to refuse */
            int32_t keep = bt.xi[0];
            bt.xi[0] = sp->input_onehot > 0 ? sp->input_onehot : sp->layers[0].input_dim;
            CHECK(B.api->train_batch(p->m, &bt.x_backend, &ty) == KH_ERR_INVALID &&
                      strstr(B.api->last_error(B.s), "index"),
                  "%s: an index outside the vocabulary is KH_ERR_INVALID: %s", name, B.api->last_error(B.s));
            bt.xi[0] = keep;
        }
        int32_t lab = bt.labels[0];
        bt.labels[0] = sp->n_classes > 1 ? sp->n_classes : 2;
        CHECK(B.api->eval_batch(p->m, &bt.x_backend, &ty) == KH_ERR_INVALID && strstr(B.api->last_error(B.s), "label"),
              "%s: a label outside the classes is KH_ERR_INVALID: %s", name, B.api->last_error(B.s));
        bt.labels[0] = lab;
        CHECK(B.api->train_batch(p->m, &bt.x_backend, &ty) == KH_OK, "%s: trains after refused input: %s", name,
              B.api->last_error(B.s));
        CHECK(synced(p->m), "%s sync: %s", name, B.api->last_error(B.s));
    }
    kb_free_batch(&bt);
}

// --- the cases -----------------------------------------------------------------------------------------------
typedef enum { C_KERNEL, C_MODEL, C_DROPOUT_STREAM, C_DROPOUT, C_DETERMINISTIC, C_SYNC_EACH, C_OOM, C_SURVIVES } ckind;
typedef struct tcase {
    char name[80];
    ckind kind;
    const kh_model_spec *sp;
    int max_batch;
    int bench; /* a benchmark model: the backend may refuse it as unsupported; on the cpu only when selected */
} tcase;

/* NULL where the case runs on this backend and device; else why not (it then counts neither way). */
static const char *not_applicable(const tcase *c) {
    int cuda = kb_device_is_cuda();
    switch (c->kind) {
    case C_DROPOUT_STREAM:
        return !cuda && !strcmp(kb_plugin_name(), "cntk") ? NULL : "the backend does not draw the kit's mask stream here";
    case C_SYNC_EACH: return cuda && g_tr->sync_env ? NULL : "no per-layer check switch on this device";
    case C_OOM: return cuda ? NULL : "the cpu would ask the kernel for terabytes";
    default: return NULL;
    }
}

/* deterministic = 1: train a fresh model from the same weights on the same batches; every weight after three
 * steps into *out (malloc'ed, *n floats) */
static int train_fixed(const kh_model_spec *sp, float **out, int64_t *n) {
    *out = NULL;
    *n = 0;
    pair p;
    if (pair_open(&p, sp, 6, 1, 0) != 0) return -1;
    kh_rng r;
    kh_rng_seed(&r, 0xde7 ^ g_seed);
    int rc = 0;
    for (int step = 0; step < 3 && rc == 0; step++) {
        kb_batch bt;
        kb_make_batch(&bt, sp, step == 1 ? 3 : 6, &r);
        int64_t yd[1] = {bt.n};
        kh_tensor ty = kb_tensor(KH_I32, KH_LAYOUT_NC, 1, yd, bt.labels);
        if (B.api->train_batch(p.m, &bt.x_backend, &ty) != KH_OK) rc = -1;
        kb_free_batch(&bt);
    }
    const kh_model_shapes *sh = kh_ref_model_shapes(p.rm);
    int64_t total = 0;
    for (int l = 0; l < sh->n_layers; l++)
        for (int s = 0; s < sh->layers[l].n_params; s++) total += sh->layers[l].params[s].numel;
    float *all = malloc((size_t)(total > 0 ? total : 1) * sizeof(float));
    if (!all) rc = -1;
    int64_t at = 0;
    for (int l = 0; rc == 0 && l < sh->n_layers; l++)
        for (int s = 0; rc == 0 && s < sh->layers[l].n_params; s++) {
            const kh_param_shape *ps = &sh->layers[l].params[s];
            kh_tensor tw = kb_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, all + at);
            if (B.api->get_weight(p.m, l, s, &tw) != KH_OK) rc = -1;
            at += ps->numel;
        }
    *out = all;
    *n = total;
    pair_free(&p);
    return rc;
}

static void deterministic(const kh_model_spec *specs, int n) {
    for (int i = 0; i < n; i++) {
        float *a = NULL, *b = NULL;
        int64_t na = 0, nb = 0;
        int ra = train_fixed(&specs[i], &a, &na), rb = train_fixed(&specs[i], &b, &nb);
        CHECK(ra == 0 && rb == 0, "%s: training failed: %s", specs[i].name, B.api->last_error(B.s));
        if (ra == 0 && rb == 0) {
            int64_t diff = 0;
            for (int64_t k = 0; k < na && k < nb; k++) diff += memcmp(&a[k], &b[k], sizeof(float)) != 0;
            CHECK(na == nb && diff == 0, "%s: two deterministic runs differ in %lld of %lld weights", specs[i].name,
                  (long long)diff, (long long)na);
        }
        free(a), free(b);
    }
}

/* Two allocations no device holds: a 2 TiB activation (a wide Dense at a huge batch) and 2^36 weights. */
static void out_of_memory(void) {
    const kh_layer_spec wide = {.kind = KH_LAYER_DENSE, .units = 1 << 20};
    const kh_layer_spec huge = {.kind = KH_LAYER_DENSE, .units = 1 << 20, .activation = KH_ACT_SOFTMAX};
    kh_model_spec sp[2] = {
        {.struct_size = sizeof sp[0], .name = "oom_activation", .input_dtype = KH_F32, .input_rank = 1,
         .input_shape = {1}, .n_layers = 1, .layers = &wide, .loss = KH_LOSS_NONE,
         .optimizer = {.kind = KH_OPT_SGD, .lr = 0.1f}},
        {.struct_size = sizeof sp[1], .name = "oom_weights", .input_dtype = KH_F32, .input_rank = 1,
         .input_shape = {1 << 16}, .n_layers = 1, .layers = &huge, .loss = KH_LOSS_CATEGORICAL_CROSSENTROPY,
         .optimizer = {.kind = KH_OPT_SGD, .lr = 0.1f}, .n_classes = 1 << 20},
    };
    int batch[2] = {1 << 19, 2};
    for (int i = 0; i < 2; i++) {
        kh_compile_opts o = {.struct_size = sizeof o, .max_batch = batch[i], .seed = 7, .deterministic = 1};
        kh_bmodel *m = NULL;
        kh_status st = B.api->compile(B.s, &sp[i], &o, &m);
        const char *e = B.api->last_error(B.s);
        CHECK(st == KH_ERR_NOMEM && m == NULL && strstr(e, g_tr->oom_says), "%s: status %d, message naming '%s': %s",
              sp[i].name, (int)st, g_tr->oom_says, e);
        printf("out-of-memory message: %s\n", e);
        if (m) B.api->model_free(m);
    }
}

/* 0: it ran; 1: the backend refused its model as unsupported (printed; neither a pass nor a failure) */
static int run_case(const tcase *c) {
    pair p;
    int rc;
    switch (c->kind) {
    case C_KERNEL:
        if (pair_open(&p, c->sp, c->max_batch, 1, 0) == 0) probes(&p, c->max_batch - 1);
        break;
    case C_MODEL:
        rc = pair_open(&p, c->sp, c->max_batch, 1, c->bench);
        if (rc == 1) return 1;
        if (rc == 0) {
            probes(&p, c->max_batch - 1);
            steps(&p, c->sp->name, c->max_batch, 3, 1, c->bench);
        }
        break;
    case C_DROPOUT_STREAM:
        if (pair_open(&p, c->sp, c->max_batch, 0, 0) == 0) steps(&p, c->name, c->max_batch, 2, 0, 0);
        break;
    case C_DROPOUT: kb_check_dropout(&B, kb_caps()->image_layout, g_seed ^ 0xd0); return 0;
    case C_DETERMINISTIC: deterministic(c->sp, c->max_batch); return 0;
    case C_SYNC_EACH:
        setenv(g_tr->sync_env, "1", 1);
        if (pair_open(&p, c->sp, 6, 1, 0) == 0) steps(&p, c->name, 6, 2, 0, 0);
        unsetenv(g_tr->sync_env);
        break;
    case C_OOM: out_of_memory(); return 0;
    case C_SURVIVES:
        if (pair_open(&p, c->sp, 6, 1, 0) == 0) steps(&p, c->name, 6, 1, 0, 0);
        break;
    }
    pair_free(&p);
    return 0;
}

#define NOLOSS KH_LOSS_NONE, kb_opt(KH_OPT_SGD, 0.1f, 0), 0
static const kh_layer_spec k_dense[] = {KB_L(.kind = KH_LAYER_DENSE, .units = 37, .activation = KH_ACT_RELU)};
static const kh_layer_spec k_dense_sm[] = {KB_L(.kind = KH_LAYER_DENSE, .units = 45, .activation = KH_ACT_SOFTMAX)};
static const kh_layer_spec k_dense_sig[] = {KB_L(.kind = KH_LAYER_DENSE, .units = 9, .activation = KH_ACT_SIGMOID)};
static const kh_layer_spec k_dense_tanh[] = {KB_L(.kind = KH_LAYER_DENSE, .units = 130, .activation = KH_ACT_TANH)};
static const kh_layer_spec k_conv_valid[] = {
    KB_L(.kind = KH_LAYER_CONV2D, .units = 32, .kernel = {3, 3}, .activation = KH_ACT_RELU)};
static const kh_layer_spec k_conv_same[] = {
    KB_L(.kind = KH_LAYER_CONV2D, .units = 16, .kernel = {3, 3}, .padding = KH_PAD_SAME, .activation = KH_ACT_TANH)};
static const kh_layer_spec k_conv_asym[] = {
    KB_L(.kind = KH_LAYER_CONV2D, .units = 5, .kernel = {2, 3}, .strides = {2, 2}, .padding = KH_PAD_SAME)};
static const kh_layer_spec k_pool[] = {KB_L(.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2})};
static const kh_layer_spec k_pool_same[] = {
    KB_L(.kind = KH_LAYER_MAXPOOL2D, .kernel = {3, 3}, .strides = {2, 2}, .padding = KH_PAD_SAME)};
static const kh_layer_spec k_act_relu[] = {KB_L(.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_RELU)};
static const kh_layer_spec k_act_sig[] = {KB_L(.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_SIGMOID)};
static const kh_layer_spec k_act_tanh[] = {KB_L(.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_TANH)};
static const kh_layer_spec k_act_sm[] = {KB_L(.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_SOFTMAX)};
static const kh_layer_spec k_flatten[] = {KB_L(.kind = KH_LAYER_FLATTEN)};
static const kh_layer_spec k_embed[] = {KB_L(.kind = KH_LAYER_EMBEDDING, .input_dim = 50, .units = 24)};
static const kh_layer_spec k_gap[] = {KB_L(.kind = KH_LAYER_GAP1D)};
static const kh_layer_spec k_lstm[] = {KB_L(.kind = KH_LAYER_LSTM, .units = 16)};
static const kh_layer_spec k_lstm_seq[] = {KB_L(.kind = KH_LAYER_LSTM, .units = 12, .return_sequences = 1)};
static const kh_layer_spec k_bilstm[] = {KB_L(.kind = KH_LAYER_BILSTM, .units = 10)};
static const kh_layer_spec k_bilstm_seq[] = {KB_L(.kind = KH_LAYER_BILSTM, .units = 7, .return_sequences = 1)};
static const kh_layer_spec k_onehot_lstm[] = {KB_L(.kind = KH_LAYER_LSTM, .units = 8)};
/* deterministic: a conv with asymmetric 'same' padding, and 7 embedding rows over 24 steps (many repeats) */
static const kh_layer_spec det_conv[] = {
    KB_L(.kind = KH_LAYER_CONV2D, .units = 8, .kernel = {3, 3}, .padding = KH_PAD_SAME, .activation = KH_ACT_RELU),
    KB_L(.kind = KH_LAYER_CONV2D, .units = 8, .kernel = {4, 4}, .strides = {2, 2}, .padding = KH_PAD_SAME,
         .activation = KH_ACT_RELU),
    KB_L(.kind = KH_LAYER_FLATTEN), KB_L(.kind = KH_LAYER_DENSE, .units = 5, .activation = KH_ACT_SOFTMAX)};
static const kh_layer_spec det_emb[] = {KB_L(.kind = KH_LAYER_EMBEDDING, .input_dim = 7, .units = 16),
                                        KB_L(.kind = KH_LAYER_GAP1D),
                                        KB_L(.kind = KH_LAYER_DENSE, .units = 1, .activation = KH_ACT_SIGMOID)};

static kh_model_spec g_kernels[21], g_det[2];
static tcase g_cases[64];

/* The one case list; returns its length. */
static int case_list(const kh_model_spec *small, int ns, const kb_model *bench, int nb) {
    int nk = 0, n = 0;
    kh_model_spec *k = g_kernels;
    k[nk++] = kb_spec("dense_relu", KH_F32, 1, 70, 0, 0, 0, k_dense, 1, NOLOSS);
    k[nk++] = kb_spec("dense_softmax", KH_F32, 1, 33, 0, 0, 0, k_dense_sm, 1, NOLOSS);
    k[nk++] = kb_spec("dense_sigmoid", KH_F32, 1, 5, 0, 0, 0, k_dense_sig, 1, NOLOSS);
    k[nk++] = kb_spec("dense_tanh", KH_F32, 1, 300, 0, 0, 0, k_dense_tanh, 1, NOLOSS);
    k[nk++] = kb_spec("conv_valid", KH_F32, 3, 12, 11, 3, 0, k_conv_valid, 1, NOLOSS);
    k[nk++] = kb_spec("conv_same", KH_F32, 3, 9, 10, 8, 0, k_conv_same, 1, NOLOSS);
    k[nk++] = kb_spec("conv_asym_same", KH_F32, 3, 7, 8, 2, 0, k_conv_asym, 1, NOLOSS);
    k[nk++] = kb_spec("maxpool", KH_F32, 3, 8, 6, 4, 0, k_pool, 1, NOLOSS);
    k[nk++] = kb_spec("maxpool_same", KH_F32, 3, 7, 9, 3, 0, k_pool_same, 1, NOLOSS);
    k[nk++] = kb_spec("act_relu", KH_F32, 3, 4, 5, 6, 0, k_act_relu, 1, NOLOSS);
    k[nk++] = kb_spec("act_sigmoid", KH_F32, 1, 77, 0, 0, 0, k_act_sig, 1, NOLOSS);
    k[nk++] = kb_spec("act_tanh", KH_F32, 2, 6, 7, 0, 0, k_act_tanh, 1, NOLOSS);
    k[nk++] = kb_spec("act_softmax", KH_F32, 2, 5, 11, 0, 0, k_act_sm, 1, NOLOSS);
    k[nk++] = kb_spec("flatten", KH_F32, 3, 3, 4, 5, 0, k_flatten, 1, NOLOSS);
    k[nk++] = kb_spec("embedding", KH_I32, 1, 13, 0, 0, 0, k_embed, 1, NOLOSS);
    k[nk++] = kb_spec("gap1d", KH_F32, 2, 17, 9, 0, 0, k_gap, 1, NOLOSS);
    k[nk++] = kb_spec("lstm", KH_F32, 2, 11, 6, 0, 0, k_lstm, 1, NOLOSS);
    k[nk++] = kb_spec("lstm_sequences", KH_F32, 2, 9, 5, 0, 0, k_lstm_seq, 1, NOLOSS);
    k[nk++] = kb_spec("bilstm", KH_F32, 2, 8, 4, 0, 0, k_bilstm, 1, NOLOSS);
    k[nk++] = kb_spec("bilstm_sequences", KH_F32, 2, 6, 3, 0, 0, k_bilstm_seq, 1, NOLOSS);
    k[nk++] = kb_spec("onehot_lstm", KH_I32, 1, 10, 0, 0, 13, k_onehot_lstm, 1, NOLOSS);
    g_det[0] = kb_spec("det_conv", KH_F32, 3, 12, 12, 3, 0, det_conv, KB_N(det_conv), KH_LOSS_CATEGORICAL_CROSSENTROPY,
                       kb_opt(KH_OPT_ADAM, 1e-2f, 0), 5);
    g_det[1] = kb_spec("det_embedding", KH_I32, 1, 24, 0, 0, 0, det_emb, KB_N(det_emb), KH_LOSS_BINARY_CROSSENTROPY,
                       kb_opt(KH_OPT_ADAM, 1e-2f, 0), 2);
#define ADD(kind_, sp_, mb_, bench_, ...)                                                                        \
    do {                                                                                                         \
        g_cases[n] = (tcase){.kind = (kind_), .sp = (sp_), .max_batch = (mb_), .bench = (bench_)};               \
        snprintf(g_cases[n].name, sizeof g_cases[n].name, __VA_ARGS__);                                          \
        n++;                                                                                                     \
    } while (0)
    for (int i = 0; i < nk; i++) ADD(C_KERNEL, &k[i], 8, 0, "kernel/%s", k[i].name);
    for (int i = 0; i < ns; i++) ADD(C_MODEL, &small[i], 6, 0, "model/%s", small[i].name);
    for (int i = 0; i < nb; i++) ADD(C_MODEL, &bench[i].spec, 4, 1, "bench/%s", bench[i].name);
    for (int i = 0; i < ns; i++) ADD(C_DROPOUT_STREAM, &small[i], 6, 0, "dropout_stream/%s", small[i].name);
    ADD(C_DROPOUT, NULL, 0, 0, "dropout");
    ADD(C_DETERMINISTIC, g_det, 2, 0, "deterministic");
    ADD(C_SYNC_EACH, &small[0], 6, 0, "sync_each/%s", small[0].name);
    ADD(C_OOM, NULL, 0, 0, "oom");
    ADD(C_SURVIVES, &small[0], 6, 0, "survives/%s", small[0].name);
#undef ADD
    return n;
}

/* $KHOST_TEST_CASES: comma-separated substrings of case names (empty: every case but, on the cpu, the
 * benchmark models) */
static int selected(const tcase *c) {
    const char *sel = getenv("KHOST_TEST_CASES");
    if (!sel || !*sel) return !(c->bench && !kb_device_is_cuda());
    char buf[512];
    snprintf(buf, sizeof buf, "%s", sel);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (*t && strstr(c->name, t)) return 1;
    return 0;
}

int main(void) {
    const char *se = getenv("KHOST_TEST_SEED");
    g_seed = se && *se ? strtoull(se, NULL, 10) : kb_device_is_cuda() ? (uint64_t)time(NULL) : 0;
    g_p = profile_of();
    kb_load_module(&B); /* skips (77) where the module is missing */
    g_tr = kb_traits_of(B.desc->name);
    printf("%s on %s, math %s, seed %llu (KHOST_TEST_SEED to repeat)\n", kb_plugin_name(), kb_device_id(),
           kb_device_math() == KH_MATH_TF32 ? "tf32" : "fp32", (unsigned long long)g_seed);

    const kh_model_spec *small;
    int ns = kb_small_models(&small);
    const kb_model *bench;
    int nb = kb_bench_models(&bench);
    int n = case_list(small, ns, bench, nb);
    /* what must hold before the device opens, on any machine: the reference kit builds every model */
    int ready = kb_ref_prerequisites(g_kernels, KB_N(g_kernels)) & kb_ref_prerequisites(small, ns) &
                kb_ref_prerequisites(g_det, KB_N(g_det));
    for (int k = 0; k < nb; k++) ready &= kb_ref_prerequisites(&bench[k].spec, 1);
    if (!ready) return kh_test_finish("test_backend_ref");
    printf("prerequisites ok: %s loaded, the reference kit builds all %d models\n", kb_plugin_name(),
           (int)KB_N(g_kernels) + ns + (int)KB_N(g_det) + nb);
    fflush(stdout);

    if (g_tr->poison_env && kb_device_is_cuda()) setenv(g_tr->poison_env, "1", 0);
    /* 2 threads on the cpu by default (BiLSTM directions in parallel, cell rows split); KHOST_TEST_THREADS=1 for
     * the sequential paths */
    const char *th = getenv("KHOST_TEST_THREADS");
    char why[700];
    int unreachable = kb_open_device(&B, th && atoi(th) > 0 ? atoi(th) : 2, why, sizeof why);
    int ran = 0, failed = 0, not_reached = 0, skipped = 0;
    for (int i = 0; i < n; i++) {
        const tcase *c = &g_cases[i];
        if (!selected(c)) continue;
        const char *na = not_applicable(c);
        if (na) {
            printf("case %-36s not applicable: %s\n", c->name, na);
            skipped++;
        } else if (unreachable) {
            printf("case %-36s not reached: %s\n", c->name, why);
            not_reached++;
        } else {
            int before = kh_test_failed;
            if (run_case(c) != 0) {
                printf("case %-36s not supported by the backend (above)\n", c->name);
                skipped++;
                continue;
            }
            ran++;
            failed += kh_test_failed > before;
            printf("case %-36s %s\n", c->name, kh_test_failed > before ? "FAILED" : "ok");
            fflush(stdout);
        }
    }
    printf("%s on %s: %d cases ran (%d failed), %d not reached, %d not applicable or unsupported\n", kb_plugin_name(),
           kb_device_id(), ran, failed, not_reached, skipped);
    kb_unload(&B);
    int rc = kh_test_finish("test_backend_ref");
    if (rc == 0 && not_reached > 0) kh_test_skip(why); /* never a pass: the cases above did not run */
    if (rc == 0 && ran == 0) kh_test_skip("no case selected ran");
    return rc;
}
