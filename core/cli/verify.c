/* core/cli/verify.c — `khost verify --plugin P [--device D] [--task T|all|none] [--tol X] [--seed N] [--batch N]`:
 * checks a backend against the float64 CPU reference kit (khost/kit/ref.h).
 *
 * (a) Per layer kind the backend supports on the device: a minimal model (loss none, deterministic) with
 *     identical random weights in backend and reference; the backend's forward/backward probes against the
 *     reference with a random output gradient: output, input gradient, every weight gradient.
 * (b) Per task (real data, one batch): one whole training step from the same kh_init_param weights with
 *     dropout off: loss, the probe gradients of every weight (when the backend has probes), and every
 *     updated weight.
 *
 * Error metric, per tensor: max_i |backend_i - ref_i| / max(max_i |ref_i|, 1e-6). Normalising by the
 * tensor's largest magnitude (not element-wise) keeps elements that cancel to ~0 from dominating, while any
 * systematic error (a transposed layout, a wrong gate, a missing term) is O(1). Tolerance 1e-4 by default:
 * float32 rounding in dot products of length K grows like sqrt(K) * 6e-8 (K <= ~10^4 here, ~6e-6) plus
 * transcendental-function error (~1e-7) and LSTM recurrences over up to 100 steps; 1e-4 leaves margin for
 * those and nothing for a bug. TF32 or half-precision math would (rightly) fail it.
 *
 * Updated weights: the first adaptive step (RMSprop, Adam) divides g by ~|g| + eps, so a float-noise error in
 * a gradient element near eps would swing its update by a large fraction. The step check therefore asks
 * whether the backend's new weight lies in the interval the reference optimizer reaches from gradients
 * within +-tol * max|g_ref| of the reference gradient (widened by one float32 ulp of the weight); the
 * distance outside that interval is divided by the largest reference update. Optimizer-semantics errors
 * (bias correction, rho, epsilon placement that matters, learning rate) are O(1) in that metric.
 *
 * The host owns layout conversion (core/cell/layout.h): NCHW backends get NCHW images and conv-shaped output
 * gradients, and their NCHW outputs / input gradients are converted back before comparing; one-hot input is
 * expanded by the host when the backend lacks KH_CAP_ONEHOT_INPUT, exactly as the training loop does.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell/mathmode.h"
#include "base/args.h"
#include "modules/caps.h"
#include "cli/commands.h"
#include "modules/layer_abi.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "modules/host_api.h"
#include "khost/kit/formulas.h"
#include "khost/kit/status.h"
#include "khost/kit/rng.h"
#include "khost/kit/spec.h"
#include "khost/kit/init.h"
#include "khost/kit/ref.h"
#include "cell/layout.h"

#define VERIFY_TOL 1e-4
#define VERIFY_FLOOR 1e-6 /* denominator floor: tensors smaller than this are compared absolutely */
#define PROBE_BATCH 4

// ---------------------------------------------------------------------------------------------------------
// state and the result table

typedef struct vctx {
    const kh_module *bm; /* the backend module: its kh_layer_spec size */
    const kh_backend_api *b;
    const char *plugin;
    kh_bsession *s;
    kh_caps caps;
    double tol;
    int relax_below; /* task checks of max-pooling models: layers below this index (and d_input) use
                        VERIFY_TIE_TOL; 0 = none */
    uint64_t seed;
    int64_t batch;
    int has_probes;
    int n_pass, n_fail, n_unsup, n_skip;
} vctx;

static void row(vctx *v, const char *what, double err, double tol) {
    int pass = err <= tol; // NaN fails
    printf("%-52s %12.3e %9.1e  %s\n", what, err, tol, pass ? "PASS" : "FAIL");
    fflush(stdout);
    if (pass) v->n_pass++;
    else v->n_fail++;
}

/* Upstream of a max-pool, a real-data batch holds windows whose two largest entries differ by less than
 * float32 rounding: a float backend may route that window's gradient to the other entry. Either route is a
 * valid subgradient, but the routed difference is O(1) at those elements, so those tensors are checked at
 * 5e-2 on real data (a layout, gate or optimizer bug is O(1) and still fails; cntk's oneDNN convolutions on
 * an AVX2-only CPU route one near-tie of mnist_cnn differently and reach 2.1e-2 in d_input); the per-layer
 * probes on random data check every layer at the strict tolerance. */
#define VERIFY_TIE_TOL 5e-2
static double tol_for(const vctx *v, int layer) {
    return layer < v->relax_below ? fmax(v->tol, VERIFY_TIE_TOL) : v->tol;
}

static void row_note(vctx *v, const char *what, const char *kind, const char *why) {
    printf("%-52s %12s %9s  %s%s%s\n", what, "-", "-", kind, why && *why ? ": " : "", why ? why : "");
    fflush(stdout);
    if (!strcmp(kind, "unsupported")) v->n_unsup++;
    else if (!strcmp(kind, "skipped")) v->n_skip++;
    else v->n_fail++;
}

static const char *berr(vctx *v) {
    const char *e = v->b->last_error ? v->b->last_error(v->s) : NULL;
    return e && *e ? e : "no reason given";
}

