/* core/results/json_scan.c — duplicate keys and exact integers in JSON text (json_scan.h). The text has been
 * accepted by cJSON, so the walk can trust its grammar and nesting depth; it never trusts its sizes. */
#include "results/json_scan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct key {
    char *s;
    size_t n;
} key;

typedef struct scan {
    const char *p;
    kh_json_int *ints;
    int n;
    char *err;
    size_t errlen;
    int failed;
} scan;

static void skip_ws(scan *sc) {
    while (*sc->p == ' ' || *sc->p == '\t' || *sc->p == '\n' || *sc->p == '\r') sc->p++;
}

static int hex4(const char *p, unsigned *u) {
    *u = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        *u = *u << 4 | (unsigned)d;
    }
    return 0;
}

static size_t put_utf8(char *w, unsigned u) {
    if (u < 0x80) return (size_t)(w[0] = (char)u, 1);
    if (u < 0x800) return w[0] = (char)(0xc0 | u >> 6), w[1] = (char)(0x80 | (u & 0x3f)), 2;
    if (u < 0x10000)
        return w[0] = (char)(0xe0 | u >> 12), w[1] = (char)(0x80 | (u >> 6 & 0x3f)), w[2] = (char)(0x80 | (u & 0x3f)), 3;
    w[0] = (char)(0xf0 | u >> 18), w[1] = (char)(0x80 | (u >> 12 & 0x3f));
    w[2] = (char)(0x80 | (u >> 6 & 0x3f)), w[3] = (char)(0x80 | (u & 0x3f));
    return 4;
}

/* A string at sc->p ('"'), decoded into a new buffer when out is not NULL; sc->p after its closing quote. */
static int read_string(scan *sc, key *out) {
    const char *s = ++sc->p, *e = s;
    while (*e && *e != '"') e += *e == '\\' && e[1] ? 2 : 1;
    sc->p = *e ? e + 1 : e;
    if (!out) return 0;
    char *w = malloc((size_t)(e - s) + 1); /* decoding never lengthens: \uXXXX (6) is at most 4 bytes */
    if (!w) return -1;
    size_t n = 0;
    for (const char *r = s; r < e;) {
        if (*r != '\\') {
            w[n++] = *r++;
            continue;
        }
        char c = r[1];
        unsigned u, lo;
        if (c == 'u' && hex4(r + 2, &u) == 0) {
            r += 6;
            if (u >= 0xd800 && u < 0xdc00 && r[0] == '\\' && r[1] == 'u' && hex4(r + 2, &lo) == 0 && lo >= 0xdc00 &&
                lo < 0xe000) {
                u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
                r += 6;
            }
            n += put_utf8(w + n, u);
            continue;
        }
        w[n++] = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c == 'b' ? '\b' : c == 'f' ? '\f' : c;
        r += 2;
    }
    w[n] = 0;
    out->s = w;
    out->n = n;
    return 0;
}

static int cmp_key(const void *a, const void *b) {
    const key *x = a, *y = b;
    size_t m = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->s, y->s, m);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

static void number(scan *sc, const char *path) {
    const char *s = sc->p;
    while (*sc->p && strchr("+-0123456789.eE", *sc->p)) sc->p++;
    for (int i = 0; path && i < sc->n; i++) {
        if (strcmp(sc->ints[i].path, path)) continue;
        uint64_t v = 0;
        int exact = sc->p > s && sc->p - s <= 20;
        for (const char *d = s; exact && d < sc->p; d++) {
            if (*d < '0' || *d > '9' || v > (UINT64_MAX - (uint64_t)(*d - '0')) / 10) exact = 0;
            else v = v * 10 + (uint64_t)(*d - '0');
        }
        sc->ints[i].found = exact ? 1 : -1;
        sc->ints[i].v = exact ? v : 0;
    }
}

static void value(scan *sc, const char *path, int depth);

/* An object at sc->p: every member's key kept, sorted, and two equal neighbours reported. */
static void object(scan *sc, const char *path, int depth) {
    key *keys = NULL;
    size_t nk = 0, cap = 0;
    sc->p++;
    for (;;) {
        skip_ws(sc);
        if (*sc->p != '"') break;
        key k;
        if (nk == cap) {
            size_t nc = cap ? 2 * cap : 16;
            key *nv = realloc(keys, nc * sizeof *nv);
            if (!nv) goto oom;
            keys = nv, cap = nc;
        }
        if (read_string(sc, &k) != 0) goto oom;
        keys[nk++] = k;
        skip_ws(sc);
        if (*sc->p == ':') sc->p++;
        char sub[256];
        const char *subpath = NULL; /* member paths are followed two levels down, where the seeds live */
        if (depth < 2 && !memchr(k.s, 0, k.n) &&
            (size_t)snprintf(sub, sizeof sub, "%s%s%s", path ? path : "", path ? "." : "", k.s) < sizeof sub)
            subpath = sub;
        value(sc, subpath, depth + 1);
        if (sc->failed) goto done;
        skip_ws(sc);
        if (*sc->p == ',') sc->p++;
    }
    if (*sc->p == '}') sc->p++;
    if (nk > 1) qsort(keys, nk, sizeof *keys, cmp_key);
    for (size_t i = 1; i < nk; i++)
        if (!cmp_key(&keys[i - 1], &keys[i])) {
            snprintf(sc->err, sc->errlen, "key \"%.80s\" twice in %s%s", keys[i].s,
                     depth == 0 ? "the top-level object" : path ? "object " : "a nested object", depth && path ? path : "");
            sc->failed = 1;
            break;
        }
    goto done;
oom:
    snprintf(sc->err, sc->errlen, "out of memory");
    sc->failed = 1;
done:
    for (size_t i = 0; i < nk; i++) free(keys[i].s);
    free(keys);
}

static void value(scan *sc, const char *path, int depth) {
    skip_ws(sc);
    char c = *sc->p;
    if (c == '{') {
        object(sc, path, depth);
    } else if (c == '[') {
        sc->p++;
        for (;;) {
            skip_ws(sc);
            if (*sc->p == ']' || !*sc->p) break;
            value(sc, NULL, depth + 1);
            if (sc->failed) return;
            skip_ws(sc);
            if (*sc->p == ',') sc->p++;
        }
        if (*sc->p == ']') sc->p++;
    } else if (c == '"') {
        read_string(sc, NULL);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        number(sc, path);
    } else {
        while (*sc->p >= 'a' && *sc->p <= 'z') sc->p++; /* true, false, null */
    }
}

int kh_json_scan(const char *text, kh_json_int *ints, int n, char *err, size_t errlen) {
    for (int i = 0; i < n; i++) ints[i].found = 0, ints[i].v = 0;
    scan sc = {.p = text, .ints = ints, .n = n, .err = err, .errlen = errlen};
    value(&sc, NULL, 0);
    return sc.failed ? -1 : 0;
}
