/* core/modules/modcache.c — the module cache file (format in modcache.h).
 *
 * The file is a cache, not a source of truth: anything that does not parse is dropped and the module it
 * described is inspected again. Each process reads it once and rewrites it only when something changed;
 * two processes racing to rewrite it each rename a complete file, so the loser's entries are inspected
 * again next time, and nothing is ever half-written.
 */
#define _GNU_SOURCE /* strdup, strndup */
#include "modules/modcache.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/abi.h"
#include "base/files.h"
#include "base/grow.h"
#include "khost/kit/regular.h"

#define MODCACHE_VERSION 1
#define MODCACHE_MAX_BYTES (16u << 20) /* thousands of modules fit; anything larger is not our file */
#define MODCACHE_MAX_FIELDS 14

// --- escaping ---------------------------------------------------------------------------------------------

char *kh_modcache_escape(const char *s) {
    if (!s) s = "";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        n += *p == '\\' || *p == '\t' || *p == '\n' ? 2 : (*p < 0x20 || *p == 0x7f) ? 4 : 1;
    char *out = malloc(n + 1), *w = out;
    if (!out) return NULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\\') *w++ = '\\', *w++ = '\\';
        else if (*p == '\t') *w++ = '\\', *w++ = 't';
        else if (*p == '\n') *w++ = '\\', *w++ = 'n';
        else if (*p < 0x20 || *p == 0x7f) w += sprintf(w, "\\x%02x", *p);
        else *w++ = (char)*p;
    }
    *w = 0;
    return out;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

int kh_modcache_unescape(char *s) {
    char *w = s;
    for (const char *r = s; *r; r++) {
        if (*r != '\\') {
            *w++ = *r;
            continue;
        }
        r++;
        if (*r == '\\') *w++ = '\\';
        else if (*r == 't') *w++ = '\t';
        else if (*r == 'n') *w++ = '\n';
        else if (*r == 'x') {
            int hi = r[1] ? hexval(r[1]) : -1, lo = hi >= 0 && r[2] ? hexval(r[2]) : -1;
            /* Only what escape() writes: a control byte, never NUL, in lower-case hex. */
            if (hi < 0 || lo < 0) return -1;
            int v = hi * 16 + lo;
            if (v == 0 || (v >= 0x20 && v != 0x7f)) return -1;
            *w++ = (char)v;
            r += 2;
        } else {
            return -1;
        }
    }
    *w = 0;
    return 0;
}

// --- entries ----------------------------------------------------------------------------------------------

void kh_modcache_entry_free(kh_modcache_entry *e) {
    if (!e) return;
    free(e->path);
    free(e->name);
    free(e->version);
    free(e->description);
    free(e->caps);
    free(e->message);
    memset(e, 0, sizeof *e);
}

void kh_modcache_free(kh_modcache *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) kh_modcache_entry_free(&c->v[i]);
    free(c->v);
    free(c->file);
    memset(c, 0, sizeof *c);
}

static int dup_field(char **dst, const char *src) {
    *dst = strdup(src ? src : "");
    return *dst ? 0 : -1;
}

static int entry_copy(kh_modcache_entry *d, const kh_modcache_entry *s) {
    *d = *s;
    d->path = d->name = d->version = d->description = d->caps = d->message = NULL;
    if (dup_field(&d->path, s->path) || dup_field(&d->name, s->name) || dup_field(&d->version, s->version) ||
        dup_field(&d->description, s->description) || dup_field(&d->caps, s->caps) ||
        dup_field(&d->message, s->message)) {
        kh_modcache_entry_free(d);
        return -1;
    }
    return 0;
}

int kh_modcache_put(kh_modcache *c, const kh_modcache_entry *e) {
    kh_modcache_entry copy;
    if (!e->path || entry_copy(&copy, e)) return -1;
    for (int i = 0; i < c->n; i++) {
        if (!strcmp(c->v[i].path, e->path)) {
            kh_modcache_entry_free(&c->v[i]);
            c->v[i] = copy;
            c->dirty = 1;
            return 0;
        }
    }
    if (c->n == c->cap) {
        kh_modcache_entry *nv = kh_grow(c->v, &c->cap, sizeof *nv, 16);
        if (!nv) {
            kh_modcache_entry_free(&copy);
            return -1;
        }
        c->v = nv;
    }
    c->v[c->n++] = copy;
    c->dirty = 1;
    return 0;
}

static int64_t mtime_ns(const struct stat *st) {
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + (int64_t)st->st_mtim.tv_nsec;
}

