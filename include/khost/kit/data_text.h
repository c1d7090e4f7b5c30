/* khost/kit/data_text.h — text data readers of the helper library (libkhost_kit.a): Keras's text tokeniser,
 * the aclImdb review folders as keras.datasets.imdb indexes them, fastText bigram features as Keras's
 * examples/imdb_fasttext.py builds them, pad_sequences, and character windows over a UTF-8 text (the
 * Nietzsche corpus of examples/lstm_text_generation.py).
 *
 * Conventions: every function that can fail returns kh_status and writes "<file>: <what is wrong>" into
 * err (errlen bytes, always terminated). Memory is plain malloc; *_free() functions release everything
 * and accept zeroed structs. No global state; safe to use from several threads on different objects.
 */
#ifndef KHOST_DATA_TEXT_H
#define KHOST_DATA_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "khost/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- UTF-8 and Keras's tokeniser ------------------------------------------------------------------------ */

/* Strict UTF-8 validation (no overlongs, surrogates or code points above U+10FFFF). Returns -1 when s[0..n)
 * is valid, else the byte offset of the first invalid sequence. */
int64_t kh_utf8_check(const char *s, size_t n);

/* Lower-case one code point as Python's str.lower() does, for the ranges where that maps one code point to
 * one code point of the same UTF-8 length: ASCII, Latin-1 Supplement, Latin Extended-A, Greek and Cyrillic
 * capitals. Other code points are returned unchanged (documented differences from Python: U+0130 'İ', which
 * Python turns into two code points, stays; capital sigma always becomes 'σ', never the final 'ς'). */
uint32_t kh_unicode_lower(uint32_t cp);

/* Called once per word; the word is not terminated and lives only during the call. Return non-zero to stop
 * (kh_text_words then returns that value as its status). */
typedef int (*kh_word_fn)(void *ctx, const char *word, size_t len);

/* Keras's text_to_word_sequence(text, lower=True, split=' ') with its default filters, after replacing every
 * "<br />" (as lower-cased) by a space, on valid UTF-8 text s[0..n). Rewrites s in place (lower-cased, every
 * filter character and "<br />" turned into spaces; the length never changes) and calls fn for each
 * non-empty run between spaces, left to right. Exactly as Keras: only ' ' splits, so '\r', '\v', '\f' and
 * non-ASCII spaces stay inside words ('\t' and '\n' are filter characters). Returns KH_OK or fn's value. */
int kh_text_words(char *s, size_t n, kh_word_fn fn, void *ctx);

/* --- sequences -------------------------------------------------------------------------------------------- */

/* A set of variable-length int32 sequences with one label each: sequence i is tokens[offsets[i] ..
 * offsets[i+1]). */
typedef struct kh_seqset {
    int64_t n;
    int64_t *offsets; /* n + 1 entries */
    int32_t *tokens;  /* offsets[n] entries */
    int32_t *labels;  /* n entries */
} kh_seqset;

void kh_seqset_free(kh_seqset *s);

/* Keras's pad_sequences(seqs, maxlen, padding='pre', truncating='pre', value=0): out (n x maxlen, row-major)
 * receives for each sequence its LAST maxlen tokens, right-aligned, zeros in front. */
kh_status kh_pad_sequences(const kh_seqset *s, int32_t maxlen, int32_t *out, char *err, size_t errlen);

/* --- aclImdb review folders, indexed as keras.datasets.imdb.load_data ------------------------------------ */
/*
 * Layout: <root>/{train,test}/{pos,neg}/<id>_<rating>.txt (root is the aclImdb folder). Label 1 = pos.
 * Reading order: train/pos then train/neg, each by ascending numeric id (then rating) — the order the
 * aclImdb preprocessing scripts Keras's data set descends from used. Every review must be valid UTF-8.
 * Words: kh_text_words on the whole file. Ranks: frequency over all training reviews, descending; ties by
 * first occurrence in the reading order (exactly Keras's Tokenizer: a stable sort of an insertion-ordered
 * count dictionary). Index = rank + index_from (rank from 1); every sequence starts with start_char; a word
 * whose index is >= num_words (num_words > 0), or a test word never seen in training, becomes oov_char.
 * Sample order of each split (what limits cut): pos and neg interleaved (pos 0, neg 0, pos 1, neg 1, ...,
 * the longer folder's rest at the end), so any prefix is balanced. The vocabulary always comes from the
 * whole training split, so a sample's indices do not depend on the limits; with limit_val only the needed
 * test files are read.
 */
typedef struct kh_imdb_opts {
    int32_t num_words;  /* 20000 (Keras's max_features); 0 = no cap */
    int32_t index_from; /* 3 */
    int32_t start_char; /* 1 */
    int32_t oov_char;   /* 2 */
    int64_t limit_train; /* 0 = all; else the first N samples of the sample order */
    int64_t limit_test;
    /* Optional progress report: done of total review files read. */
    void (*progress)(void *ctx, const char *what, int64_t done, int64_t total);
    void *progress_ctx;
} kh_imdb_opts;