// max |a - b| / max(max |b|, floor)
static double rel_err(const float *a, const double *b, int64_t n) {
    double diff = 0.0, scale = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= diff)) diff = d; // NaN propagates
        if (fabs(b[i]) > scale) scale = fabs(b[i]);
    }
    return diff / (scale > VERIFY_FLOOR ? scale : VERIFY_FLOOR);
}

// ---------------------------------------------------------------------------------------------------------
// tensors and layouts

static int64_t shape_numel(int rank, const int32_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    return n;
}

// A tensor (n, shape...) in Keras order; image-shaped (rank-3 per sample) f32 tensors become NCHW when the
// backend asked for it. data is malloc'ed (bytes for the logical shape).
static int make_tensor(kh_tensor *t, uint32_t dtype, int64_t n, int rank, const int32_t *shape, int nchw) {
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->rank = rank + 1;
    t->dims[0] = n;
    for (int i = 0; i < rank; i++) t->dims[i + 1] = shape[i];
    t->layout = dtype == KH_I32 ? KH_LAYOUT_NT : rank == 3 ? KH_LAYOUT_NHWC : rank == 2 ? KH_LAYOUT_NTC : KH_LAYOUT_NC;
    if (nchw && rank == 3 && dtype == KH_F32) {
        t->layout = KH_LAYOUT_NCHW;
        t->dims[1] = shape[2], t->dims[2] = shape[0], t->dims[3] = shape[1];
    }
    t->data = calloc((size_t)(n * shape_numel(rank, shape) + 1), 4);
    return t->data ? 0 : -1;
}

// NHWC float (n, h, w, c) into t's layout (a copy, or the NCHW transposition).
static void to_backend(kh_tensor *t, const float *nhwc) {
    int64_t n = kh_tensor_numel(t);
    if (t->layout == KH_LAYOUT_NCHW)
        kh_layout_nhwc_to_nchw(t->data, nhwc, t->dims[0], t->dims[2], t->dims[3], t->dims[1]);
    else memcpy(t->data, nhwc, (size_t)n * 4);
}

// t's float data back into NHWC order.
static void from_backend(float *nhwc, const kh_tensor *t) {
    if (t->layout == KH_LAYOUT_NCHW)
        kh_layout_nchw_to_nhwc(nhwc, t->data, t->dims[0], t->dims[1], t->dims[2], t->dims[3]);
    else memcpy(nhwc, t->data, (size_t)kh_tensor_numel(t) * 4);
}

// ---------------------------------------------------------------------------------------------------------
// one model on both sides

typedef struct pair {
    kh_model_spec spec;
    kh_model_shapes sh;   // the reference's (kh_spec_infer)
    kh_ref_model *ref;
    kh_bmodel *bm;
    kh_tensor xb;         // the batch as the backend receives it
    void *xb_buf;         // conversion buffer behind xb (NULL when xb aliases the task batch)
    int64_t n;            // batch size
    float **w0;           // initial weights per flat (layer, slot)
    int n_slots;
} pair;

static void pair_free(vctx *v, pair *p) {
    if (p->bm) v->b->model_free(p->bm);
    kh_ref_model_free(p->ref);
    if (p->w0) {
        for (int i = 0; i < p->n_slots; i++) free(p->w0[i]);
    }
    free(p->w0);
    free(p->xb_buf);
    kh_model_shapes_free(&p->sh);
    memset(p, 0, sizeof *p);
}

// Compile the spec on both sides and set identical weights: kh_init_param from seed, plus uniform noise of
// `noise` (probes use it so zero biases and the forget bias are exercised off their special values).
static int pair_open(vctx *v, pair *p, const kh_model_spec *spec, int64_t n, uint64_t wseed, double noise,
                     char *why, size_t whylen) {
    memset(p, 0, sizeof *p);
    p->spec = *spec;
    p->n = n;
    if (kh_ref_model_create(spec, &p->ref, why, whylen) != KH_OK) return -1;
    if (kh_spec_infer(spec, &p->sh, why, whylen) != KH_OK) return -1;
    kh_compile_opts co = {.struct_size = sizeof co, .max_batch = (int32_t)n, .seed = v->seed, .deterministic = 1};
    char rerr[256] = "";
    if (kh_backend_compile(v->bm, v->s, spec, &co, &p->bm, rerr, sizeof rerr) != KH_OK) {
        p->bm = NULL;
        snprintf(why, whylen, "compile: %s", rerr[0] ? rerr : berr(v));
        return -1;
    }
    for (int l = 0; l < p->sh.n_layers; l++) p->n_slots += p->sh.layers[l].n_params;
    p->w0 = calloc((size_t)p->n_slots + 1, sizeof *p->w0);
    if (!p->w0) return snprintf(why, whylen, "out of memory"), -1;
    kh_rng rng;
    kh_rng_seed(&rng, wseed);
    int k = 0;
    for (int l = 0; l < p->sh.n_layers; l++) {
        for (int s = 0; s < p->sh.layers[l].n_params; s++, k++) {
            const kh_param_shape *ps = &p->sh.layers[l].params[s];
            float *w = p->w0[k] = malloc((size_t)ps->numel * sizeof *w + 1);
            if (!w) return snprintf(why, whylen, "out of memory for layer %d %s", l, ps->name), -1;
            if (kh_init_param(&rng, ps, w) != KH_OK)
                return snprintf(why, whylen, "layer %d %s: initialiser failed", l, ps->name), -1;
            for (int64_t i = 0; i < ps->numel && noise > 0; i++) w[i] += (float)(noise * (2.0 * kh_rng_uniform(&rng) - 1.0));
            kh_tensor t = {.dtype = KH_F32, .layout = KH_LAYOUT_ANY, .rank = ps->rank, .data = w};
            for (int d = 0; d < ps->rank; d++) t.dims[d] = ps->dims[d];
            if (v->b->set_weight(p->bm, l, s, &t) != KH_OK)
                return snprintf(why, whylen, "set_weight layer %d %s: %s", l, ps->name, berr(v)), -1;
            if (kh_ref_model_set_weight_f32(p->ref, l, s, w, ps->numel) != KH_OK)
                return snprintf(why, whylen, "reference set_weight: %s", kh_ref_model_last_error(p->ref)), -1;
        }
    }
    return 0;
}

