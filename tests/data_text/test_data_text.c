/* test_data_text.c — Keras compatibility of the text readers (khost/kit/data_text.h) on a small hand-checked
 * corpus the test writes as an aclImdb-like tree, plus UTF-8 handling, malformed trees and Nietzsche-style
 * character windows over multi-byte text. Every expected value below was worked out by hand from Keras 2's
 * text_to_word_sequence / Tokenizer / imdb.load_data / pad_sequences / imdb_fasttext.py (and agrees with
 * tests/data_text/keras_reference.py). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "khost/kit/data_text.h"
#include "testutil.h"

/* --- helpers ------------------------------------------------------------------------------------------- */
static void mkdirs(const char *root, const char *sub) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", root, sub);
    mkdir(root, 0755);
    for (char *s = p + strlen(root) + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(p, 0755);
            *s = '/';
        }
    mkdir(p, 0755);
}

static void put(const char *root, const char *rel, const char *text) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    kh_test_write_file(p, text, strlen(text));
}

static void make_tree(const char *root) {
    mkdirs(root, "train/pos");
    mkdirs(root, "train/neg");
    mkdirs(root, "test/pos");
    mkdirs(root, "test/neg");
}

/* Sequence i of s equals want[0..n). */
static int seq_is(const kh_seqset *s, int64_t i, const int32_t *want, int64_t n) {
    if (i >= s->n) return 0;
    int64_t a = s->offsets[i], b = s->offsets[i + 1];
    if (b - a != n) return 0;
    for (int64_t k = 0; k < n; k++)
        if (s->tokens[a + k] != want[k]) return 0;
    return 1;
}

static void print_seq(const kh_seqset *s, int64_t i) {
    if (i >= s->n) return;
    fprintf(stderr, "  got:");
    for (int64_t k = s->offsets[i]; k < s->offsets[i + 1]; k++) fprintf(stderr, " %d", s->tokens[k]);
    fprintf(stderr, "\n");
}

