/* tests/kit/test_flops.c — kh_spec_flops against hand-computed counts for the six benchmark models
 * (docs/PERFORMANCE.md, "How the numbers are counted"; the MAC sums are the ones written out there). */
#include <string.h>

#include "khost/kit/spec.h"
#include "khost/kit/flops.h"
#include "testutil.h"

#define L(...) ((kh_layer_spec){__VA_ARGS__})

typedef struct want {
    double fwd, bwd, params, opt_k;
} want;

static kh_model_flops last; /* the latest check's counts, for the byte checks that follow it */

static void check(const char *name, uint32_t dtype, int rank, int a, int b, int c, int onehot, const kh_layer_spec *l,
                  int n, uint32_t opt, want w) {
    kh_model_spec s = {.struct_size = sizeof s, .name = name, .input_dtype = dtype, .input_rank = rank,
                       .input_shape = {a, b, c}, .input_onehot = onehot, .n_layers = n, .layers = l,
                       .loss = KH_LOSS_NONE, .optimizer = {.kind = opt}};
    kh_model_shapes sh;
    char err[256];
    if (kh_spec_infer(&s, &sh, err, sizeof err) != KH_OK) {
        CHECK(0, "%s: %s", name, err);
        return;
    }
    kh_model_flops f;
    kh_layer_flops per[32];
    CHECK(kh_spec_flops(&s, &sh, &f, per, err, sizeof err) == KH_OK, "%s: %s", name, err);
    CHECK(f.forward == w.fwd, "%s forward %.0f, hand %.0f", name, f.forward, w.fwd);
    CHECK(f.backward == w.bwd, "%s backward %.0f, hand %.0f", name, f.backward, w.bwd);
    CHECK(f.params == w.params, "%s params %.0f, hand %.0f", name, f.params, w.params);
    CHECK(f.optimizer == w.params * w.opt_k, "%s optimizer %.0f, hand %.0f", name, f.optimizer, w.params * w.opt_k);
    double sum_f = 0, sum_b = 0;
    for (int i = 0; i < n; i++) sum_f += per[i].forward, sum_b += per[i].backward;
    CHECK(sum_f == f.forward && sum_b == f.backward, "%s per-layer counts add up", name);
    /* each layer's backward is its weight gradient (the forward's FLOPs again) and its input gradient, which the
     * first layer with weights does not need (nothing before it learns) unless it is recurrent */
    int before_weights = 1;
    for (int i = 0; i < n; i++) {
        CHECK(per[i].weight_grad == per[i].forward && per[i].input_grad + per[i].weight_grad == per[i].backward,
              "%s layer %d: input %.0f + weight %.0f gradient FLOPs, backward %.0f, forward %.0f", name, i,
              per[i].input_grad, per[i].weight_grad, per[i].backward, per[i].forward);
        if (before_weights && l[i].kind != KH_LAYER_LSTM && l[i].kind != KH_LAYER_BILSTM)
            CHECK(per[i].input_grad == 0, "%s layer %d: an input gradient of %.0f FLOPs before any weights", name, i,
                  per[i].input_grad);
        if (sh.layers[i].n_params > 0) before_weights = 0;
    }
    last = f;
    kh_model_shapes_free(&sh);
}

