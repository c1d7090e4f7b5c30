/* kit/data/charwin.c — character windows over a UTF-8 text, as examples/lstm_text_generation.py cuts
 * them (maxlen 40, step 3). The text is kept once as alphabet indices (4 bytes a character) and windows
 * are cut on demand, so the one-hot tensor (windows x 40 x 57 floats, 1.8 GB) never exists. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/data_text.h"
#include "khost/kit/status.h"
#include "txt_io.h"

void kh_charwin_free(kh_charwin *c) {
    if (!c) return;
    free(c->alphabet);
    free(c->text);
    memset(c, 0, sizeof *c);
}

/* Decode one code point of valid UTF-8 at s[*i], advancing *i. */
static uint32_t utf8_next(const unsigned char *s, size_t n, size_t *i) {
    unsigned c = s[*i];
    size_t k = c < 0x80 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
    uint32_t cp = k == 0 ? c : k == 1 ? (c & 0x1Fu) : k == 2 ? (c & 0x0Fu) : (c & 0x07u);
    for (size_t j = 1; j <= k && *i + j < n; j++) cp = (cp << 6) | (s[*i + j] & 0x3Fu);
    *i += k + 1;
    return cp;
}

int32_t kh_charwin_index(const kh_charwin *c, uint32_t cp) {
    int32_t lo = 0, hi = c->n_distinct - 1;
    while (lo <= hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (c->alphabet[mid] == cp) return mid;
        if (c->alphabet[mid] < cp) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

kh_status kh_charwin_from_text(const char *what, const char *text, size_t len, int32_t maxlen, int32_t step,
                               kh_charwin *out, char *err, size_t errlen) {
    if (!what) what = "text";
    if (!out || (!text && len) || maxlen <= 0 || step <= 0)
        return kh_errf(err, errlen, KH_ERR_INVALID, "%s: bad arguments (maxlen %d, step %d)", what, (int)maxlen,
                       (int)step);
    memset(out, 0, sizeof *out);
    int64_t bad = kh_utf8_check(text, len);
    if (bad >= 0)
        return kh_errf(err, errlen, KH_ERR_DATA, "%s: not valid UTF-8 (byte %lld: 0x%02x)", what, (long long)bad,
                       (unsigned)(unsigned char)text[bad]);
    const unsigned char *s = (const unsigned char *)text;
    kh_charwin c;
    memset(&c, 0, sizeof c);
    c.maxlen = maxlen;
    c.step = step;
    /* A bitmap of the code points present (0x110000 bits = 136 KiB) gives the sorted alphabet directly. */
    uint64_t *seen = calloc(0x110000 / 64, sizeof *seen);
    c.text = malloc((len > 0 ? len : 1) * sizeof *c.text); /* characters <= bytes */
    if (!seen || !c.text) goto nomem;
    /* Pass 1: decode, universal newlines, lower-case; store code points for now. */
    int64_t n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp = utf8_next(s, len, &i);
        if (cp == '\r') { /* io.open's universal newlines: "\r\n" and a lone "\r" both read as "\n" */
            if (i < len && s[i] == '\n') i++;
            cp = '\n';
        }
        cp = kh_unicode_lower(cp);
        seen[cp >> 6] |= 1ull << (cp & 63);
        c.text[n++] = (int32_t)cp;
    }
    for (uint32_t w = 0; w < 0x110000 / 64; w++) c.n_distinct += __builtin_popcountll(seen[w]);
    c.alphabet = malloc((size_t)(c.n_distinct > 0 ? c.n_distinct : 1) * sizeof *c.alphabet);
    if (!c.alphabet) goto nomem;
    /* Word by word, bit by bit: a short text must not cost a walk over all 0x110000 code points. */
    int32_t k = 0;
    for (uint32_t w = 0; w < 0x110000 / 64; w++)
        for (uint64_t bits = seen[w]; bits; bits &= bits - 1) c.alphabet[k++] = w * 64 + (uint32_t)__builtin_ctzll(bits);
    free(seen);
    seen = NULL;
    /* Pass 2: code points to alphabet indices. */
    for (int64_t i = 0; i < n; i++) c.text[i] = kh_charwin_index(&c, (uint32_t)c.text[i]);
    c.n_chars = n;
    if (n <= maxlen) {
        kh_charwin_free(&c);
        return kh_errf(err, errlen, KH_ERR_DATA, "%s: %lld characters, too short for windows of %d", what,
                       (long long)n, (int)maxlen);
    }
    c.n_windows = (n - maxlen + step - 1) / step; /* len(range(0, n - maxlen, step)) */
    if (n < (int64_t)len) { /* give back what multi-byte characters left unused */
        int32_t *shrunk = realloc(c.text, (size_t)n * sizeof *c.text);
        if (shrunk) c.text = shrunk;
    }
    *out = c;
    return KH_OK;
nomem:
    free(seen);
    kh_charwin_free(&c);
    return kh_errf(err, errlen, KH_ERR_NOMEM, "%s: out of memory (%zu bytes of text)", what, len);
}

kh_status kh_charwin_load(const char *path, int32_t maxlen, int32_t step, kh_charwin *out, char *err,
                          size_t errlen) {
    if (!path || !out) return kh_errf(err, errlen, KH_ERR_INVALID, "charwin: missing argument");
    memset(out, 0, sizeof *out);
    char *buf = NULL;
    size_t cap = 0, len = 0;
    char why[4500];
    int e = txt_read_file(path, &buf, &cap, &len, why, sizeof why);
    if (e) {
        free(buf);
        if (e == ENOENT) return kh_errf(err, errlen, KH_ERR_IO, "%s: not found", path);
        if (e == ENOMEM) return kh_errf(err, errlen, KH_ERR_NOMEM, "%s: out of memory reading the text", path);
        return kh_errf(err, errlen, KH_ERR_IO, "%s", why);
    }
    kh_status st = kh_charwin_from_text(path, buf, len, maxlen, step, out, err, errlen);
    free(buf);
    return st;
}

kh_status kh_charwin_window(const kh_charwin *c, int64_t w, int32_t *x, int32_t *y) {
    if (!c || w < 0 || w >= c->n_windows || !x) return KH_ERR_INVALID;
    const int32_t *src = c->text + w * (int64_t)c->step;
    memcpy(x, src, (size_t)c->maxlen * sizeof *x);
    if (y) *y = src[c->maxlen];
    return KH_OK;
}
