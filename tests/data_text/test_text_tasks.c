/* test_text_tasks.c — the three text task modules through their ABI, as the host drives them: descriptor,
 * info and published figures, the model spec (validated by kh_spec_infer), load on a small generated data
 * directory (limits, missing data message), get_batch contents and argument checks, describe(), and
 * lstm_text_generation's after-training sampling through a fake predictor. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "khost/kit/spec.h"
#include "task_host.h"
#include "testutil.h"

static int has(const char *s, const char *part) { return s && strstr(s, part) != NULL; }

static void put(const char *root, const char *rel, const char *text) {
    char p[1024], dir[1024];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    snprintf(dir, sizeof dir, "%s", p);
    for (char *s = dir + strlen(root) + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(dir, 0755);
            *s = '/';
        }
    kh_test_write_file(p, text, strlen(text));
}

/* The corpus of test_data_text.c (its indices are hand-checked there), under <data>/imdb/aclImdb. */
static void write_imdb(const char *data) {
    put(data, "imdb/aclImdb/train/pos/0_9.txt", "Good film. Good<br />acting!");
    put(data, "imdb/aclImdb/train/pos/2_10.txt", "\xc3\x89" "CLAIR\tfilm (good) x_y");
    put(data, "imdb/aclImdb/train/neg/1_1.txt", "Bad film, bad plot. It's BAD<BR />ok\r\nend");
    put(data, "imdb/aclImdb/test/pos/5_7.txt", "good unknownword film");
    put(data, "imdb/aclImdb/test/neg/3_4.txt", "FILM bad bad acting");
}

static const kh_published *find_pub(const kh_task_info *ti, const char *backend, const char *device) {
    for (int i = 0; i < ti->n_published; i++)
        if (!strcmp(ti->published[i].backend, backend) && !strcmp(ti->published[i].device, device))
            return &ti->published[i];
    return NULL;
}

/* Published rows of the original benchmark the task must carry, exactly (metric -1: the cell has none). */
typedef struct pub_row {
    const char *backend, *device;
    double metric, s_per_epoch;
} pub_row;

static void check_published(const kh_task_info *ti, const pub_row *want, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const kh_published *p = find_pub(ti, want[i].backend, want[i].device);
        CHECK(p && p->metric == want[i].metric && p->s_per_epoch == want[i].s_per_epoch, "published %s/%s",
              want[i].backend, want[i].device);
    }
}

/* What a task module must say about itself: its info (12 published rows each) and some of those rows. */
typedef struct task_expect {
    const char *name, *dataset, *metric;
    int32_t epochs, batch_size, has_validation, target_is_max;
    double target;
    pub_row pubs[4];
    size_t n_pubs;
} task_expect;

/* The task module e->name with its descriptor and info checked against e; NULL (a failed check) when it does not
 * open. */
static const kh_task_api *open_task(const task_expect *e) {
    const kh_module_desc *desc;
    const kh_task_api *t = th_open_task(e->name, &desc);
    CHECK(t && !strcmp(desc->name, e->name) && desc->abi_major == KH_ABI_MAJOR, "open %s", e->name);
    if (!t) return NULL;
    const kh_task_info *ti = t->info();
    CHECK(!strcmp(ti->dataset, e->dataset) && ti->epochs == e->epochs && ti->batch_size == e->batch_size &&
              ti->has_validation == e->has_validation && !strcmp(ti->metric, e->metric) && ti->target == e->target &&
              ti->target_is_max == e->target_is_max && ti->n_published == 12,
          "%s info", e->name);
    check_published(ti, e->pubs, e->n_pubs);
    return t;
}

static kh_status load(const kh_task_api *t, const char *data, int64_t lt, int64_t lv, kh_tdata **d, char *err,
                      size_t n) {
    kh_load_opts o = {.struct_size = sizeof o, .data_dir = data, .limit_train = lt, .limit_val = lv, .seed = 1};
    err[0] = 0;
    return t->load(&th_host, &o, d, err, n);
}

static void check_spec(const kh_model_spec *m, const char *what) {
    kh_model_shapes sh;
    char err[512];
    kh_status st = kh_spec_infer(m, &sh, err, sizeof err);
    CHECK(st == KH_OK, "%s: spec_infer: %s", what, err);
    if (st == KH_OK) kh_model_shapes_free(&sh);
}