// Convert the task-layout batch x into the backend's view (NCHW images, host one-hot expansion).
static int pair_input(vctx *v, pair *p, const kh_tensor *x) {
    int to_nchw = v->caps.image_layout == KH_LAYOUT_NCHW;
    int32_t onehot = p->spec.input_onehot > 0 && !(v->caps.flags & KH_CAP_ONEHOT_INPUT) ? p->spec.input_onehot : 0;
    int64_t numel = kh_tensor_numel(x) * (onehot > 0 ? onehot : 1);
    p->xb_buf = malloc((size_t)numel * 4 + 1);
    if (!p->xb_buf) return -1;
    return kh_layout_convert(&p->xb, x, to_nchw, onehot, p->xb_buf);
}

static void slot_label(char *buf, size_t n, const char *prefix, const char *what, const pair *p, int l, int s) {
    snprintf(buf, n, "%s %s L%d.%s", prefix, what, l, p->sh.layers[l].params[s].name);
}

// Forward + backward probes with output gradient dy (NHWC/Keras order, n * out_numel doubles) on both
// sides; rows for the output, the input gradient (f32 inputs) and every weight gradient.
static void probe_compare(vctx *v, pair *p, const kh_tensor *x, const double *dy, const char *label) {
    char what[160];
    const kh_layer_shapes *last = &p->sh.layers[p->sh.n_layers - 1];
    int nchw = v->caps.image_layout == KH_LAYOUT_NCHW;
    int64_t nout = p->n * last->out_numel;
    kh_tensor out = {0}, dyt = {0}, dxt = {0};
    float *tmp = malloc((size_t)(nout > 0 ? nout : 1) * 4);
    float *dxf = NULL;
    double *dyr = NULL;
    int want_dx = p->spec.input_dtype == KH_F32;
    if (!tmp || make_tensor(&out, KH_F32, p->n, last->out_rank, last->out_shape, nchw) != 0 ||
        make_tensor(&dyt, KH_F32, p->n, last->out_rank, last->out_shape, nchw) != 0) {
        row_note(v, label, "error", "out of memory");
        goto done;
    }
    if (want_dx) {
        if (make_tensor(&dxt, KH_F32, p->n, p->spec.input_rank, p->spec.input_shape, nchw) != 0 ||
            !(dxf = malloc((size_t)kh_tensor_numel(&dxt) * 4))) {
            row_note(v, label, "error", "out of memory");
            goto done;
        }
    }
    // reference, fed the float32-rounded output gradient the backend receives: only the backend's own
    // arithmetic then differs
    dyr = malloc((size_t)(nout > 0 ? nout : 1) * sizeof *dyr);
    if (!dyr) {
        row_note(v, label, "error", "out of memory");
        goto done;
    }
    for (int64_t i = 0; i < nout; i++) dyr[i] = (double)(float)dy[i];
    if (kh_ref_model_forward(p->ref, x, 1) != KH_OK || kh_ref_model_backward(p->ref, dyr) != KH_OK) {
        snprintf(what, sizeof what, "%s", label);
        row_note(v, what, "error", kh_ref_model_last_error(p->ref));
        goto done;
    }
    // backend
    if (v->b->forward(p->bm, &p->xb, &out) != KH_OK) {
        snprintf(what, sizeof what, "%s forward", label);
        row_note(v, what, "error", berr(v));
        goto done;
    }
    from_backend(tmp, &out);
    snprintf(what, sizeof what, "%s output", label);
    row(v, what, rel_err(tmp, kh_ref_model_output(p->ref, NULL), nout), v->tol);
    for (int64_t i = 0; i < nout; i++) tmp[i] = (float)dy[i];
    to_backend(&dyt, tmp);
    if (v->b->backward(p->bm, &dyt, want_dx ? &dxt : NULL) != KH_OK) {
        snprintf(what, sizeof what, "%s backward", label);
        row_note(v, what, "error", berr(v));
        goto done;
    }
    if (want_dx) {
        from_backend(dxf, &dxt);
        snprintf(what, sizeof what, "%s d_input", label);
        row(v, what, rel_err(dxf, kh_ref_model_input_grad(p->ref), kh_tensor_numel(&dxt)), tol_for(v, 0));
    }
    for (int l = 0; l < p->sh.n_layers; l++) {
        for (int s = 0; s < p->sh.layers[l].n_params; s++) {
            const kh_param_shape *ps = &p->sh.layers[l].params[s];
            float *g = malloc((size_t)ps->numel * 4 + 1);
            kh_tensor gt = {.dtype = KH_F32, .layout = KH_LAYOUT_ANY, .rank = ps->rank, .data = g};
            for (int d = 0; d < ps->rank; d++) gt.dims[d] = ps->dims[d];
            slot_label(what, sizeof what, label, "grad", p, l, s);
            if (!g) row_note(v, what, "error", "out of memory");
            else if (v->b->get_grad(p->bm, l, s, &gt) != KH_OK) row_note(v, what, "error", berr(v));
            else row(v, what, rel_err(g, kh_ref_model_grad(p->ref, l, s), ps->numel), tol_for(v, l));
            free(g);
        }
    }
done:
    free(tmp), free(dxf), free(dyr), free(out.data), free(dyt.data), free(dxt.data);
}

