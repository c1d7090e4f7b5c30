/* tasks/common_models/bench_models.c — see bench_models.h. Each model cites the script it reproduces. */
#include "bench_models.h"

#include <string.h>

const char *const kh_bench_model_names[KH_BENCH_N_MODELS] = {"mnist_mlp", "mnist_cnn", "cifar10_cnn",
                                                             "imdb_bidirectional_lstm", "imdb_fasttext",
                                                             "lstm_text_generation"};

#define L(...) ((kh_layer_spec){__VA_ARGS__})
#define DENSE(u, a) L(.kind = KH_LAYER_DENSE, .units = (u), .activation = (a))
#define DROP(r) L(.kind = KH_LAYER_DROPOUT, .rate = (r))
#define CONV(f, pad, a) L(.kind = KH_LAYER_CONV2D, .units = (f), .kernel = {3, 3}, .padding = (pad), .activation = (a))
#define ACT(a) L(.kind = KH_LAYER_ACTIVATION, .activation = (a))
#define POOL2 L(.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2})

static void input(kh_model_spec *s, uint32_t dtype, int rank, int a, int b, int c) {
    s->input_dtype = dtype;
    s->input_rank = rank;
    s->input_shape[0] = a, s->input_shape[1] = b, s->input_shape[2] = c;
}

/* Keras 2 defaults written out: epsilon 1e-7 (K.epsilon()), RMSprop rho 0.9, Adam betas 0.9 / 0.999. */
static kh_optimizer_spec rmsprop(float lr, float decay) {
    return (kh_optimizer_spec){.kind = KH_OPT_RMSPROP, .lr = lr, .rho = 0.9f, .epsilon = 1e-7f, .decay = decay};
}

static int push(kh_bench_model *m, kh_layer_spec l) {
    if (m->spec.n_layers >= KH_BENCH_MAX_LAYERS) return -1;
    m->layers[m->spec.n_layers++] = l;
    return 0;
}