/* x/y tensors over caller buffers */
static void tensors(kh_tensor *x, kh_tensor *y, int32_t *xb, int32_t *yb, int32_t n, int32_t T) {
    *x = (kh_tensor){.dtype = KH_I32, .layout = KH_LAYOUT_NT, .rank = 2, .dims = {n, T}, .data = xb};
    *y = (kh_tensor){.dtype = KH_I32, .layout = KH_LAYOUT_NC, .rank = 1, .dims = {n}, .data = yb};
}

static void test_bilstm(const char *data, const char *empty) {
    static const task_expect e = {"imdb_bidirectional_lstm", "imdb", "val_acc", 4, 32, 1, 0, 0.82,
                                  {{"theano", "K80", -1, -1}, {"theano", "Titan X", 0.8310, 310.3},
                                   {"tensorflow", "M60", 0.8301, 244.3}, {"cntk", "1080 Ti", 0.8388, 94.3}}, 4};
    const kh_task_api *t = open_task(&e);
    if (!t) return;

    char err[1024];
    kh_tdata *d = NULL;
    kh_status st = load(t, empty, 0, 0, &d, err, sizeof err);
    CHECK(st == KH_ERR_IO && has(err, "imdb/aclImdb") && has(err, "not found; run: tools/fetch-datasets imdb"),
          "missing data: %d %s", st, err);

    th_progress_calls = 0;
    st = load(t, data, 0, 0, &d, err, sizeof err);
    CHECK(st == KH_OK, "load: %s", err);
    if (st != KH_OK) return;
    CHECK(th_progress_calls > 0, "progress reported");
    CHECK(t->count(d, KH_SPLIT_TRAIN) == 3 && t->count(d, KH_SPLIT_VAL) == 2, "counts");
    kh_model_spec m;
    memset(&m, 0, sizeof m);
    m.struct_size = sizeof m;
    CHECK(t->model(d, &m) == KH_OK, "model");
    CHECK(m.input_dtype == KH_I32 && m.input_rank == 1 && m.input_shape[0] == 100 && m.input_onehot == 0, "input");
    CHECK(m.n_layers == 4 && m.layers[0].kind == KH_LAYER_EMBEDDING && m.layers[0].input_dim == 20000 &&
              m.layers[0].units == 128 && m.layers[1].kind == KH_LAYER_BILSTM && m.layers[1].units == 64 &&
              m.layers[1].return_sequences == 0 && m.layers[2].kind == KH_LAYER_DROPOUT && m.layers[2].rate == 0.5f &&
              m.layers[3].kind == KH_LAYER_DENSE && m.layers[3].units == 1 && m.layers[3].activation == KH_ACT_SIGMOID,
          "layers");
    CHECK(m.loss == KH_LOSS_BINARY_CROSSENTROPY && m.n_classes == 1 && m.optimizer.kind == KH_OPT_ADAM &&
              m.optimizer.lr == 0.001f && m.optimizer.beta_1 == 0.9f && m.optimizer.beta_2 == 0.999f &&
              m.optimizer.epsilon == 1e-7f && m.optimizer.decay == 0.0f,
          "loss and optimizer");
    check_spec(&m, "bilstm");

    int32_t xb[3 * 100], yb[3];
    kh_tensor x, y;
    tensors(&x, &y, xb, yb, 2, 100);
    int64_t idx[3] = {1, 0, 2};
    CHECK(t->get_batch(d, KH_SPLIT_TRAIN, idx, 2, &x, &y) == KH_OK, "get_batch: %s", t->last_error(d));
    /* train sample 1 = neg 1_1: 1 bad film bad plot it's bad ok\r end = 1 6 5 6 11 12 6 13 14 (all < 20000) */
    static const int32_t s1[] = {1, 6, 5, 6, 11, 12, 6, 13, 14};
    int zeros = 1;
    for (int k = 0; k < 91; k++) zeros &= xb[k] == 0;
    CHECK(zeros && memcmp(xb + 91, s1, sizeof s1) == 0 && yb[0] == 0, "row 0 = sample 1, padded in front");
    CHECK(xb[100 + 95] == 1 && xb[199] == 7 && yb[1] == 1, "row 1 = sample 0");
    tensors(&x, &y, xb, yb, 2, 100);
    CHECK(t->get_batch(d, KH_SPLIT_VAL, (int64_t[]){1, 0}, 2, &x, &y) == KH_OK && xb[95] == 1 && xb[99] == 7 &&
              yb[0] == 0 && yb[1] == 1,
          "validation batch");
    CHECK(t->get_batch(d, KH_SPLIT_VAL, (int64_t[]){2, 0}, 2, &x, &y) == KH_ERR_INVALID && has(t->last_error(d), "out of range"),
          "out-of-range sample: %s", t->last_error(d));
    tensors(&x, &y, xb, yb, 2, 99);
    CHECK(t->get_batch(d, KH_SPLIT_TRAIN, idx, 2, &x, &y) == KH_ERR_INVALID, "wrong T rejected");
    tensors(&x, &y, xb, yb, 2, 100);
    x.dtype = KH_F32;
    CHECK(t->get_batch(d, KH_SPLIT_TRAIN, idx, 2, &x, &y) == KH_ERR_INVALID, "wrong dtype rejected");
    tensors(&x, &y, xb, yb, 2, 100);
    CHECK(t->get_batch(d, 7, idx, 2, &x, &y) == KH_ERR_INVALID, "unknown split rejected");

    th_described[0] = 0;
    CHECK(t->describe(d, th_print, NULL) == KH_OK, "describe");
    CHECK(has(th_described, "train: 3 reviews, 2 positive / 1 negative") &&
              has(th_described, "validation (test): 2 reviews, 1 positive / 1 negative") &&
              has(th_described, "11 distinct words") && has(th_described, "num_words 20000") &&
              has(th_described, "max_features 20000") && has(th_described, "good (3)") &&
              has(th_described, "(N, 100) int32"),
          "describe content");
    t->unload(d);

    st = load(t, data, 2, 1, &d, err, sizeof err);
    CHECK(st == KH_OK && t->count(d, KH_SPLIT_TRAIN) == 2 && t->count(d, KH_SPLIT_VAL) == 1, "limits: %s", err);
    if (st == KH_OK) {
        tensors(&x, &y, xb, yb, 2, 100);
        CHECK(t->get_batch(d, KH_SPLIT_TRAIN, (int64_t[]){0, 1}, 2, &x, &y) == KH_OK && yb[0] + yb[1] == 1,
              "a limited train set holds both classes");
        t->unload(d);
    }
    t->unload(NULL);
}