int main(void) {
    /* mnist_mlp: MACs 784*512 + 512*512 + 512*10 = 668,672; backward adds the input gradients of layers 2-3 */
    const kh_layer_spec mlp[] = {L(.kind = KH_LAYER_DENSE, .units = 512, .activation = KH_ACT_RELU),
                                 L(.kind = KH_LAYER_DROPOUT, .rate = 0.2f),
                                 L(.kind = KH_LAYER_DENSE, .units = 512, .activation = KH_ACT_RELU),
                                 L(.kind = KH_LAYER_DROPOUT, .rate = 0.2f),
                                 L(.kind = KH_LAYER_DENSE, .units = 10, .activation = KH_ACT_SOFTMAX)};
    check("mnist_mlp", KH_F32, 1, 784, 0, 0, 0, mlp, 5, KH_OPT_RMSPROP,
          (want){1337344, 1337344 + 2.0 * (262144 + 5120), 669706, 9});
    /* compulsory bytes: RMSprop's w and a read and written once (4 passes); outputs of the three Dense (512,
     * 512, 10) written and read once, their gradients too; Dropout fuses into its producer */
    CHECK(last.param_bytes_train == 4 * 669706.0 * 4, "mnist_mlp train bytes %.0f", last.param_bytes_train);
    CHECK(last.param_bytes_eval == 4 * 669706.0, "mnist_mlp eval bytes %.0f", last.param_bytes_eval);
    CHECK(last.act_bytes_train == 4 * 4 * 1034.0, "mnist_mlp activation bytes %.0f", last.act_bytes_train);
    CHECK(last.act_bytes_eval == 4 * 2 * 1034.0, "mnist_mlp eval activation bytes %.0f", last.act_bytes_eval);
    CHECK(last.ws_param_train == 4 * 669706.0 * 2 && last.ws_act_train == 4 * 2 * 1034.0,
          "mnist_mlp working set %.0f + %.0f per sample", last.ws_param_train, last.ws_act_train);

    /* mnist_cnn: 26*26*32*9 = 194,688; 24*24*64*288 = 10,616,832; 9216*128 = 1,179,648; 128*10 = 1,280 */
    const kh_layer_spec cnn[] = {
        L(.kind = KH_LAYER_CONV2D, .units = 32, .kernel = {3, 3}, .activation = KH_ACT_RELU),
        L(.kind = KH_LAYER_CONV2D, .units = 64, .kernel = {3, 3}, .activation = KH_ACT_RELU),
        L(.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}), L(.kind = KH_LAYER_DROPOUT, .rate = 0.25f),
        L(.kind = KH_LAYER_FLATTEN), L(.kind = KH_LAYER_DENSE, .units = 128, .activation = KH_ACT_RELU),
        L(.kind = KH_LAYER_DROPOUT, .rate = 0.5f), L(.kind = KH_LAYER_DENSE, .units = 10, .activation = KH_ACT_SOFTMAX)};
    check("mnist_cnn", KH_F32, 3, 28, 28, 1, 0, cnn, 8, KH_OPT_ADADELTA,
          (want){2.0 * 11992448, 2.0 * 11992448 + 2.0 * (10616832 + 1179648 + 1280),
                 320 + 18496 + 1179776 + 1290, 16});

    /* cifar10_cnn: 884,736 + 8,294,400 + 4,147,200 + 6,230,016 + 1,179,648 + 5,120 = 20,741,120 */
    const kh_layer_spec cifar[] = {
        L(.kind = KH_LAYER_CONV2D, .units = 32, .kernel = {3, 3}, .padding = KH_PAD_SAME),
        L(.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_RELU), L(.kind = KH_LAYER_CONV2D, .units = 32, .kernel = {3, 3}),
        L(.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_RELU), L(.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}),
        L(.kind = KH_LAYER_DROPOUT, .rate = 0.25f),
        L(.kind = KH_LAYER_CONV2D, .units = 64, .kernel = {3, 3}, .padding = KH_PAD_SAME),
        L(.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_RELU), L(.kind = KH_LAYER_CONV2D, .units = 64, .kernel = {3, 3}),
        L(.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_RELU), L(.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}),
        L(.kind = KH_LAYER_DROPOUT, .rate = 0.25f), L(.kind = KH_LAYER_FLATTEN), L(.kind = KH_LAYER_DENSE, .units = 512),
        L(.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_RELU), L(.kind = KH_LAYER_DROPOUT, .rate = 0.5f),
        L(.kind = KH_LAYER_DENSE, .units = 10), L(.kind = KH_LAYER_ACTIVATION, .activation = KH_ACT_SOFTMAX)};
    check("cifar10_cnn", KH_F32, 3, 32, 32, 3, 0, cifar, 18, KH_OPT_RMSPROP,
          (want){2.0 * 20741120, 2.0 * 20741120 + 2.0 * (20741120 - 884736),
                 896 + 9248 + 18496 + 36928 + 1180160 + 5130, 9});

    /* imdb_bidirectional_lstm: 2 directions x 100 steps x 4*64*(128+64) = 9,830,400 MACs; Dense 128;
     * the Embedding below has parameters, so the LSTM's input gradient counts */
    const kh_layer_spec bilstm[] = {
        L(.kind = KH_LAYER_EMBEDDING, .input_dim = 20000, .units = 128), L(.kind = KH_LAYER_BILSTM, .units = 64),
        L(.kind = KH_LAYER_DROPOUT, .rate = 0.5f), L(.kind = KH_LAYER_DENSE, .units = 1, .activation = KH_ACT_SIGMOID)};
    check("imdb_bidirectional_lstm", KH_I32, 1, 100, 0, 0, 0, bilstm, 4, KH_OPT_ADAM,
          (want){2.0 * (9830400 + 128), 4.0 * (9830400 + 128), 2560000 + 2 * (128 * 256 + 64 * 256 + 256) + 129, 12});

    /* imdb_fasttext: only the Dense(1) over 50 features; Adam updates all 1,210,948 x 50 rows */
    const kh_layer_spec ft[] = {L(.kind = KH_LAYER_EMBEDDING, .input_dim = 1210948, .units = 50),
                                L(.kind = KH_LAYER_GAP1D),
                                L(.kind = KH_LAYER_DENSE, .units = 1, .activation = KH_ACT_SIGMOID)};
    check("imdb_fasttext", KH_I32, 1, 400, 0, 0, 0, ft, 3, KH_OPT_ADAM, (want){100, 200, 1210948.0 * 50 + 51, 12});
    /* bytes per step: every parameter's w, m, v read and written once (6 passes), the table's rows included
     * (Keras's dense Adam); the gradient is not compulsory (a fused update never stores it) */
    CHECK(last.param_bytes_train == 4 * (51.0 + 1210948.0 * 50) * 6, "imdb_fasttext train bytes %.0f",
          last.param_bytes_train);
    CHECK(last.param_bytes_eval == 4 * 51.0, "imdb_fasttext eval bytes %.0f", last.param_bytes_eval);
    CHECK(last.ws_param_train == 4 * (51.0 + 1210948.0 * 50) * 3, "imdb_fasttext working set %.0f", last.ws_param_train);
    /* per sample: the 400 x 50 gathered rows read once; the average (50) and the Dense (1) written and read,
     * with their gradients; the gathered rows themselves fuse into the average */
    CHECK(last.act_bytes_train == 4 * (400 * 50 + 4 * (50 + 1.0)), "imdb_fasttext activation bytes %.0f",
          last.act_bytes_train);
    CHECK(last.act_bytes_eval == 4 * (400 * 50 + 2 * (50 + 1.0)), "imdb_fasttext eval activation bytes %.0f",
          last.act_bytes_eval);

    /* lstm_text_generation: 40 x 4*128*(57+128) = 3,788,800 MACs + Dense 128*57 = 7,296; the LSTM is the first
     * layer: its input gradient is not needed, its recurrent one (40 x 4*128*128 = 2,621,440) is */
    const kh_layer_spec tg[] = {L(.kind = KH_LAYER_LSTM, .units = 128),
                                L(.kind = KH_LAYER_DENSE, .units = 57, .activation = KH_ACT_SOFTMAX)};
    check("lstm_text_generation", KH_I32, 1, 40, 0, 0, 57, tg, 2, KH_OPT_RMSPROP,
          (want){2.0 * (3788800 + 7296), 2.0 * (3788800 + 7296) + 2.0 * 2621440 + 2.0 * 7296,
                 57 * 512 + 128 * 512 + 512 + 128 * 57 + 57, 9});

    /* an epoch: 1000 training samples in batches of 128 (8 steps, the last partial), 100 validation samples */
    kh_model_flops f = {.forward = 10, .backward = 20, .optimizer = 1000, .param_bytes_train = 7,
                        .param_bytes_eval = 3, .act_bytes_train = 5, .act_bytes_eval = 2};
    double fl, by;
    kh_flops_epoch(&f, 1000, 128, 100, &fl, &by);
    CHECK(fl == 1000 * 30.0 + 8 * 1000.0 + 100 * 10.0, "epoch flops %.0f", fl);
    CHECK(by == 8 * 7.0 + 1 * 3.0 + 1000 * 5.0 + 100 * 2.0, "epoch bytes %.0f", by);
    /* the same epoch in its two phases; a full step's working set (the validation's 100 < one batch) */
    f.ws_param_train = 40, f.ws_act_train = 2, f.ws_param_eval = 11, f.ws_act_eval = 1;
    kh_flops_phase tr, ev;
    kh_flops_phases(&f, 1000, 128, 100, &tr, &ev);
    CHECK(tr.flops + ev.flops == fl && tr.bytes + ev.bytes == by, "the phases add up to the epoch");
    CHECK(tr.flops == 1000 * 30.0 + 8 * 1000.0 && ev.bytes == 3.0 + 100 * 2.0, "phase split %.0f %.0f", tr.flops,
          ev.bytes);
    CHECK(tr.working_set == 40 + 128 * 2.0 && ev.working_set == 11 + 100 * 1.0, "working sets %.0f %.0f",
          tr.working_set, ev.working_set);
    /* an unknown optimizer is an error, not a silent zero */
    kh_model_spec bad = {.struct_size = sizeof bad, .input_dtype = KH_F32, .input_rank = 1, .input_shape = {4},
                         .n_layers = 1, .layers = mlp + 4, .loss = KH_LOSS_CATEGORICAL_CROSSENTROPY,
                         .optimizer = {.kind = 99}, .n_classes = 10};
    kh_model_shapes sh;
    char err[256];
    if (kh_spec_infer(&bad, &sh, err, sizeof err) == KH_OK) {
        CHECK(kh_spec_flops(&bad, &sh, &f, NULL, err, sizeof err) == KH_ERR_INVALID && strstr(err, "optimizer"),
              "unknown optimizer refused: %s", err);
        kh_model_shapes_free(&sh);
    } else {
        CHECK(strstr(err, "optimizer") != NULL, "spec_infer refuses the optimizer: %s", err);
    }
    return kh_test_finish("test_flops");
}
