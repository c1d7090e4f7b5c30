/* tests/tensorflow_gpu/test_tf_gpu_ref.c — the tensorflow backend on cuda:0 against the float64 reference kit
 * (khost/kit/ref.h), as tests/cntk_gpu does for cntk: the comparison needs no CPU path of the plugin (the GPU
 * machine has no BLAS, so tensorflow and theano refuse a cpu session there). Skips (exit 77) visibly where no
 * CUDA device is usable, but only after its prerequisites: the module loads and the reference kit builds every
 * model of the test ("prerequisites ok" is printed before the CUDA open; tools/gpu-check.sh's rehearsal
 * requires that line from every GPU test that skipped).
 * For the small models of tests/backend (every layer kind, activation, loss, optimizer and input path) and the
 * six benchmark models at a small batch, dropout off (deterministic = 1: the reference kit draws no counter
 * masks):
 *   1. weights set on the device read back bit-identical;
 *   2. probes on a partial batch: the training-mode forward output, the input gradient, every weight gradient,
 *      from two backward calls after the one forward;
 *   3. three training steps (the last one on a partial batch): the loss and correct count of each step, and
 *      every weight after it;
 *   4. an evaluation batch (metrics) and predict;
 *   5. a bad embedding index or label is KH_ERR_INVALID with a message (validated on the host while staging),
 *      and the model keeps working after it;
 *   6. an impossible allocation is KH_ERR_NOMEM naming sizes, and the session still works after it;
 *   7. dropout on the device (deterministic = 0): the kept fraction, the inverted scaling, the backward using
 *      the forward's mask, a new mask for the next forward.
 * Tolerances: FP32 (FMA, no TF32: the session's math mode is fp32) against float64, relative to the largest
 * magnitude of the reference tensor. TF_GPU_TEST_SEED fixes the seed (else the clock; printed).
 * TF_GPU_TEST_ON_CPU=1 rehearses the harness without a GPU where the plugin has a cpu path: the "device" side is
 * a cpu session (TF_GPU_TEST_ON_CPU_THREADS, default 2), every comparison runs, the out-of-memory check is left
 * out; the run then exits 77 (skipped): it proves the test, never the GPU path. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parity.h"
#include "testutil.h"
#include "bench_specs.h"
#include "tf_gpu_testlib.h"
#include "khost/kit/ref.h"
#include "khost/kit/rng.h"
#include "khost/kit/spec.h"

#define PROBE_TOL 1e-4
#define STEP_TOL 1e-3

static kb_backend GPU;
static uint64_t g_seed;

static float *nan_buf(int64_t n) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; p && i < n; i++) p[i] = NAN;
    return p;
}

/* Weights after optimizer steps. SGD is linear in the gradient: within tol. RMSprop, Adam and Adadelta divide
 * each gradient element by its own running magnitude, so an element whose gradient is rounding noise around
 * zero takes a step of up to about lr in a direction the summation order decides. For them every element must
 * lie within tol plus the two sides' own movements (no jump beyond what a step explains), and the elements the
 * reference moved confidently (at least half its largest move in the tensor: a gradient well above the noise)
 * must move the same way on the device, by the same total within 10% — a kernel that does not step, steps the
 * wrong way or at the wrong scale fails. */