static void test_fasttext(const char *data) {
    static const task_expect e = {"imdb_fasttext", "imdb", "val_acc", 5, 32, 1, 0, 0.88,
                                  {{"theano", "M60", 0.8856, 15.4}, {"cntk", "K80", 0.9064, 69.5},
                                   {"tensorflow", "1080 Ti", 0.8856, 4.5}}, 3};
    const kh_task_api *t = open_task(&e);
    if (!t) return;
    char err[1024];
    kh_tdata *d = NULL;
    kh_status st = load(t, data, 0, 0, &d, err, sizeof err);
    CHECK(st == KH_OK, "load: %s", err);
    if (st != KH_OK) return;
    kh_model_spec m;
    memset(&m, 0, sizeof m);
    m.struct_size = sizeof m;
    CHECK(t->model(d, &m) == KH_OK, "model");
    /* num_words 20000 keeps every word: train 1 4 5 4 7 | 1 6 5 6 11 12 6 13 14 | 1 8 5 4 9 10 has 4 + 8 + 4 = 16
     * distinct bigrams (the (5,4) of sample 2 repeats sample 0's) -> ids 20001..20016, max_features 20017 */
    CHECK(m.n_layers == 3 && m.layers[0].kind == KH_LAYER_EMBEDDING && m.layers[0].input_dim == 20017 &&
              m.layers[0].units == 50 && m.layers[1].kind == KH_LAYER_GAP1D && m.layers[2].kind == KH_LAYER_DENSE &&
              m.layers[2].units == 1 && m.layers[2].activation == KH_ACT_SIGMOID,
          "layers (input_dim %d)", m.layers[0].input_dim);
    CHECK(m.input_shape[0] == 400 && m.loss == KH_LOSS_BINARY_CROSSENTROPY && m.optimizer.kind == KH_OPT_ADAM,
          "input and loss");
    check_spec(&m, "fasttext");
    int32_t xb[400], yb[1];
    kh_tensor x, y;
    tensors(&x, &y, xb, yb, 1, 400);
    CHECK(t->get_batch(d, KH_SPLIT_TRAIN, (int64_t[]){0}, 1, &x, &y) == KH_OK, "get_batch");
    static const int32_t s0[] = {1, 4, 5, 4, 7, 20001, 20002, 20003, 20004};
    CHECK(memcmp(xb + 391, s0, sizeof s0) == 0 && xb[390] == 0 && yb[0] == 1, "sample 0 with its bigrams");
    tensors(&x, &y, xb, yb, 1, 400);
    /* test sample 1 = neg 3_4: 1 5 6 6 7; (5,6) is training bigram 20007 (sample 1: (1,6) (6,5) (5,6)) */
    CHECK(t->get_batch(d, KH_SPLIT_VAL, (int64_t[]){1}, 1, &x, &y) == KH_OK && xb[393] == 0 && xb[394] == 1 &&
              xb[398] == 7 && xb[399] == 20007,
          "test bigram appended: %d %d %d %d", xb[393], xb[394], xb[398], xb[399]);
    th_described[0] = 0;
    CHECK(t->describe(d, th_print, NULL) == KH_OK, "describe");
    CHECK(has(th_described, "bigrams (ngram_range 2): 16 from the training sequences, ids 20001..20016; "
                            "max_features 20017") &&
              has(th_described, "with bigram features appended") && has(th_described, "(N, 400) int32"),
          "describe content");
    t->unload(d);
}

