/* kit/data/imdb.c — the aclImdb review folders indexed as keras.datasets.imdb.load_data does
 * (khost/kit/data_text.h documents order, ranks and tie-breaks). One streaming pass over the training files
 * builds the vocabulary (an open-addressing hash table) and keeps each review as int32 word ids; ranks are
 * then assigned once and the test files are mapped through the finished table. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/data_text.h"
#include "khost/kit/status.h"
#include "txt_io.h"

/* --- vocabulary --------------------------------------------------------------------------------------- */
typedef struct vent {
    uint64_t hash;
    int64_t off;   /* word bytes in pool, NUL-terminated */
    int64_t count; /* occurrences in the training reviews */
    uint32_t len;
    int32_t index; /* rank + index_from once ranked */
} vent;

/* A slot keeps 24 bits of the hash, the word's length and its first 8 bytes beside the id, so finding a
 * word of up to 8 bytes (most tokens) costs one cache miss, and longer ones touch their entry only when
 * all of that matches. Three dependent misses per token made the lookup the loader's main cost. */
typedef struct vslot {
    uint32_t tag; /* hash bits 40..63, then min(length, 255) in the low byte */
    uint32_t id;  /* entry id + 1; 0 = empty */
    uint64_t head; /* the first 8 bytes, zero-padded */
} vslot;

static uint32_t slot_tag(uint64_t h, size_t n) {
    return (uint32_t)(h >> 32 & 0xFFFFFF00u) | (uint32_t)(n < 255 ? n : 255);
}

static uint64_t word_head(const char *w, size_t n) {
    uint64_t x = 0;
    memcpy(&x, w, n < 8 ? n : 8);
    return x;
}

struct kh_imdb_vocab {
    vslot *slots;
    uint64_t nslots; /* a power of two, kept at most half full */
    vent *ent;       /* in order of first occurrence */
    int64_t n, cap;
    char *pool;
    int64_t pool_len, pool_cap;
    int32_t *tokval; /* once ranked: the token each id becomes (num_words applied), compact for the mapping */
};

static uint64_t word_hash(const char *w, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, then a final mix so the low bits index well */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)w[i]) * 0x100000001b3ull;
    h ^= h >> 31;
    h *= 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

static void vocab_free(struct kh_imdb_vocab *v) {
    if (!v) return;
    free(v->slots);
    free(v->ent);
    free(v->pool);
    free(v->tokval);
    free(v);
}

static int64_t vocab_find(const struct kh_imdb_vocab *v, const char *w, size_t n, uint64_t h, uint64_t *slot) {
    uint64_t mask = v->nslots - 1;
    uint32_t tag = slot_tag(h, n);
    uint64_t head = word_head(w, n);
    for (uint64_t s = h & mask;; s = (s + 1) & mask) {
        const vslot *e = &v->slots[s];
        if (!e->id) {
            if (slot) *slot = s;
            return -1;
        }
        if (e->tag != tag || e->head != head) continue;
        if (n <= 8) return (int64_t)e->id - 1; /* length and all bytes matched */
        const vent *x = &v->ent[e->id - 1];
        if (x->len == n && memcmp(v->pool + x->off + 8, w + 8, n - 8) == 0) return (int64_t)e->id - 1;
    }
}

static int vocab_rehash(struct kh_imdb_vocab *v, uint64_t nslots) {
    vslot *ns = calloc((size_t)nslots, sizeof *ns);
    if (!ns) return -1;
    for (int64_t i = 0; i < v->n; i++) {
        uint64_t s = v->ent[i].hash & (nslots - 1);
        while (ns[s].id) s = (s + 1) & (nslots - 1);
        ns[s] = (vslot){slot_tag(v->ent[i].hash, v->ent[i].len), (uint32_t)(i + 1),
                        word_head(v->pool + v->ent[i].off, v->ent[i].len)};
    }
    free(v->slots);
    v->slots = ns;
    v->nslots = nslots;
    return 0;
}

