/* imdb_fasttext.c — Keras 2's examples/imdb_fasttext.py as the benchmark ran it: imdb.load_data(
 * num_words=20000), ngram_range 2 (every training bigram gets an id from 20001 up and is appended to each
 * sequence containing it), pad_sequences(maxlen=400); Embedding(max_features, 50) -> GlobalAveragePooling1D
 * -> Dense(1, sigmoid); Adam; binary cross-entropy; batch 32; 5 epochs. */
#include "../common_imdb/imdb_task.h"

static const imdb_task_def def = {
    .name = "imdb_fasttext",
    .num_words = 20000, .maxlen = 400, .bigrams = 1,
    .description = "IMDb sentiment, fastText: word + bigram Embedding(max_features,50), average pooling "
                   "(Keras imdb_fasttext.py)",
};

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) {
    (void)host;
    return imdb_task_module(&def);
}