static void compare_stepped(const char *model, const char *what, const float *dev, const double *ref, const float *w0,
                            int64_t n, double tol, int adaptive) {
    if (!adaptive) {
        kb_compare(model, what, dev, ref, n, tol, g_seed);
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
        if (isnan(dev[i]) || fabs(dd - dr) > tol * mx + fabs(dr) + fabs(dd)) bad++;
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

/* The output tensor of a batch of n: NHWC for an image output (the backend's own layout). */
static kh_tensor out_tensor(const kh_layer_shapes *last, int64_t n, int64_t *dims, float *data) {
    dims[0] = n;
    for (int i = 0; i < 3; i++) dims[i + 1] = last->out_shape[i];
    return kb_tensor(KH_F32, last->out_rank == 3 ? KH_LAYOUT_NHWC : KH_LAYOUT_ANY, last->out_rank + 1, dims, data);
}

static void probes(const char *name, const kh_model_spec *sp, kh_bmodel *mg, kh_ref_model *rm, int64_t n, kh_rng *r) {
    kb_batch bt;
    kb_make_batch(&bt, sp, n, r);
    const kh_model_shapes *sh = kh_ref_model_shapes(rm);
    const kh_layer_shapes *last = &sh->layers[sh->n_layers - 1];
    int64_t on = n * last->out_numel, od[4];
    float *y = nan_buf(on), *dy = nan_buf(on);
    double *dyd = malloc((size_t)(on > 0 ? on : 1) * sizeof(double));
    kh_tensor ty = out_tensor(last, n, od, y), tdy = out_tensor(last, n, od, dy);
    CHECK(GPU.api->forward(mg, &bt.x_backend, &ty) == KH_OK, "%s device forward: %s", name, GPU.api->last_error(GPU.s));
    CHECK(kh_ref_model_forward(rm, &bt.x_nhwc, 1) == KH_OK, "%s ref forward: %s", name, kh_ref_model_last_error(rm));
    kb_compare(name, "probe forward", y, kh_ref_model_output(rm, NULL), on, PROBE_TOL, g_seed);
    kb_fill_uniform(dy, on, -1.0f, 1.0f, r);
    for (int64_t i = 0; dyd && i < on; i++) dyd[i] = dy[i];
    CHECK(dyd && kh_ref_model_backward(rm, dyd) == KH_OK, "%s ref backward", name);
    float *dx = NULL;
    kh_tensor tdx, *pdx = NULL;
    /* backward twice after one forward (backend.h allows it): the second must match the reference too */
    for (int pass = 0; pass < 2; pass++) {
        const char *tag = pass ? " (2nd backward)" : "";
        for (int64_t i = 0; dyd && i < on; i++) dy[i] = (float)dyd[i];
        if (sp->input_dtype == KH_F32) {
            free(dx);
            dx = nan_buf(bt.n * bt.per);
            tdx = bt.x_nhwc;
            tdx.data = dx;
            pdx = &tdx;
        }
        CHECK(GPU.api->backward(mg, &tdy, pdx) == KH_OK, "%s device backward%s: %s", name, tag,
              GPU.api->last_error(GPU.s));
        char what[96];
        snprintf(what, sizeof what, "probe d_input%s", tag);
        if (dx) kb_compare(name, what, dx, kh_ref_model_input_grad(rm), bt.n * bt.per, PROBE_TOL, g_seed);
        for (int l = 0; l < sh->n_layers; l++)
            for (int s = 0; s < sh->layers[l].n_params; s++) {
                const kh_param_shape *ps = &sh->layers[l].params[s];
                float *g = nan_buf(ps->numel);
                kh_tensor tg = kb_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, g);
                CHECK(GPU.api->get_grad(mg, l, s, &tg) == KH_OK, "%s device get_grad: %s", name,
                      GPU.api->last_error(GPU.s));
                snprintf(what, sizeof what, "probe grad[%d][%d]%s", l, s, tag);
                kb_compare(name, what, g, kh_ref_model_grad(rm, l, s), ps->numel, PROBE_TOL, g_seed);
                free(g);
            }
    }
    free(y), free(dy), free(dyd), free(dx);
    kb_free_batch(&bt);
}

/* the device's metrics of one phase (read and reset) against the reference's mean loss and correct count */
static void metrics_equal(const char *name, const char *when, uint32_t phase, kh_bmodel *mg, int64_t n,
                          double ref_loss, int64_t ref_correct) {
    kh_metrics a = {NAN, NAN, -1};
    CHECK(GPU.api->read_metrics(mg, phase, &a, 1) == KH_OK, "%s read_metrics: %s", name, GPU.api->last_error(GPU.s));
    CHECK(a.samples == n, "%s %s samples %lld, expected %lld", name, when, (long long)a.samples, (long long)n);
    double loss = a.loss_sum / (double)(n > 0 ? n : 1);
    CHECK(fabs(loss - ref_loss) <= STEP_TOL * (fabs(ref_loss) + 1e-3), "%s %s mean loss %.7g vs %.7g (seed %llu)", name,
          when, loss, ref_loss, (unsigned long long)g_seed);
    /* a near-tie between classes may round either way in FP32 */
    CHECK(fabs(a.correct - (double)ref_correct) <= 1.0, "%s %s correct %.0f vs %lld", name, when, a.correct,
          (long long)ref_correct);
}

static void one_model(const kh_model_spec *sp, int max_batch) {
    const char *name = sp->name;
    kh_ref_model *rm = NULL;
    char err[256];
    kh_compile_opts o = {.struct_size = sizeof o, .max_batch = max_batch, .seed = 7, .deterministic = 1};
    kh_bmodel *mg = NULL;
    kh_status st = GPU.api->compile(GPU.s, sp, &o, &mg);
    if (st == KH_ERR_UNSUPPORTED) { /* outside the backend's capabilities on every device */
        printf("%s: not supported by the " TFG_PLUGIN " backend: %s\n", name, GPU.api->last_error(GPU.s));
        return;
    }
    CHECK(st == KH_OK && mg != NULL, "%s: device compile: %s", name, GPU.api->last_error(GPU.s));
    CHECK(kh_ref_model_create(sp, &rm, err, sizeof err) == KH_OK, "%s: reference: %s", name, err);
    float **w = NULL;
    if (!mg || !rm || kb_init_weights(&GPU, mg, sp, g_seed ^ 0x5eed, &w) != 0) {
        CHECK(mg == NULL || rm == NULL, "%s: device set_weight: %s", name, GPU.api->last_error(GPU.s));
        goto done;
    }
    const kh_model_shapes *sh = kh_ref_model_shapes(rm);
    for (int l = 0; l < sh->n_layers; l++)
        for (int s = 0; s < sh->layers[l].n_params; s++) {
            const kh_param_shape *ps = &sh->layers[l].params[s];
            const float *w0 = w[l * KH_MAX_SLOTS + s];
            kh_ref_model_set_weight_f32(rm, l, s, w0, ps->numel);
            float *back = nan_buf(ps->numel);
            kh_tensor tb = kb_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, back);
            CHECK(GPU.api->get_weight(mg, l, s, &tb) == KH_OK, "%s get_weight: %s", name, GPU.api->last_error(GPU.s));
            CHECK(!memcmp(back, w0, (size_t)ps->numel * sizeof *back), "%s w[%d][%d] as set: bit-identical", name, l, s);
            free(back);
        }
    int adaptive = sp->optimizer.kind != KH_OPT_SGD;
    kh_rng r;
    kh_rng_seed(&r, g_seed);
    probes(name, sp, mg, rm, max_batch > 1 ? max_batch - 1 : 1, &r);
    for (int step = 0; step < 3; step++) {
        kb_batch bt;
        kb_make_batch(&bt, sp, step == 2 && max_batch > 1 ? max_batch - 1 : max_batch, &r);
        int64_t yd[1] = {bt.n};
        kh_tensor ty = kb_tensor(KH_I32, KH_LAYOUT_NC, 1, yd, bt.labels);
        CHECK(GPU.api->train_batch(mg, &bt.x_backend, &ty) == KH_OK, "%s device train: %s", name,
              GPU.api->last_error(GPU.s));
        double ref_loss = 0;
        int64_t ref_correct = 0;
        CHECK(kh_ref_model_train_step(rm, &bt.x_nhwc, bt.labels, &ref_loss, &ref_correct) == KH_OK, "%s ref step: %s",
              name, kh_ref_model_last_error(rm));
        char when[32];
        snprintf(when, sizeof when, "step %d", step + 1);
        metrics_equal(name, when, KH_PHASE_TRAIN, mg, bt.n, ref_loss, ref_correct);
        for (int l = 0; l < sh->n_layers; l++)
            for (int s = 0; s < sh->layers[l].n_params; s++) {
                const kh_param_shape *ps = &sh->layers[l].params[s];
                float *a = nan_buf(ps->numel);
                kh_tensor ta = kb_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, a);
                CHECK(GPU.api->get_weight(mg, l, s, &ta) == KH_OK, "%s get_weight: %s", name,
                      GPU.api->last_error(GPU.s));
                char what[96];
                snprintf(what, sizeof what, "after %s w[%d][%d]", when, l, s);
                compare_stepped(name, what, a, kh_ref_model_weight(rm, l, s), w[l * KH_MAX_SLOTS + s], ps->numel,
                                STEP_TOL, adaptive);
                free(a);
            }
        kb_free_batch(&bt);
    }
    kb_batch bt;
    kb_make_batch(&bt, sp, max_batch, &r);
    int64_t yd[1] = {bt.n};
    kh_tensor ty = kb_tensor(KH_I32, KH_LAYOUT_NC, 1, yd, bt.labels);
    CHECK(GPU.api->eval_batch(mg, &bt.x_backend, &ty) == KH_OK, "%s device eval: %s", name, GPU.api->last_error(GPU.s));
    double ref_loss = 0;
    int64_t ref_correct = 0;
    CHECK(kh_ref_model_forward(rm, &bt.x_nhwc, 0) == KH_OK, "%s ref eval forward", name);
    kh_ref_model_loss(rm, bt.labels, &ref_loss, &ref_correct);
    CHECK(GPU.api->sync(mg) == KH_OK, "%s: sync: %s", name, GPU.api->last_error(GPU.s));
    metrics_equal(name, "eval", KH_PHASE_EVAL, mg, bt.n, ref_loss, ref_correct);
    const kh_layer_shapes *last = &sh->layers[sh->n_layers - 1];
    int64_t on = bt.n * last->out_numel, od[4];
    float *p = nan_buf(on);
    kh_tensor tp = out_tensor(last, bt.n, od, p);
    CHECK(GPU.api->predict(mg, &bt.x_backend, &tp) == KH_OK, "%s device predict: %s", name, GPU.api->last_error(GPU.s));
    kb_compare(name, "predict", p, kh_ref_model_output(rm, NULL), on, STEP_TOL, g_seed);
    free(p);
    /* bad input is refused on the host while staging, and the model still trains */
    if (bt.x_backend.dtype == KH_I32) { /* an expanded one-hot input carries no index to refuse */
        int32_t keep = bt.xi[0];
        bt.xi[0] = sp->layers[0].input_dim;
        CHECK(GPU.api->train_batch(mg, &bt.x_backend, &ty) == KH_ERR_INVALID && strstr(GPU.api->last_error(GPU.s), "index"),
              "%s: an index outside the vocabulary is KH_ERR_INVALID: %s", name, GPU.api->last_error(GPU.s));
        bt.xi[0] = keep;
    }
    int32_t lab = bt.labels[0];
    bt.labels[0] = sp->n_classes > 1 ? sp->n_classes : 2;
    CHECK(GPU.api->eval_batch(mg, &bt.x_backend, &ty) == KH_ERR_INVALID && strstr(GPU.api->last_error(GPU.s), "label"),
          "%s: a label outside the classes is KH_ERR_INVALID: %s", name, GPU.api->last_error(GPU.s));
    bt.labels[0] = lab;
    CHECK(GPU.api->train_batch(mg, &bt.x_backend, &ty) == KH_OK, "%s: trains after refused input: %s", name,
          GPU.api->last_error(GPU.s));
    CHECK(GPU.api->sync(mg) == KH_OK, "%s: sync: %s", name, GPU.api->last_error(GPU.s));
    kb_free_batch(&bt);
    printf("%s: compared\n", name);