// ---------------------------------------------------------------------------------------------------------
// (a) per layer kind

typedef struct layer_case {
    const char *name;
    kh_layer_spec layer;
    uint32_t dtype;
    int rank;
    int32_t shape[3];
    int32_t onehot;
} layer_case;

static int first_bit(uint32_t mask) {
    for (int i = 0; i < 32; i++)
        if (mask & (1u << i)) return i;
    return 0;
}

static void verify_layers(vctx *v) {
    // Small shapes that still exercise every index: non-square images, odd sizes, several channels.
    static const layer_case cases[] = {
        {"dense[linear]", {.kind = KH_LAYER_DENSE, .units = 7, .activation = KH_ACT_LINEAR}, KH_F32, 1, {12}, 0},
        {"dense[relu]", {.kind = KH_LAYER_DENSE, .units = 7, .activation = KH_ACT_RELU}, KH_F32, 1, {12}, 0},
        {"dense[sigmoid]", {.kind = KH_LAYER_DENSE, .units = 7, .activation = KH_ACT_SIGMOID}, KH_F32, 1, {12}, 0},
        {"dense[tanh]", {.kind = KH_LAYER_DENSE, .units = 7, .activation = KH_ACT_TANH}, KH_F32, 1, {12}, 0},
        {"dense[softmax]", {.kind = KH_LAYER_DENSE, .units = 7, .activation = KH_ACT_SOFTMAX}, KH_F32, 1, {12}, 0},
        {"activation[relu]", {.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_RELU}, KH_F32, 1, {11}, 0},
        {"activation[sigmoid]", {.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_SIGMOID}, KH_F32, 1, {11}, 0},
        {"activation[tanh]", {.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_TANH}, KH_F32, 1, {11}, 0},
        {"activation[softmax]", {.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_SOFTMAX}, KH_F32, 1, {11}, 0},
        {"dropout", {.kind = KH_LAYER_DROPOUT, .rate = 0.5f}, KH_F32, 1, {10}, 0},
        {"flatten", {.kind = KH_LAYER_FLATTEN}, KH_F32, 3, {5, 4, 3}, 0},
        {"conv2d[valid,relu]", {.kind = KH_LAYER_CONV2D, .units = 5, .kernel = {3, 3}, .activation = KH_ACT_RELU},
         KH_F32, 3, {7, 6, 3}, 0},
        {"conv2d[same,relu]",
         {.kind = KH_LAYER_CONV2D, .units = 5, .kernel = {3, 3}, .padding = KH_PAD_SAME, .activation = KH_ACT_RELU},
         KH_F32, 3, {7, 6, 3}, 0},
        {"conv2d[valid,linear]", {.kind = KH_LAYER_CONV2D, .units = 4, .kernel = {3, 3}}, KH_F32, 3, {6, 7, 2}, 0},
        {"maxpool2d[2x2]", {.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}}, KH_F32, 3, {6, 8, 3}, 0},
        {"maxpool2d[2x2,odd]", {.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}}, KH_F32, 3, {7, 5, 2}, 0},
        {"embedding", {.kind = KH_LAYER_EMBEDDING, .input_dim = 11, .units = 4}, KH_I32, 1, {6}, 0},
        {"lstm", {.kind = KH_LAYER_LSTM, .units = 4}, KH_F32, 2, {5, 3}, 0},
        {"lstm[sequences]", {.kind = KH_LAYER_LSTM, .units = 4, .return_sequences = 1}, KH_F32, 2, {5, 3}, 0},
        {"lstm[onehot]", {.kind = KH_LAYER_LSTM, .units = 4}, KH_I32, 1, {5}, 6},
        {"bilstm", {.kind = KH_LAYER_BILSTM, .units = 3}, KH_F32, 2, {5, 3}, 0},
        {"bilstm[sequences]", {.kind = KH_LAYER_BILSTM, .units = 3, .return_sequences = 1}, KH_F32, 2, {5, 3}, 0},
        {"gap1d", {.kind = KH_LAYER_GAP1D}, KH_F32, 2, {5, 3}, 0},
    };
    printf("\n(a) layers: forward/backward probes, batch %d, random weights and output gradient\n", PROBE_BATCH);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const layer_case *c = &cases[k];
        kh_model_spec spec;
        memset(&spec, 0, sizeof spec);
        spec.struct_size = sizeof spec;
        spec.name = c->name;
        spec.input_dtype = c->dtype;
        spec.input_rank = c->rank;
        memcpy(spec.input_shape, c->shape, sizeof spec.input_shape);
        spec.input_onehot = c->onehot;
        spec.n_layers = 1;
        spec.layers = &c->layer;
        spec.loss = KH_LOSS_NONE;
        // the caps check also asks for an optimizer: use one the backend has, it is never stepped
        spec.optimizer = (kh_optimizer_spec){(uint32_t)first_bit(v->caps.optimizers), 0.001f, 0.9f, 0.9f, 0.999f, 1e-7f, 0};
        char why[512] = "";
        if (!v->has_probes) {
            row_note(v, c->name, "unsupported", "the backend has no probes (KH_CAP_PROBES)");
            continue;
        }
        if (kh_caps_check(&v->caps, &spec, why, sizeof why) != 0) {
            row_note(v, c->name, "unsupported", why);
            continue;
        }
        pair p;
        kh_rng rng;
        kh_rng_seed(&rng, kh_seed_mix(v->seed, 0x7E51, k, 1));
        kh_tensor x;
        int64_t per = shape_numel(c->rank, c->shape);
        if (make_tensor(&x, c->dtype, PROBE_BATCH, c->rank, c->shape, 0) != 0) {
            row_note(v, c->name, "error", "out of memory");
            continue;
        }
        int32_t vocab = c->onehot > 0 ? c->onehot : c->layer.input_dim;
        for (int64_t i = 0; i < PROBE_BATCH * per; i++) {
            if (c->dtype == KH_I32) ((int32_t *)x.data)[i] = (int32_t)kh_rng_below(&rng, (uint64_t)vocab);
            else ((float *)x.data)[i] = (float)(2.0 * kh_rng_uniform(&rng) - 1.0);
        }
        if (pair_open(v, &p, &spec, PROBE_BATCH, kh_seed_mix(v->seed, 0x7E51, k, 2), 0.1, why, sizeof why) != 0 ||
            pair_input(v, &p, &x) != 0) {
            row_note(v, c->name, "error", why[0] ? why : "input conversion failed");
        } else {
            int64_t nout = PROBE_BATCH * p.sh.layers[0].out_numel;
            double *dy = malloc((size_t)nout * sizeof *dy);
            if (!dy) {
                row_note(v, c->name, "error", "out of memory");
            } else {
                for (int64_t i = 0; i < nout; i++) dy[i] = 2.0 * kh_rng_uniform(&rng) - 1.0;
                probe_compare(v, &p, &x, dy, c->name);
                free(dy);
            }
        }
        pair_free(v, &p);
        free(x.data);
    }
}