/* --- lstm_text_generation ------------------------------------------------------------------------------ */
typedef struct fake_model {
    int32_t hot[2]; /* the characters (alphabet indices) given probability */
    int calls, bad_input, slid;
    int32_t last_window[40];
    char out[8192];
} fake_model;

static kh_status fake_predict(void *ctx, const kh_tensor *x, kh_tensor *y) {
    fake_model *f = ctx;
    if (x->dtype != KH_I32 || x->rank != 2 || x->dims[0] != 1 || x->dims[1] != 40 || y->dtype != KH_F32 ||
        y->rank != 2 || y->dims[0] != 1)
        f->bad_input++;
    const int32_t *w = x->data;
    /* each call's window is the previous one shifted left with the drawn character appended */
    if (f->calls > 0 && memcmp(w, f->last_window + 1, 39 * sizeof *w) == 0 && (w[39] == f->hot[0] || w[39] == f->hot[1]))
        f->slid++;
    memcpy(f->last_window, w, sizeof f->last_window);
    float *p = y->data;
    for (int64_t i = 0; i < y->dims[1]; i++) p[i] = 0;
    p[f->hot[0]] = 0.7f;
    p[f->hot[1]] = 0.3f;
    f->calls++;
    return KH_OK;
}

static void fake_print(void *ctx, const char *text) {
    fake_model *f = ctx;
    size_t at = strlen(f->out);
    snprintf(f->out + at, sizeof f->out - at, "%s", text);
}

