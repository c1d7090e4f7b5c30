/* imdb_fasttext.c — Keras 2's examples/imdb_fasttext.py as the benchmark ran it: imdb.load_data(
 * num_words=20000), ngram_range 2 (every training bigram gets an id from 20001 up and is appended to each
 * sequence containing it), pad_sequences(maxlen=400); Embedding(max_features, 50) -> GlobalAveragePooling1D
 * -> Dense(1, sigmoid); Adam; binary cross-entropy; batch 32; 5 epochs. */
#include "../common_imdb/imdb_task.h"

/* The published table, backend x GPU (K80, M60, Titan X, 1080 Ti); -1 = not reported. */
static const kh_published published[] = {
    {"theano", "K80", -1, -1},
    {"theano", "M60", 0.8856, 15.4},
    {"theano", "Titan X", 0.8856, 10.9},
    {"theano", "1080 Ti", 0.8856, 9.5},
    {"tensorflow", "K80", 0.9068, 58.3},
    {"tensorflow", "M60", 0.8856, 4.6},
    {"tensorflow", "Titan X", 0.8856, 6.0},
    {"tensorflow", "1080 Ti", 0.8856, 4.5},
    {"cntk", "K80", 0.9064, 69.5},
    {"cntk", "M60", 0.8854, 4.5},
    {"cntk", "Titan X", 0.8854, 3.4},
    {"cntk", "1080 Ti", 0.8854, 2.7},
};

static const kh_task_info info = {
    .struct_size = sizeof(kh_task_info), .dataset = "imdb", .epochs = 5, .batch_size = 32,
    .train_samples_per_epoch = 0, .has_validation = 1, .metric = "val_acc", .target = 0.88, .target_is_max = 0,
    .n_published = (int32_t)(sizeof published / sizeof published[0]), .published = published,
};

static const imdb_task_def def = {.name = "imdb_fasttext", .num_words = 20000, .maxlen = 400, .bigrams = 1};

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
    .kind = KH_MODULE_TASK, .name = "imdb_fasttext", .version = "1.0",
    .description = "IMDb sentiment, fastText: word + bigram Embedding(max_features,50), average pooling "
                   "(Keras imdb_fasttext.py)",
    .api = &api,
};

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) {
    (void)host;
    return &desc;
}