// ---------------------------------------------------------------------------------------------------------
// (b) one training step per task

// The first optimizer step from zero state, for one element: w0 - update(g). Keras 2 semantics through the
// shared formulas, iterations = 0 (verify always compares the first step of a fresh model).
static double first_step(const kh_optimizer_spec *o, double w0, double g) {
    double eps = o->epsilon > 0.0f ? (double)o->epsilon : KH_EPSILON;
    double lr = kh_ref_lr_decayed((double)o->lr, (double)o->decay, 0);
    double w = w0, a = 0.0, b = 0.0;
    switch (o->kind) {
    case KH_OPT_RMSPROP: kh_rmsprop_update_d(&w, &a, g, lr, (double)o->rho, eps); break;
    case KH_OPT_ADAM:
        kh_adam_update_d(&w, &a, &b, g, kh_ref_adam_lr_t(lr, (double)o->beta_1, (double)o->beta_2, 0),
                         (double)o->beta_1, (double)o->beta_2, eps);
        break;
    case KH_OPT_ADADELTA: kh_adadelta_update_d(&w, &a, &b, g, lr, (double)o->rho, eps); break;
    default: w -= lr * g; break;
    }
    return w;
}

// The step metric described at the top of the file.
static double step_err(const kh_optimizer_spec *o, const float *w1, const float *w0, const double *g,
                       const double *w1_ref, int64_t n, double tol) {
    double gmax = 0.0, dmax = 0.0, worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        gmax = fmax(gmax, fabs(g[i]));
        dmax = fmax(dmax, fabs(w1_ref[i] - (double)w0[i]));
    }
    double delta = tol * gmax;
    for (int64_t i = 0; i < n; i++) {
        double lo = first_step(o, (double)w0[i], g[i] - delta), hi = first_step(o, (double)w0[i], g[i] + delta);
        if (lo > hi) {
            double t = lo;
            lo = hi, hi = t;
        }
        double ulp = fabs(w1_ref[i]) * 1.2e-7; // one float32 ulp: the backend stores its result in float
        lo = fmin(lo, w1_ref[i]) - ulp, hi = fmax(hi, w1_ref[i]) + ulp;
        double a = (double)w1[i];
        double out = a < lo ? lo - a : a > hi ? a - hi : 0.0;
        if (!(out <= worst)) worst = out; // NaN propagates
    }
    return worst / (dmax > 1e-12 ? dmax : 1e-12);
}

