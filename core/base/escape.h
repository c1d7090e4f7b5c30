/* core/base/escape.h — text from an untrusted source (a record, a file name, a module's message) written where
 * it lands: XML/HTML text and attributes, a Markdown table cell, a terminal line. Every form replaces bytes that
 * are not valid UTF-8, and control characters, with U+FFFD, so nothing read can add markup, a table cell, a
 * line, or a terminal escape sequence. */
#ifndef KHOST_CORE_ESCAPE_H
#define KHOST_CORE_ESCAPE_H

#include <stddef.h>
#include <stdio.h>

/* XML/HTML text or attribute content: & < > " ' as entities; a tab is kept. */
void kh_esc_xml(FILE *f, const char *s);
/* Markdown text (a table cell, a list item): the characters that make structure or markup in CommonMark and
 * GitHub's tables (\ ` | < > [ ] &) backslash-escaped, a tab or line break as a space. */
void kh_esc_md(FILE *f, const char *s);
/* A terminal line (stderr messages that quote what was read): a tab is kept, everything else as kh_esc_md's
 * replacement, no escaping of punctuation. */
void kh_esc_line(FILE *f, const char *s);
/* kh_esc_line into a new string (free it); NULL when out of memory. */
char *kh_esc_line_dup(const char *s);
/* A message line on stderr: prefix as given, then text as kh_esc_line writes it, then a line break. */
void kh_esc_msg(const char *prefix, const char *text);
#endif
