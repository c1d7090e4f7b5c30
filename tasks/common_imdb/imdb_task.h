/* imdb_task.h — the shared body of the two IMDb task modules (imdb_bidirectional_lstm, imdb_fasttext):
 * reading the aclImdb folders through the kit (khost/kit/data_text.h), optional fastText bigrams, 'pre' padding,
 * get_batch over int32 (N, T) index rows, and describe(). Each task supplies an imdb_task_def, and its entry
 * point returns imdb_task_module(def). */
#ifndef KHOST_TASKS_IMDB_TASK_H
#define KHOST_TASKS_IMDB_TASK_H

#include "khost/kit/data_text.h"
#include "khost/khost.h"

typedef struct imdb_task_def {
    const char *name;  /* task name, used in messages and as the name of its model and info in tasks/common_models */
    const char *description; /* the module descriptor's */
    int32_t num_words; /* Keras's max_features before bigrams: 20000 */
    int32_t maxlen;    /* pad_sequences maxlen */
    int32_t bigrams;   /* 1: fastText bigram features (ngram_range = 2) */
} imdb_task_def;

/* The module descriptor of the module's one task, def: call it from the entry point. */
const kh_module_desc *imdb_task_module(const imdb_task_def *def);

#endif
