/* th_sb.c — the text buffer of the code generators. */
#include "th_sb.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(th_sb *b, size_t more) {
    if (b->oom) return 0;
    if (b->len + more + 1 <= b->cap) return 1;
    size_t nc = b->cap ? b->cap : 4096;
    while (nc < b->len + more + 1) nc *= 2;
    char *p = realloc(b->s, nc);
    if (!p) {
        b->oom = 1;
        return 0;
    }
    b->s = p;
    b->cap = nc;
    return 1;
}

void th_sb_put(th_sb *b, const char *text, size_t len) {
    if (!reserve(b, len)) return;
    memcpy(b->s + b->len, text, len);
    b->len += len;
    b->s[b->len] = 0;
}

void th_sb_vprintf(th_sb *b, const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    int k = vsnprintf(NULL, 0, fmt, ap);
    if (k >= 0 && reserve(b, (size_t)k)) {
        vsnprintf(b->s + b->len, (size_t)k + 1, fmt, again);
        b->len += (size_t)k;
    }
    va_end(again);
}

void th_sb_printf(th_sb *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    th_sb_vprintf(b, fmt, ap);
    va_end(ap);
}

void th_sb_free(th_sb *b) {
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}
