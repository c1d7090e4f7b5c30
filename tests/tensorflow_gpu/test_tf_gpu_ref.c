/* tests/tensorflow_gpu/test_tf_gpu_ref.c — the tensorflow backend on cuda:0 against itself on the cpu (the
 * CPU path is verified against the float64 reference kit by `khost verify`): the same graphs, the same
 * weights, the same dropout masks (both draw khost/kit/counter_rng.h's kh_dropout_keep with the same keys), so
 * every difference is the GPU path's. Skips (exit 77) visibly where no CUDA device is usable.
 * For the small models of tests/cntk (every layer kind, activation, loss, optimizer and input path) and the
 * six benchmark models at a small batch, dropout ON:
 *   1. weights set on the device read back bit-identical;
 *   2. probes on a partial batch: the training-mode forward output, the input gradient, every weight gradient,
 *      from two backward calls after the one forward;
 *   3. three training steps (the last one on a partial batch): every weight after each step, then the
 *      accumulated loss sum, correct count and sample count;
 *   4. an evaluation batch (metrics) and predict;
 *   5. a bad embedding index or label is KH_ERR_INVALID with a message (validated on the host while staging),
 *      and the model keeps working after it;
 *   6. an impossible allocation is KH_ERR_NOMEM naming sizes, and the session still works after it.
 * Tolerances: FP32 (FMA, no TF32) on both sides, different summation orders (cuBLAS, cuDNN, atomics in the
 * embedding gradient); relative to the largest magnitude of the cpu tensor. TF_GPU_TEST_SEED fixes the seed
 * (else the clock; printed).
 * TF_GPU_TEST_ON_CPU=1 rehearses the harness without a GPU: the "device" side is a second cpu session
 * (TF_GPU_TEST_ON_CPU_THREADS, default 2, against the reference side's TF_GPU_TEST_CPU_THREADS, default 1: other
 * summation orders, as on the GPU), every comparison runs, the out-of-memory check is left out; the run then exits 77
 * (skipped): it proves the test, never the GPU path. */
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
#include "khost/kit/rng.h"
#include "khost/kit/spec.h"

#define PROBE_TOL 1e-4
#define STEP_TOL 1e-3

static kb_backend CPU, GPU;
static uint64_t g_seed;

static double rel_err(const float *a, const float *b, int64_t n) {
    double mx = 1e-3, d = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) return INFINITY;
        if (fabs((double)b[i]) > mx) mx = fabs((double)b[i]);
        if (fabs((double)a[i] - (double)b[i]) > d) d = fabs((double)a[i] - (double)b[i]);
    }
    return d / mx;
}

static void compare(const char *model, const char *what, const float *gpu, const float *cpu, int64_t n, double tol) {
    double e = rel_err(gpu, cpu, n);
    CHECK(e <= tol, "%s %s: relative error %.3g > %.1g (seed %llu)", model, what, e, tol, (unsigned long long)g_seed);
    if (getenv("TF_TEST_VERBOSE")) {
        double mx = 0.0;
        for (int64_t i = 0; i < n; i++) mx = fabs((double)cpu[i]) > mx ? fabs((double)cpu[i]) : mx;
        printf("  %-26s %-28s %.3g (largest %.3g)\n", model, what, e, mx);
    }
}

static float *nan_buf(int64_t n) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; p && i < n; i++) p[i] = NAN;
    return p;
}

/* The model input as the host hands it to tensorflow: NHWC images, indices, one-hot expanded to f32. */
typedef struct feed {
    kb_batch bt;
    float *onehot;
    kh_tensor x, y;
    int64_t ydims[1];
} feed;

static void make_feed(feed *fd, const kh_model_spec *sp, int64_t n, kh_rng *r) {
    memset(fd, 0, sizeof *fd);
    kb_make_batch(&fd->bt, sp, n, r);
    fd->x = fd->bt.x_nhwc;
    if (sp->input_onehot > 0) {
        int64_t depth = sp->input_onehot, per = fd->bt.per;
        fd->onehot = calloc((size_t)(n * per * depth), sizeof(float));
        for (int64_t k = 0; fd->onehot && k < n * per; k++) fd->onehot[k * depth + fd->bt.xi[k]] = 1.0f;
        int64_t dims[4] = {n, 0, 0, 0};
        for (int i = 0; i < sp->input_rank; i++) dims[i + 1] = sp->input_shape[i];
        dims[sp->input_rank + 1] = depth;
        fd->x = kb_tensor(KH_F32, KH_LAYOUT_NTC, sp->input_rank + 2, dims, fd->onehot);
    }
    fd->ydims[0] = n;
    fd->y = kb_tensor(KH_I32, KH_LAYOUT_NC, 1, fd->ydims, fd->bt.labels);
}