#define CHECK_SEQ(set, i, ...)                                                                    \
    do {                                                                                          \
        static const int32_t want_[] = {__VA_ARGS__};                                             \
        int ok_ = seq_is((set), (i), want_, (int64_t)(sizeof want_ / sizeof want_[0]));           \
        CHECK(ok_, "sequence %d of %s", (int)(i), #set);                                          \
        if (!ok_) print_seq((set), (i));                                                          \
    } while (0)

/* --- tokeniser ------------------------------------------------------------------------------------------ */
typedef struct words {
    char buf[1024];
    size_t len;
    int n;
} words;

static int collect(void *ctx, const char *w, size_t n) {
    words *c = ctx;
    if (c->len + n + 2 >= sizeof c->buf) return 99;
    if (c->n++) c->buf[c->len++] = '|';
    memcpy(c->buf + c->len, w, n);
    c->len += n;
    c->buf[c->len] = 0;
    return 0;
}

/* The words of text joined by '|'. */
static const char *tok(const char *text) {
    static words c;
    memset(&c, 0, sizeof c);
    char tmp[1024];
    size_t n = strlen(text);
    memcpy(tmp, text, n + 1);
    int r = kh_text_words(tmp, n, collect, &c);
    if (r) return "<error>";
    return c.buf;
}

#define CHECK_TOK(text, want) CHECK(strcmp(tok(text), want) == 0, "tokens of \"%s\": got \"%s\", want \"%s\"", text, tok(text), want)

static void test_tokenizer(void) {
    CHECK_TOK("Hello, World!", "hello|world");
    CHECK_TOK("The END.", "the|end");
    CHECK_TOK("a<br />b", "a|b");
    CHECK_TOK("a<br /><br />b", "a|b");
    CHECK_TOK("x<BR />y", "x|y");             /* lower-cased before "<br />" is removed */
    CHECK_TOK("a<br/>b", "a|br|b");           /* not "<br />": '<', '/', '>' are filters, "br" stays */
    CHECK_TOK("don't stop", "don't|stop");    /* the apostrophe is not a filter */
    CHECK_TOK("tab\there\nnew", "tab|here|new"); /* \t and \n are filters */
    CHECK_TOK("x\ry", "x\ry");                /* Keras splits on ' ' only: \r stays inside the word */
    CHECK_TOK("a_b-c.d", "a|b|c|d");
    CHECK_TOK("50%off", "50|off");
    CHECK_TOK("back\\slash", "back|slash");
    CHECK_TOK("!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~", "");
    CHECK_TOK("", "");
    CHECK_TOK("    ", "");
    CHECK_TOK("\xc3\x80\xc3\x89\xc3\x8e", "\xc3\xa0\xc3\xa9\xc3\xae");            /* ÀÉÎ -> àéî */
    CHECK_TOK("na\xc3\xafve\xe2\x80\x94" "caf\xc3\xa9", "na\xc3\xafve\xe2\x80\x94" "caf\xc3\xa9"); /* — is kept */
    CHECK_TOK("\xc5\xbb\xc3\x93\xc5\x81W", "\xc5\xbc\xc3\xb3\xc5\x82w");         /* ŻÓŁW -> żółw */
    CHECK_TOK("\xc3\x97 \xc3\x9f", "\xc3\x97|\xc3\x9f");                       /* × and ß unchanged */
    CHECK_TOK("<", "");
    CHECK_TOK("<br /", "br");                 /* an unfinished tag is just filters */

    /* the rewrite happens in place and keeps the length */
    char s[] = "Ab,<br />C";
    words c;
    memset(&c, 0, sizeof c);
    CHECK(kh_text_words(s, strlen(s), collect, &c) == KH_OK, "kh_text_words status");
    CHECK(strcmp(s, "ab       c") == 0, "in-place rewrite: \"%s\"", s);
    /* a callback's non-zero return stops the scan and is returned */
    char big[] = "a b c";
    CHECK(kh_text_words(big, 5, collect, &(words){.len = sizeof c.buf}) == 99, "callback status passes through");
}

static void test_utf8(void) {
    CHECK(kh_utf8_check("plain ascii", 11) == -1, "ascii");
    CHECK(kh_utf8_check("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14) == -1, "2-, 3- and 4-byte characters");
    CHECK(kh_utf8_check("ab\xff", 3) == 2, "0xff");
    CHECK(kh_utf8_check("a\x80", 2) == 1, "stray continuation byte");
    CHECK(kh_utf8_check("\xc0\xaf", 2) == 0, "overlong '/'");
    CHECK(kh_utf8_check("x\xe0\x80\xaf", 4) == 1, "overlong 3-byte");
    CHECK(kh_utf8_check("\xed\xa0\x80", 3) == 0, "surrogate");
    CHECK(kh_utf8_check("\xf4\x90\x80\x80", 4) == 0, "above U+10FFFF");
    CHECK(kh_utf8_check("0123456789\xe2\x82", 12) == 10, "truncated at the end");
    CHECK(kh_utf8_check("\xc3\xa9\xc3", 3) == 2, "truncated 2-byte");
    CHECK(kh_utf8_check("latin1 caf\xe9!", 12) == 10, "Latin-1 byte");

    CHECK(kh_unicode_lower('A') == 'a' && kh_unicode_lower('z') == 'z' && kh_unicode_lower('1') == '1', "ASCII");
    CHECK(kh_unicode_lower(0xC9) == 0xE9, "É");
    CHECK(kh_unicode_lower(0xD7) == 0xD7, "× unchanged");
    CHECK(kh_unicode_lower(0xDF) == 0xDF, "ß unchanged");
    CHECK(kh_unicode_lower(0x17B) == 0x17C && kh_unicode_lower(0x141) == 0x142 && kh_unicode_lower(0x152) == 0x153,
          "Latin Extended-A");
    CHECK(kh_unicode_lower(0x178) == 0xFF, "Ÿ");
    CHECK(kh_unicode_lower(0x131) == 0x131 && kh_unicode_lower(0x130) == 0x130, "ı stays, İ documented as unchanged");
    CHECK(kh_unicode_lower(0x3A3) == 0x3C3 && kh_unicode_lower(0x391) == 0x3B1 && kh_unicode_lower(0x38F) == 0x3CE,
          "Greek");
    CHECK(kh_unicode_lower(0x414) == 0x434 && kh_unicode_lower(0x401) == 0x451, "Cyrillic");
    CHECK(kh_unicode_lower(0x4E2D) == 0x4E2D, "CJK unchanged");

    char b[8];
    CHECK(kh_utf8_put(b, 0x20AC) == 3 && memcmp(b, "\xe2\x82\xac", 3) == 0, "put €");
    CHECK(kh_utf8_put(b, 0x1F600) == 4 && memcmp(b, "\xf0\x9f\x98\x80", 4) == 0, "put 😀");
}

/* --- pad_sequences ------------------------------------------------------------------------------------- */
static void test_pad(void) {
    int64_t off[] = {0, 5, 5, 7, 10};
    int32_t tok[] = {1, 2, 3, 4, 5, /* empty */ 6, 7, 8, 9, 10};
    int32_t lab[] = {0, 1, 0, 1};
    kh_seqset s = {4, off, tok, lab};
    int32_t out[4 * 3];
    char err[256];
    CHECK(kh_pad_sequences(&s, 3, out, err, sizeof err) == KH_OK, "pad status");
    static const int32_t want[] = {3, 4, 5, /* last 3 kept */ 0, 0, 0, 0, 6, 7, /* zeros in front */ 8, 9, 10};
    CHECK(memcmp(out, want, sizeof want) == 0, "pre padding / pre truncation: %d %d %d | %d %d %d | %d %d %d | %d %d %d",
          out[0], out[1], out[2], out[3], out[4], out[5], out[6], out[7], out[8], out[9], out[10], out[11]);
    CHECK(kh_pad_sequences(&s, 0, out, err, sizeof err) == KH_ERR_INVALID, "maxlen 0 is invalid");

    double mean, median;
    kh_seqset_length_stats(&s, &mean, &median);
    CHECK_CLOSE(mean, 2.5, 0, 1e-12, "mean length");
    CHECK_CLOSE(median, 2.5, 0, 1e-12, "median length (even count: mean of the middle two)");
}

/* --- the aclImdb corpus -------------------------------------------------------------------------------- */
/* Reading order: train/pos by id (0_9, 2_10), then train/neg (1_1). Words in that order:
 *   pos 0_9  "Good film. Good<br />acting!"                    good film good acting
 *   pos 2_10 "ÉCLAIR\tfilm (good) x_y"                         éclair film good x y
 *   neg 1_1  "Bad film, bad plot. It's BAD<BR />ok\r\nend"      bad film bad plot it's bad ok\r end
 * Counts: good 3, film 3, bad 3, then 1 each. Ranks: good 1, film 2, bad 3 (ties by first occurrence, not
 * alphabetically), acting 4, éclair 5, x 6, y 7, plot 8, it's 9, "ok\r" 10, end 11. Index = rank + 3.
 * Sample order interleaves pos/neg: train = pos 0_9, neg 1_1, pos 2_10; test = pos 5_7, neg 3_4. */
static void write_corpus(const char *root) {
    make_tree(root);
    put(root, "train/pos/0_9.txt", "Good film. Good<br />acting!");
    put(root, "train/pos/2_10.txt", "\xc3\x89" "CLAIR\tfilm (good) x_y");
    put(root, "train/neg/1_1.txt", "Bad film, bad plot. It's BAD<BR />ok\r\nend");
    put(root, "train/neg/.hidden", "\xff not a review, ignored");
    put(root, "test/pos/5_7.txt", "good unknownword film");
    put(root, "test/neg/3_4.txt", "FILM bad bad acting");
}

static void test_imdb_corpus(void) {
    const char *root = kh_test_tmpdir("imdb");
    write_corpus(root);
    char err[1024];
    kh_imdb_opts o;
    kh_imdb_opts_default(&o);
    CHECK(o.num_words == 20000 && o.index_from == 3 && o.start_char == 1 && o.oov_char == 2, "defaults");

    /* No cap: every word keeps rank + 3. */
    o.num_words = 0;
    kh_imdb d;
    kh_status st = kh_imdb_load(root, &o, &d, err, sizeof err);
    CHECK(st == KH_OK, "load: %s", err);
    if (st != KH_OK) return;
    CHECK(d.train_files == 3 && d.test_files == 2, "files %lld / %lld", (long long)d.train_files, (long long)d.test_files);
    CHECK(d.vocab_size == 11, "vocabulary %lld", (long long)d.vocab_size);
    CHECK(d.train_words == 17, "training tokens %lld", (long long)d.train_words);
    CHECK(kh_imdb_word_index(&d, "good") == 4 && kh_imdb_word_index(&d, "film") == 5 &&
              kh_imdb_word_index(&d, "bad") == 6,
          "ties broken by first occurrence: good %lld film %lld bad %lld", (long long)kh_imdb_word_index(&d, "good"),
          (long long)kh_imdb_word_index(&d, "film"), (long long)kh_imdb_word_index(&d, "bad"));
    CHECK(kh_imdb_word_index(&d, "\xc3\xa9" "clair") == 8, "éclair lower-cased, index 8");
    CHECK(kh_imdb_word_index(&d, "ok\r") == 13, "\"ok\\r\" is one word (split on ' ' only)");
    CHECK(kh_imdb_word_index(&d, "end") == 14, "end");
    CHECK(kh_imdb_word_index(&d, "br") == -1, "\"<br />\" leaves no \"br\" word");
    CHECK(kh_imdb_word_index(&d, "unknownword") == -1, "test-only word is not in the vocabulary");
    CHECK(d.n_top == 11 && strcmp(d.top_words[0], "good") == 0 && d.top_counts[0] == 3 &&
              strcmp(d.top_words[3], "acting") == 0,
          "top words");
    CHECK(d.train.n == 3 && d.test.n == 2, "samples %lld / %lld", (long long)d.train.n, (long long)d.test.n);
    CHECK_SEQ(&d.train, 0, 1, 4, 5, 4, 7);
    CHECK_SEQ(&d.train, 1, 1, 6, 5, 6, 11, 12, 6, 13, 14);
    CHECK_SEQ(&d.train, 2, 1, 8, 5, 4, 9, 10);
    CHECK(d.train.labels[0] == 1 && d.train.labels[1] == 0 && d.train.labels[2] == 1, "train labels interleaved");
    CHECK_SEQ(&d.test, 0, 1, 4, 2, 5);
    CHECK_SEQ(&d.test, 1, 1, 5, 6, 6, 7);
    CHECK(d.test.labels[0] == 1 && d.test.labels[1] == 0, "test labels");
    CHECK(d.test_oov_unseen == 1, "one unseen test token, got %lld", (long long)d.test_oov_unseen);
    kh_imdb_free(&d);

    /* num_words = 10: every index >= 10 becomes 2 (y 10, plot 11, it's 12, ok\r 13, end 14). */
    o.num_words = 10;
    st = kh_imdb_load(root, &o, &d, err, sizeof err);
    CHECK(st == KH_OK, "load num_words 10: %s", err);
    if (st != KH_OK) return;
    CHECK_SEQ(&d.train, 0, 1, 4, 5, 4, 7);
    CHECK_SEQ(&d.train, 1, 1, 6, 5, 6, 2, 2, 6, 2, 2);
    CHECK_SEQ(&d.train, 2, 1, 8, 5, 4, 9, 2);
    CHECK_SEQ(&d.test, 0, 1, 4, 2, 5);
    CHECK(kh_imdb_word_index(&d, "end") == 14, "word_index is before the cap");

    /* pad to 4: the last 4 tokens survive ('pre' truncation); to 7: zeros in front */
    int32_t p4[3 * 4], p7[3 * 7];
    CHECK(kh_pad_sequences(&d.train, 4, p4, err, sizeof err) == KH_OK, "pad 4");
    static const int32_t w4[] = {4, 5, 4, 7, 2, 6, 2, 2, 5, 4, 9, 2};
    CHECK(memcmp(p4, w4, sizeof w4) == 0, "pad 4 values");
    CHECK(kh_pad_sequences(&d.train, 7, p7, err, sizeof err) == KH_OK, "pad 7");
    static const int32_t w7[] = {0, 0, 1, 4, 5, 4, 7, /* 9 tokens cut to their last 7: */ 5, 6, 2, 2, 6, 2, 2,
                                 0, 1, 8, 5, 4, 9, 2};
    CHECK(memcmp(p7, w7, sizeof w7) == 0, "pad 7 values: %d %d %d %d %d %d %d | %d %d %d %d %d %d %d", p7[0], p7[1],
          p7[2], p7[3], p7[4], p7[5], p7[6], p7[7], p7[8], p7[9], p7[10], p7[11], p7[12], p7[13]);

    /* fastText bigrams with start_index = num_words + 1 = 11, first occurrence over train in sample order:
     * s0 (1,4)=11 (4,5)=12 (5,4)=13 (4,7)=14; s1 (1,6)=15 (6,5)=16 (5,6)=17 (6,2)=18 (2,2)=19 (2,6)=20, then
     * (6,2), (2,2) again; s2 (1,8)=21 (8,5)=22 (5,4) known (4,9)=23 (9,2)=24. Test bigrams only if in train. */
    kh_bigram_info bi;
    st = kh_fasttext_bigrams(&d.train, &d.test, 11, &bi, err, sizeof err);
    CHECK(st == KH_OK, "bigrams: %s", err);
    CHECK(bi.n_bigrams == 14 && bi.max_features == 25, "bigrams %lld, max_features %lld", (long long)bi.n_bigrams,
          (long long)bi.max_features);
    CHECK_SEQ(&d.train, 0, 1, 4, 5, 4, 7, 11, 12, 13, 14);
    CHECK_SEQ(&d.train, 1, 1, 6, 5, 6, 2, 2, 6, 2, 2, 15, 16, 17, 18, 19, 20, 18, 19);
    CHECK_SEQ(&d.train, 2, 1, 8, 5, 4, 9, 2, 21, 22, 13, 23, 24);
    CHECK_SEQ(&d.test, 0, 1, 4, 2, 5, 11);
    CHECK_SEQ(&d.test, 1, 1, 5, 6, 6, 7, 17);
    CHECK(d.train.labels[1] == 0 && d.test.labels[0] == 1, "labels survive the rewrite");
    int32_t p6[3 * 6];
    CHECK(kh_pad_sequences(&d.train, 6, p6, err, sizeof err) == KH_OK, "pad bigrams");
    static const int32_t w6[] = {4, 7, 11, 12, 13, 14};
    CHECK(memcmp(p6, w6, sizeof w6) == 0, "after bigrams, 'pre' truncation keeps the appended ids");
    kh_imdb_free(&d);

    /* limits: the first samples of the interleaved order (balanced), vocabulary still from all of train */
    kh_imdb_opts_default(&o);
    o.limit_train = 2;
    o.limit_test = 1;
    st = kh_imdb_load(root, &o, &d, err, sizeof err);
    CHECK(st == KH_OK, "load with limits: %s", err);
    if (st != KH_OK) return;
    CHECK(d.train.n == 2 && d.test.n == 1 && d.train_files == 3, "limited counts");
    CHECK(d.train.labels[0] == 1 && d.train.labels[1] == 0, "a limited train set is balanced");
    CHECK_SEQ(&d.train, 1, 1, 6, 5, 6, 11, 12, 6, 13, 14);
    CHECK_SEQ(&d.test, 0, 1, 4, 2, 5);
    CHECK(d.vocab_size == 11, "vocabulary from the whole train split");
    kh_imdb_free(&d);
    kh_imdb_free(&d); /* idempotent on a freed struct */
}

/* Interleaving with unequal folders: the longer folder's rest comes last. */
static void test_imdb_unbalanced(void) {
    const char *root = kh_test_tmpdir("imdb-unbal");
    make_tree(root);
    put(root, "train/pos/0_7.txt", "a");
    put(root, "train/pos/1_7.txt", "b");
    put(root, "train/pos/10_7.txt", "c"); /* numeric order: 0, 1, 10 (not "0", "1", "10" by name ... same here) */
    put(root, "train/pos/9_8.txt", "d");  /* by name 9_8 would sort after 10_7; by id it comes before */
    put(root, "train/neg/5_2.txt", "e");
    put(root, "test/pos/0_8.txt", "a");
    put(root, "test/neg/0_3.txt", "e");
    char err[1024];
    kh_imdb_opts o;
    kh_imdb_opts_default(&o);
    kh_imdb d;
    kh_status st = kh_imdb_load(root, &o, &d, err, sizeof err);
    CHECK(st == KH_OK, "load: %s", err);
    if (st != KH_OK) return;
    /* all count 1: ranks by first occurrence a b d c e (pos by id 0,1,9,10 then neg) -> 4 5 6 7 8 */
    CHECK(kh_imdb_word_index(&d, "d") == 6 && kh_imdb_word_index(&d, "c") == 7, "files sorted by numeric id");
    CHECK(d.train.n == 5, "5 samples");
    int32_t lab[5];
    for (int i = 0; i < 5 && i < d.train.n; i++) lab[i] = d.train.labels[i];
    CHECK(lab[0] == 1 && lab[1] == 0 && lab[2] == 1 && lab[3] == 1 && lab[4] == 1, "pos, neg, then pos rest");
    CHECK_SEQ(&d.train, 1, 1, 8);
    CHECK_SEQ(&d.train, 4, 1, 7);
    kh_imdb_free(&d);
}

static int has(const char *s, const char *part) { return strstr(s, part) != NULL; }

/* A fresh tree <base>/<name> (the four folders) holding files, NULL-terminated (path, text) pairs, into root. */
static void tree(const char *base, const char *name, const char *const *files, char *root, size_t n) {
    snprintf(root, n, "%s/%s", base, name);
    make_tree(root);
    for (; files[0]; files += 2) put(root, files[0], files[1]);
}

/* Every folder with one valid review: what a malformed case adds its one fault to. */
#define VALID_TRAIN "train/pos/0_9.txt", "x", "train/neg/0_2.txt", "x"
#define VALID_TEST "test/pos/0_9.txt", "x", "test/neg/0_2.txt", "x"

static void test_imdb_malformed(void) {
    char err[1024];
    kh_imdb_opts o;
    kh_imdb_opts_default(&o);
    kh_imdb d;
    const char *base = kh_test_tmpdir("imdb-bad");
    char root[1024];

    snprintf(root, sizeof root, "%s/missing", base);
    kh_status st = kh_imdb_load(root, &o, &d, err, sizeof err);
    CHECK(st == KH_ERR_IO && has(err, root) && has(err, "not found"), "missing tree: %d %s", st, err);

    snprintf(root, sizeof root, "%s/notest", base);
    make_tree(root);
    put(root, "train/pos/0_9.txt", "x");
    put(root, "train/neg/0_1.txt", "y");
    put(root, "test/pos/0_9.txt", "x");
    char p[1200];
    snprintf(p, sizeof p, "%s/test/neg", root);
    rmdir(p);
    st = kh_imdb_load(root, &o, &d, err, sizeof err);
    CHECK(st == KH_ERR_IO && has(err, "test/neg") && has(err, "not found"), "missing test/neg: %d %s", st, err);

    tree(base, "empty", (const char *const[]){"train/pos/0_9.txt", "x", VALID_TEST, NULL}, root, sizeof root);
    st = kh_imdb_load(root, &o, &d, err, sizeof err);
    CHECK(st == KH_ERR_DATA && has(err, "train/neg") && has(err, "no reviews"), "empty train/neg: %d %s", st, err);

    tree(base, "latin1", (const char *const[]){VALID_TRAIN, "train/pos/7_8.txt", "caf\xe9 in Latin-1", VALID_TEST, NULL},
         root, sizeof root);
    st = kh_imdb_load(root, &o, &d, err, sizeof err);
    CHECK(st == KH_ERR_DATA && has(err, "train/pos/7_8.txt") && has(err, "UTF-8") && has(err, "byte 3"),
          "non-UTF-8 review: %d %s", st, err);
    CHECK(d.train.n == 0 && d.vocab == NULL, "output zeroed on error");

    tree(base, "latin1test", (const char *const[]){VALID_TRAIN, "test/pos/0_9.txt", "x", "test/neg/4_2.txt", "\xc3\x28", NULL},
         root, sizeof root);
    st = kh_imdb_load(root, &o, &d, err, sizeof err);
    CHECK(st == KH_ERR_DATA && has(err, "test/neg/4_2.txt") && has(err, "UTF-8"), "non-UTF-8 test review: %s", err);

    static const char *const bad_names[] = {"review.txt", "3_11.txt", "3_0.txt", "3_5.txt.bak", "_5.txt", "3_.txt",
                                            "3-5.txt", "x3_5.txt"};
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
        char name[32], rel[256];
        snprintf(name, sizeof name, "name%zu", i);
        snprintf(rel, sizeof rel, "test/neg/%s", bad_names[i]);
        tree(base, name, (const char *const[]){VALID_TRAIN, "test/pos/0_9.txt", "x", rel, "x", NULL}, root, sizeof root);
        st = kh_imdb_load(root, &o, &d, err, sizeof err);
        CHECK(st == KH_ERR_DATA && has(err, rel) && has(err, "<id>_<rating>.txt"), "bad name %s: %d %s", bad_names[i],
              st, err);
    }

    tree(base, "dup",
         (const char *const[]){"train/pos/4_8.txt", "x", "train/pos/4_9.txt", "y", "train/neg/0_2.txt", "x", VALID_TEST,
                                NULL},
         root, sizeof root);
    st = kh_imdb_load(root, &o, &d, err, sizeof err);
    CHECK(st == KH_ERR_DATA && has(err, "train/pos") && has(err, "id 4"), "duplicate id: %d %s", st, err);

    tree(base, "dir", (const char *const[]){VALID_TRAIN, VALID_TEST, NULL}, root, sizeof root);
    mkdirs(root, "train/pos/1_9.txt");
    st = kh_imdb_load(root, &o, &d, err, sizeof err);
    CHECK(st == KH_ERR_IO && has(err, "train/pos/1_9.txt"), "a folder named like a review: %d %s", st, err);

    o.num_words = -1;
    st = kh_imdb_load(base, &o, &d, err, sizeof err);
    CHECK(st == KH_ERR_INVALID, "negative num_words rejected");
}

/* --- character windows ------------------------------------------------------------------------------- */
static void test_charwin(void) {
    /* "AbéÉ\r\nzz\ráb": lower-cased and universal newlines -> "abéé\nzz\náb", 10 characters (13 bytes).
     * Alphabet by code point: \n a b z á é -> 0..5; text 1 2 5 5 0 3 3 0 4 2.
     * maxlen 3, step 2: windows at 0, 2, 4, 6 (range(0, 7, 2)) = 4. */
    const char *t = "Ab\xc3\xa9\xc3\x89\r\nzz\r\xc3\xa1" "b";
    kh_charwin c;
    char err[512];
    kh_status st = kh_charwin_from_text("tiny", t, strlen(t), 3, 2, &c, err, sizeof err);
    CHECK(st == KH_OK, "charwin: %s", err);
    if (st != KH_OK) return;
    CHECK(c.n_chars == 10, "characters, not bytes: %lld", (long long)c.n_chars);
    CHECK(c.n_distinct == 6, "distinct %d", c.n_distinct);
    static const uint32_t alpha[] = {'\n', 'a', 'b', 'z', 0xE1, 0xE9};
    CHECK(c.n_distinct == 6 && memcmp(c.alphabet, alpha, sizeof alpha) == 0, "alphabet sorted by code point");
    static const int32_t text[] = {1, 2, 5, 5, 0, 3, 3, 0, 4, 2};
    CHECK(memcmp(c.text, text, sizeof text) == 0, "indices");
    CHECK(c.n_windows == 4, "windows %lld", (long long)c.n_windows);
    static const int32_t wx[4][3] = {{1, 2, 5}, {5, 5, 0}, {0, 3, 3}, {3, 0, 4}};
    static const int32_t wy[4] = {5, 3, 0, 2};
    for (int w = 0; w < 4; w++) {
        int32_t x[3], y = -1;
        CHECK(kh_charwin_window(&c, w, x, &y) == KH_OK, "window %d", w);
        CHECK(memcmp(x, wx[w], sizeof x) == 0 && y == wy[w], "window %d: %d %d %d -> %d", w, x[0], x[1], x[2], y);
    }
    int32_t x[3], y;
    CHECK(kh_charwin_window(&c, 4, x, &y) == KH_ERR_INVALID && kh_charwin_window(&c, -1, x, &y) == KH_ERR_INVALID,
          "out-of-range windows");
    CHECK(kh_charwin_index(&c, 0xE9) == 5 && kh_charwin_index(&c, 'q') == -1 && kh_charwin_index(&c, 0xC9) == -1,
          "index lookup (É was lower-cased)");
    kh_charwin_free(&c);

    /* 3- and 4-byte characters; (n - maxlen) divisible by step: "x€😀x€😀x" = 7 chars, maxlen 1, step 3 ->
     * range(0, 6, 3) = 2 windows. */
    const char *u = "x\xe2\x82\xac\xf0\x9f\x98\x80x\xe2\x82\xac\xf0\x9f\x98\x80x";
    st = kh_charwin_from_text("wide", u, strlen(u), 1, 3, &c, err, sizeof err);
    CHECK(st == KH_OK && c.n_chars == 7 && c.n_distinct == 3 && c.n_windows == 2, "wide characters: %lld chars, %d, %lld",
          (long long)c.n_chars, c.n_distinct, (long long)c.n_windows);
    if (st == KH_OK) {
        CHECK(c.alphabet[0] == 'x' && c.alphabet[1] == 0x20AC && c.alphabet[2] == 0x1F600, "wide alphabet");
        CHECK(kh_charwin_window(&c, 1, x, &y) == KH_OK && x[0] == 0 && y == 1, "window 1 = x -> €");
    }
    kh_charwin_free(&c);

    st = kh_charwin_from_text("short", "abc", 3, 3, 1, &c, err, sizeof err);
    CHECK(st == KH_ERR_DATA && has(err, "short") && has(err, "too short"), "too short: %s", err);
    st = kh_charwin_from_text("bad", "ab\xffz", 4, 1, 1, &c, err, sizeof err);
    CHECK(st == KH_ERR_DATA && has(err, "bad") && has(err, "UTF-8") && has(err, "byte 2"), "invalid UTF-8: %s", err);

    const char *dir = kh_test_tmpdir("charwin");
    char path[1024];
    snprintf(path, sizeof path, "%s/nietzsche.txt", dir);
    st = kh_charwin_load(path, 40, 3, &c, err, sizeof err);
    CHECK(st == KH_ERR_IO && has(err, path) && has(err, "not found"), "missing file: %s", err);
    kh_test_write_file(path, "ok \xc3\xa9t\xe9", 7);
    st = kh_charwin_load(path, 2, 1, &c, err, sizeof err);
    CHECK(st == KH_ERR_DATA && has(err, path) && has(err, "UTF-8"), "non-UTF-8 file: %s", err);
    kh_test_write_file(path, "Hello\r\nWorld", 12);
    st = kh_charwin_load(path, 4, 3, &c, err, sizeof err);
    CHECK(st == KH_OK && c.n_chars == 11 && c.n_windows == 3, "file: %lld chars, %lld windows", (long long)c.n_chars,
          (long long)c.n_windows);
    kh_charwin_free(&c);
}

int main(void) {
    test_tokenizer();
    test_utf8();
    test_pad();
    test_imdb_corpus();
    test_imdb_unbalanced();
    test_imdb_malformed();
    test_charwin();
    return kh_test_finish("test_data_text");
}
