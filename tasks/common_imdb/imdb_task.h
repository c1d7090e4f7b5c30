/* imdb_task.h — the shared body of the two IMDb task modules (imdb_bidirectional_lstm, imdb_fasttext):
 * reading the aclImdb folders through the kit (khost/kit/data_text.h), optional fastText bigrams, 'pre' padding,
 * get_batch over int32 (N, T) index rows, and describe(). Each task supplies an imdb_task_def and model(). */
#ifndef KHOST_TASKS_IMDB_TASK_H
#define KHOST_TASKS_IMDB_TASK_H

#include "khost/kit/data_text.h"
#include "khost/khost.h"

typedef struct imdb_task_def {
    const char *name;  /* task name, used in messages */
    int32_t num_words; /* Keras's max_features before bigrams: 20000 */
    int32_t maxlen;    /* pad_sequences maxlen */
    int32_t bigrams;   /* 1: fastText bigram features (ngram_range = 2) */
} imdb_task_def;

/* What the task modules see of the loaded data (the rest is private to imdb_task.c). */
typedef struct imdb_task_view {
    int64_t max_features; /* the Embedding's rows: num_words, or start_index + bigrams */
} imdb_task_view;

kh_status imdb_task_load(const imdb_task_def *def, const kh_host_api *host, const kh_load_opts *o, kh_tdata **out,
                         char *err, size_t errlen);
void imdb_task_unload(kh_tdata *d);
const char *imdb_task_last_error(kh_tdata *d);
const imdb_task_view *imdb_task_get_view(kh_tdata *d);
/* The task's model (tasks/common_models/bench_models.h, by the def's name), with imdb_fasttext's embedding
 * sized by the bigram features of the loaded data; the layers live in d. */
kh_status imdb_task_model(kh_tdata *d, kh_model_spec *m);
int64_t imdb_task_count(kh_tdata *d, uint32_t split);
kh_status imdb_task_get_batch(kh_tdata *d, uint32_t split, const int64_t *idx, int32_t n, kh_tensor *x, kh_tensor *y);
kh_status imdb_task_describe(kh_tdata *d, kh_print_fn print, void *ctx);

#endif
