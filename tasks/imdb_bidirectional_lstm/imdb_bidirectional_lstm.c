/* imdb_bidirectional_lstm.c — Keras 2's examples/imdb_bidirectional_lstm.py as the benchmark ran it:
 * imdb.load_data(num_words=20000), pad_sequences(maxlen=100); Embedding(20000, 128) ->
 * Bidirectional(LSTM(64)) (concat, last step) -> Dropout(0.5) -> Dense(1, sigmoid); Adam; binary
 * cross-entropy; batch 32; 4 epochs; validation on the 25000 test reviews. */
#include "../common_imdb/imdb_task.h"

static const imdb_task_def def = {
    .name = "imdb_bidirectional_lstm",
    .num_words = 20000, .maxlen = 100, .bigrams = 0,
    .description = "IMDb sentiment, Embedding(20000,128) + Bidirectional(LSTM(64)) (Keras imdb_bidirectional_lstm.py)",
};

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) {
    (void)host;
    return imdb_task_module(&def);
}