// dL/d(output) of the mean loss for the probes (the backend differentiates its own final softmax/sigmoid):
// CCE -[j == t] / (n p_t), BCE (p - y) / (n p (1 - p)); zero where Keras's clip binds, as the loss is flat.
static void loss_output_grad(double *dy, const double *p, const int32_t *y, int64_t n, int64_t C, uint32_t loss) {
    for (int64_t i = 0; i < n; i++) {
        if (loss == KH_LOSS_BINARY_CROSSENTROPY) {
            double q = p[i];
            dy[i] = kh_clip_prob_d(q) != q ? 0.0 : (q - (double)y[i]) / ((double)n * q * (1.0 - q));
            continue;
        }
        for (int64_t j = 0; j < C; j++) {
            double pt = p[i * C + y[i]];
            dy[i * C + j] = (j == y[i] && kh_clip_prob_d(pt) == pt) ? -1.0 / ((double)n * pt) : 0.0;
        }
    }
}

static void verify_task(vctx *v, kh_host *h, kh_module *tm) {
    const kh_task_api *t = tm->task;
    const char *name = tm->desc->name;
    const kh_task_info *info = t->info();
    char err[1024] = "", what[160];
    kh_tdata *data = NULL;
    int64_t n = v->batch > 0 ? v->batch : (info && info->batch_size > 0 ? info->batch_size : 32);
    kh_load_opts lo = {.struct_size = sizeof lo, .data_dir = kh_host_data_dir(h), .limit_train = n,
                       .limit_val = 1, .seed = v->seed};
    kh_status st = t->load(kh_host_api_get(), &lo, &data, err, sizeof err);
    if (st != KH_OK) {
        // a missing data set is visible but not a verification failure
        row_note(v, name, st == KH_ERR_IO ? "skipped" : "error",
                 st == KH_ERR_IO ? (err[0] ? err : "data set missing") : (err[0] ? err : kh_status_name(st)));
        return;
    }
    kh_spec_buf sb;
    memset(&sb, 0, sizeof sb);
    kh_model_spec spec;
    pair p;
    memset(&p, 0, sizeof p);
    kh_tensor x = {0}, y = {0};
    int64_t *idx = NULL;
    double *dy = NULL;
    float *w1 = NULL;
    err[0] = 0;
    if (kh_task_model(tm, data, &sb, err, sizeof err) != KH_OK) {
        row_note(v, name, "error", err);
        goto done;
    }
    spec = sb.spec;
    if (kh_caps_check(&v->caps, &spec, err, sizeof err) != 0) {
        row_note(v, name, "unsupported", err);
        goto done;
    }
    int64_t count = t->count(data, KH_SPLIT_TRAIN);
    if (count < n) n = count;
    if (n <= 0) {
        row_note(v, name, "error", "the training split is empty");
        goto done;
    }
    int32_t yshape[1] = {1};
    idx = malloc((size_t)n * sizeof *idx);
    if (!idx || make_tensor(&x, spec.input_dtype, n, spec.input_rank, spec.input_shape, 0) != 0 ||
        make_tensor(&y, KH_I32, n, 0, yshape, 0) != 0) {
        row_note(v, name, "error", "out of memory");
        goto done;
    }
    y.rank = 1, y.layout = KH_LAYOUT_NC;
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    if (t->get_batch(data, KH_SPLIT_TRAIN, idx, (int32_t)n, &x, &y) != KH_OK) {
        row_note(v, name, "error", t->last_error(data));
        goto done;
    }
    /* Exact ties inside a max-pooling window (saturated MNIST strokes give bit-identical conv outputs) make
     * the gradient's route depend on float rounding: BLAS computes equal dot products in different orders
     * for different columns, so the float backend and the float64 reference can pick different winners and
     * d_input differs by O(1) at those pixels. A +-1e-3 jitter of the real pixels makes maxima unique, so
     * the check measures the backend, not tie-breaking. */
    int has_pool = 0;
    for (int l = 0; l < spec.n_layers; l++)
        if (spec.layers[l].kind == KH_LAYER_MAXPOOL2D) has_pool = 1, v->relax_below = l;
    if (has_pool && x.dtype == KH_F32) {
        kh_rng jr;
        kh_rng_seed(&jr, kh_seed_mix(v->seed, 0x7177E5, 0, 0));
        float *xf = x.data;
        for (int64_t i = 0; i < kh_tensor_numel(&x); i++) xf[i] += (float)((2.0 * kh_rng_uniform(&jr) - 1.0) * 1e-3);
        printf("%s: inputs jittered by +-1e-3 so max-pooling has no exact ties; layers 0-%d and d_input checked at "
               "%.0e (near-ties route gradients by float rounding)\n", name, v->relax_below - 1, VERIFY_TIE_TOL);
    }
    // the training loop's initial weights: kh_init_param in (layer, slot) order from the run's seed
    if (pair_open(v, &p, &spec, n, kh_seed_mix(v->seed, 0x5EED, 0, 0), 0.0, err, sizeof err) != 0 ||
        pair_input(v, &p, &x) != 0) {
        row_note(v, name, "error", err[0] ? err : "input conversion failed");
        goto done;
    }
    printf("%s: batch %lld, %s, %s\n", name, (long long)n, kh_loss_name(spec.loss), kh_optimizer_name(spec.optimizer.kind));

    // gradients through the probes, with the reference's dL/d(output) as the output gradient
    if (v->has_probes) {
        const kh_layer_shapes *last = &p.sh.layers[p.sh.n_layers - 1];
        int64_t nout = n * last->out_numel;
        if (kh_ref_model_forward(p.ref, &x, 1) != KH_OK || !(dy = malloc((size_t)nout * sizeof *dy))) {
            row_note(v, name, "error", "reference forward failed");
            goto done;
        }
        loss_output_grad(dy, kh_ref_model_output(p.ref, NULL), y.data, n, last->out_numel, spec.loss);
        probe_compare(v, &p, &x, dy, name);
    }

    // one training step on each side
    double ref_loss = NAN;
    if (kh_ref_model_train_step(p.ref, &x, y.data, &ref_loss, NULL) != KH_OK) {
        row_note(v, name, "error", kh_ref_model_last_error(p.ref));
        goto done;
    }
    kh_metrics met = {0};
    if (v->b->train_batch(p.bm, &p.xb, &y) != KH_OK || v->b->sync(p.bm) != KH_OK ||
        v->b->read_metrics(p.bm, KH_PHASE_TRAIN, &met, 1) != KH_OK) {
        snprintf(what, sizeof what, "%s train step", name);
        row_note(v, what, "error", berr(v));
        goto done;
    }
    double bl = met.samples > 0 ? met.loss_sum / (double)met.samples : NAN;
    snprintf(what, sizeof what, "%s loss", name);
    row(v, what, fabs(bl - ref_loss) / fmax(fabs(ref_loss), VERIFY_FLOOR), v->tol);
    int k = 0;
    for (int l = 0; l < p.sh.n_layers; l++) {
        for (int s = 0; s < p.sh.layers[l].n_params; s++, k++) {
            const kh_param_shape *ps = &p.sh.layers[l].params[s];
            slot_label(what, sizeof what, name, "step", &p, l, s);
            free(w1);
            w1 = malloc((size_t)ps->numel * 4 + 1);
            kh_tensor wt = {.dtype = KH_F32, .layout = KH_LAYOUT_ANY, .rank = ps->rank, .data = w1};
            for (int d = 0; d < ps->rank; d++) wt.dims[d] = ps->dims[d];
            if (!w1) row_note(v, what, "error", "out of memory");
            else if (v->b->get_weight(p.bm, l, s, &wt) != KH_OK) row_note(v, what, "error", berr(v));
            else
                row(v, what, step_err(&spec.optimizer, w1, p.w0[k], kh_ref_model_grad(p.ref, l, s),
                                      kh_ref_model_weight(p.ref, l, s), ps->numel, v->tol), tol_for(v, l));
        }
    }
done:
    v->relax_below = 0;
    pair_free(v, &p);
    free(idx), free(dy), free(w1), free(x.data), free(y.data);
    kh_spec_buf_free(&sb);
    if (data) t->unload(data);
}