/* Id of the word, inserting it (count 0) when new; -1 when out of memory. */
static int64_t vocab_intern(struct kh_imdb_vocab *v, const char *w, size_t n) {
    uint64_t h = word_hash(w, n), slot;
    int64_t id = vocab_find(v, w, n, h, &slot);
    if (id >= 0) return id;
    if ((uint64_t)(v->n + 1) * 2 > v->nslots || v->n >= (int64_t)UINT32_MAX - 1) {
        if (v->n >= (int64_t)UINT32_MAX - 1 || vocab_rehash(v, v->nslots * 2) != 0) return -1;
        (void)vocab_find(v, w, n, h, &slot);
    }
    if (n > UINT32_MAX || txt_reserve((void **)&v->ent, &v->cap, v->n, 1, sizeof *v->ent) ||
        txt_reserve((void **)&v->pool, &v->pool_cap, v->pool_len, (int64_t)n + 1, 1))
        return -1;
    vent *e = &v->ent[v->n];
    e->hash = h;
    e->off = v->pool_len;
    e->len = (uint32_t)n;
    e->count = 0;
    e->index = -1;
    memcpy(v->pool + v->pool_len, w, n);
    v->pool[v->pool_len + (int64_t)n] = 0;
    v->pool_len += (int64_t)n + 1;
    v->slots[slot] = (vslot){slot_tag(h, n), (uint32_t)(v->n + 1), word_head(w, n)};
    return v->n++;
}

/* --- folder listing ------------------------------------------------------------------------------------ */
typedef struct review {
    int64_t id;
    int32_t rating;
    int64_t name_off;
} review;

typedef struct folder {
    char dir[4096];
    review *r;
    int64_t n, cap;
    char *names;
    int64_t names_len, names_cap;
} folder;

static void folder_free(folder *f) {
    free(f->r);
    free(f->names);
    memset(f, 0, sizeof *f);
}

/* "<digits>_<digits>.txt" with rating 1..10; returns 0 when the name fits. */
static int parse_name(const char *s, int64_t *id, int32_t *rating) {
    int64_t a = 0;
    int da = 0;
    for (; *s >= '0' && *s <= '9'; s++, da++) {
        if (da >= 18) return -1;
        a = a * 10 + (*s - '0');
    }
    if (!da || *s++ != '_') return -1;
    int32_t b = 0;
    int db = 0;
    for (; *s >= '0' && *s <= '9'; s++, db++) {
        if (db >= 3) return -1;
        b = b * 10 + (*s - '0');
    }
    if (!db || strcmp(s, ".txt") != 0 || b < 1 || b > 10) return -1;
    *id = a;
    *rating = b;
    return 0;
}

static int cmp_review(const void *pa, const void *pb) {
    const review *a = pa, *b = pb;
    if (a->id != b->id) return a->id < b->id ? -1 : 1;
    return (a->rating > b->rating) - (a->rating < b->rating);
}

static kh_status list_folder(const char *root, const char *sub, folder *f, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    int w = snprintf(f->dir, sizeof f->dir, "%s/%s", root, sub);
    if (w < 0 || (size_t)w >= sizeof f->dir)
        return kh_errf(err, errlen, KH_ERR_INVALID, "%s/%s: path too long", root, sub);
    DIR *d = opendir(f->dir);
    if (!d) {
        int e = errno;
        if (e == ENOENT) return kh_errf(err, errlen, KH_ERR_IO, "%s: not found", f->dir);
        return kh_errf(err, errlen, KH_ERR_IO, "%s: cannot open folder: %s", f->dir, strerror(e));
    }
    kh_status st = KH_OK;
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        if (name[0] == '.') continue; /* ".", ".." and hidden files (editor or OS leftovers) */
        review rv;
        if (parse_name(name, &rv.id, &rv.rating) != 0) {
            st = kh_errf(err, errlen, KH_ERR_DATA,
                         "%s/%s: file name is not <id>_<rating>.txt with a rating of 1..10", f->dir, name);
            break;
        }
        size_t nl = strlen(name);
        if (txt_reserve((void **)&f->r, &f->cap, f->n, 1, sizeof *f->r) ||
            txt_reserve((void **)&f->names, &f->names_cap, f->names_len, (int64_t)nl + 1, 1)) {
            st = kh_errf(err, errlen, KH_ERR_NOMEM, "%s: out of memory listing the folder", f->dir);
            break;
        }
        rv.name_off = f->names_len;
        memcpy(f->names + f->names_len, name, nl + 1);
        f->names_len += (int64_t)nl + 1;
        f->r[f->n++] = rv;
        errno = 0;
    }
    if (st == KH_OK && errno != 0)
        st = kh_errf(err, errlen, KH_ERR_IO, "%s: cannot read folder: %s", f->dir, strerror(errno));
    closedir(d);
    if (st == KH_OK && f->n == 0)
        st = kh_errf(err, errlen, KH_ERR_DATA, "%s: no reviews (<id>_<rating>.txt files) in the folder", f->dir);
    if (st == KH_OK) {
        qsort(f->r, (size_t)f->n, sizeof *f->r, cmp_review);
        for (int64_t i = 1; i < f->n; i++)
            if (f->r[i].id == f->r[i - 1].id) {
                st = kh_errf(err, errlen, KH_ERR_DATA, "%s: two reviews with id %lld (%s, %s)", f->dir,
                             (long long)f->r[i].id, f->names + f->r[i - 1].name_off, f->names + f->r[i].name_off);
                break;
            }
    }
    if (st != KH_OK) folder_free(f);
    return st;
}