done:
    kb_free_weights(sp, w);
    if (mg) GPU.api->model_free(mg);
    kh_ref_model_free(rm);
}

/* A dense layer of 2^36 weights cannot be allocated: KH_ERR_NOMEM with a message, the session still works. */
static void out_of_memory(void) {
    const kh_layer_spec l = {.kind = KH_LAYER_DENSE, .units = 1 << 20, .activation = KH_ACT_SOFTMAX};
    kh_model_spec sp = {.struct_size = sizeof sp, .name = "huge", .input_dtype = KH_F32, .input_rank = 1,
                        .input_shape = {1 << 16}, .n_layers = 1, .layers = &l, .loss = KH_LOSS_CATEGORICAL_CROSSENTROPY,
                        .optimizer = {.kind = KH_OPT_SGD, .lr = 0.1f}, .n_classes = 1 << 20};
    kh_compile_opts o = {.struct_size = sizeof o, .max_batch = 2, .seed = 7};
    kh_bmodel *m = NULL;
    kh_status st = GPU.api->compile(GPU.s, &sp, &o, &m);
    const char *e = GPU.api->last_error(GPU.s);
    CHECK(st == KH_ERR_NOMEM && m == NULL && strstr(e, "MiB"), "out of device memory: status %d: %s", (int)st, e);
    printf("out-of-memory message: %s\n", e);
}

