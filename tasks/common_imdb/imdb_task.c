/* imdb_task.c — the shared body of the IMDb task modules (see imdb_task.h). Sequences are read with
 * keras.datasets.imdb's indexing, optionally extended with fastText bigrams, then padded once into
 * (N, maxlen) int32 rows so get_batch is a row copy; the unpadded sequences are freed after padding. */
#define _POSIX_C_SOURCE 200809L
#include "imdb_task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "khost/kit/status.h"
#include "../common_models/bench_models.h"
#include "../common_models/bench_tasks.h"

typedef struct split_stats {
    int64_t n, pos;
    double mean, median;             /* tokens incl. start marker, before bigrams and padding */
    double mean_bg, median_bg;       /* with bigrams appended (fastText) */
    int64_t longer;                  /* sequences longer than maxlen (cut at the front) */
} split_stats;

/* The loaded data's sizes the model needs. */
typedef struct imdb_task_view {
    int64_t max_features; /* the Embedding's rows: num_words, or start_index + bigrams */
} imdb_task_view;

struct kh_tdata {
    const imdb_task_def *def;
    const kh_host_api *host;
    char err[1024];
    char root[4096];
    kh_imdb imdb; /* vocabulary and counts; its sequences are freed once padded */
    int32_t *x[2];
    int32_t *y[2];
    split_stats st[2];
    kh_bigram_info bi;
    imdb_task_view view;
    kh_bench_model model; /* the spec model() returns points into it */
};

static void host_progress(void *ctx, const char *what, int64_t done, int64_t total) {
    const kh_host_api *host = ctx;
    if (host && KH_HAS_MEMBER(kh_host_api, host->struct_size, progress) && host->progress)
        host->progress(what, done, total);
}

static void seq_stats(const kh_seqset *s, int32_t maxlen, double *mean, double *median, int64_t *longer) {
    kh_seqset_length_stats(s, mean, median);
    if (!longer) return;
    *longer = 0;
    for (int64_t i = 0; i < s->n; i++) *longer += s->offsets[i + 1] - s->offsets[i] > maxlen;
}

static void imdb_task_unload(kh_tdata *d) {
    if (!d) return;
    kh_imdb_free(&d->imdb);
    for (int s = 0; s < 2; s++) {
        free(d->x[s]);
        free(d->y[s]);
    }
    free(d);
}

/* The module's one task: imdb_task_module sets it, before the host can call a member. */
static const imdb_task_def *task;