static void free_feed(feed *fd) {
    kb_free_batch(&fd->bt);
    free(fd->onehot);
}

/* Weights after optimizer steps. SGD is linear in the gradient: within tol. RMSprop, Adam and Adadelta divide
 * each gradient element by its own running magnitude, so an element whose gradient is rounding noise around
 * zero takes a step of up to about lr in a direction the summation order decides (as between two cpu thread
 * counts). For them every element must lie within tol plus the two sides' own movements (no jump beyond
 * what a step explains), and the elements the cpu moved confidently (at least half its largest move in the
 * tensor: a gradient well above the noise) must move the same way on the device, by the same total within
 * 10% — a kernel that does not step, steps the wrong way or at the wrong scale fails. */
static void compare_stepped(const char *model, const char *what, const float *gpu, const float *cpu, const float *w0,
                            int64_t n, double tol, int adaptive) {
    if (!adaptive) {
        compare(model, what, gpu, cpu, n, tol);
        return;
    }
    double mx = 1e-3, big = 0.0, mov_g = 0.0, mov_c = 0.0;
    int64_t bad = 0, sure = 0, same = 0;
    for (int64_t i = 0; i < n; i++) {
        if (fabs((double)cpu[i]) > mx) mx = fabs((double)cpu[i]);
        if (fabs((double)cpu[i] - w0[i]) > big) big = fabs((double)cpu[i] - w0[i]);
    }
    for (int64_t i = 0; i < n; i++) {
        double dc = (double)cpu[i] - w0[i], dg = (double)gpu[i] - w0[i];
        if (isnan(gpu[i]) || fabs(dg - dc) > tol * mx + fabs(dc) + fabs(dg)) bad++;
        if (big > 0.0 && fabs(dc) >= 0.5 * big) {
            sure++;
            same += (dc > 0) == (dg > 0);
            mov_c += fabs(dc), mov_g += fabs(dg);
        }
    }
    CHECK(bad == 0, "%s %s: %lld of %lld elements beyond what a step explains (seed %llu)", model, what, (long long)bad,
          (long long)n, (unsigned long long)g_seed);
    CHECK(10 * same >= 9 * sure, "%s %s: %lld of %lld confidently moved elements moved the same way (seed %llu)", model,
          what, (long long)same, (long long)sure, (unsigned long long)g_seed);
    CHECK(mov_c == 0.0 || fabs(mov_g - mov_c) <= 0.1 * mov_c, "%s %s: their movement %.4g vs %.4g (seed %llu)", model,
          what, mov_g, mov_c, (unsigned long long)g_seed);
    if (getenv("TF_TEST_VERBOSE"))
        printf("  %-26s %-28s same direction %lld/%lld, movement %.4g/%.4g\n", model, what, (long long)same,
               (long long)sure, mov_g, mov_c);
}

/* every weight of both models equal within tol (exactly when tol is 0) */
static void compare_weights(const char *name, const char *when, const kh_model_shapes *sh, kh_bmodel *mc,
                            kh_bmodel *mg, double tol, float **w0, int adaptive) {
    for (int l = 0; l < sh->n_layers; l++)
        for (int s = 0; s < sh->layers[l].n_params; s++) {
            const kh_param_shape *ps = &sh->layers[l].params[s];
            float *a = nan_buf(ps->numel), *b = nan_buf(ps->numel);
            kh_tensor ta = kb_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, a);
            kh_tensor tb = kb_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, b);
            CHECK(GPU.api->get_weight(mg, l, s, &ta) == KH_OK, "%s gpu get_weight: %s", name, GPU.api->last_error(GPU.s));
            CHECK(CPU.api->get_weight(mc, l, s, &tb) == KH_OK, "%s cpu get_weight", name);
            char what[96];
            snprintf(what, sizeof what, "%s w[%d][%d]", when, l, s);
            if (tol == 0.0) CHECK(!memcmp(a, b, (size_t)ps->numel * sizeof *a), "%s %s: bit-identical", name, what);
            else compare_stepped(name, what, a, b, w0[l * KH_MAX_SLOTS + s], ps->numel, tol, adaptive);
            free(a);
            free(b);
        }
}

