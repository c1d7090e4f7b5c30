/* th_sb.h — a growing text buffer for generated sources. A failed allocation latches `oom`, so the code generator
 * write freely and check once at the end. */
#ifndef TH_SB_H
#define TH_SB_H

#include <stdarg.h>
#include <stddef.h>

typedef struct th_sb {
    char *s;
    size_t len, cap;
    int oom;
} th_sb;

void th_sb_printf(th_sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void th_sb_vprintf(th_sb *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
void th_sb_put(th_sb *b, const char *text, size_t len);
void th_sb_free(th_sb *b);

#endif