static void test_textgen(const char *data, const char *empty) {
    static const task_expect e = {"lstm_text_generation", "nietzsche", "loss", 10, 128, 0, 1, 1.45,
                                  {{"theano", "M60", 1.3939, 353.1}, {"cntk", "1080 Ti", 1.3956, 32.7},
                                   {"tensorflow", "K80", 1.4060, 87.6}}, 3};
    const kh_task_api *t = open_task(&e);
    if (!t) return;
    char err[1024];
    kh_tdata *d = NULL;
    kh_status st = load(t, empty, 0, 0, &d, err, sizeof err);
    CHECK(st == KH_ERR_IO && has(err, "nietzsche/nietzsche.txt: not found; run: tools/fetch-datasets nietzsche"),
          "missing data: %s", err);

    /* 100 characters: "Ab" + "é" then 97 letters/spaces, so windows = ceil((100 - 40) / 3) = 20 */
    char text[256] = "Ab\xc3\xa9";
    for (int i = 0; i < 97; i++) strncat(text, (i % 5 == 4) ? " " : (i % 3 ? "x" : "Y"), 2);
    put(data, "nietzsche/nietzsche.txt", text);
    st = load(t, data, 0, 0, &d, err, sizeof err);
    CHECK(st == KH_OK, "load: %s", err);
    if (st != KH_OK) return;
    /* alphabet: ' ' a b x y é -> 6 */
    CHECK(t->count(d, KH_SPLIT_TRAIN) == 20 && t->count(d, KH_SPLIT_VAL) == 0, "counts %lld",
          (long long)t->count(d, KH_SPLIT_TRAIN));
    kh_model_spec m;
    memset(&m, 0, sizeof m);
    m.struct_size = sizeof m;
    CHECK(t->model(d, &m) == KH_OK, "model");
    CHECK(m.input_dtype == KH_I32 && m.input_rank == 1 && m.input_shape[0] == 40 && m.input_onehot == 6, "input");
    CHECK(m.n_layers == 2 && m.layers[0].kind == KH_LAYER_LSTM && m.layers[0].units == 128 &&
              m.layers[0].return_sequences == 0 && m.layers[1].kind == KH_LAYER_DENSE && m.layers[1].units == 6 &&
              m.layers[1].activation == KH_ACT_SOFTMAX,
          "layers");
    CHECK(m.loss == KH_LOSS_CATEGORICAL_CROSSENTROPY && m.n_classes == 6 && m.optimizer.kind == KH_OPT_RMSPROP &&
              m.optimizer.lr == 0.01f && m.optimizer.rho == 0.9f && m.optimizer.epsilon == 1e-7f,
          "loss and optimizer");
    check_spec(&m, "textgen");

    int32_t xb[2 * 40], yb[2];
    kh_tensor x, y;
    tensors(&x, &y, xb, yb, 2, 40);
    CHECK(t->get_batch(d, KH_SPLIT_TRAIN, (int64_t[]){0, 19}, 2, &x, &y) == KH_OK, "get_batch");
    /* window 0: a b é ...; window 19 starts at character 57; label of window 0 is character 40 */
    CHECK(xb[0] == 1 && xb[1] == 2 && xb[2] == 5, "window 0 starts a b é: %d %d %d", xb[0], xb[1], xb[2]);
    CHECK(t->get_batch(d, KH_SPLIT_TRAIN, (int64_t[]){20}, 1, &x, &y) == KH_ERR_INVALID, "window 20 out of range");
    CHECK(t->get_batch(d, KH_SPLIT_VAL, (int64_t[]){0}, 1, &x, &y) == KH_ERR_INVALID, "no validation split");

    th_described[0] = 0;
    CHECK(t->describe(d, th_print, NULL) == KH_OK, "describe");
    CHECK(has(th_described, "corpus length: 100 characters") && has(th_described, "total chars: 6") &&
              has(th_described, "nb sequences: 20 windows of 40") && has(th_described, "\xc3\xa9"),
          "describe content");

    fake_model f;
    memset(&f, 0, sizeof f);
    f.hot[0] = 3; /* 'x' */
    f.hot[1] = 0; /* ' ' */
    kh_predictor p = {.ctx = &f, .predict = fake_predict, .print = fake_print, .seed = 42};
    st = t->after_training(d, &p);
    CHECK(st == KH_OK, "after_training: %s", t->last_error(d));
    CHECK(f.calls == 400 && f.bad_input == 0 && f.slid == 399, "400 predictions over a sliding window (%d, %d, %d)",
          f.calls, f.bad_input, f.slid);
    CHECK(has(f.out, "----- diversity: 0.5\n") && has(f.out, "----- Generating with seed: \""), "headers: %s", f.out);
    /* the last line: the 40-character seed, then 400 characters drawn only from 'x' and ' ' */
    char *last = strrchr(f.out, '"');
    int only = last != NULL, n_x = 0;
    if (last) {
        char *gen = strchr(last, '\n');
        gen = gen ? gen + 1 : NULL;
        only = gen != NULL;
        /* skip the seed (may contain the 2-byte é) */
        int chars = 0;
        while (gen && *gen && chars < 40) {
            gen += ((unsigned char)*gen >= 0xC0) ? 2 : 1;
            chars++;
        }
        int gen_chars = 0;
        for (; gen && *gen && *gen != '\n'; gen++, gen_chars++) {
            only &= *gen == 'x' || *gen == ' ';
            n_x += *gen == 'x';
        }
        only &= gen_chars == 400;
    }
    /* at diversity 0.5, 0.7/0.3 becomes 0.49/0.09 normalised: 'x' with p = 0.845 */
    CHECK(only && n_x > 300 && n_x < 380, "generated text from the model's distribution at diversity 0.5 (x: %d)", n_x);
    /* the same seed gives the same text */
    fake_model g;
    memset(&g, 0, sizeof g);
    g.hot[0] = 3;
    g.hot[1] = 0;
    p.ctx = &g;
    CHECK(t->after_training(d, &p) == KH_OK && strcmp(f.out, g.out) == 0, "deterministic for a seed");
    t->unload(d);
}

int main(void) {
    const char *data = kh_test_tmpdir("textdata");
    const char *empty = kh_test_tmpdir("textempty");
    write_imdb(data);
    test_bilstm(data, empty);
    test_fasttext(data);
    test_textgen(data, empty);
    return kh_test_finish("test_text_tasks");
}
