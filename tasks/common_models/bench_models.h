/* tasks/common_models/bench_models.h — the six models of the original benchmark, defined once, as its Keras
 * examples (Keras 2.0.x examples/<task>.py) build them: the task modules build their specs from these, and every
 * test or tool that needs "the benchmark's models" takes them from here. Sizes that the data decides
 * (imdb_fasttext's features with bigrams, lstm_text_generation's distinct characters) are parameters. */
#ifndef KHOST_TASKS_BENCH_MODELS_H
#define KHOST_TASKS_BENCH_MODELS_H

#include <stdint.h>

#include "khost/khost.h"

#define KH_BENCH_N_MODELS 6
#define KH_BENCH_MAX_LAYERS 18

/* The full data sets' sizes, for callers without the data (tests, tools). */
#define KH_BENCH_FASTTEXT_FEATURES 1200000 /* about what imdb_fasttext's bigram vocabulary comes to */
#define KH_BENCH_TEXTGEN_CHARS 57          /* distinct characters of the Nietzsche corpus */

typedef struct kh_bench_model {
    kh_model_spec spec; /* spec.layers points at layers below: keep the struct where it was filled */
    kh_layer_spec layers[KH_BENCH_MAX_LAYERS];
    int32_t batch_size; /* the original's */
} kh_bench_model;

/* The names, in the benchmark's order. */
extern const char *const kh_bench_model_names[KH_BENCH_N_MODELS];

/* Fill m with model `name`. data_size: imdb_fasttext's feature count or lstm_text_generation's character
 * count (0: the full data set's); ignored by the others. KH_ERR_INVALID for an unknown name or a size < 2. */
kh_status kh_bench_model_get(const char *name, int64_t data_size, kh_bench_model *m);

/* Copy m's spec into a task's out-parameter, leaving the struct_size the host set. */
void kh_bench_model_fill(const kh_bench_model *m, kh_model_spec *out);

#endif
