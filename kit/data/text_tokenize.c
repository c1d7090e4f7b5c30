/* kit/data/text_tokenize.c — UTF-8 checking, Python-compatible lower-casing, Keras's
 * text_to_word_sequence, pad_sequences, and kh_seqset helpers (khost/kit/data_text.h). */
#include <stdlib.h>
#include <string.h>

#include "khost/kit/data_text.h"
#include "khost/kit/status.h"

int64_t kh_utf8_check(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        /* ASCII fast path, 8 bytes at a time: reviews are almost entirely ASCII. */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        uint32_t cp, min;
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1, cp = c & 0x1F, min = 0x80;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2, cp = c & 0x0F, min = 0x800;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return (int64_t)i; /* continuation byte, 0xC0/0xC1 or 0xF5.. as a lead byte */
        }
        if (n - i - 1 < need) return (int64_t)i;
        for (size_t k = 1; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return (int64_t)i;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return (int64_t)i;
        i += need + 1;
    }
    return -1;
}

uint32_t kh_unicode_lower(uint32_t cp) {
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) return cp + 32; /* Latin-1 capitals (not the sign ×) */
    if (cp >= 0x100 && cp <= 0x17F) {                          /* Latin Extended-A: case pairs */
        if (cp == 0x130) return cp;                              /* İ: Python yields two code points */
        if (cp == 0x178) return 0xFF;                            /* Ÿ -> ÿ */
        if ((cp <= 0x137) || (cp >= 0x14A && cp <= 0x177)) return (cp & 1) ? cp : cp + 1;
        if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E)) return (cp & 1) ? cp + 1 : cp;
        return cp; /* ĸ, ŉ, ſ are lower-case already */
    }
    if (cp >= 0x391 && cp <= 0x3AB && cp != 0x3A2) return cp + 32; /* Greek capitals (Σ -> σ always) */
    if (cp == 0x386) return 0x3AC;
    if (cp >= 0x388 && cp <= 0x38A) return cp + 37;
    if (cp == 0x38C) return 0x3CC;
    if (cp == 0x38E || cp == 0x38F) return cp + 63;
    if (cp >= 0x400 && cp <= 0x40F) return cp + 80; /* Cyrillic Ѐ..Џ */
    if (cp >= 0x410 && cp <= 0x42F) return cp + 32; /* Cyrillic А..Я */
    return cp;
}