static void probes(const char *name, const kh_model_spec *sp, const kh_model_shapes *sh, kh_bmodel *mc,
                   kh_bmodel *mg, int64_t n, kh_rng *r) {
    feed fd;
    make_feed(&fd, sp, n, r);
    int64_t on = sh->layers[sh->n_layers - 1].out_numel, in = fd.bt.per * (sp->input_onehot > 0 ? sp->input_onehot : 1);
    int64_t odims[2] = {n, on}, idims[2] = {n, in};
    float *yc = nan_buf(n * on), *yg = nan_buf(n * on), *dy = nan_buf(n * on);
    kb_fill_uniform(dy, n * on, -1.0f, 1.0f, r);
    kh_tensor tyc = kb_tensor(KH_F32, KH_LAYOUT_NC, 2, odims, yc), tyg = kb_tensor(KH_F32, KH_LAYOUT_NC, 2, odims, yg);
    kh_tensor tdy = kb_tensor(KH_F32, KH_LAYOUT_NC, 2, odims, dy);
    CHECK(CPU.api->forward(mc, &fd.x, &tyc) == KH_OK, "%s cpu forward: %s", name, CPU.api->last_error(CPU.s));
    CHECK(GPU.api->forward(mg, &fd.x, &tyg) == KH_OK, "%s gpu forward: %s", name, GPU.api->last_error(GPU.s));
    compare(name, "probe forward", yg, yc, n * on, PROBE_TOL);
    int f32_in = fd.x.dtype == KH_F32;
    float *dxc = f32_in ? nan_buf(n * in) : NULL, *dxg = f32_in ? nan_buf(n * in) : NULL;
    kh_tensor tdxc = kb_tensor(KH_F32, KH_LAYOUT_NC, 2, idims, dxc), tdxg = kb_tensor(KH_F32, KH_LAYOUT_NC, 2, idims, dxg);
    CHECK(CPU.api->backward(mc, &tdy, f32_in ? &tdxc : NULL) == KH_OK, "%s cpu backward: %s", name,
          CPU.api->last_error(CPU.s));
    /* backward twice after one forward (backend.h allows it): the device's second must match the cpu too */
    for (int pass = 0; pass < 2; pass++) {
        const char *tag = pass ? " (2nd backward)" : "";
        if (dxg)
            for (int64_t i = 0; i < n * in; i++) dxg[i] = NAN;
        CHECK(GPU.api->backward(mg, &tdy, f32_in ? &tdxg : NULL) == KH_OK, "%s gpu backward%s: %s", name, tag,
              GPU.api->last_error(GPU.s));
        char what[64];
        snprintf(what, sizeof what, "probe d_input%s", tag);
        if (f32_in) compare(name, what, dxg, dxc, n * in, PROBE_TOL);
        for (int l = 0; l < sh->n_layers; l++)
            for (int s = 0; s < sh->layers[l].n_params; s++) {
                const kh_param_shape *ps = &sh->layers[l].params[s];
                float *a = nan_buf(ps->numel), *b = nan_buf(ps->numel);
                kh_tensor ta = kb_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, a);
                kh_tensor tb = kb_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, b);
                CHECK(GPU.api->get_grad(mg, l, s, &ta) == KH_OK, "%s gpu get_grad: %s", name,
                      GPU.api->last_error(GPU.s));
                CHECK(CPU.api->get_grad(mc, l, s, &tb) == KH_OK, "%s cpu get_grad", name);
                snprintf(what, sizeof what, "probe grad[%d][%d]%s", l, s, tag);
                compare(name, what, a, b, ps->numel, PROBE_TOL);
                free(a);
                free(b);
            }
    }
    free(yc), free(yg), free(dy), free(dxc), free(dxg);
    free_feed(&fd);
}

static void metrics_equal(const char *name, uint32_t phase, kh_bmodel *mc, kh_bmodel *mg) {
    kh_metrics a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    CHECK(GPU.api->read_metrics(mg, phase, &a, 1) == KH_OK, "%s gpu read_metrics: %s", name, GPU.api->last_error(GPU.s));
    CHECK(CPU.api->read_metrics(mc, phase, &b, 1) == KH_OK, "%s cpu read_metrics", name);
    const char *ph = phase == KH_PHASE_TRAIN ? "train" : "eval";
    CHECK(a.samples == b.samples && a.samples > 0, "%s %s samples %lld vs %lld", name, ph, (long long)a.samples,
          (long long)b.samples);
    CHECK(fabs(a.loss_sum - b.loss_sum) <= STEP_TOL * (fabs(b.loss_sum) + 1.0), "%s %s loss sum %.6g vs %.6g", name, ph,
          a.loss_sum, b.loss_sum);
    /* a near-tie between classes may round either way in FP32 */
    CHECK(fabs(a.correct - b.correct) <= 1.0, "%s %s correct %.0f vs %.0f", name, ph, a.correct, b.correct);
}