// ---------------------------------------------------------------------------------------------------------
// command

static int parse(int argc, char **argv, const char **plugin, const char **device, const char **task, uint32_t *math,
                 vctx *v) {
    kh_args a;
    kh_args_init(&a, "verify", argc, argv);
    const char *opt, *iv, *val;
    while ((opt = kh_args_next(&a, &iv))) {
        if (!strcmp(opt, "--plugin") || !strcmp(opt, "--device") || !strcmp(opt, "--task") || !strcmp(opt, "--tol")) {
            if (!(val = kh_args_value(&a, opt, iv))) return -1;
            if (!strcmp(opt, "--plugin")) *plugin = val;
            else if (!strcmp(opt, "--device")) *device = val;
            else if (!strcmp(opt, "--task")) *task = val;
            else {
                char *end;
                v->tol = strtod(val, &end);
                if (*end || end == val || !(v->tol > 0) || !isfinite(v->tol)) {
                    fprintf(stderr, "khost verify: --tol needs a positive finite number, not '%s'\n", val);
                    return -1;
                }
            }
        } else if (!strcmp(opt, "--math")) {
            if (!(val = kh_args_value(&a, opt, iv))) return -1;
            if (kh_math_parse(val, math) != 0) {
                fprintf(stderr, "khost verify: --math expects fp32 or tf32, got '%s'\n", val);
                return -1;
            }
        } else if (!strcmp(opt, "--seed") || !strcmp(opt, "--batch")) {
            int64_t nval;
            if (!(val = kh_args_value(&a, opt, iv)) || kh_args_int64(opt, val, !strcmp(opt, "--seed") ? 0 : 1, &nval))
                return -1;
            if (!strcmp(opt, "--seed")) v->seed = (uint64_t)nval;
            else v->batch = nval;
        } else {
            return kh_args_unknown(&a, opt);
        }
    }
    if (!*plugin) {
        fprintf(stderr, "khost verify: --plugin is required (see khost --help)\n");
        return -1;
    }
    return 0;
}

