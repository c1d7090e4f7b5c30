/* lstm_text_generation.c — Keras 2's examples/lstm_text_generation.py as the benchmark ran it: the Nietzsche
 * text lower-cased, windows of 40 characters every 3, the next character as label; LSTM(128) on the one-hot
 * windows -> Dense(n_chars, softmax); RMSprop(lr 0.01); categorical cross-entropy; batch 128; 10 epochs, no
 * validation (the metric is the training loss). After training, 400 characters are sampled at diversity 0.5
 * from a random seed window, as the script printed them.
 * The windows are never materialised: the text is kept once as character indices, a batch is cut from it,
 * and the model declares input_onehot = n_chars (the backend, or the host, does the one-hot expansion). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/data_text.h"
#include "khost/khost.h"
#include "khost/kit/status.h"
#include "khost/kit/rng.h"
#include "../common_models/bench_models.h"
#include "../common_models/bench_tasks.h"

enum { MAXLEN = 40, STEP = 3, GEN_CHARS = 400 };
static const double DIVERSITY = 0.5;

struct kh_tdata {
    char err[1024];
    char path[4096];
    kh_charwin cw;
    int64_t n_train; /* windows used (limit_train) */
    kh_bench_model model; /* the spec model() returns points into it */
};

static void unload(kh_tdata *d) {
    if (!d) return;
    kh_charwin_free(&d->cw);
    free(d);
}

static kh_status load(const kh_host_api *host, const kh_load_opts *o, kh_tdata **out, char *err, size_t errlen) {
    (void)host;
    if (!out || !o || !o->data_dir)
        return kh_errf(err, errlen, KH_ERR_INVALID, "lstm_text_generation: load: no data directory given");
    *out = NULL;
    kh_tdata *d = calloc(1, sizeof *d);
    if (!d) return kh_errf(err, errlen, KH_ERR_NOMEM, "lstm_text_generation: out of memory");
    int w = snprintf(d->path, sizeof d->path, "%s/nietzsche/nietzsche.txt", o->data_dir);
    if (w < 0 || (size_t)w >= sizeof d->path) {
        free(d);
        return kh_errf(err, errlen, KH_ERR_INVALID, "%s/nietzsche/nietzsche.txt: path too long", o->data_dir);
    }
    kh_status st = kh_charwin_load(d->path, MAXLEN, STEP, &d->cw, err, errlen);
    if (st != KH_OK) {
        size_t len = strlen(err);
        if (st == KH_ERR_IO && len >= 9 && strcmp(err + len - 9, "not found") == 0)
            snprintf(err + len, errlen - len, "; run: tools/fetch-datasets nietzsche");
        free(d);
        return st;
    }
    d->n_train = o->limit_train > 0 && o->limit_train < d->cw.n_windows ? o->limit_train : d->cw.n_windows;
    *out = d;
    return KH_OK;
}

static const char *last_error(kh_tdata *d) { return d ? d->err : "no task data"; }

static kh_status model(kh_tdata *d, kh_model_spec *m) {
    /* the softmax and the one-hot input are as wide as the corpus has distinct characters */
    kh_status st = kh_bench_model_get("lstm_text_generation", d->cw.n_distinct, &d->model);
    if (st != KH_OK) return st;
    kh_bench_model_fill(&d->model, m);
    return KH_OK;
}

static int64_t count(kh_tdata *d, uint32_t split) {
    return d && split == KH_SPLIT_TRAIN ? d->n_train : 0; /* no validation split */
}

static kh_status get_batch(kh_tdata *d, uint32_t split, const int64_t *idx, int32_t n, kh_tensor *x, kh_tensor *y) {
    if (split != KH_SPLIT_TRAIN)
        return KH_ERRF_TO(d, KH_ERR_INVALID, "lstm_text_generation: get_batch: split %u has no samples", split);
    if (n < 0 || (n > 0 && !idx) || !x || !y || (n > 0 && (!x->data || !y->data)))
        return KH_ERRF_TO(d, KH_ERR_INVALID, "lstm_text_generation: get_batch: bad arguments");
    if (x->dtype != KH_I32 || x->rank != 2 || x->dims[0] != n || x->dims[1] != MAXLEN)
        return KH_ERRF_TO(d, KH_ERR_INVALID, "lstm_text_generation: get_batch: x must be i32 (%d, %d) (got dtype %u, rank %d)",
                          n, MAXLEN, x->dtype, x->rank);
    if (y->dtype != KH_I32 || kh_tensor_numel(y) != n)
        return KH_ERRF_TO(d, KH_ERR_INVALID, "lstm_text_generation: get_batch: y must be i32 with %d values", n);
    int32_t *xs = x->data, *ys = y->data;
    for (int32_t i = 0; i < n; i++) {
        if (idx[i] < 0 || idx[i] >= d->n_train)
            return KH_ERRF_TO(d, KH_ERR_INVALID, "lstm_text_generation: get_batch: window %lld out of range 0..%lld",
                              (long long)idx[i], (long long)d->n_train - 1);
        kh_charwin_window(&d->cw, idx[i], xs + (size_t)i * MAXLEN, &ys[i]);
    }
    return KH_OK;
}

/* The character as the user should see it in describe(): printable ASCII and other characters as themselves,
 * controls escaped. */
static void show_char(char *buf, uint32_t cp) {
    if (cp == '\n') strcpy(buf, "\\n");
    else if (cp == '\t') strcpy(buf, "\\t");
    else if (cp < 0x20 || cp == 0x7F) snprintf(buf, 8, "\\x%02x", (unsigned)cp);
    else buf[kh_utf8_put(buf, cp)] = 0;
}