size_t kh_utf8_put(char *buf, uint32_t cp) {
    unsigned char *b = (unsigned char *)buf;
    if (cp < 0x80) {
        b[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        b[0] = (unsigned char)(0xC0 | (cp >> 6));
        b[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        b[0] = (unsigned char)(0xE0 | (cp >> 12));
        b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    b[0] = (unsigned char)(0xF0 | (cp >> 18));
    b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    b[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Separators: ' ' and Keras's default filters !"#$%&()*+,-./:;<=>?@[\]^_`{|}~ plus tab and newline. A
 * constant table, so nothing is initialised at run time (no global state, thread-safe). */
static const unsigned char k_sep[128] = {
    ['\t'] = 1, ['\n'] = 1, [' '] = 1, ['!'] = 1, ['"'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1,
    ['('] = 1,  [')'] = 1,  ['*'] = 1, ['+'] = 1, [','] = 1, ['-'] = 1, ['.'] = 1, ['/'] = 1, [':'] = 1,
    [';'] = 1,  ['<'] = 1,  ['='] = 1, ['>'] = 1, ['?'] = 1, ['@'] = 1, ['['] = 1, ['\\'] = 1, [']'] = 1,
    ['^'] = 1,  ['_'] = 1,  ['`'] = 1, ['{'] = 1, ['|'] = 1, ['}'] = 1, ['~'] = 1,
};

static int is_br_tag(const unsigned char *s, size_t left) {
    /* "<br />" after lower-casing: only ASCII B/R lower-case to b/r among the mapped code points. */
    return left >= 6 && (s[1] | 0x20) == 'b' && (s[2] | 0x20) == 'r' && s[3] == ' ' && s[4] == '/' && s[5] == '>';
}

int kh_text_words(char *text, size_t n, kh_word_fn fn, void *ctx) {
    unsigned char *s = (unsigned char *)text;
    size_t i = 0;
    size_t start = 0;
    int in_word = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t step = 1;
        int sep = 0;
        if (c < 0x80) {
            if (k_sep[c]) {
                /* Python: text.lower().replace("<br />", " ") before translating. */
                if (c == '<' && is_br_tag(s + i, n - i)) {
                    memset(s + i, ' ', 6);
                    step = 6;
                } else {
                    s[i] = ' ';
                }
                sep = 1;
            } else if (c >= 'A' && c <= 'Z') {
                s[i] = (unsigned char)(c + 32);
            }
        } else if ((c & 0xE0) == 0xC0) {
            /* a valid two-byte sequence (the caller checked): lower-case when the result is two bytes too */
            if (i + 1 < n) {
                uint32_t cp = ((uint32_t)(c & 0x1F) << 6) | (s[i + 1] & 0x3F);
                uint32_t lo = kh_unicode_lower(cp);
                if (lo != cp && lo >= 0x80 && lo < 0x800) kh_utf8_put((char *)s + i, lo);
            }
            step = 2;
        } else if ((c & 0xF0) == 0xE0) {
            step = 3;
        } else if ((c & 0xF8) == 0xF0) {
            step = 4;
        }
        if (step > n - i) step = n - i;
        if (sep) {
            if (in_word) {
                int r = fn(ctx, text + start, i - start);
                if (r) return r;
                in_word = 0;
            }
        } else if (!in_word) {
            start = i;
            in_word = 1;
        }
        i += step;
    }
    if (in_word) {
        int r = fn(ctx, text + start, n - start);
        if (r) return r;
    }
    return KH_OK;
}

void kh_seqset_free(kh_seqset *s) {
    if (!s) return;
    free(s->offsets);
    free(s->tokens);
    free(s->labels);
    memset(s, 0, sizeof *s);
}

kh_status kh_pad_sequences(const kh_seqset *s, int32_t maxlen, int32_t *out, char *err, size_t errlen) {
    if (!s || !out || maxlen <= 0)
        return kh_errf(err, errlen, KH_ERR_INVALID, "pad_sequences: bad arguments (maxlen %d)", (int)maxlen);
    for (int64_t i = 0; i < s->n; i++) {
        int64_t a = s->offsets[i], b = s->offsets[i + 1];
        int64_t len = b - a;
        int64_t keep = len < maxlen ? len : maxlen; /* truncating='pre': the last tokens survive */
        int32_t *row = out + i * (int64_t)maxlen;
        int64_t pad = maxlen - keep;
        if (pad) memset(row, 0, (size_t)pad * sizeof *row); /* padding='pre', value 0 */
        if (keep) memcpy(row + pad, s->tokens + (b - keep), (size_t)keep * sizeof *row);
    }
    return KH_OK;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void kh_seqset_length_stats(const kh_seqset *s, double *mean, double *median) {
    *mean = 0;
    *median = 0;
    if (!s || s->n <= 0) return;
    *mean = (double)s->offsets[s->n] / (double)s->n;
    int64_t *len = malloc((size_t)s->n * sizeof *len);
    if (!len) { /* the median is cosmetic (describe); report the mean only rather than fail */
        *median = -1;
        return;
    }
    for (int64_t i = 0; i < s->n; i++) len[i] = s->offsets[i + 1] - s->offsets[i];
    qsort(len, (size_t)s->n, sizeof *len, cmp_i64);
    /* numpy.median: the mean of the two middle values for an even count */
    *median = (s->n & 1) ? (double)len[s->n / 2] : 0.5 * (double)(len[s->n / 2 - 1] + len[s->n / 2]);
    free(len);
}