/* --- reading ------------------------------------------------------------------------------------------- */
typedef struct reader {
    char *buf;
    size_t cap;
    char path[4096 + 256];
} reader;

/* Read review i of folder f into r->buf as validated UTF-8. */
static kh_status read_review(reader *r, const folder *f, int64_t i, size_t *len, char *err, size_t errlen) {
    int w = snprintf(r->path, sizeof r->path, "%s/%s", f->dir, f->names + f->r[i].name_off);
    if (w < 0 || (size_t)w >= sizeof r->path)
        return kh_errf(err, errlen, KH_ERR_INVALID, "%s/%s: path too long", f->dir, f->names + f->r[i].name_off);
    char why[4500];
    int e = txt_read_file(r->path, &r->buf, &r->cap, len, why, sizeof why);
    if (e == ENOMEM) return kh_errf(err, errlen, KH_ERR_NOMEM, "%s: out of memory reading the review", r->path);
    if (e) return kh_errf(err, errlen, KH_ERR_IO, "%s", why);
    int64_t bad = kh_utf8_check(r->buf, *len);
    if (bad >= 0)
        return kh_errf(err, errlen, KH_ERR_DATA, "%s: not valid UTF-8 (byte %lld: 0x%02x)", r->path, (long long)bad,
                       (unsigned)(unsigned char)r->buf[bad]);
    return KH_OK;
}

typedef struct train_ctx {
    struct kh_imdb_vocab *v;
    int32_t *tok;
    int64_t ntok, cap;
} train_ctx;

static int on_train_word(void *ctx, const char *w, size_t n) {
    train_ctx *c = ctx;
    int64_t id = vocab_intern(c->v, w, n);
    if (id < 0 || (c->ntok == c->cap && txt_reserve((void **)&c->tok, &c->cap, c->ntok, 1, sizeof *c->tok)))
        return KH_ERR_NOMEM;
    c->v->ent[id].count++;
    c->tok[c->ntok++] = (int32_t)id;
    return 0;
}

typedef struct test_ctx {
    const struct kh_imdb_vocab *v;
    kh_imdb *d;
    kh_seqset *s;
    int64_t cap;
} test_ctx;

static int32_t capped(const kh_imdb *d, int64_t index) {
    return (d->num_words > 0 && index >= d->num_words) ? d->oov_char : (int32_t)index;
}

static int on_test_word(void *ctx, const char *w, size_t n) {
    test_ctx *c = ctx;
    int64_t id = vocab_find(c->v, w, n, word_hash(w, n), NULL);
    int32_t t;
    if (id < 0) {
        t = c->d->oov_char;
        c->d->test_oov_unseen++;
    } else {
        t = c->v->tokval[id];
    }
    int64_t used = c->s->offsets[c->s->n];
    if (used == c->cap && txt_reserve((void **)&c->s->tokens, &c->cap, used, 1, sizeof(int32_t))) return KH_ERR_NOMEM;
    c->s->tokens[used] = t;
    c->s->offsets[c->s->n]++;
    return 0;
}

/* Sample k of the interleaved order pos 0, neg 0, pos 1, neg 1, ... (the longer folder's rest last). */
static void sample_at(int64_t k, int64_t npos, int64_t nneg, int *pos, int64_t *j) {
    int64_t m = npos < nneg ? npos : nneg;
    if (k < 2 * m) {
        *pos = !(k & 1);
        *j = k / 2;
    } else {
        *pos = npos > m;
        *j = m + (k - 2 * m);
    }
}

typedef struct rank_sort {
    int64_t count, id;
} rank_sort;

static int cmp_rank(const void *pa, const void *pb) {
    const rank_sort *a = pa, *b = pb;
    if (a->count != b->count) return a->count > b->count ? -1 : 1; /* more frequent first */
    return (a->id > b->id) - (a->id < b->id);                       /* ties: first occurrence first */
}

void kh_imdb_opts_default(kh_imdb_opts *o) {
    memset(o, 0, sizeof *o);
    o->num_words = 20000;
    o->index_from = 3;
    o->start_char = 1;
    o->oov_char = 2;
}

