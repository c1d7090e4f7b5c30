/* kit/data/fasttext_bigrams.c — bigram features as Keras's examples/imdb_fasttext.py builds them with
 * ngram_range = 2 (create_ngram_set over x_train, token_indice from start_index, add_ngram on both splits).
 * The original enumerates a Python set, so its id order is arbitrary; ours is first occurrence over the
 * training sequences in their order, which makes the table deterministic. */
#include <stdlib.h>
#include <string.h>

#include "khost/kit/data_text.h"
#include "khost/kit/status.h"

/* Key and id side by side, so a probe costs one cache line (the table outgrows the caches: ~1.2M bigrams). */
typedef struct bslot {
    uint64_t key;
    int64_t id; /* -1 = empty */
} bslot;

enum { PREFETCH_AHEAD = 8 };

typedef struct bigram_table {
    bslot *s;
    uint64_t nslots; /* power of two, at most half full */
    int64_t n;
} bigram_table;

static uint64_t pair_key(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }

static uint64_t key_hash(uint64_t k) {
    k ^= k >> 33; /* murmur3's fmix64: pairs of small integers need thorough mixing */
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    return k ^ (k >> 33);
}

static int table_alloc(bigram_table *t, uint64_t nslots) {
    if (nslots > SIZE_MAX / sizeof *t->s) return -1;
    t->s = malloc((size_t)nslots * sizeof *t->s);
    if (!t->s) return -1;
    for (uint64_t i = 0; i < nslots; i++) t->s[i].id = -1;
    t->nslots = nslots;
    return 0;
}

static int64_t table_find(const bigram_table *t, uint64_t k) {
    uint64_t mask = t->nslots - 1;
    for (uint64_t i = key_hash(k) & mask;; i = (i + 1) & mask) {
        if (t->s[i].id < 0) return -1;
        if (t->s[i].key == k) return t->s[i].id;
    }
}

/* The id of k, inserting it with the next id when absent; -1 when out of memory. */
static int64_t table_add(bigram_table *t, uint64_t k) {
    if ((uint64_t)(t->n + 1) * 2 > t->nslots) {
        bigram_table g = {0};
        if (t->nslots > (UINT64_MAX >> 2) || table_alloc(&g, t->nslots * 2)) return -1;
        for (uint64_t i = 0; i < t->nslots; i++) {
            if (t->s[i].id < 0) continue;
            uint64_t j = key_hash(t->s[i].key) & (g.nslots - 1);
            while (g.s[j].id >= 0) j = (j + 1) & (g.nslots - 1);
            g.s[j] = t->s[i];
        }
        free(t->s);
        t->s = g.s;
        t->nslots = g.nslots;
    }
    uint64_t mask = t->nslots - 1;
    uint64_t i = key_hash(k) & mask;
    for (; t->s[i].id >= 0; i = (i + 1) & mask)
        if (t->s[i].key == k) return t->s[i].id;
    t->s[i].key = k;
    t->s[i].id = t->n++;
    return t->s[i].id;
}

/* add_ngram for one set: ids[j] is the bigram id starting at token j (-1: not in the table, or the last
 * token of a sequence). New arrays go to *off / *tok. */
static kh_status append_bigrams(const kh_seqset *s, const int32_t *ids, int32_t start_index, int64_t **off,
                                int32_t **tok) {
    int64_t total = 0;
    for (int64_t j = 0; j < s->offsets[s->n]; j++) total += 1 + (ids[j] >= 0);
    *off = malloc((size_t)(s->n + 1) * sizeof **off);
    *tok = malloc((size_t)(total > 0 ? total : 1) * sizeof **tok);
    if (!*off || !*tok) {
        free(*off);
        free(*tok);
        *off = NULL;
        *tok = NULL;
        return KH_ERR_NOMEM;
    }
    int64_t at = 0;
    for (int64_t i = 0; i < s->n; i++) {
        int64_t a = s->offsets[i], b = s->offsets[i + 1];
        (*off)[i] = at;
        memcpy(*tok + at, s->tokens + a, (size_t)(b - a) * sizeof **tok);
        at += b - a;
        for (int64_t j = a; j < b; j++) /* in order of occurrence, repeats included */
            if (ids[j] >= 0) (*tok)[at++] = start_index + ids[j];
    }
    (*off)[s->n] = at;
    return KH_OK;
}

kh_status kh_fasttext_bigrams(kh_seqset *train, kh_seqset *test, int32_t start_index, kh_bigram_info *info,
                              char *err, size_t errlen) {
    if (!train || !info || start_index < 0)
        return kh_errf(err, errlen, KH_ERR_INVALID, "fasttext bigrams: bad arguments (start_index %d)",
                       (int)start_index);
    bigram_table t = {0};
    int64_t *off[2] = {NULL, NULL};
    int32_t *tok[2] = {NULL, NULL};
    int32_t *ids = NULL;
    kh_seqset *sets[2] = {train, test};
    if (table_alloc(&t, 1u << 16)) goto nomem;
    for (int k = 0; k < 2; k++) {
        kh_seqset *s = sets[k];
        if (!s) continue;
        ids = malloc((size_t)(s->offsets[s->n] > 0 ? s->offsets[s->n] : 1) * sizeof *ids);
        if (!ids) goto nomem;
        for (int64_t i = 0; i < s->n; i++) {
            int64_t a = s->offsets[i], b = s->offsets[i + 1];
            for (int64_t j = a; j + 1 < b; j++) {
                /* The table (64 MiB for aclImdb) misses the caches on nearly every probe: ask for the slot of
                 * the pair PREFETCH_AHEAD positions on now, so its line arrives while this one is handled. */
                if (j + 1 + PREFETCH_AHEAD < b)
                    __builtin_prefetch(&t.s[key_hash(pair_key(s->tokens[j + PREFETCH_AHEAD],
                                                              s->tokens[j + 1 + PREFETCH_AHEAD])) &
                                            (t.nslots - 1)]);
                uint64_t key = pair_key(s->tokens[j], s->tokens[j + 1]);
                int64_t id = k == 0 ? table_add(&t, key) : table_find(&t, key); /* test: training bigrams only */
                if (k == 0 && id < 0) goto nomem;
                ids[j] = (int32_t)id;
            }
            if (b > a) ids[b - 1] = -1;
            if (t.n > (int64_t)INT32_MAX - start_index) {
                free(ids);
                free(t.s);
                free(off[0]);
                free(tok[0]);
                return kh_errf(err, errlen, KH_ERR_DATA, "fasttext bigrams: more than %lld bigrams do not fit int32 ids",
                               (long long)(INT32_MAX - start_index));
            }
        }
        if (append_bigrams(s, ids, start_index, &off[k], &tok[k]) != KH_OK) goto nomem;
        free(ids);
        ids = NULL;
    }
    /* Only now replace the sets, so a failure leaves them as they were. */
    for (int k = 0; k < 2; k++) {
        if (!sets[k]) continue;
        free(sets[k]->offsets);
        free(sets[k]->tokens);
        sets[k]->offsets = off[k];
        sets[k]->tokens = tok[k];
    }
    info->n_bigrams = t.n;
    info->max_features = (int64_t)start_index + t.n;
    free(t.s);
    return KH_OK;
nomem:
    for (int k = 0; k < 2; k++) {
        free(off[k]);
        free(tok[k]);
    }
    free(ids);
    free(t.s);
    return kh_errf(err, errlen, KH_ERR_NOMEM, "fasttext bigrams: out of memory (%lld bigrams so far)", (long long)t.n);
}