static kh_status imdb_task_load(const kh_host_api *host, const kh_load_opts *o, kh_tdata **out, char *err,
                                size_t errlen) {
    const imdb_task_def *def = task;
    if (!out || !o || !o->data_dir)
        return kh_errf(err, errlen, KH_ERR_INVALID, "%s: load: no data directory given", def->name);
    *out = NULL;
    kh_tdata *d = calloc(1, sizeof *d);
    if (!d) return kh_errf(err, errlen, KH_ERR_NOMEM, "%s: out of memory", def->name);
    d->def = def;
    d->host = host;
    int w = snprintf(d->root, sizeof d->root, "%s/imdb/aclImdb", o->data_dir);
    kh_status st;
    if (w < 0 || (size_t)w >= sizeof d->root) {
        st = kh_errf(err, errlen, KH_ERR_INVALID, "%s/imdb/aclImdb: path too long", o->data_dir);
        goto fail;
    }
    struct stat sb;
    if (stat(d->root, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        st = kh_errf(err, errlen, KH_ERR_IO, "%s: not found; run: tools/fetch-datasets imdb", d->root);
        goto fail;
    }
    kh_imdb_opts io;
    kh_imdb_opts_default(&io);
    io.num_words = def->num_words;
    io.limit_train = o->limit_train;
    io.limit_test = o->limit_val;
    io.progress = host_progress;
    io.progress_ctx = (void *)host;
    if ((st = kh_imdb_load(d->root, &io, &d->imdb, err, errlen)) != KH_OK) {
        /* a folder of the tree missing: the installation is incomplete, say how to redo it */
        size_t len = strlen(err);
        if (st == KH_ERR_IO && len >= 9 && strcmp(err + len - 9, "not found") == 0)
            snprintf(err + len, errlen - len, "; run: tools/fetch-datasets imdb");
        goto fail;
    }
    kh_seqset *set[2] = {&d->imdb.train, &d->imdb.test};
    for (int s = 0; s < 2; s++) {
        split_stats *ss = &d->st[s];
        ss->n = set[s]->n;
        for (int64_t i = 0; i < set[s]->n; i++) ss->pos += set[s]->labels[i] == 1;
        seq_stats(set[s], def->maxlen, &ss->mean, &ss->median, def->bigrams ? NULL : &ss->longer);
    }
    d->view.max_features = def->num_words;
    if (def->bigrams) {
        /* examples/imdb_fasttext.py: start_index = max_features + 1 */
        if ((st = kh_fasttext_bigrams(set[0], set[1], def->num_words + 1, &d->bi, err, errlen)) != KH_OK) goto fail;
        d->view.max_features = d->bi.max_features;
        for (int s = 0; s < 2; s++)
            seq_stats(set[s], def->maxlen, &d->st[s].mean_bg, &d->st[s].median_bg, &d->st[s].longer);
    }
    for (int s = 0; s < 2; s++) {
        int64_t n = set[s]->n;
        d->x[s] = malloc((size_t)(n > 0 ? n : 1) * (size_t)def->maxlen * sizeof(int32_t));
        d->y[s] = malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
        if (!d->x[s] || !d->y[s]) {
            st = kh_errf(err, errlen, KH_ERR_NOMEM, "%s: out of memory padding %lld sequences", d->root, (long long)n);
            goto fail;
        }
        if ((st = kh_pad_sequences(set[s], def->maxlen, d->x[s], err, errlen)) != KH_OK) goto fail;
        memcpy(d->y[s], set[s]->labels, (size_t)n * sizeof(int32_t));
        kh_seqset_free(set[s]); /* the padded rows are all get_batch needs */
    }
    *out = d;
    return KH_OK;
fail:
    imdb_task_unload(d);
    return st;
}

static const char *imdb_task_last_error(kh_tdata *d) { return d ? d->err : "no task data"; }

/* The task's model (tasks/common_models/bench_models.h, by the def's name), with imdb_fasttext's embedding
 * sized by the bigram features of the loaded data; the layers live in d. */
static kh_status imdb_task_model(kh_tdata *d, kh_model_spec *m) {
    /* imdb_fasttext's embedding covers the bigram features this data set produced */
    int64_t features = d->def->bigrams ? d->view.max_features : 0;
    if (d->def->bigrams && features <= 0) return KH_ERR_INTERNAL;
    kh_status st = kh_bench_model_get(d->def->name, features, &d->model);
    if (st != KH_OK) return st;
    kh_bench_model_fill(&d->model, m);
    return KH_OK;
}

static int64_t imdb_task_count(kh_tdata *d, uint32_t split) { return d && split <= KH_SPLIT_VAL ? d->st[split].n : 0; }

static kh_status imdb_task_get_batch(kh_tdata *d, uint32_t split, const int64_t *idx, int32_t n, kh_tensor *x, kh_tensor *y) {
    if (split > KH_SPLIT_VAL)
        return KH_ERRF_TO(d, KH_ERR_INVALID, "%s: get_batch: unknown split %u", d->def->name, split);
    int32_t T = d->def->maxlen;
    if (n < 0 || (n > 0 && !idx) || !x || !y || (n > 0 && (!x->data || !y->data)))
        return KH_ERRF_TO(d, KH_ERR_INVALID, "%s: get_batch: bad arguments", d->def->name);
    if (x->dtype != KH_I32 || x->rank != 2 || x->dims[0] != n || x->dims[1] != T)
        return KH_ERRF_TO(d, KH_ERR_INVALID, "%s: get_batch: x must be i32 (%d, %d) (got dtype %u, rank %d)",
                          d->def->name, n, T, x->dtype, x->rank);
    if (y->dtype != KH_I32 || kh_tensor_numel(y) != n)
        return KH_ERRF_TO(d, KH_ERR_INVALID, "%s: get_batch: y must be i32 with %d values", d->def->name, n);
    int32_t *xs = x->data, *ys = y->data;
    for (int32_t i = 0; i < n; i++) {
        int64_t k = idx[i];
        if (k < 0 || k >= d->st[split].n)
            return KH_ERRF_TO(d, KH_ERR_INVALID, "%s: get_batch: sample %lld out of range 0..%lld", d->def->name,
                              (long long)k, (long long)d->st[split].n - 1);
        memcpy(xs + (size_t)i * (size_t)T, d->x[split] + (size_t)k * (size_t)T, (size_t)T * sizeof *xs);
        ys[i] = d->y[split][k];
    }
    return KH_OK;
}

static kh_status imdb_task_describe(kh_tdata *d, kh_print_fn print, void *ctx) {
    if (!d || !print) return KH_ERR_INVALID;
    const kh_imdb *m = &d->imdb;
    char line[1024];
    snprintf(line, sizeof line, "imdb: %s (%lld train / %lld test review files)", d->root,
             (long long)m->train_files, (long long)m->test_files);
    print(ctx, line);
    static const char *const split_name[2] = {"train", "validation (test)"};
    for (int s = 0; s < 2; s++) {
        const split_stats *ss = &d->st[s];
        snprintf(line, sizeof line, "%s: %lld reviews, %lld positive / %lld negative (%.1f%% positive)", split_name[s],
                 (long long)ss->n, (long long)ss->pos, (long long)(ss->n - ss->pos),
                 ss->n ? 100.0 * (double)ss->pos / (double)ss->n : 0.0);
        print(ctx, line);
        snprintf(line, sizeof line, "  review length in tokens (start marker included): mean %.1f, median %.1f",
                 ss->mean, ss->median);
        print(ctx, line);
        if (d->def->bigrams) {
            snprintf(line, sizeof line, "  with bigram features appended: mean %.1f, median %.1f", ss->mean_bg,
                     ss->median_bg);
            print(ctx, line);
        }
        snprintf(line, sizeof line, "  %lld of %lld sequences (%.1f%%) longer than %d lose their first tokens",
                 (long long)ss->longer, (long long)ss->n, ss->n ? 100.0 * (double)ss->longer / (double)ss->n : 0.0,
                 (int)d->def->maxlen);
        print(ctx, line);
    }
    snprintf(line, sizeof line,
             "vocabulary: %lld distinct words in %lld training tokens; num_words %d: indices 0 pad, 1 start, "
             "2 out-of-vocabulary, 4..%d the %d most frequent words",
             (long long)m->vocab_size, (long long)m->train_words, (int)m->num_words, (int)m->num_words - 1,
             (int)m->num_words - 1 - m->index_from);
    print(ctx, line);
    int at = snprintf(line, sizeof line, "most frequent:");
    for (int i = 0; i < m->n_top && i < 12 && at > 0 && (size_t)at < sizeof line; i++)
        at += snprintf(line + at, sizeof line - (size_t)at, " %s (%lld)", m->top_words[i], (long long)m->top_counts[i]);
    print(ctx, line);
    snprintf(line, sizeof line, "test tokens never seen in training (index 2): %lld", (long long)m->test_oov_unseen);
    print(ctx, line);
    if (d->def->bigrams) {
        snprintf(line, sizeof line,
                 "bigrams (ngram_range 2): %lld from the training sequences, ids %d..%lld; max_features %lld",
                 (long long)d->bi.n_bigrams, (int)d->def->num_words + 1, (long long)d->bi.max_features - 1,
                 (long long)d->bi.max_features);
        print(ctx, line);
    } else {
        snprintf(line, sizeof line, "max_features %lld (the Embedding's rows)", (long long)d->view.max_features);
        print(ctx, line);
    }
    snprintf(line, sizeof line, "input: (N, %d) int32 token indices, layout NT, padded and truncated 'pre'; "
             "labels int32 0/1", (int)d->def->maxlen);
    print(ctx, line);
    return KH_OK;
}

const kh_module_desc *imdb_task_module(const imdb_task_def *def) {
    static const kh_task_api members = {
        .load = imdb_task_load, .unload = imdb_task_unload, .last_error = imdb_task_last_error, .model = imdb_task_model,
        .count = imdb_task_count, .get_batch = imdb_task_get_batch, .describe = imdb_task_describe};
    task = def;
    return kh_bench_task_module(def->name, def->description, &members);
}