void kh_imdb_free(kh_imdb *d) {
    if (!d) return;
    kh_seqset_free(&d->train);
    kh_seqset_free(&d->test);
    vocab_free(d->vocab);
    memset(d, 0, sizeof *d);
}

int64_t kh_imdb_word_index(const kh_imdb *d, const char *word) {
    if (!d || !d->vocab || !word) return -1;
    size_t n = strlen(word);
    int64_t id = vocab_find(d->vocab, word, n, word_hash(word, n), NULL);
    return id < 0 ? -1 : d->vocab->ent[id].index;
}

static void report(const kh_imdb_opts *o, const char *what, int64_t done, int64_t total) {
    if (o->progress) o->progress(o->progress_ctx, what, done, total);
}

kh_status kh_imdb_load(const char *root, const kh_imdb_opts *o, kh_imdb *out, char *err, size_t errlen) {
    if (!root || !o || !out) return kh_errf(err, errlen, KH_ERR_INVALID, "imdb: missing argument");
    memset(out, 0, sizeof *out);
    if (o->num_words < 0 || o->index_from < 0 || o->limit_train < 0 || o->limit_test < 0)
        return kh_errf(err, errlen, KH_ERR_INVALID, "%s: bad options (num_words %d, index_from %d)", root,
                       (int)o->num_words, (int)o->index_from);
    kh_imdb d;
    memset(&d, 0, sizeof d);
    d.num_words = o->num_words;
    d.index_from = o->index_from;
    d.start_char = o->start_char;
    d.oov_char = o->oov_char;
    folder tr[2], te[2]; /* [0] pos, [1] neg */
    memset(tr, 0, sizeof tr);
    memset(te, 0, sizeof te);
    reader rd;
    memset(&rd, 0, sizeof rd);
    train_ctx tc;
    memset(&tc, 0, sizeof tc);
    int64_t *seg = NULL; /* token offsets of each training review in reading order */
    rank_sort *rs = NULL;
    kh_status st;
    static const char *const subs[4] = {"train/pos", "train/neg", "test/pos", "test/neg"};
    for (int k = 0; k < 4; k++)
        if ((st = list_folder(root, subs[k], k < 2 ? &tr[k] : &te[k - 2], err, errlen)) != KH_OK) goto fail;

    d.vocab = calloc(1, sizeof *d.vocab);
    if (!d.vocab || vocab_rehash(d.vocab, 1u << 17) != 0) goto nomem;
    tc.v = d.vocab;
    int64_t ntrain = tr[0].n + tr[1].n;
    d.train_files = ntrain;
    d.test_files = te[0].n + te[1].n;
    int64_t ltrain = o->limit_train > 0 && o->limit_train < ntrain ? o->limit_train : ntrain;
    int64_t ltest = o->limit_test > 0 && o->limit_test < d.test_files ? o->limit_test : d.test_files;
    int64_t total_files = ntrain + ltest;
    seg = malloc((size_t)(ntrain + 1) * sizeof *seg);
    if (!seg) goto nomem;

    /* Pass 1: every training review in reading order (pos then neg), words interned as ids. */
    int64_t done = 0;
    for (int f = 0; f < 2; f++)
        for (int64_t i = 0; i < tr[f].n; i++, done++) {
            size_t len;
            if ((st = read_review(&rd, &tr[f], i, &len, err, errlen)) != KH_OK) goto fail;
            seg[done] = tc.ntok;
            int r = kh_text_words(rd.buf, len, on_train_word, &tc);
            if (r) goto nomem;
            if ((done & 1023) == 0) report(o, "imdb: reading reviews", done, total_files);
        }
    seg[ntrain] = tc.ntok;
    d.train_words = tc.ntok;
    d.vocab_size = d.vocab->n;

    /* Ranks: count descending, ties by first occurrence (Keras's stable sort of an ordered dict). */
    if (d.vocab->n > 0) {
        rs = malloc((size_t)d.vocab->n * sizeof *rs);
        if (!rs) goto nomem;
    }
    for (int64_t i = 0; i < d.vocab->n; i++) rs[i] = (rank_sort){d.vocab->ent[i].count, i};
    if (d.vocab->n > 0) qsort(rs, (size_t)d.vocab->n, sizeof *rs, cmp_rank);
    for (int64_t r = 0; r < d.vocab->n; r++) {
        if (r + 1 + d.index_from > INT32_MAX) goto nomem; /* cannot happen below 2^31 words */
        d.vocab->ent[rs[r].id].index = (int32_t)(r + 1 + d.index_from);
        if (r < 32) {
            d.top_words[r] = d.vocab->pool + d.vocab->ent[rs[r].id].off;
            d.top_counts[r] = d.vocab->ent[rs[r].id].count;
            d.n_top = (int32_t)(r + 1);
        }
    }
    free(rs);
    rs = NULL;
    d.vocab->tokval = malloc((size_t)(d.vocab->n > 0 ? d.vocab->n : 1) * sizeof *d.vocab->tokval);
    if (!d.vocab->tokval) goto nomem;
    for (int64_t i = 0; i < d.vocab->n; i++) d.vocab->tokval[i] = capped(&d, d.vocab->ent[i].index);

    /* The training samples in sample order, mapped to indices. */
    int64_t need = 0;
    for (int64_t k = 0; k < ltrain; k++) {
        int pos;
        int64_t j;
        sample_at(k, tr[0].n, tr[1].n, &pos, &j);
        int64_t fi = pos ? j : tr[0].n + j;
        need += seg[fi + 1] - seg[fi] + 1;
    }
    d.train.offsets = malloc((size_t)(ltrain + 1) * sizeof *d.train.offsets);
    d.train.tokens = malloc((size_t)(need > 0 ? need : 1) * sizeof *d.train.tokens);
    d.train.labels = malloc((size_t)(ltrain > 0 ? ltrain : 1) * sizeof *d.train.labels);
    if (!d.train.offsets || !d.train.tokens || !d.train.labels) goto nomem;
    int64_t at = 0;
    for (int64_t k = 0; k < ltrain; k++) {
        int pos;
        int64_t j;
        sample_at(k, tr[0].n, tr[1].n, &pos, &j);
        int64_t fi = pos ? j : tr[0].n + j;
        d.train.offsets[k] = at;
        d.train.labels[k] = pos;
        d.train.tokens[at++] = d.start_char;
        for (int64_t t = seg[fi]; t < seg[fi + 1]; t++) d.train.tokens[at++] = d.vocab->tokval[tc.tok[t]];
    }
    d.train.offsets[ltrain] = at;
    d.train.n = ltrain;
    free(tc.tok);
    tc.tok = NULL;
    free(seg);
    seg = NULL;

    /* Pass 2: the test samples needed, read directly in sample order. */
    test_ctx xc = {d.vocab, &d, &d.test, 0};
    d.test.offsets = malloc((size_t)(ltest + 1) * sizeof *d.test.offsets);
    d.test.labels = malloc((size_t)(ltest > 0 ? ltest : 1) * sizeof *d.test.labels);
    if (!d.test.offsets || !d.test.labels) goto nomem;
    d.test.offsets[0] = 0;
    for (int64_t k = 0; k < ltest; k++, done++) {
        int pos;
        int64_t j;
        sample_at(k, te[0].n, te[1].n, &pos, &j);
        size_t len;
        if ((st = read_review(&rd, &te[pos ? 0 : 1], j, &len, err, errlen)) != KH_OK) goto fail;
        d.test.labels[k] = pos;
        d.test.n = k; /* on_test_word appends to sequence k */
        int64_t used = d.test.offsets[k];
        if (used == xc.cap && txt_reserve((void **)&d.test.tokens, &xc.cap, used, 1, sizeof(int32_t))) goto nomem;
        d.test.tokens[used] = d.start_char;
        d.test.offsets[k] = used + 1;
        if (kh_text_words(rd.buf, len, on_test_word, &xc)) goto nomem;
        /* on_test_word advanced offsets[k] as the running end; it becomes sequence k+1's start */
        d.test.offsets[k + 1] = d.test.offsets[k];
        d.test.offsets[k] = used;
        if ((done & 1023) == 0) report(o, "imdb: reading reviews", done, total_files);
    }
    d.test.n = ltest;
    if (!d.test.tokens && !(d.test.tokens = malloc(sizeof(int32_t)))) goto nomem;
    report(o, "imdb: reading reviews", total_files, total_files);

    for (int k = 0; k < 2; k++) {
        folder_free(&tr[k]);
        folder_free(&te[k]);
    }
    free(rd.buf);
    *out = d;
    return KH_OK;

nomem:
    st = kh_errf(err, errlen, KH_ERR_NOMEM, "%s: out of memory indexing the reviews", root);
fail:
    for (int k = 0; k < 2; k++) {
        folder_free(&tr[k]);
        folder_free(&te[k]);
    }
    free(rd.buf);
    free(tc.tok);
    free(seg);
    free(rs);
    kh_imdb_free(&d);
    return st;
}