static kh_status describe(kh_tdata *d, kh_print_fn print, void *ctx) {
    if (!d || !print) return KH_ERR_INVALID;
    char line[2048];
    snprintf(line, sizeof line, "nietzsche: %s", d->path);
    print(ctx, line);
    snprintf(line, sizeof line, "corpus length: %lld characters (lower-cased, UTF-8 decoded); total chars: %d",
             (long long)d->cw.n_chars, (int)d->cw.n_distinct);
    print(ctx, line);
    int at = snprintf(line, sizeof line, "alphabet (by code point):");
    for (int32_t i = 0; i < d->cw.n_distinct && at > 0 && (size_t)at + 16 < sizeof line; i++) {
        char c[8];
        show_char(c, d->cw.alphabet[i]);
        at += snprintf(line + at, sizeof line - (size_t)at, " %s", c);
    }
    print(ctx, line);
    snprintf(line, sizeof line, "nb sequences: %lld windows of %d characters, step %d, the next character as label",
             (long long)d->cw.n_windows, MAXLEN, STEP);
    print(ctx, line);
    if (d->n_train != d->cw.n_windows) {
        snprintf(line, sizeof line, "training on the first %lld windows (limit)", (long long)d->n_train);
        print(ctx, line);
    }
    snprintf(line, sizeof line, "input: (N, %d) int32 character indices, layout NT, one-hot to (N, %d, %d) in the "
             "model; labels int32 next-character index; no validation split", MAXLEN, MAXLEN, (int)d->cw.n_distinct);
    print(ctx, line);
    return KH_OK;
}

/* Keras's sample(preds, temperature): log(p) / T, exp, normalise, one multinomial draw. In float64 as numpy. */
static int32_t sample(const float *p, int32_t n, double temperature, kh_rng *r) {
    double w[512];
    double mx = -INFINITY, sum = 0;
    for (int32_t i = 0; i < n; i++) {
        w[i] = p[i] > 0 ? log((double)p[i]) / temperature : -INFINITY;
        if (w[i] > mx) mx = w[i];
    }
    if (!isfinite(mx)) return 0; /* no probability mass at all: nothing sensible to draw */
    /* exp(w - max) instead of exp(w): the same distribution after normalising, without underflow */
    for (int32_t i = 0; i < n; i++) sum += (w[i] = exp(w[i] - mx));
    double u = kh_rng_uniform(r) * sum, acc = 0;
    for (int32_t i = 0; i < n; i++) {
        acc += w[i];
        if (u < acc) return i;
    }
    for (int32_t i = n - 1; i >= 0; i--) /* rounding left u at the very top: the last character with mass */
        if (w[i] > 0) return i;
    return 0;
}

static kh_status after_training(kh_tdata *d, const kh_predictor *p) {
    if (!d || !p || !p->predict || !p->print) return KH_ERR_INVALID;
    const kh_charwin *c = &d->cw;
    int32_t n = c->n_distinct;
    if (n > 512) return KH_ERRF_TO(d, KH_ERR_UNSUPPORTED, "lstm_text_generation: sampling supports at most 512 characters, the text has %d", n);
    kh_rng r;
    kh_rng_seed(&r, p->seed);
    /* random.randint(0, len(text) - maxlen - 1) */
    int64_t start = (int64_t)kh_rng_below(&r, (uint64_t)(c->n_chars - MAXLEN));
    int32_t window[MAXLEN];
    memcpy(window, c->text + start, sizeof window);
    float probs[512];
    /* The seed and the generated characters, UTF-8: at most 4 bytes per character. */
    char *text = malloc((size_t)(MAXLEN + GEN_CHARS) * 4 + 64);
    if (!text) return KH_ERRF_TO(d, KH_ERR_NOMEM, "lstm_text_generation: out of memory");
    size_t len = 0;
    for (int i = 0; i < MAXLEN; i++) len += kh_utf8_put(text + len, c->alphabet[window[i]]);
    text[len] = 0;
    char head[64];
    snprintf(head, sizeof head, "\n----- diversity: %.1f\n", DIVERSITY);
    p->print(p->ctx, head);
    p->print(p->ctx, "----- Generating with seed: \"");
    p->print(p->ctx, text);
    p->print(p->ctx, "\"\n");
    kh_tensor x = {.dtype = KH_I32, .layout = KH_LAYOUT_NT, .rank = 2, .dims = {1, MAXLEN}, .data = window};
    kh_tensor y = {.dtype = KH_F32, .layout = KH_LAYOUT_NC, .rank = 2, .dims = {1, n}, .data = probs};
    for (int i = 0; i < GEN_CHARS; i++) {
        kh_status st = p->predict(p->ctx, &x, &y);
        if (st != KH_OK) {
            free(text);
            return KH_ERRF_TO(d, st, "lstm_text_generation: predict failed after %d characters (%s)", i, kh_status_name(st));
        }
        int32_t next = sample(probs, n, DIVERSITY, &r);
        len += kh_utf8_put(text + len, c->alphabet[next]);
        memmove(window, window + 1, (MAXLEN - 1) * sizeof window[0]);
        window[MAXLEN - 1] = next;
    }
    text[len] = 0;
    /* As the script: sys.stdout.write(generated) — the seed followed by what the model wrote — then print() */
    p->print(p->ctx, text);
    p->print(p->ctx, "\n");
    free(text);
    return KH_OK;
}

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) {
    static const kh_task_api members = {.load = load, .unload = unload, .last_error = last_error, .model = model,
                                        .count = count, .get_batch = get_batch, .describe = describe,
                                        .after_training = after_training};
    (void)host;
    return kh_bench_task_module(
        "lstm_text_generation",
        "Nietzsche character model, LSTM(128) on 40-character windows (Keras lstm_text_generation.py)", &members);
}
