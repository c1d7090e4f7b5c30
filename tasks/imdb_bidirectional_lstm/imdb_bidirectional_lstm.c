/* imdb_bidirectional_lstm.c — Keras 2's examples/imdb_bidirectional_lstm.py as the benchmark ran it:
 * imdb.load_data(num_words=20000), pad_sequences(maxlen=100); Embedding(20000, 128) ->
 * Bidirectional(LSTM(64)) (concat, last step) -> Dropout(0.5) -> Dense(1, sigmoid); Adam; binary
 * cross-entropy; batch 32; 4 epochs; validation on the 25000 test reviews. */
#include "../common_imdb/imdb_task.h"

/* The published table, backend x GPU (K80, M60, Titan X, 1080 Ti); -1 = not reported. */
static const kh_published published[] = {
    {"theano", "K80", -1, -1},
    {"theano", "M60", -1, -1},
    {"theano", "Titan X", 0.8310, 310.3},
    {"theano", "1080 Ti", 0.8364, 148.5},
    {"tensorflow", "K80", 0.8343, 276.6},
    {"tensorflow", "M60", 0.8301, 244.3},
    {"tensorflow", "Titan X", 0.8327, 295.3},
    {"tensorflow", "1080 Ti", 0.8313, 245.5},
    {"cntk", "K80", 0.8354, 152.4},
    {"cntk", "M60", 0.8348, 116.0},
    {"cntk", "Titan X", 0.8325, 99.5},
    {"cntk", "1080 Ti", 0.8388, 94.3},
};

static const kh_task_info info = {
    .struct_size = sizeof(kh_task_info), .dataset = "imdb", .epochs = 4, .batch_size = 32,
    .train_samples_per_epoch = 0, .has_validation = 1, .metric = "val_acc", .target = 0.82, .target_is_max = 0,
    .n_published = (int32_t)(sizeof published / sizeof published[0]), .published = published,
};

static const imdb_task_def def = {.name = "imdb_bidirectional_lstm", .num_words = 20000, .maxlen = 100, .bigrams = 0};

static const kh_task_info *get_info(void) { return &info; }

static kh_status load(const kh_host_api *host, const kh_load_opts *o, kh_tdata **out, char *err, size_t errlen) {
    return imdb_task_load(&def, host, o, out, err, errlen);
}

static const kh_task_api api = {
    .struct_size = sizeof(kh_task_api), .info = get_info, .load = load, .unload = imdb_task_unload,
    .last_error = imdb_task_last_error, .model = imdb_task_model, .count = imdb_task_count,
    .get_batch = imdb_task_get_batch, .augment = NULL, .describe = imdb_task_describe, .after_training = NULL,
};

static const kh_module_desc desc = {
    KH_MODULE_DESC_HEAD,
    .kind = KH_MODULE_TASK, .name = "imdb_bidirectional_lstm", .version = "1.0",
    .description = "IMDb sentiment, Embedding(20000,128) + Bidirectional(LSTM(64)) (Keras imdb_bidirectional_lstm.py)",
    .api = &api,
};

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) {
    (void)host;
    return &desc;
}