int main(void) {
    const char *se = getenv("TF_GPU_TEST_SEED");
    g_seed = se && *se ? strtoull(se, NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu\n", (unsigned long long)g_seed);
    const char *rh = getenv("TF_GPU_TEST_ON_CPU");
    int rehearsal = rh && *rh && *rh != '0';
    tfg_load_module(&GPU);
    const kh_model_spec *small;
    int ns = kb_small_models(&small);
    const kb_model *bench;
    int nb = kb_bench_models(&bench);
    /* what must hold before the CUDA open, on any machine: the reference kit builds every model of the test */
    int ready = kb_ref_prerequisites(small, ns);
    for (int k = 0; k < nb; k++) ready &= kb_ref_prerequisites(&bench[k].spec, 1);
    if (!ready) return kh_test_finish("test_tf_gpu_ref (" TFG_PLUGIN ")");
    printf("prerequisites ok: " TFG_PLUGIN " loaded, the reference kit builds all %d models\n", ns + nb);
    fflush(stdout);
    const char *rt = getenv("TF_GPU_TEST_ON_CPU_THREADS");
    GPU.s = rehearsal ? tfg_open_cpu(&GPU, rt && *rt ? atoi(rt) : 2) : tfg_open_cuda(&GPU); /* skips without a usable device */
    if (!GPU.s) {
        CHECK(0, "open the rehearsal's cpu session");
        return kh_test_finish("test_tf_gpu_ref (" TFG_PLUGIN ")");
    }
    for (int k = 0; k < ns; k++) one_model(&small[k], 6);
    for (int k = 0; k < nb; k++) one_model(&bench[k].spec, 4);
    kb_check_dropout(&GPU, KH_LAYOUT_NHWC, g_seed);
    if (!rehearsal) out_of_memory();
    one_model(&small[0], 3); /* the session still works */
    GPU.api->close(GPU.s);
    tfg_unload(&GPU);
    int rc = kh_test_finish("test_tf_gpu_ref (" TFG_PLUGIN ")");
    if (rehearsal && rc == 0) kh_test_skip("harness rehearsal on a cpu session: the GPU path was not run");
    return rc;
}