void kh_imdb_opts_default(kh_imdb_opts *o);

typedef struct kh_imdb {
    kh_seqset train, test;   /* unpadded, start_char first, num_words applied, in sample order */
    int64_t train_files;     /* review files in each split (before limits) */
    int64_t test_files;
    int64_t vocab_size;      /* distinct words in the training reviews */
    int64_t train_words;     /* word tokens in the training reviews (all of them) */
    int64_t test_oov_unseen; /* test tokens of the kept samples that never occur in training */
    int32_t num_words, index_from, start_char, oov_char;
    /* The most frequent training words (rank r at [r-1]), for describe() and tests: up to 32. */
    int32_t n_top;
    const char *top_words[32]; /* point into the vocabulary, valid until kh_imdb_free */
    int64_t top_counts[32];
    struct kh_imdb_vocab *vocab; /* private: the training vocabulary (kh_imdb_word_index) */
} kh_imdb;

/* Reads and indexes the review folders. A missing folder is KH_ERR_IO ("<dir>: not found"); an empty
 * folder, a file name not of the form <id>_<rating>.txt (rating 1..10), a duplicate id or a non-UTF-8
 * review is KH_ERR_DATA naming the file. On error *out is left zeroed. */
kh_status kh_imdb_load(const char *root, const kh_imdb_opts *o, kh_imdb *out, char *err, size_t errlen);
void kh_imdb_free(kh_imdb *d);

/* Index of a word (as kh_text_words yields it: lower-cased, no filter characters) before the num_words cap:
 * rank + index_from, or -1 when the word never occurs in the training reviews. */
int64_t kh_imdb_word_index(const kh_imdb *d, const char *word);

/* Mean and median sequence length of a set (tokens, start marker included, before padding). */
void kh_seqset_length_stats(const kh_seqset *s, double *mean, double *median);

/* --- fastText bigram features, as examples/imdb_fasttext.py with ngram_range = 2 ------------------------- */
/*
 * The table holds every bigram (consecutive pair) of the training sequences; ids start_index, start_index+1,
 * ... in order of first occurrence over train in its order (the original enumerates a Python set, whose
 * order is arbitrary). Then every sequence of train and test gets, appended in order of occurrence, the id
 * of each of its bigrams that is in the table (duplicates included). max_features = start_index + bigrams
 * (the highest id + 1). Both sets are rewritten in place; on error they are left unchanged.
 */
typedef struct kh_bigram_info {
    int64_t n_bigrams;
    int64_t max_features;
} kh_bigram_info;

kh_status kh_fasttext_bigrams(kh_seqset *train, kh_seqset *test, int32_t start_index, kh_bigram_info *info,
                              char *err, size_t errlen);

/* --- character windows over a UTF-8 text (examples/lstm_text_generation.py) ----------------------------- */
/*
 * The text is decoded as Python's io.open(path, encoding='utf-8').read().lower() sees it: universal newlines
 * ("\r\n" and "\r" become "\n"), lower-cased with kh_unicode_lower, counted in characters (code points).
 * The alphabet is the distinct characters sorted by code point (Python's sorted(set(text))); the text is
 * kept once as alphabet indices. Window w covers characters [w*step, w*step + maxlen) and its label is
 * character w*step + maxlen; windows = ceil((n_chars - maxlen) / step).
 */
typedef struct kh_charwin {
    int64_t n_chars;
    int32_t n_distinct;
    uint32_t *alphabet; /* n_distinct code points, ascending */
    int32_t *text;      /* n_chars alphabet indices */
    int32_t maxlen, step;
    int64_t n_windows;
} kh_charwin;

/* From a file: missing = KH_ERR_IO ("<path>: not found"); non-UTF-8 or too short = KH_ERR_DATA. */
kh_status kh_charwin_load(const char *path, int32_t maxlen, int32_t step, kh_charwin *out, char *err,
                          size_t errlen);
/* From memory; `what` names the source in error messages. */
kh_status kh_charwin_from_text(const char *what, const char *text, size_t len, int32_t maxlen, int32_t step,
                               kh_charwin *out, char *err, size_t errlen);
void kh_charwin_free(kh_charwin *c);
/* Window w: x receives maxlen alphabet indices, *y the next character's index. KH_ERR_INVALID if w is out
 * of range. */
kh_status kh_charwin_window(const kh_charwin *c, int64_t w, int32_t *x, int32_t *y);
/* Alphabet index of a code point, or -1. */
int32_t kh_charwin_index(const kh_charwin *c, uint32_t cp);
/* Append the UTF-8 encoding of code point cp to buf (at least 5 bytes free); returns bytes written. */
size_t kh_utf8_put(char *buf, uint32_t cp);

#ifdef __cplusplus
}
#endif
#endif
