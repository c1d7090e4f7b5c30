/* core/base/escape.c — untrusted text written where it lands (escape.h). */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include "base/escape.h"

#include <stdlib.h>
#include <string.h>

static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */

/* The length of the valid UTF-8 sequence at p (1..4), or 0 (a stray or overlong byte, a surrogate, above
 * U+10FFFF, or the noncharacters U+FFFE and U+FFFF, which XML refuses). */
static int utf8_len(const unsigned char *p) {
    unsigned c = p[0];
    if (c < 0x80) return 1;
    int n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    if (n == 3) {
        if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0)) return 0;
        if (c == 0xef && p[1] == 0xbf && (p[2] == 0xbe || p[2] == 0xbf)) return 0;
    }
    if (n == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90))) return 0;
    return n;
}

/* One character of s at *p: its bytes written when valid and printable, else U+FFFD (a control character but
 * tab, DEL, C1 controls, invalid UTF-8). Advances *p. Returns the ASCII byte written, or 0. */
static int put_char(FILE *f, const unsigned char **p, int keep_tab) {
    const unsigned char *s = *p;
    int n = utf8_len(s);
    if (n == 0) {
        fputs(replacement, f);
        *p = s + 1;
        return 0;
    }
    *p = s + n;
    if (n == 1 && ((s[0] < 0x20 && !(keep_tab && s[0] == '\t')) || s[0] == 0x7f)) {
        fputs(replacement, f);
        return 0;
    }
    if (n == 2 && s[0] == 0xc2 && s[1] < 0xa0) { /* C1 controls U+0080..U+009F */
        fputs(replacement, f);
        return 0;
    }
    fwrite(s, 1, (size_t)n, f);
    return n == 1 ? s[0] : 0;
}

void kh_esc_xml(FILE *f, const char *s) {
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        const char *ent = *p == '&' ? "&amp;" : *p == '<' ? "&lt;" : *p == '>' ? "&gt;" : *p == '"' ? "&quot;"
                        : *p == '\'' ? "&#39;" : NULL;
        if (ent) {
            fputs(ent, f);
            p++;
        } else {
            put_char(f, &p, 1);
        }
    }
}

void kh_esc_md(FILE *f, const char *s) {
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        if (*p == '\t' || *p == '\n' || *p == '\r') {
            fputc(' ', f);
            p++;
        } else if (strchr("\\`|<>[]&", *p)) {
            fputc('\\', f);
            fputc(*p++, f);
        } else {
            put_char(f, &p, 0);
        }
    }
}

void kh_esc_line(FILE *f, const char *s) {
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) put_char(f, &p, 1);
}

char *kh_esc_line_dup(const char *s) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    kh_esc_line(f, s);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

void kh_esc_msg(const char *prefix, const char *text) {
    fputs(prefix, stderr);
    kh_esc_line(stderr, text);
    fputc('\n', stderr);
}