int kh_cmd_verify(kh_host *h, int argc, char **argv) {
    vctx v;
    memset(&v, 0, sizeof v);
    v.tol = VERIFY_TOL;
    v.seed = h->reg.seed;
    const char *plugin = NULL, *device = NULL, *task = "all";
    uint32_t math = KH_MATH_FP32;
    if (parse(argc, argv, &plugin, &device, &task, &math, &v) != 0) return KH_EXIT_USAGE;
    char err[1024] = "";
    const kh_host_api *api = kh_host_api_get();
    kh_module *bm = kh_modules_find(&h->mods, KH_MODULE_BACKEND, plugin, api, err, sizeof err);
    if (!bm) {
        kh_logf(KH_LOG_ERROR, "%s", err);
        return KH_EXIT_MODULE;
    }
    ptrdiff_t bi = bm - h->mods.v; // a later find may load by path and grow (move) the module list
    kh_module *tonly = NULL;
    if (strcmp(task, "all") && strcmp(task, "none")) {
        tonly = kh_modules_find(&h->mods, KH_MODULE_TASK, task, api, err, sizeof err);
        if (!tonly) {
            kh_logf(KH_LOG_ERROR, "%s", err);
            return KH_EXIT_MODULE;
        }
    }
    bm = &h->mods.v[bi];
    kh_devices *devs = kh_host_devices(h);
    kh_device *dev = kh_host_device(h, device);
    if (!dev) return KH_EXIT_DEVICE;
    v.bm = bm;
    v.b = bm->backend;
    v.plugin = bm->desc->name;
    v.caps.struct_size = sizeof v.caps;
    if (v.b->get_caps(dev->kind, &v.caps) != KH_OK) {
        kh_logf(KH_LOG_ERROR, "verify: %s get_caps failed", v.plugin);
        return KH_EXIT_MODULE;
    }
    /* the session's FP32 math; the tolerance stays the one given (TF32 rounds inputs to 10 bits: --tol) */
    char math_note[192];
    kh_device sdev = *dev;
    sdev.struct_size = sizeof sdev;
    sdev.math = kh_math_effective(math, dev, bm->desc->abi_minor, v.plugin, math_note, sizeof math_note);
    printf("khost verify: plugin %s %s on %s (%s) against the float64 reference, tolerance %.1e, seed %llu, math %s%s%s\n",
           v.plugin, bm->desc->version ? bm->desc->version : "", dev->id, dev->name, v.tol,
           (unsigned long long)v.seed, kh_math_name(sdev.math), math_note[0] ? ": " : "", math_note);
    if (!v.caps.available) {
        printf("%s: device kind not available: %s\n", v.plugin, v.caps.note[0] ? v.caps.note : "no reason given");
        return KH_EXIT_UNSUPPORTED;
    }
    v.has_probes = (v.caps.flags & KH_CAP_PROBES) && v.b->forward && v.b->backward && v.b->get_grad;
    if (kh_device_activate(devs, dev, err, sizeof err) != 0) {
        kh_logf(KH_LOG_ERROR, "%s", err);
        return KH_EXIT_DEVICE;
    }
    err[0] = 0;
    if (v.b->open(api, &sdev, &v.s, err, sizeof err) != KH_OK) {
        kh_logf(KH_LOG_ERROR, "verify: %s open on %s: %s", v.plugin, dev->id, err[0] ? err : "no reason given");
        kh_device_release(devs, dev);
        return KH_EXIT_DEVICE;
    }
    char envs[512]; /* what the backend runs on (its record's environment): which path was verified */
    if (v.b->environment && v.b->environment(v.s, envs, sizeof envs) == KH_OK) printf("environment: %s\n", envs);
    printf("metric: max|backend - reference| / max|reference| per tensor; step: distance outside the reference "
           "optimizer's reach / max reference update\n");
    printf("%-52s %12s %9s  %s\n", "layer/step", "max_rel_err", "tol", "result");
    verify_layers(&v);
    if (strcmp(task, "none")) {
        printf("\n(b) tasks: one training step on one batch of real data, same initial weights, dropout off\n");
        if (!tonly) kh_modules_load_kind(&h->mods, KH_MODULE_TASK, api);
        for (int i = 0; i < h->mods.n; i++) {
            kh_module *m = &h->mods.v[i];
            if (m->kind != KH_MODULE_TASK || (tonly ? m != tonly : !m->enabled)) continue;
            verify_task(&v, h, m);
        }
    }
    v.b->close(v.s);
    kh_device_release(devs, dev);
    printf("\nsummary: %d passed, %d failed, %d unsupported, %d skipped\n", v.n_pass, v.n_fail, v.n_unsup, v.n_skip);
    return v.n_fail ? KH_EXIT_VERIFY : KH_EXIT_OK;
}