const kh_modcache_entry *kh_modcache_lookup(const kh_modcache *c, const char *path, const struct stat *st) {
    for (int i = 0; i < c->n; i++) {
        const kh_modcache_entry *e = &c->v[i];
        if (strcmp(e->path, path)) continue;
        if (e->size == (int64_t)st->st_size && e->mtime_ns == mtime_ns(st) && e->dev == (uint64_t)st->st_dev &&
            e->ino == (uint64_t)st->st_ino)
            return e;
        return NULL;
    }
    return NULL;
}

// --- text ---------------------------------------------------------------------------------------------------

static int parse_i64(const char *s, int64_t *out) {
    if (!*s || !((*s >= '0' && *s <= '9') || *s == '-')) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static int parse_u64(const char *s, uint64_t *out) {
    if (!*s || *s < '0' || *s > '9') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static int parse_abi(const char *s, unsigned *major, unsigned *minor) {
    uint64_t a, b;
    const char *dot = strchr(s, '.');
    if (!dot || dot - s > 8) return -1;
    char head[16];
    memcpy(head, s, (size_t)(dot - s));
    head[dot - s] = 0;
    if (parse_u64(head, &a) || parse_u64(dot + 1, &b) || a > 0xffff || b > 0xffff) return -1;
    *major = (unsigned)a;
    *minor = (unsigned)b;
    return 0;
}

/* One "module" line (NUL-terminated, no newline) into e; -1 when malformed. Fields are unescaped in place. */
static int parse_line(char *line, kh_modcache_entry *e) {
    char *f[MODCACHE_MAX_FIELDS];
    int n = 0;
    for (char *p = line;;) {
        if (n == MODCACHE_MAX_FIELDS) return -1;
        f[n++] = p;
        char *tab = strchr(p, '\t');
        if (!tab) break;
        *tab = 0;
        p = tab + 1;
    }
    if (n < 7 || strcmp(f[0], "module")) return -1;
    for (int i = 1; i < n; i++)
        if (kh_modcache_unescape(f[i])) return -1;
    memset(e, 0, sizeof *e);
    uint64_t size;
    if (f[1][0] != '/' || parse_u64(f[2], &size) || size > INT64_MAX || parse_i64(f[3], &e->mtime_ns) ||
        parse_u64(f[4], &e->dev) || parse_u64(f[5], &e->ino))
        return -1;
    e->size = (int64_t)size;
    if (!strcmp(f[6], "ok") && n == 13) {
        uint64_t kind;
        if (parse_u64(f[7], &kind) || (kind != KH_MODULE_BACKEND && kind != KH_MODULE_TASK) ||
            parse_abi(f[8], &e->abi_major, &e->abi_minor) || !f[9][0])
            return -1;
        e->status = KH_SCAN_OK;
        e->kind = (int)kind;
        e->name = f[9], e->version = f[10], e->description = f[11], e->caps = f[12];
    } else if (!strcmp(f[6], "noentry") && n == 7) {
        e->status = KH_SCAN_NOENTRY;
    } else if (!strcmp(f[6], "error") && n == 8 && f[7][0]) {
        e->status = KH_SCAN_ERROR;
        e->message = f[7];
    } else {
        return -1;
    }
    e->path = f[1];
    return 0;
}

static int header_ok(const char *line) {
    char want[64];
    snprintf(want, sizeof want, "khost-module-cache %d abi %d.%d", MODCACHE_VERSION, KH_ABI_MAJOR, KH_ABI_MINOR);
    return !strcmp(line, want);
}

int kh_modcache_parse(kh_modcache *c, const char *text, size_t len) {
    char *buf = malloc(len + 1);
    if (!buf) return -1;
    memcpy(buf, text, len);
    buf[len] = 0;
    int dropped = 0, first = 1, rc = 0;
    for (char *p = buf; p < buf + len;) {
        char *nl = memchr(p, '\n', (size_t)(buf + len - p));
        char *end = nl ? nl : buf + len;
        *end = 0;
        int has_nul = strlen(p) != (size_t)(end - p);
        if (first) {
            first = 0;
            if (has_nul || !header_ok(p)) { /* another format or ABI: start afresh */
                dropped = 1;
                break;
            }
        } else if (*p) {
            kh_modcache_entry e;
            /* a line without its newline was cut short by a writer that was not ours */
            if (has_nul || !nl || parse_line(p, &e)) {
                dropped++;
            } else if (kh_modcache_put(c, &e)) {
                rc = -1;
                break;
            }
        }
        p = end + 1;
    }
    free(buf);
    return rc ? -1 : dropped;
}

char *kh_modcache_format(const kh_modcache *c, size_t *len) {
    size_t cap = 256, n = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    n = (size_t)snprintf(out, cap, "khost-module-cache %d abi %d.%d\n", MODCACHE_VERSION, KH_ABI_MAJOR,
                         KH_ABI_MINOR);
    for (int i = 0; i < c->n; i++) {
        const kh_modcache_entry *e = &c->v[i];
        const char *raw[7] = {e->path, e->name, e->version, e->description, e->caps, e->message, NULL};
        char *esc[6] = {0};
        int bad = 0;
        for (int k = 0; k < 6; k++) bad |= !(esc[k] = kh_modcache_escape(raw[k]));
        char head[160];
        size_t need = 0;
        if (!bad) {
            snprintf(head, sizeof head, "\t%" PRId64 "\t%" PRId64 "\t%" PRIu64 "\t%" PRIu64 "\t", e->size,
                     e->mtime_ns, e->dev, e->ino);
            need = strlen(esc[0]) + strlen(head) + strlen(esc[1]) + strlen(esc[2]) + strlen(esc[3]) +
                   strlen(esc[4]) + strlen(esc[5]) + 80;
            if (n + need > cap) {
                size_t ncap = (n + need) * 2;
                char *nb = realloc(out, ncap);
                if (!nb) bad = 1;
                else out = nb, cap = ncap;
            }
        }
        if (!bad) {
            if (e->status == KH_SCAN_OK)
                n += (size_t)snprintf(out + n, cap - n, "module\t%s%sok\t%d\t%u.%u\t%s\t%s\t%s\t%s\n", esc[0], head,
                                      e->kind, e->abi_major, e->abi_minor, esc[1], esc[2], esc[3], esc[4]);
            else if (e->status == KH_SCAN_NOENTRY)
                n += (size_t)snprintf(out + n, cap - n, "module\t%s%snoentry\n", esc[0], head);
            else
                n += (size_t)snprintf(out + n, cap - n, "module\t%s%serror\t%s\n", esc[0], head,
                                      esc[5][0] ? esc[5] : "unknown error");
        }
        for (int k = 0; k < 6; k++) free(esc[k]);
        if (bad) {
            free(out);
            return NULL;
        }
    }
    if (len) *len = n;
    return out;
}

// --- the file -------------------------------------------------------------------------------------------------

int kh_modcache_load(kh_modcache *c, const char *file, char *err, size_t errlen) {
    free(c->file);
    if (!(c->file = strdup(file))) {
        snprintf(err, errlen, "%s: out of memory", file);
        return -1;
    }
    FILE *f = kh_fopen_regular(file, err, errlen); /* the cache is never a FIFO or a device */
    if (!f) {
        if (errno == ENOENT) return 0;
        return -1;
    }
    char *buf = malloc(MODCACHE_MAX_BYTES);
    size_t n = buf ? fread(buf, 1, MODCACHE_MAX_BYTES, f) : 0;
    int rd_err = ferror(f), eno = errno;
    fclose(f);
    if (!buf || rd_err) {
        snprintf(err, errlen, "%s: %s", file, buf ? strerror(eno) : "out of memory");
        free(buf);
        return -1;
    }
    int dropped = n == MODCACHE_MAX_BYTES ? 1 : kh_modcache_parse(c, buf, n);
    free(buf);
    if (dropped < 0) {
        snprintf(err, errlen, "%s: out of memory", file);
        return -1;
    }
    /* What was read is clean; anything dropped makes the next save rewrite the file without it. */
    c->dirty = dropped > 0;
    return 0;
}

int kh_modcache_save(kh_modcache *c, char *err, size_t errlen) {
    if (!c->file || !c->dirty) return 0;
    char *dir = strdup(c->file);
    if (!dir) {
        snprintf(err, errlen, "%s: out of memory", c->file);
        return -1;
    }
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = 0;
        if (kh_mkdirs(dir) != 0) {
            snprintf(err, errlen, "%s: cannot create: %s", dir, strerror(errno));
            free(dir);
            return -1;
        }
    }
    free(dir);
    size_t len;
    char *text = kh_modcache_format(c, &len);
    if (!text) {
        snprintf(err, errlen, "%s: out of memory", c->file);
        return -1;
    }
    int rc = kh_write_atomic(c->file, text, len, err, errlen);
    free(text);
    if (rc == 0) c->dirty = 0;
    return rc;
}

char *kh_modcache_default_path(void) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    const char *base = xdg && xdg[0] == '/' ? xdg : NULL, *sub = "/khost/modules.cache";
    if (!base && home && home[0] == '/') base = home, sub = "/.cache/khost/modules.cache";
    if (!base) return NULL;
    size_t n = strlen(base) + strlen(sub) + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s%s", base, sub);
    return p;
}
