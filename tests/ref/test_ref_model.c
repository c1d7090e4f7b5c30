/* tests/ref/test_ref_model.c — the whole-model reference (kh_ref_model) on tiny versions of the six task
 * architectures: mlp, cnn (valid + same conv, pooling, flatten), cifar-like strided conv, char-LSTM on
 * one-hot input, Embedding + Bidirectional LSTM, fastText (Embedding + GlobalAveragePooling1D), and LSTM
 * with return_sequences into pooling.
 * Checks, each against float64 central differences (GC_TOL) or independent arithmetic:
 *   - loss gradients of every (layer, slot) and of the input (f32 models) through the fused softmax/sigmoid;
 *   - the probe path: backward from a random output gradient (parameter gradients overwritten, not summed);
 *   - a training step = w - update(grad) for SGD and Adam, iterations counted;
 *   - one-hot input equals the same model on explicitly expanded float input;
 *   - dropout: off in inference and when disabled, deterministic per seed, and changes training outputs;
 *   - refusals: bad weight size, labels out of range, backward before forward, out-of-range indices. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "khost/kit/ref.h"
#include "testutil.h"

typedef struct mctx {
    kh_ref_model *m;
    kh_tensor x;    // the batch as a task gives it
    double *xd;     // float64 copy of an f32 input (NULL for index input)
    int32_t *y;     // labels
    double *r;      // random output gradient for the probe objective
    int64_t B, nin, nout;
    int probe;      // 1: objective sum(r * out); 0: the mean loss
} mctx;

static double objective(void *v) {
    mctx *c = v;
    kh_status st = c->xd ? kh_ref_model_forward_d(c->m, c->xd, c->B, 0) : kh_ref_model_forward(c->m, &c->x, 0);
    if (st != KH_OK) return NAN;
    if (c->probe) {
        int64_t n;
        const double *out = kh_ref_model_output(c->m, &n);
        return gc_dot(c->r, out, n);
    }
    double loss = NAN;
    if (kh_ref_model_loss(c->m, c->y, &loss, NULL) != KH_OK) return NAN;
    return loss;
}

static kh_model_spec make_spec(const char *name, uint32_t dtype, int rank, int s0, int s1, int s2, int onehot,
                               const kh_layer_spec *layers, int n, uint32_t loss, int classes) {
    kh_model_spec s = kh_test_spec(name, dtype, rank, s0, s1, s2, onehot, layers, n, loss, classes);
    s.optimizer = (kh_optimizer_spec){KH_OPT_SGD, 0.1f, 0.9f, 0.9f, 0.999f, 1e-7f, 0.0f};
    return s;
}

// Build the model with random weights and a random batch; vocab bounds index inputs.
static kh_ref_model *build(const kh_model_spec *spec, kh_rng *r, mctx *c, int64_t B, int32_t vocab) {
    char err[256] = "";
    kh_ref_model *m = NULL;
    kh_status st = kh_ref_model_create(spec, &m, err, sizeof err);
    CHECK(st == KH_OK, "%s: create: %s", spec->name, err);
    if (st != KH_OK) return NULL;
    const kh_model_shapes *sh = kh_ref_model_shapes(m);
    for (int32_t l = 0; l < sh->n_layers; l++)
        for (int s = 0; s < sh->layers[l].n_params; s++) {
            double *w = kh_ref_model_weight(m, l, s);
            gc_fill(w, sh->layers[l].params[s].numel, r, -0.5, 0.5);
        }
    memset(c, 0, sizeof *c);
    c->m = m, c->B = B;
    int64_t per = 1;
    for (int i = 0; i < spec->input_rank; i++) per *= spec->input_shape[i];
    c->nin = B * per;
    c->x.dtype = spec->input_dtype;
    c->x.rank = spec->input_rank + 1;
    c->x.dims[0] = B;
    for (int i = 0; i < spec->input_rank; i++) c->x.dims[i + 1] = spec->input_shape[i];
    c->x.data = calloc((size_t)c->nin, 4);
    if (!c->x.data) exit(2);
    if (spec->input_dtype == KH_F32) {
        c->xd = gc_alloc(c->nin);
        gc_fill(c->xd, c->nin, r, -1, 1);
        for (int64_t i = 0; i < c->nin; i++) ((float *)c->x.data)[i] = (float)c->xd[i];
    } else {
        for (int64_t i = 0; i < c->nin; i++) ((int32_t *)c->x.data)[i] = (int32_t)gc_range(r, 0, vocab - 1);
    }
    c->y = calloc((size_t)B, sizeof(int32_t));
    if (!c->y) exit(2);
    int classes = spec->loss == KH_LOSS_BINARY_CROSSENTROPY ? 2 : spec->n_classes;
    for (int64_t n = 0; n < B; n++) c->y[n] = (int32_t)gc_range(r, 0, classes - 1);
    c->nout = B * sh->layers[sh->n_layers - 1].out_numel;
    c->r = gc_alloc(c->nout);
    gc_fill(c->r, c->nout, r, -1, 1);
    return m;
}

static void free_ctx(mctx *c) {
    kh_ref_model_free(c->m);
    free(c->x.data), free(c->xd), free(c->y), free(c->r);
}

// Copy every gradient of the model (and its input gradient) out, then finite-difference each.
static void check_grads(const char *label, mctx *c) {
    const kh_model_shapes *sh = kh_ref_model_shapes(c->m);
    gc_tensor ts[64];
    double *copies[64];
    int nt = 0;
    static char names[64][32];
    if (c->xd) {
        const double *dx = kh_ref_model_input_grad(c->m);
        copies[nt] = gc_alloc(c->nin);
        memcpy(copies[nt], dx, (size_t)c->nin * sizeof(double));
        ts[nt] = (gc_tensor){"d_input", c->xd, copies[nt], c->nin};
        nt++;
    }
    for (int32_t l = 0; l < sh->n_layers && nt < 64; l++)
        for (int s = 0; s < sh->layers[l].n_params && nt < 64; s++) {
            int64_t n = sh->layers[l].params[s].numel;
            copies[nt] = gc_alloc(n);
            memcpy(copies[nt], kh_ref_model_grad(c->m, l, s), (size_t)n * sizeof(double));
            snprintf(names[nt], sizeof names[nt], "L%d.%s", l, sh->layers[l].params[s].name);
            ts[nt] = (gc_tensor){names[nt], kh_ref_model_weight(c->m, l, s), copies[nt], n};
            nt++;
        }
    gc_check(label, objective, c, ts, nt, GC_TOL);
    for (int k = 0; k < nt; k++) free(copies[k]);
}

static void check_model(const kh_model_spec *spec, kh_rng *r, int64_t B, int32_t vocab) {
    mctx c;
    kh_ref_model *m = build(spec, r, &c, B, vocab);
    if (!m) return;
    char label[96];
    // (1) loss gradients through the fused final activation
    kh_status st = kh_ref_model_forward(m, &c.x, 0);
    if (st == KH_OK && c.xd) st = kh_ref_model_forward_d(m, c.xd, B, 0); // exact float64 input for FD
    CHECK(st == KH_OK, "%s forward: %s", spec->name, kh_ref_model_last_error(m));
    st = kh_ref_model_loss_backward(m, c.y);
    CHECK(st == KH_OK, "%s loss backward: %s", spec->name, kh_ref_model_last_error(m));
    snprintf(label, sizeof label, "model %s loss", spec->name);
    check_grads(label, &c);
    // (2) the probe path, run twice: gradients must be overwritten, not accumulated
    c.probe = 1;
    objective(&c);
    CHECK(kh_ref_model_backward(m, c.r) == KH_OK, "probe backward");
    objective(&c);
    CHECK(kh_ref_model_backward(m, c.r) == KH_OK, "probe backward");
    snprintf(label, sizeof label, "model %s probe", spec->name);
    check_grads(label, &c);
    c.probe = 0;

    // (3) a training step with SGD: w1 = w0 - lr * g(w0), iterations 0 -> 1
    const kh_model_shapes *sh = kh_ref_model_shapes(m);
    int32_t l0 = sh->n_layers - 1;
    while (l0 > 0 && sh->layers[l0].n_params == 0) l0--; // the last layer with weights
    int64_t n0 = sh->layers[l0].params[0].numel;
    double *w0 = gc_alloc(n0), *g0 = gc_alloc(n0);
    memcpy(w0, kh_ref_model_weight(m, l0, 0), (size_t)n0 * sizeof(double));
    kh_ref_model_forward(m, &c.x, 1);
    kh_ref_model_loss_backward(m, c.y);
    memcpy(g0, kh_ref_model_grad(m, l0, 0), (size_t)n0 * sizeof(double));
    double loss = NAN;
    int64_t correct = -1;
    st = kh_ref_model_train_step(m, &c.x, c.y, &loss, &correct);
    CHECK(st == KH_OK && kh_ref_model_iterations(m) == 1, "%s train step: %s", spec->name, kh_ref_model_last_error(m));
    CHECK(isfinite(loss) && correct >= 0 && correct <= B, "%s loss %g correct %lld", spec->name, loss, (long long)correct);
    double e = 0;
    const double *w1 = kh_ref_model_weight(m, l0, 0);
    for (int64_t i = 0; i < n0; i++) e = fmax(e, fabs(w1[i] - (w0[i] - (double)spec->optimizer.lr * g0[i])));
    CHECK(e < 1e-12, "%s: sgd step w1 = w0 - lr g (err %.3e)", spec->name, e);
    free(w0), free(g0);
    free_ctx(&c);
}

static void test_adam_step(kh_rng *r) {
    kh_layer_spec L[1] = {{.kind = KH_LAYER_DENSE, .units = 3, .activation = KH_ACT_SOFTMAX}};
    kh_model_spec s = make_spec("adam", KH_F32, 1, 4, 0, 0, 0, L, 1, KH_LOSS_CATEGORICAL_CROSSENTROPY, 3);
    s.optimizer = (kh_optimizer_spec){KH_OPT_ADAM, 0.01f, 0, 0.9f, 0.999f, 1e-7f, 0.1f};
    mctx c;
    kh_ref_model *m = build(&s, r, &c, 5, 0);
    if (!m) return;
    double w[12], mm[12] = {0}, vv[12] = {0};
    memcpy(w, kh_ref_model_weight(m, 0, 0), sizeof w);
    for (int step = 0; step < 3; step++) {
        // the expected update from the kit's per-tensor functions, with the schedule written out here
        kh_ref_model_forward(m, &c.x, 0);
        kh_ref_model_loss_backward(m, c.y);
        const double *g = kh_ref_model_grad(m, 0, 0);
        double lr = (double)s.optimizer.lr / (1.0 + (double)s.optimizer.decay * step);
        double t = step + 1.0;
        double lr_t = lr * sqrt(1.0 - pow((double)s.optimizer.beta_2, t)) / (1.0 - pow((double)s.optimizer.beta_1, t));
        kh_ref_adam_update(w, mm, vv, g, 12, lr_t, (double)s.optimizer.beta_1, (double)s.optimizer.beta_2,
                           (double)s.optimizer.epsilon);
        CHECK(kh_ref_model_train_step(m, &c.x, c.y, NULL, NULL) == KH_OK, "adam step");
    }
    double e = 0;
    for (int i = 0; i < 12; i++) e = fmax(e, fabs(kh_ref_model_weight(m, 0, 0)[i] - w[i]));
    CHECK(e < 1e-14 && kh_ref_model_iterations(m) == 3, "model adam with decay, 3 steps (err %.3e)", e);
    free_ctx(&c);
}

// One-hot i32 input must equal the same model fed the expanded float tensor.
static void test_onehot(kh_rng *r) {
    kh_layer_spec L[2] = {{.kind = KH_LAYER_LSTM, .units = 3}, {.kind = KH_LAYER_DENSE, .units = 5, .activation = KH_ACT_SOFTMAX}};
    kh_model_spec si = make_spec("onehot", KH_I32, 1, 4, 0, 0, 5, L, 2, KH_LOSS_CATEGORICAL_CROSSENTROPY, 5);
    kh_model_spec sf = make_spec("expanded", KH_F32, 2, 4, 5, 0, 0, L, 2, KH_LOSS_CATEGORICAL_CROSSENTROPY, 5);
    mctx ci, cf;
    kh_ref_model *mi = build(&si, r, &ci, 3, 5);
    kh_ref_model *mf = build(&sf, r, &cf, 3, 0);
    if (!mi || !mf) return;
    for (int s = 0; s < 3; s++)
        kh_ref_model_set_weight(mf, 0, s, kh_ref_model_weight(mi, 0, s), kh_ref_model_shapes(mi)->layers[0].params[s].numel);
    for (int s = 0; s < 2; s++)
        kh_ref_model_set_weight(mf, 1, s, kh_ref_model_weight(mi, 1, s), kh_ref_model_shapes(mi)->layers[1].params[s].numel);
    const int32_t *idx = ci.x.data;
    for (int64_t i = 0; i < 12; i++)
        for (int k = 0; k < 5; k++) cf.xd[i * 5 + k] = idx[i] == k;
    CHECK(kh_ref_model_forward(mi, &ci.x, 0) == KH_OK, "onehot forward");
    CHECK(kh_ref_model_forward_d(mf, cf.xd, 3, 0) == KH_OK, "expanded forward");
    int64_t n1, n2;
    const double *o1 = kh_ref_model_output(mi, &n1), *o2 = kh_ref_model_output(mf, &n2);
    CHECK(n1 == 15 && n2 == 15 && memcmp(o1, o2, 15 * sizeof(double)) == 0, "one-hot expansion equals float one-hot");
    CHECK(kh_ref_model_input_grad(mi) == NULL, "index input has no input gradient");
    ((int32_t *)ci.x.data)[4] = 5;
    CHECK(kh_ref_model_forward(mi, &ci.x, 0) == KH_ERR_INVALID, "one-hot index out of range refused");
    free_ctx(&ci);
    free_ctx(&cf);
}

static void test_dropout_and_errors(kh_rng *r) {
    kh_layer_spec L[3] = {{.kind = KH_LAYER_DENSE, .units = 16, .activation = KH_ACT_RELU},
                          {.kind = KH_LAYER_DROPOUT, .rate = 0.5f},
                          {.kind = KH_LAYER_DENSE, .units = 2, .activation = KH_ACT_SOFTMAX}};
    kh_model_spec s = make_spec("dropout", KH_F32, 1, 6, 0, 0, 0, L, 3, KH_LOSS_CATEGORICAL_CROSSENTROPY, 2);
    mctx c;
    kh_ref_model *m = build(&s, r, &c, 4, 0);
    if (!m) return;
    double base[8], a[8], b[8];
    kh_ref_model_forward(m, &c.x, 1); // dropout not enabled: identity even in training
    memcpy(base, kh_ref_model_output(m, NULL), sizeof base);
    kh_ref_model_set_dropout(m, 1, 99);
    kh_ref_model_forward(m, &c.x, 0);
    CHECK(memcmp(base, kh_ref_model_output(m, NULL), sizeof base) == 0, "inference ignores dropout");
    kh_ref_model_forward(m, &c.x, 1);
    memcpy(a, kh_ref_model_output(m, NULL), sizeof a);
    CHECK(memcmp(a, base, sizeof a) != 0, "training with dropout changes the output");
    // a fresh model with the same weights and dropout seed must draw the same masks
    mctx c2;
    kh_ref_model *m2 = build(&s, r, &c2, 4, 0);
    for (int l = 0; l < 3; l += 2)
        for (int k = 0; k < 2; k++)
            kh_ref_model_set_weight(m2, l, k, kh_ref_model_weight(m, l, k), kh_ref_model_shapes(m)->layers[l].params[k].numel);
    kh_ref_model_set_dropout(m2, 1, 99);
    kh_ref_model_forward(m2, &c.x, 1);
    memcpy(b, kh_ref_model_output(m2, NULL), sizeof b);
    CHECK(memcmp(a, b, sizeof a) == 0, "same seed, same forward count: same masks");

    // refusals
    double w1[3] = {0};
    CHECK(kh_ref_model_set_weight(m, 0, 0, w1, 3) == KH_ERR_INVALID, "wrong weight size refused");
    CHECK(kh_ref_model_set_weight(m, 1, 0, w1, 3) == KH_ERR_INVALID, "dropout has no weights");
    CHECK(kh_ref_model_weight(m, 7, 0) == NULL && kh_ref_model_grad(m, 0, 2) == NULL, "bad (layer, slot) is NULL");
    c.y[0] = 2;
    kh_ref_model_forward(m, &c.x, 0);
    CHECK(kh_ref_model_loss(m, c.y, NULL, NULL) == KH_ERR_INVALID, "label out of range refused: %s",
          kh_ref_model_last_error(m));
    CHECK(kh_ref_model_loss_backward(m, c.y) == KH_ERR_INVALID, "label out of range refused in backward");
    mctx c3;
    kh_ref_model *m3 = build(&s, r, &c3, 2, 0);
    CHECK(kh_ref_model_backward(m3, c3.r) == KH_ERR_INVALID, "backward before forward refused");
    kh_layer_spec bad[1] = {{.kind = KH_LAYER_DENSE, .units = 0}};
    kh_model_spec sb = make_spec("bad", KH_F32, 1, 6, 0, 0, 0, bad, 1, KH_LOSS_NONE, 0);
    char err[256] = "";
    kh_ref_model *mb = NULL;
    CHECK(kh_ref_model_create(&sb, &mb, err, sizeof err) == KH_ERR_INVALID && mb == NULL && err[0],
          "invalid spec refused with a message");
    // a categorical loss needs a final softmax to fuse
    kh_layer_spec nolin[1] = {{.kind = KH_LAYER_DENSE, .units = 3, .activation = KH_ACT_LINEAR}};
    kh_model_spec sn = make_spec("nosoftmax", KH_F32, 1, 2, 0, 0, 0, nolin, 1, KH_LOSS_CATEGORICAL_CROSSENTROPY, 3);
    mctx c4;
    kh_ref_model *m4 = build(&sn, r, &c4, 2, 0);
    kh_ref_model_forward(m4, &c4.x, 0);
    CHECK(kh_ref_model_loss_backward(m4, c4.y) == KH_ERR_UNSUPPORTED, "cce without softmax is unsupported");
    free_ctx(&c), free_ctx(&c2), free_ctx(&c3), free_ctx(&c4);
}

int main(void) {
    kh_rng r;
    kh_rng_seed(&r, 4242);
    // whole models: the loss is O(1) while some weights' gradients are ~1e-4, so a larger step keeps the
    // float64 round-off of the objective (~1e-16 / h) well below GC_TOL relative to those gradients
    gc_h = 1e-5;
    { // mnist_mlp
        kh_layer_spec L[5] = {{.kind = KH_LAYER_DENSE, .units = 6, .activation = KH_ACT_RELU},
                              {.kind = KH_LAYER_DROPOUT, .rate = 0.2f},
                              {.kind = KH_LAYER_DENSE, .units = 5, .activation = KH_ACT_RELU},
                              {.kind = KH_LAYER_DROPOUT, .rate = 0.2f},
                              {.kind = KH_LAYER_DENSE, .units = 4, .activation = KH_ACT_SOFTMAX}};
        kh_model_spec s = make_spec("mlp", KH_F32, 1, 7, 0, 0, 0, L, 5, KH_LOSS_CATEGORICAL_CROSSENTROPY, 4);
        check_model(&s, &r, 3, 0);
    }
    { // mnist_cnn
        kh_layer_spec L[7] = {{.kind = KH_LAYER_CONV2D, .units = 2, .kernel = {3, 3}, .activation = KH_ACT_RELU},
                              {.kind = KH_LAYER_CONV2D, .units = 3, .kernel = {3, 3}, .padding = KH_PAD_SAME, .activation = KH_ACT_RELU},
                              {.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}},
                              {.kind = KH_LAYER_DROPOUT, .rate = 0.25f},
                              {.kind = KH_LAYER_FLATTEN},
                              {.kind = KH_LAYER_DENSE, .units = 4, .activation = KH_ACT_RELU},
                              {.kind = KH_LAYER_DENSE, .units = 3, .activation = KH_ACT_SOFTMAX}};
        kh_model_spec s = make_spec("cnn", KH_F32, 3, 7, 6, 2, 0, L, 7, KH_LOSS_CATEGORICAL_CROSSENTROPY, 3);
        check_model(&s, &r, 2, 0);
    }
    { // cifar-like: strided same conv, linear conv + separate Activation, softmax as its own layer
        kh_layer_spec L[6] = {{.kind = KH_LAYER_CONV2D, .units = 2, .kernel = {3, 3}, .strides = {2, 2}, .padding = KH_PAD_SAME},
                              {.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_TANH},
                              {.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}, .padding = KH_PAD_SAME},
                              {.kind = KH_LAYER_FLATTEN},
                              {.kind = KH_LAYER_DENSE, .units = 3},
                              {.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_SOFTMAX}};
        kh_model_spec s = make_spec("cifar", KH_F32, 3, 7, 7, 3, 0, L, 6, KH_LOSS_CATEGORICAL_CROSSENTROPY, 3);
        check_model(&s, &r, 2, 0);
    }
    { // lstm_text_generation: one-hot characters
        kh_layer_spec L[3] = {{.kind = KH_LAYER_LSTM, .units = 3},
                              {.kind = KH_LAYER_DENSE, .units = 4},
                              {.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_SOFTMAX}};
        kh_model_spec s = make_spec("charlstm", KH_I32, 1, 5, 0, 0, 4, L, 3, KH_LOSS_CATEGORICAL_CROSSENTROPY, 4);
        check_model(&s, &r, 3, 4);
    }
    { // imdb_bidirectional_lstm
        kh_layer_spec L[4] = {{.kind = KH_LAYER_EMBEDDING, .input_dim = 9, .units = 3},
                              {.kind = KH_LAYER_BILSTM, .units = 2},
                              {.kind = KH_LAYER_DROPOUT, .rate = 0.5f},
                              {.kind = KH_LAYER_DENSE, .units = 1, .activation = KH_ACT_SIGMOID}};
        kh_model_spec s = make_spec("bilstm", KH_I32, 1, 5, 0, 0, 0, L, 4, KH_LOSS_BINARY_CROSSENTROPY, 1);
        check_model(&s, &r, 3, 9);
    }
    { // imdb_fasttext
        kh_layer_spec L[3] = {{.kind = KH_LAYER_EMBEDDING, .input_dim = 7, .units = 3},
                              {.kind = KH_LAYER_GAP1D},
                              {.kind = KH_LAYER_DENSE, .units = 1, .activation = KH_ACT_SIGMOID}};
        kh_model_spec s = make_spec("fasttext", KH_I32, 1, 6, 0, 0, 0, L, 3, KH_LOSS_BINARY_CROSSENTROPY, 1);
        check_model(&s, &r, 4, 7);
    }
    { // sequences through LSTM and BiLSTM return_sequences into pooling
        kh_layer_spec L[4] = {{.kind = KH_LAYER_LSTM, .units = 3, .return_sequences = 1},
                              {.kind = KH_LAYER_BILSTM, .units = 2, .return_sequences = 1},
                              {.kind = KH_LAYER_GAP1D},
                              {.kind = KH_LAYER_DENSE, .units = 2, .activation = KH_ACT_SOFTMAX}};
        kh_model_spec s = make_spec("seq", KH_F32, 2, 4, 3, 0, 0, L, 4, KH_LOSS_CATEGORICAL_CROSSENTROPY, 2);
        check_model(&s, &r, 2, 0);
    }
    test_adam_step(&r);
    test_onehot(&r);
    test_dropout_and_errors(&r);
    return kh_test_finish("test_ref_model");
}
