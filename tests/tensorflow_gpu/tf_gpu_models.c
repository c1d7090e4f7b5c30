/* tests/tensorflow_gpu/tf_gpu_models.c — see tf_gpu_models.h. */
#include "tf_gpu_models.h"

#include <string.h>

#define L_(...) ((kh_layer_spec){__VA_ARGS__})

static kh_optimizer_spec opt(uint32_t kind, float lr, float rho, float decay) {
    kh_optimizer_spec o;
    memset(&o, 0, sizeof o);
    o.kind = kind, o.lr = lr, o.rho = rho, o.beta_1 = 0.9f, o.beta_2 = 0.999f, o.epsilon = 1e-7f, o.decay = decay;
    return o;
}

static const kh_layer_spec mlp[] = {L_(.kind = KH_LAYER_DENSE, .units = 512, .activation = KH_ACT_RELU),
                                    L_(.kind = KH_LAYER_DROPOUT, .rate = 0.2f),
                                    L_(.kind = KH_LAYER_DENSE, .units = 512, .activation = KH_ACT_RELU),
                                    L_(.kind = KH_LAYER_DROPOUT, .rate = 0.2f),
                                    L_(.kind = KH_LAYER_DENSE, .units = 10, .activation = KH_ACT_SOFTMAX)};
static const kh_layer_spec cnn[] = {L_(.kind = KH_LAYER_CONV2D, .units = 32, .kernel = {3, 3}, .activation = KH_ACT_RELU),
                                    L_(.kind = KH_LAYER_CONV2D, .units = 64, .kernel = {3, 3}, .activation = KH_ACT_RELU),
                                    L_(.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}),
                                    L_(.kind = KH_LAYER_DROPOUT, .rate = 0.25f),
                                    L_(.kind = KH_LAYER_FLATTEN),
                                    L_(.kind = KH_LAYER_DENSE, .units = 128, .activation = KH_ACT_RELU),
                                    L_(.kind = KH_LAYER_DROPOUT, .rate = 0.5f),
                                    L_(.kind = KH_LAYER_DENSE, .units = 10, .activation = KH_ACT_SOFTMAX)};
static const kh_layer_spec cifar[] = {
    L_(.kind = KH_LAYER_CONV2D, .units = 32, .kernel = {3, 3}, .padding = KH_PAD_SAME, .activation = KH_ACT_RELU),
    L_(.kind = KH_LAYER_CONV2D, .units = 32, .kernel = {3, 3}, .activation = KH_ACT_RELU),
    L_(.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}),
    L_(.kind = KH_LAYER_DROPOUT, .rate = 0.25f),
    L_(.kind = KH_LAYER_CONV2D, .units = 64, .kernel = {3, 3}, .padding = KH_PAD_SAME, .activation = KH_ACT_RELU),
    L_(.kind = KH_LAYER_CONV2D, .units = 64, .kernel = {3, 3}, .activation = KH_ACT_RELU),
    L_(.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}),
    L_(.kind = KH_LAYER_DROPOUT, .rate = 0.25f),
    L_(.kind = KH_LAYER_FLATTEN),
    L_(.kind = KH_LAYER_DENSE, .units = 512, .activation = KH_ACT_RELU),
    L_(.kind = KH_LAYER_DROPOUT, .rate = 0.5f),
    L_(.kind = KH_LAYER_DENSE, .units = 10, .activation = KH_ACT_SOFTMAX)};
static const kh_layer_spec bilstm[] = {L_(.kind = KH_LAYER_EMBEDDING, .input_dim = 20000, .units = 128),
                                       L_(.kind = KH_LAYER_BILSTM, .units = 64),
                                       L_(.kind = KH_LAYER_DROPOUT, .rate = 0.5f),
                                       L_(.kind = KH_LAYER_DENSE, .units = 1, .activation = KH_ACT_SIGMOID)};
/* imdb_fasttext with bigrams: ~1.2 million features, as the task builds its vocabulary */
static const kh_layer_spec fasttext[] = {L_(.kind = KH_LAYER_EMBEDDING, .input_dim = 1200000, .units = 50),
                                         L_(.kind = KH_LAYER_GAP1D),
                                         L_(.kind = KH_LAYER_DENSE, .units = 1, .activation = KH_ACT_SIGMOID)};
static const kh_layer_spec textgen[] = {L_(.kind = KH_LAYER_LSTM, .units = 128),
                                        L_(.kind = KH_LAYER_DENSE, .units = 57, .activation = KH_ACT_SOFTMAX)};

#define SPEC(nm, dt, rk, a, b, c, oh, ly, ls, o, cls)                                                                  \
    {.struct_size = sizeof(kh_model_spec), .name = nm, .input_dtype = dt, .input_rank = rk, .input_shape = {a, b, c}, \
     .input_onehot = oh, .n_layers = (int)(sizeof ly / sizeof ly[0]), .layers = ly, .loss = ls, .optimizer = o,      \
     .n_classes = cls}

int tfg_bench_models(const tfg_model **out) {
    static tfg_model m[6];
    static int n;
    if (!n) {
        m[n++] = (tfg_model){"mnist_mlp", SPEC("mnist_mlp", KH_F32, 1, 784, 0, 0, 0, mlp, KH_LOSS_CATEGORICAL_CROSSENTROPY,
                                               opt(KH_OPT_RMSPROP, 1e-3f, 0.9f, 0), 10), 128};
        m[n++] = (tfg_model){"mnist_cnn", SPEC("mnist_cnn", KH_F32, 3, 28, 28, 1, 0, cnn, KH_LOSS_CATEGORICAL_CROSSENTROPY,
                                               opt(KH_OPT_ADADELTA, 1.0f, 0.95f, 0), 10), 128};
        m[n++] = (tfg_model){"cifar10_cnn", SPEC("cifar10_cnn", KH_F32, 3, 32, 32, 3, 0, cifar,
                                                 KH_LOSS_CATEGORICAL_CROSSENTROPY, opt(KH_OPT_RMSPROP, 1e-4f, 0.9f, 1e-6f),
                                                 10), 32};
        m[n++] = (tfg_model){"imdb_bidirectional_lstm", SPEC("imdb_bidirectional_lstm", KH_I32, 1, 100, 0, 0, 0, bilstm,
                                                             KH_LOSS_BINARY_CROSSENTROPY, opt(KH_OPT_ADAM, 1e-3f, 0, 0), 1),
                             32};
        m[n++] = (tfg_model){"imdb_fasttext", SPEC("imdb_fasttext", KH_I32, 1, 400, 0, 0, 0, fasttext,
                                                   KH_LOSS_BINARY_CROSSENTROPY, opt(KH_OPT_ADAM, 1e-3f, 0, 0), 1), 32};
        m[n++] = (tfg_model){"lstm_text_generation", SPEC("lstm_text_generation", KH_I32, 1, 40, 0, 0, 57, textgen,
                                                          KH_LOSS_CATEGORICAL_CROSSENTROPY,
                                                          opt(KH_OPT_RMSPROP, 1e-2f, 0.9f, 0), 57), 128};
    }
    *out = m;
    return n;
}