kh_status kh_bench_model_get(const char *name, int64_t data_size, kh_bench_model *m) {
    memset(m, 0, sizeof *m);
    m->spec.struct_size = sizeof m->spec;
    m->spec.layers = m->layers;
    kh_model_spec *s = &m->spec;
    if (!name) return KH_ERR_INVALID;
    if (!strcmp(name, "mnist_mlp")) { /* mnist_mlp.py: x.reshape(-1, 784), RMSprop() */
        input(s, KH_F32, 1, 784, 0, 0);
        push(m, DENSE(512, KH_ACT_RELU)), push(m, DROP(0.2f)), push(m, DENSE(512, KH_ACT_RELU)), push(m, DROP(0.2f));
        push(m, DENSE(10, KH_ACT_SOFTMAX));
        s->optimizer = rmsprop(0.001f, 0.0f);
        s->loss = KH_LOSS_CATEGORICAL_CROSSENTROPY, s->n_classes = 10, m->batch_size = 128;
    } else if (!strcmp(name, "mnist_cnn")) { /* mnist_cnn.py: channels_last, Adadelta() */
        input(s, KH_F32, 3, 28, 28, 1);
        push(m, CONV(32, KH_PAD_VALID, KH_ACT_RELU)), push(m, CONV(64, KH_PAD_VALID, KH_ACT_RELU)), push(m, POOL2);
        push(m, DROP(0.25f)), push(m, L(.kind = KH_LAYER_FLATTEN)), push(m, DENSE(128, KH_ACT_RELU));
        push(m, DROP(0.5f)), push(m, DENSE(10, KH_ACT_SOFTMAX));
        s->optimizer = (kh_optimizer_spec){.kind = KH_OPT_ADADELTA, .lr = 1.0f, .rho = 0.95f, .epsilon = 1e-7f};
        s->loss = KH_LOSS_CATEGORICAL_CROSSENTROPY, s->n_classes = 10, m->batch_size = 128;
    } else if (!strcmp(name, "cifar10_cnn")) { /* cifar10_cnn.py: Conv2D then Activation layers, RMSprop(1e-4, decay 1e-6) */
        input(s, KH_F32, 3, 32, 32, 3);
        for (int f = 32; f <= 64; f *= 2) {
            push(m, CONV(f, KH_PAD_SAME, KH_ACT_LINEAR)), push(m, ACT(KH_ACT_RELU));
            push(m, CONV(f, KH_PAD_VALID, KH_ACT_LINEAR)), push(m, ACT(KH_ACT_RELU)), push(m, POOL2), push(m, DROP(0.25f));
        }
        push(m, L(.kind = KH_LAYER_FLATTEN)), push(m, DENSE(512, KH_ACT_LINEAR)), push(m, ACT(KH_ACT_RELU));
        push(m, DROP(0.5f)), push(m, DENSE(10, KH_ACT_LINEAR)), push(m, ACT(KH_ACT_SOFTMAX));
        s->optimizer = rmsprop(1e-4f, 1e-6f);
        s->loss = KH_LOSS_CATEGORICAL_CROSSENTROPY, s->n_classes = 10, m->batch_size = 32;
    } else if (!strcmp(name, "imdb_bidirectional_lstm")) { /* imdb_bidirectional_lstm.py: maxlen 100, 20000 words */
        input(s, KH_I32, 1, 100, 0, 0);
        push(m, L(.kind = KH_LAYER_EMBEDDING, .input_dim = 20000, .units = 128));
        push(m, L(.kind = KH_LAYER_BILSTM, .units = 64)), push(m, DROP(0.5f)), push(m, DENSE(1, KH_ACT_SIGMOID));
    } else if (!strcmp(name, "imdb_fasttext")) { /* imdb_fasttext.py: ngram_range 2, maxlen 400, 50 dims */
        int64_t v = data_size ? data_size : KH_BENCH_FASTTEXT_FEATURES;
        if (v < 2 || v > INT32_MAX) return KH_ERR_INVALID;
        input(s, KH_I32, 1, 400, 0, 0);
        push(m, L(.kind = KH_LAYER_EMBEDDING, .input_dim = (int32_t)v, .units = 50));
        push(m, L(.kind = KH_LAYER_GAP1D)), push(m, DENSE(1, KH_ACT_SIGMOID));
    } else if (!strcmp(name, "lstm_text_generation")) { /* lstm_text_generation.py: maxlen 40, RMSprop(lr=0.01) */
        int64_t n = data_size ? data_size : KH_BENCH_TEXTGEN_CHARS;
        if (n < 2 || n > INT32_MAX) return KH_ERR_INVALID;
        input(s, KH_I32, 1, 40, 0, 0);
        s->input_onehot = (int32_t)n; /* the model's real input: one_hot(x, n), the script's boolean (40, n) */
        push(m, L(.kind = KH_LAYER_LSTM, .units = 128)), push(m, DENSE((int32_t)n, KH_ACT_SOFTMAX));
        s->optimizer = rmsprop(0.01f, 0.0f);
        s->loss = KH_LOSS_CATEGORICAL_CROSSENTROPY, s->n_classes = (int32_t)n, m->batch_size = 128;
    } else {
        return KH_ERR_INVALID;
    }
    if (!strncmp(name, "imdb_", 5)) { /* both IMDb scripts: Adam(), binary cross-entropy, batch 32 */
        s->optimizer = (kh_optimizer_spec){.kind = KH_OPT_ADAM, .lr = 0.001f, .beta_1 = 0.9f, .beta_2 = 0.999f,
                                           .epsilon = 1e-7f};
        s->loss = KH_LOSS_BINARY_CROSSENTROPY, s->n_classes = 1, m->batch_size = 32;
    }
    s->name = name;
    for (int i = 0; i < KH_BENCH_N_MODELS; i++)
        if (!strcmp(name, kh_bench_model_names[i])) s->name = kh_bench_model_names[i]; /* a static string */
    return KH_OK;
}

void kh_bench_model_fill(const kh_bench_model *m, kh_model_spec *out) {
    uint32_t size = out->struct_size;
    *out = m->spec;
    out->struct_size = size;
}