static void one_model(const kh_model_spec *sp, int max_batch) {
    const char *name = sp->name;
    kh_model_shapes sh;
    char err[256];
    if (kh_spec_infer(sp, &sh, err, sizeof err) != KH_OK) {
        CHECK(0, "%s: %s", name, err);
        return;
    }
    kh_compile_opts o = {.struct_size = sizeof o, .max_batch = max_batch, .seed = 7, .deterministic = 0};
    kh_bmodel *mc = NULL, *mg = NULL;
    kh_status st = CPU.api->compile(CPU.s, sp, &o, &mc);
    if (st == KH_ERR_UNSUPPORTED) { /* outside the backend's capabilities on every device (e.g. strided Conv2D) */
        printf("%s: not supported by the " TFG_PLUGIN " backend: %s\n", name, CPU.api->last_error(CPU.s));
        kh_model_shapes_free(&sh);
        return;
    }
    CHECK(st == KH_OK && mc, "%s: cpu compile: %s", name, CPU.api->last_error(CPU.s));
    st = GPU.api->compile(GPU.s, sp, &o, &mg);
    CHECK(st == KH_OK && mg, "%s: gpu compile: %s", name, GPU.api->last_error(GPU.s));
    if (!mc || !mg) {
        if (mc) CPU.api->model_free(mc);
        if (mg) GPU.api->model_free(mg);
        kh_model_shapes_free(&sh);
        return;
    }
    float **w = NULL;
    CHECK(kb_init_weights(&CPU, mc, sp, g_seed ^ 0x5eed, &w) == 0, "%s cpu weights", name);
    for (int l = 0; w && l < sh.n_layers; l++)
        for (int s = 0; s < sh.layers[l].n_params; s++) {
            const kh_param_shape *ps = &sh.layers[l].params[s];
            kh_tensor t = kb_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, w[l * KH_MAX_SLOTS + s]);
            CHECK(GPU.api->set_weight(mg, l, s, &t) == KH_OK, "%s gpu set_weight: %s", name, GPU.api->last_error(GPU.s));
        }
    if (!w) {
        CPU.api->model_free(mc);
        GPU.api->model_free(mg);
        kh_model_shapes_free(&sh);
        return;
    }
    int adaptive = sp->optimizer.kind != KH_OPT_SGD;
    compare_weights(name, "as set", &sh, mc, mg, 0.0, w, adaptive);
    kh_rng r;
    kh_rng_seed(&r, g_seed);
    probes(name, sp, &sh, mc, mg, max_batch > 1 ? max_batch - 1 : 1, &r);
    for (int step = 0; step < 3; step++) {
        feed fd;
        make_feed(&fd, sp, step == 2 && max_batch > 1 ? max_batch - 1 : max_batch, &r);
        CHECK(CPU.api->train_batch(mc, &fd.x, &fd.y) == KH_OK, "%s cpu train: %s", name, CPU.api->last_error(CPU.s));
        CHECK(GPU.api->train_batch(mg, &fd.x, &fd.y) == KH_OK, "%s gpu train: %s", name, GPU.api->last_error(GPU.s));
        char when[32];
        snprintf(when, sizeof when, "after step %d", step + 1);
        compare_weights(name, when, &sh, mc, mg, STEP_TOL, w, adaptive);
        free_feed(&fd);
    }
    metrics_equal(name, KH_PHASE_TRAIN, mc, mg);
    feed fd;
    make_feed(&fd, sp, max_batch, &r);
    CHECK(CPU.api->eval_batch(mc, &fd.x, &fd.y) == KH_OK, "%s cpu eval", name);
    CHECK(GPU.api->eval_batch(mg, &fd.x, &fd.y) == KH_OK, "%s gpu eval: %s", name, GPU.api->last_error(GPU.s));
    metrics_equal(name, KH_PHASE_EVAL, mc, mg);
    int64_t on = sh.layers[sh.n_layers - 1].out_numel, odims[2] = {max_batch, on};
    float *pc = nan_buf(max_batch * on), *pg = nan_buf(max_batch * on);
    kh_tensor tpc = kb_tensor(KH_F32, KH_LAYOUT_NC, 2, odims, pc), tpg = kb_tensor(KH_F32, KH_LAYOUT_NC, 2, odims, pg);
    CHECK(CPU.api->predict(mc, &fd.x, &tpc) == KH_OK, "%s cpu predict", name);
    CHECK(GPU.api->predict(mg, &fd.x, &tpg) == KH_OK, "%s gpu predict: %s", name, GPU.api->last_error(GPU.s));
    compare(name, "predict", pg, pc, max_batch * on, STEP_TOL);
    /* bad input is refused on the host while staging, and the model still trains */
    if (fd.x.dtype == KH_I32) {
        int32_t keep = fd.bt.xi[0];
        fd.bt.xi[0] = sp->layers[0].input_dim;
        CHECK(GPU.api->train_batch(mg, &fd.x, &fd.y) == KH_ERR_INVALID && strstr(GPU.api->last_error(GPU.s), "index"),
              "%s: an index outside the vocabulary is KH_ERR_INVALID: %s", name, GPU.api->last_error(GPU.s));
        fd.bt.xi[0] = keep;
    }
    int32_t lab = fd.bt.labels[0];
    fd.bt.labels[0] = sp->n_classes > 1 ? sp->n_classes : 2;
    CHECK(GPU.api->eval_batch(mg, &fd.x, &fd.y) == KH_ERR_INVALID && strstr(GPU.api->last_error(GPU.s), "label"),
          "%s: a label outside the classes is KH_ERR_INVALID: %s", name, GPU.api->last_error(GPU.s));
    fd.bt.labels[0] = lab;
    CHECK(GPU.api->train_batch(mg, &fd.x, &fd.y) == KH_OK, "%s: trains after refused input: %s", name,
          GPU.api->last_error(GPU.s));
    CHECK(GPU.api->sync(mg) == KH_OK, "%s: sync: %s", name, GPU.api->last_error(GPU.s));
    free(pc), free(pg);
    free_feed(&fd);
    kb_free_weights(sp, w);
    CPU.api->model_free(mc);
    GPU.api->model_free(mg);
    kh_model_shapes_free(&sh);
    printf("%s: compared\n", name);
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
    CPU = GPU;
    /* The comparison side first, before the CUDA open that skips without a device: a machine where the plugin
     * has no cpu path (built without BLAS, as the device machine is) fails here on any machine, the rehearsal
     * included, instead of only once a GPU is there. One thread: nodes in graph order, a fixed summation order. */
    const char *ct = getenv("TF_GPU_TEST_CPU_THREADS");
    CPU.s = tfg_open_cpu(&CPU, ct && *ct ? atoi(ct) : 1);
    CHECK(CPU.s != NULL, "open the comparison side, " TFG_PLUGIN " on the cpu (this test needs the plugin's cpu path)");
    if (!CPU.s) return kh_test_finish("test_tf_gpu_ref (" TFG_PLUGIN ")");
    const char *rt = getenv("TF_GPU_TEST_ON_CPU_THREADS");
    GPU.s = rehearsal ? tfg_open_cpu(&GPU, rt && *rt ? atoi(rt) : 2) : tfg_open_cuda(&GPU); /* skips without a usable device */
    if (!GPU.s) {
        CHECK(0, "open the rehearsal's second cpu session");
        CPU.api->close(CPU.s);
        return kh_test_finish("test_tf_gpu_ref (" TFG_PLUGIN ")");
    }
    {
        const kh_model_spec *small;
        int ns = kb_small_models(&small);
        for (int k = 0; k < ns; k++) one_model(&small[k], 6);
        const kb_model *bench;
        int nb = kb_bench_models(&bench);
        for (int k = 0; k < nb; k++) one_model(&bench[k].spec, 4);
        if (!rehearsal) out_of_memory();
        const kh_model_spec *again;
        kb_small_models(&again);
        one_model(&again[0], 3);
        CPU.api->close(CPU.s);
    }
    GPU.api->close(GPU.s);
    tfg_unload(&GPU);
    int rc = kh_test_finish("test_tf_gpu_ref (" TFG_PLUGIN ")");
    if (rehearsal && rc == 0) kh_test_skip("harness rehearsal on two cpu sessions: the GPU path was not run");
    return rc;
}
