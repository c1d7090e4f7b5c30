/* core/modules/registry.c — the INI registry (conf/khost.ini) parsed with inih.
 *
 * inih splits "key = value" lines and finds malformed ones, but its handler gets no line number (Debian
 * builds it with INI_HANDLER_LINENO 0) and is never called for an empty section. So the file is read into
 * memory and handed to ini_parse_stream() line by line through our own reader, which counts lines and
 * notes section headers (exactly as inih recognises them) as they pass: every message can then say
 * file:line, and "[plugin x]" with no keys still registers x. Multi-line values (indented continuation
 * lines) are refused: for a path they are almost always a mistake, and inih would report them as a second
 * value of the same key.
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include "modules/registry.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "khost/abi.h"

/* A registry is a hand-written file of a few hundred lines; anything this large is not one. */
#define REG_MAX_FILE_BYTES (4u << 20)
#define REG_MAX_LINE 65536 /* characters in one line; inih's own buffer is far shorter (long_line) */
#define REG_MAX_NAME 63 /* module names end up in fixed 64-byte fields of results records */

// --- small string helpers ---------------------------------------------------------------------------------

static char *xstrndup(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

static char *xstrdup(const char *s) { return xstrndup(s, strlen(s)); }

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* Collapse "//", "/./" and "dir/.." of an absolute path in place. Lexical on purpose: the base folder
 * already went through realpath(), and the target need not exist yet (results_dir is created later). */
static void normalize_path(char *p) {
    size_t w = 0; /* write position; p[0] is '/' */
    const char *r = p;
    char *out = p;
    while (*r) {
        while (*r == '/') r++;
        if (!*r) break;
        const char *seg = r;
        while (*r && *r != '/') r++;
        size_t len = (size_t)(r - seg);
        if (len == 1 && seg[0] == '.') continue;
        if (len == 2 && seg[0] == '.' && seg[1] == '.') {
            while (w > 0 && out[w - 1] != '/') w--;
            if (w > 0) w--; /* drop the separator too; ".." of "/" stays "/" */
            continue;
        }
        out[w++] = '/';
        memmove(out + w, seg, len);
        w += len;
    }
    if (w == 0) out[w++] = '/';
    out[w] = 0;
}

/* An absolute, normalised path for `rel` seen from folder `base` (itself absolute). */
static char *resolve_path(const char *base, const char *rel) {
    char *p = rel[0] == '/' ? xstrdup(rel) : xasprintf("%s/%s", base, rel);
    if (p) normalize_path(p);
    return p;
}

static int valid_module_name(const char *s) {
    size_t n = 0;
    for (; s[n]; n++)
        if (!(islower((unsigned char)s[n]) || isdigit((unsigned char)s[n]) || s[n] == '_')) return 0;
    return n > 0 && n <= REG_MAX_NAME;
}

/* Copy at most 40 characters of untrusted text for an error message, making control bytes visible. */
static void excerpt(char *dst, size_t n, const char *src, size_t len) {
    size_t w = 0, i = 0;
    for (; i < len && w + 4 < n && i < 40; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[w++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (i < len && w + 4 < n) {
        memcpy(dst + w, "...", 3);
        w += 3;
    }
    dst[w] = 0;
}

// --- parse state -----------------------------------------------------------------------------------------

enum sec_kind { SEC_NONE, SEC_KHOST, SEC_MODULE, SEC_UNKNOWN, SEC_BAD };

typedef struct reg_parse {
    kh_registry *r;
    const char *buf; size_t len, pos; /* the whole file, and how far the reader got */
    int lineno;                       /* line last handed to inih: the one its handler is now seeing */
    int cont_line;                    /* line that inih will treat as a continuation, or 0 */
    int have_prev_key;                /* inih's prev_name is non-empty: indented lines continue it */
    enum sec_kind sec;
    char *sec_name;                   /* normalised section ("khost", "plugin cntk", raw otherwise) */
    char *sec_raw;                    /* as inih passes it to the handler (untrimmed) */
    int module;                       /* index in r->modules for SEC_MODULE */
    int khost_line;                   /* first [khost] header, 0 if none */
    int set_plugin_dirs, set_task_dirs, set_data_dir, set_results_dir, set_device, set_seed;
    int set_strict_modes, set_scan_timeout;
    int err_line;                     /* line of the recorded error; INT_MAX for "no line" errors */
    int nomem;
    char *err;                        /* first error's text */
    size_t errlen;
} reg_parse;

static int set_err(reg_parse *p, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int set_err(reg_parse *p, int line, const char *fmt, ...) {
    /* Keep the earliest: inih reports the first malformed line only after the whole parse. */
    if (p->err_line && line >= p->err_line) return 0;
    p->err_line = line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, p->errlen, fmt, ap);
    va_end(ap);
    return 0;
}

static int oom(reg_parse *p) {
    if (!p->nomem) {
        p->nomem = 1;
        p->err_line = 0; /* out of memory outranks any parse error */
        set_err(p, -1, "%s: out of memory", p->r->file);
    }
    return 0;
}

static void add_warning(reg_parse *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_warning(reg_parse *p, const char *fmt, ...) {
    kh_registry *r = p->r;
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    char **nw = realloc(r->warnings, (size_t)(r->n_warnings + 1) * sizeof *nw);
    if (!nw) {
        oom(p);
        return;
    }
    r->warnings = nw;
    if (!(nw[r->n_warnings] = xstrdup(tmp))) {
        oom(p);
        return;
    }
    r->n_warnings++;
}

// --- the line reader: counts lines and recognises section headers as inih will -----------------------------

static int begin_section(reg_parse *p, const char *raw, size_t rawlen, int line);

/* inih's find_chars_or_comment for "]": stops at ']' or at an inline ';' comment (preceded by space). */
static const char *find_close_bracket(const char *s) {
    int was_space = 0;
    while (*s && *s != ']' && !(was_space && *s == ';')) {
        was_space = isspace((unsigned char)*s);
        s++;
    }
    return s;
}

/* Same, for the "=" or ":" of a key line. */
static const char *find_assign(const char *s) {
    int was_space = 0;
    while (*s && *s != '=' && *s != ':' && !(was_space && *s == ';')) {
        was_space = isspace((unsigned char)*s);
        s++;
    }
    return s;
}

/* Mirror inih's classification of one line (comment, continuation, section, key, malformed) so that
 * section headers and continuation lines are known before its handler runs. `line` is NUL-terminated. */
static void classify_line(reg_parse *p, char *line) {
    char *s = line;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1])) n--;
    int indented = n > 0 && isspace((unsigned char)s[0]);
    while (n > 0 && isspace((unsigned char)*s)) s++, n--;
    char save = s[n];
    s[n] = 0;
    if (n == 0 || *s == ';' || *s == '#') {
        /* comment or blank line */
    } else if (p->have_prev_key && indented) {
        p->cont_line = p->lineno;
    } else if (*s == '[') {
        const char *end = find_close_bracket(s + 1);
        if (*end == ']') {
            p->have_prev_key = 0;
            begin_section(p, s + 1, (size_t)(end - (s + 1)), p->lineno);
        }
    } else if (*find_assign(s)) {
        const char *a = find_assign(s);
        if (*a == '=' || *a == ':') p->have_prev_key = 1;
    }
    s[n] = save;
}

#if INI_HANDLER_LINENO
static int reg_handler(void *user, const char *section, const char *key, const char *value, int lineno);
#else
static int reg_handler(void *user, const char *section, const char *key, const char *value);
#endif

/* A line longer than the buffer of the system's inih (200 bytes in Debian's build; cluster paths are longer)
 * is split here exactly as inih splits a key line (key before the first '=' or ':', value after it, an
 * inline ';' comment after whitespace dropped, both trimmed) and handed to the same handler; inih then sees
 * a blank line. Section headers and comments of that length are not registry lines: refused or skipped. */
static void long_line(reg_parse *p, const char *start, size_t len) {
    char *s = xstrndup(start, len);
    if (!s) {
        oom(p);
        return;
    }
    char *k = s;
    while (*k && isspace((unsigned char)*k)) k++;
    if (*k == ';' || *k == '#') {
        free(s);
        return;
    }
    int indented = k > s;
    classify_line(p, s);
    char *a = (char *)find_assign(k);
    if (*k == '[' || (indented && p->cont_line == p->lineno) || (*a != '=' && *a != ':')) {
        if (p->cont_line == p->lineno)
            set_err(p, p->lineno, "%s:%d: indented line continues a value: multi-line values are not supported",
                    p->r->file, p->lineno);
        else
            set_err(p, p->lineno, "%s:%d: line of %zu characters is not 'key = value'", p->r->file, p->lineno, len);
        free(s);
        return;
    }
    *a = 0;
    char *ke = a;
    while (ke > k && isspace((unsigned char)ke[-1])) *--ke = 0;
    char *v = a + 1;
    while (*v && isspace((unsigned char)*v)) v++;
    char *ve = v;
    for (; *ve; ve++)
        if (*ve == ';' && ve > v && isspace((unsigned char)ve[-1])) break;
    *ve = 0;
    while (ve > v && isspace((unsigned char)ve[-1])) *--ve = 0;
#if INI_HANDLER_LINENO
    reg_handler(p, p->sec_raw ? p->sec_raw : "", k, v, p->lineno);
#else
    reg_handler(p, p->sec_raw ? p->sec_raw : "", k, v);
#endif
    free(s);
}

static char *reg_reader(char *str, int num, void *stream) {
    reg_parse *p = stream;
    if (p->pos >= p->len || num < 3) return NULL;
    const char *start = p->buf + p->pos;
    const char *nl = memchr(start, '\n', p->len - p->pos);
    size_t linelen = nl ? (size_t)(nl - start) + 1 : p->len - p->pos;
    p->pos += linelen;
    p->lineno++;
    /* A line longer than inih's buffer would be split and its tail parsed as a line of its own; a NUL byte
     * would silently cut it. Report both and hand inih a blank line so line numbers stay in step. */
    size_t content = linelen;
    while (content > 0 && (start[content - 1] == '\n' || start[content - 1] == '\r')) content--;
    if (content > (size_t)num - 3 || memchr(start, 0, linelen)) {
        if (memchr(start, 0, linelen))
            set_err(p, p->lineno, "%s:%d: line contains a NUL byte", p->r->file, p->lineno);
        else if (content > REG_MAX_LINE)
            set_err(p, p->lineno, "%s:%d: line longer than %d characters", p->r->file, p->lineno, REG_MAX_LINE);
        else
            long_line(p, start, content);
        memcpy(str, "\n", 2);
        return str;
    }
    /* The line's end may be any run of CR bytes before its LF: only the content and one LF fit inih's buffer. */
    memcpy(str, start, content);
    size_t kept = content;
    if (nl) str[kept++] = '\n';
    str[kept] = 0;
    /* inih skips a UTF-8 byte-order mark on the first line; so must the classification. */
    if (p->lineno == 1 && kept >= 3 && !memcmp(str, "\xEF\xBB\xBF", 3)) classify_line(p, str + 3);
    else classify_line(p, str);
    return str;
}

// --- sections ----------------------------------------------------------------------------------------------

static int begin_section(reg_parse *p, const char *raw, size_t rawlen, int line) {
    kh_registry *r = p->r;
    free(p->sec_name);
    free(p->sec_raw);
    p->sec_name = p->sec_raw = NULL;
    p->sec = SEC_BAD;
    p->module = -1;
    if (!(p->sec_raw = xstrndup(raw, rawlen))) return oom(p);

    /* Split "kind name" on whitespace, ignoring surrounding blanks. */
    const char *s = raw, *e = raw + rawlen;
    while (s < e && isspace((unsigned char)*s)) s++;
    while (e > s && isspace((unsigned char)e[-1])) e--;
    const char *k_end = s;
    while (k_end < e && !isspace((unsigned char)*k_end)) k_end++;
    const char *nm = k_end;
    while (nm < e && isspace((unsigned char)*nm)) nm++;
    size_t klen = (size_t)(k_end - s), nlen = (size_t)(e - nm);
    char shown[64];
    excerpt(shown, sizeof shown, s, (size_t)(e - s));

    int kind = 0;
    if (klen == 6 && !memcmp(s, "plugin", 6)) kind = KH_MODULE_BACKEND;
    if (klen == 4 && !memcmp(s, "task", 4)) kind = KH_MODULE_TASK;

    if (klen == 5 && !memcmp(s, "khost", 5) && nlen == 0) {
        if (p->khost_line) {
            set_err(p, line, "%s:%d: duplicate section [khost] (first at line %d)", r->file, line, p->khost_line);
            return 0;
        }
        p->khost_line = line;
        p->sec = SEC_KHOST;
        if (!(p->sec_name = xstrdup("khost"))) return oom(p);
        return 0;
    }
    if (!kind) {
        add_warning(p, "%s:%d: unknown section [%s] (its keys are ignored)", r->file, line, shown);
        p->sec = SEC_UNKNOWN;
        if (!(p->sec_name = xstrndup(s, (size_t)(e - s)))) return oom(p);
        return 0;
    }
    const char *kword = kind == KH_MODULE_BACKEND ? "plugin" : "task";
    if (nlen == 0) {
        set_err(p, line, "%s:%d: [%s] needs a module name: [%s NAME]", r->file, line, kword, kword);
        return 0;
    }
    char *name = xstrndup(nm, nlen);
    if (!name) return oom(p);
    if (!valid_module_name(name)) {
        char nshown[64];
        excerpt(nshown, sizeof nshown, nm, nlen);
        set_err(p, line, "%s:%d: invalid module name '%s' in [%s] (use 1-%d characters of [a-z0-9_])", r->file,
                line, nshown, shown, REG_MAX_NAME);
        free(name);
        return 0;
    }
    for (int i = 0; i < r->n_modules; i++) {
        if (r->modules[i].kind == kind && !strcmp(r->modules[i].name, name)) {
            set_err(p, line, "%s:%d: duplicate section [%s %s] (first at line %d)", r->file, line, kword, name,
                    r->modules[i].line);
            free(name);
            return 0;
        }
    }
    kh_reg_module *nmods = realloc(r->modules, (size_t)(r->n_modules + 1) * sizeof *nmods);
    if (!nmods) {
        free(name);
        return oom(p);
    }
    r->modules = nmods;
    kh_reg_module *m = &nmods[r->n_modules];
    memset(m, 0, sizeof *m);
    m->name = name;
    m->kind = kind;
    m->enabled = 1;
    m->line = line;
    p->module = r->n_modules++;
    p->sec = SEC_MODULE;
    if (!(p->sec_name = xasprintf("%s %s", kword, name))) return oom(p);
    return 0;
}

// --- values ------------------------------------------------------------------------------------------------

static int parse_bool(const char *v, int *out) {
    static const char *const yes[] = {"true", "1", "yes", "on"}, *const no[] = {"false", "0", "no", "off"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
        if (!strcmp(v, yes[i])) return *out = 1, 0;
        if (!strcmp(v, no[i])) return *out = 0, 0;
    }
    return -1;
}

/* ':'-separated list of folders, each resolved; empty entries are skipped. */
static int parse_dirs(reg_parse *p, const char *v, char ***out, int *n_out) {
    for (int i = 0; i < *n_out; i++) free((*out)[i]);
    free(*out);
    *out = NULL;
    *n_out = 0;
    const char *s = v;
    while (*s) {
        const char *e = strchr(s, ':');
        if (!e) e = s + strlen(s);
        const char *a = s, *b = e;
        while (a < b && isspace((unsigned char)*a)) a++;
        while (b > a && isspace((unsigned char)b[-1])) b--;
        if (b > a) {
            char *rel = xstrndup(a, (size_t)(b - a));
            char *abs = rel ? resolve_path(p->r->dir, rel) : NULL;
            free(rel);
            char **nv = abs ? realloc(*out, (size_t)(*n_out + 1) * sizeof *nv) : NULL;
            if (!nv) {
                free(abs);
                return -1;
            }
            *out = nv;
            nv[(*n_out)++] = abs;
        }
        s = *e ? e + 1 : e;
    }
    return 0;
}

/* Defaults follow the conventions of an installed program: data under $XDG_DATA_HOME/khost
 * (~/.local/share/khost), results in ./results of the working directory. Never a folder beside the
 * registry, which for an installed khost is inside the installation. -1 when out of memory. */
static int default_data_dir(char **dst) {
    const char *x = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    char buf[4200];
    if (x && x[0] == '/') snprintf(buf, sizeof buf, "%s/khost", x); /* relative values are ignored (XDG spec) */
    else snprintf(buf, sizeof buf, "%s/.local/share/khost", home && *home ? home : "");
    normalize_path(buf);
    return (*dst = xstrdup(buf)) ? 0 : -1;
}

static int default_results_dir(char **dst) {
    char cwd[4096], buf[4200];
    if (!getcwd(cwd, sizeof cwd)) snprintf(cwd, sizeof cwd, ".");
    snprintf(buf, sizeof buf, "%s/results", cwd);
    if (buf[0] == '/') normalize_path(buf);
    return (*dst = xstrdup(buf)) ? 0 : -1;
}

static int set_resolved(reg_parse *p, char **dst, const char *v) {
    char *abs = resolve_path(p->r->dir, v);
    if (!abs) return -1;
    free(*dst);
    *dst = abs;
    return 0;
}

static int khost_key(reg_parse *p, const char *key, const char *v, int line) {
    kh_registry *r = p->r;
    const char *f = r->file;
    int rc = 0;
    if (!strcmp(key, "plugin_dirs")) {
        rc = parse_dirs(p, v, &r->plugin_dirs, &r->n_plugin_dirs);
        p->set_plugin_dirs = 1;
    } else if (!strcmp(key, "task_dirs")) {
        rc = parse_dirs(p, v, &r->task_dirs, &r->n_task_dirs);
        p->set_task_dirs = 1;
    } else if (!strcmp(key, "data_dir") || !strcmp(key, "results_dir")) {
        if (!*v) return set_err(p, line, "%s:%d: %s is empty", f, line, key);
        int data = key[0] == 'd';
        rc = set_resolved(p, data ? &r->data_dir : &r->results_dir, v);
        *(data ? &p->set_data_dir : &p->set_results_dir) = 1;
    } else if (!strcmp(key, "default_device")) {
        if (!*v) return set_err(p, line, "%s:%d: default_device is empty", f, line);
        char *d = xstrdup(v);
        if (!d) return oom(p);
        free(r->default_device);
        r->default_device = d;
        p->set_device = 1;
    } else if (!strcmp(key, "seed")) {
        char *end = NULL;
        errno = 0;
        unsigned long long s = isdigit((unsigned char)v[0]) ? strtoull(v, &end, 10) : 0;
        if (!end || *end || errno) {
            char shown[64];
            excerpt(shown, sizeof shown, v, strlen(v));
            return set_err(p, line, "%s:%d: seed '%s' is not an unsigned 64-bit integer", f, line, shown);
        }
        r->seed = (uint64_t)s;
        p->set_seed = 1;
    } else if (!strcmp(key, "strict_modes")) {
        if (parse_bool(v, &r->strict_modes)) {
            char shown[64];
            excerpt(shown, sizeof shown, v, strlen(v));
            return set_err(p, line, "%s:%d: strict_modes = '%s': expected true/false, yes/no, on/off or 1/0", f,
                           line, shown);
        }
        p->set_strict_modes = 1;
    } else if (!strcmp(key, "scan_timeout")) {
        char *end = NULL;
        errno = 0;
        double t = isdigit((unsigned char)v[0]) ? strtod(v, &end) : 0;
        if (!end || *end || errno || !(t > 0 && t <= 3600)) {
            char shown[64];
            excerpt(shown, sizeof shown, v, strlen(v));
            return set_err(p, line, "%s:%d: scan_timeout '%s' is not a number of seconds in (0, 3600]", f, line,
                           shown);
        }
        r->scan_timeout = t;
        p->set_scan_timeout = 1;
    } else if (!strcmp(key, "module_cache")) {
        if (!*v) return set_err(p, line, "%s:%d: module_cache is empty", f, line);
        rc = set_resolved(p, &r->module_cache, v);
    } else {
        char shown[64];
        excerpt(shown, sizeof shown, key, strlen(key));
        add_warning(p, "%s:%d: unknown key '%s' in [khost]", f, line, shown);
    }
    return rc ? oom(p) : 0;
}

static int module_key(reg_parse *p, const char *key, const char *v, int line) {
    kh_reg_module *m = &p->r->modules[p->module];
    const char *f = p->r->file;
    if (!strcmp(key, "path")) {
        if (!*v) return set_err(p, line, "%s:%d: path is empty in [%s]", f, line, p->sec_name);
        if (set_resolved(p, &m->path, v)) return oom(p);
    } else if (!strcmp(key, "enabled")) {
        if (parse_bool(v, &m->enabled)) {
            char shown[64];
            excerpt(shown, sizeof shown, v, strlen(v));
            set_err(p, line, "%s:%d: enabled = '%s' in [%s]: expected true/false, yes/no, on/off or 1/0", f, line,
                    shown, p->sec_name);
        }
    }
    /* Other keys are the module's own configuration: kept in kv, read through config_get. */
    return 0;
}

#if INI_HANDLER_LINENO
static int reg_handler(void *user, const char *section, const char *key, const char *value, int lineno)
#else
static int reg_handler(void *user, const char *section, const char *key, const char *value)
#endif
{
    reg_parse *p = user;
    kh_registry *r = p->r;
    int line = p->lineno;
#if INI_HANDLER_LINENO
    line = lineno; /* the library's own count, equal to ours */
#endif
    if (p->nomem) return 1;
    if (!value) value = ""; /* INI_ALLOW_NO_VALUE builds */
    char kshown[64];
    excerpt(kshown, sizeof kshown, key, strlen(key));
    if (line == p->cont_line) {
        set_err(p, line, "%s:%d: indented line continues the value of '%s': multi-line values are not supported",
                r->file, line, kshown);
        return 1;
    }
    if (!*key) {
        set_err(p, line, "%s:%d: missing key before '='", r->file, line);
        return 1;
    }
    /* Our reader and inih must agree on the section; they can only differ on input we do not foresee. */
    /* inih keeps only the first 49 bytes of a section name, hence the prefix comparison. */
    if (p->sec != SEC_NONE && (!p->sec_raw || strncmp(section, p->sec_raw, strlen(section)))) {
        set_err(p, line, "%s:%d: cannot tell which section this line belongs to", r->file, line);
        return 1;
    }
    if (p->sec == SEC_NONE) {
        add_warning(p, "%s:%d: key '%s' outside any section is ignored", r->file, line, kshown);
        return 1;
    }
    if (p->sec == SEC_BAD) return 1; /* the header's error is already recorded */

    for (int i = 0; i < r->n_kv; i++) {
        if (!strcmp(r->kv[i].section, p->sec_name) && !strcmp(r->kv[i].key, key)) {
            set_err(p, line, "%s:%d: duplicate key '%s' in [%s] (first at line %d)", r->file, line, kshown,
                    p->sec_name, r->kv[i].line);
            return 1;
        }
    }
    kh_reg_kv *nkv = realloc(r->kv, (size_t)(r->n_kv + 1) * sizeof *nkv);
    if (!nkv) return oom(p), 1;
    r->kv = nkv;
    kh_reg_kv *kv = &nkv[r->n_kv];
    kv->section = xstrdup(p->sec_name);
    kv->key = xstrdup(key);
    kv->value = xstrdup(value);
    kv->line = line;
    r->n_kv++;
    if (!kv->section || !kv->key || !kv->value) return oom(p), 1;

    if (p->sec == SEC_KHOST) khost_key(p, key, value, line);
    else if (p->sec == SEC_MODULE) module_key(p, key, value, line);
    return 1;
}

/* Explain a line inih refused (it only says which). */
static void describe_malformed(reg_parse *p, int line) {
    const char *s = p->buf, *end = p->buf + p->len;
    for (int l = 1; l < line && s < end; l++) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        s = nl ? nl + 1 : end;
    }
    const char *e = memchr(s, '\n', (size_t)(end - s));
    if (!e) e = end;
    while (s < e && isspace((unsigned char)*s)) s++;
    while (e > s && isspace((unsigned char)e[-1])) e--;
    char shown[64];
    excerpt(shown, sizeof shown, s, (size_t)(e - s));
    if (s < e && *s == '[')
        set_err(p, line, "%s:%d: malformed section header '%s' (no closing ']')", p->r->file, line, shown);
    else
        set_err(p, line, "%s:%d: malformed line '%s' (expected 'key = value' or '[section]')", p->r->file, line,
                shown);
}

// --- public ------------------------------------------------------------------------------------------------

static int read_all(const char *path, char **out, size_t *len, char *err, size_t errlen) {
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; only a regular file is a registry. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    memset(&st, 0, sizeof st);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: %s", path,
                 S_ISDIR(st.st_mode) ? "is a directory, not a registry file" : "not a regular file: not a registry");
        close(fd);
        return -1;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            if (cap >= REG_MAX_FILE_BYTES) {
                snprintf(err, errlen, "%s: larger than %u bytes: not a registry", path, REG_MAX_FILE_BYTES);
                goto fail;
            }
            size_t ncap = cap ? cap * 2 : 4096;
            char *nb = realloc(buf, ncap);
            if (!nb) {
                snprintf(err, errlen, "%s: out of memory", path);
                goto fail;
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        snprintf(err, errlen, "%s: read error: %s", path, strerror(errno));
        goto fail;
    }
    fclose(f);
    *out = buf;
    *len = n;
    return 0;
fail:
    free(buf);
    fclose(f);
    return -1;
}

int kh_registry_load(const char *path, kh_registry *out, char *err, size_t errlen) {
    char dummy[8];
    if (!err || !errlen) err = dummy, errlen = sizeof dummy;
    err[0] = 0;
    memset(out, 0, sizeof *out);
    if (!path || !*path) {
        snprintf(err, errlen, "registry path is empty");
        return -1;
    }
    char *buf = NULL;
    size_t len = 0;
    if (read_all(path, &buf, &len, err, errlen)) return -1;

    reg_parse p;
    memset(&p, 0, sizeof p);
    p.r = out;
    p.buf = buf;
    p.len = len;
    p.err = err;
    p.errlen = errlen;
    p.module = -1;

    /* The file exists (we just read it): realpath only fails now on memory or a race. */
    out->file = realpath(path, NULL);
    if (!out->file) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        free(buf);
        return -1;
    }
    char *slash = strrchr(out->file, '/');
    out->dir = slash == out->file ? xstrdup("/") : xstrndup(out->file, (size_t)(slash - out->file));
    if (!out->dir) {
        oom(&p);
    } else {
        int rc = ini_parse_stream(reg_reader, &p, reg_handler, &p);
        if (rc == -2 || rc == -1) oom(&p);
        else if (rc > 0 && !p.nomem) describe_malformed(&p, rc);
    }

    /* Defaults for what [khost] left out; relative ones, like the file's own, resolve against its folder. */
    if (!p.err_line) {
        if (!p.set_plugin_dirs && parse_dirs(&p, "plugins", &out->plugin_dirs, &out->n_plugin_dirs)) oom(&p);
        if (!p.set_task_dirs && parse_dirs(&p, "tasks", &out->task_dirs, &out->n_task_dirs)) oom(&p);
        if (!p.set_data_dir && default_data_dir(&out->data_dir)) oom(&p);
        if (!p.set_results_dir && default_results_dir(&out->results_dir)) oom(&p);
        if (!p.set_device && !(out->default_device = xstrdup("auto"))) oom(&p);
        if (!p.set_seed) out->seed = 1;
        if (!p.set_strict_modes) out->strict_modes = 1;
        if (!p.set_scan_timeout) out->scan_timeout = 10.0;
    }
    free(p.sec_name);
    free(p.sec_raw);
    free(buf);
    if (p.err_line) {
        kh_registry_free(out);
        return -1;
    }
    return 0;
}

void kh_registry_free(kh_registry *r) {
    if (!r) return;
    free(r->file);
    free(r->dir);
    for (int i = 0; i < r->n_plugin_dirs; i++) free(r->plugin_dirs[i]);
    free(r->plugin_dirs);
    for (int i = 0; i < r->n_task_dirs; i++) free(r->task_dirs[i]);
    free(r->task_dirs);
    free(r->data_dir);
    free(r->results_dir);
    free(r->default_device);
    free(r->module_cache);
    for (int i = 0; i < r->n_modules; i++) {
        free(r->modules[i].name);
        free(r->modules[i].path);
    }
    free(r->modules);
    for (int i = 0; i < r->n_kv; i++) {
        free(r->kv[i].section);
        free(r->kv[i].key);
        free(r->kv[i].value);
    }
    free(r->kv);
    for (int i = 0; i < r->n_warnings; i++) free(r->warnings[i]);
    free(r->warnings);
    memset(r, 0, sizeof *r);
}

const char *kh_registry_get(const kh_registry *r, const char *section, const char *key) {
    if (!r || !section || !key) return NULL;
    for (int i = 0; i < r->n_kv; i++)
        if (!strcmp(r->kv[i].section, section) && !strcmp(r->kv[i].key, key)) return r->kv[i].value;
    return NULL;
}

char *kh_registry_locate(const char *exe_path, char *err, size_t errlen) {
    char dummy[8];
    if (!err || !errlen) err = dummy, errlen = sizeof dummy;
    err[0] = 0;
    const char *env = getenv("KHOST_CONF");
    if (env && *env) {
        /* An explicit choice is never second-guessed by falling back to another file. */
        char *p = realpath(env, NULL);
        if (!p) snprintf(err, errlen, "KHOST_CONF=%s: cannot open: %s", env, strerror(errno));
        return p;
    }
    char *exe = NULL;
    if (exe_path && *exe_path) exe = realpath(exe_path, NULL);
    if (!exe) exe = realpath("/proc/self/exe", NULL);
    if (!exe) {
        snprintf(err, errlen, "no registry: KHOST_CONF is unset and the khost binary's folder is unknown (%s)",
                 exe_path ? exe_path : "no path");
        return NULL;
    }
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    char *tried[2] = {xasprintf("%s/khost.ini", *exe ? exe : ""),
                      xasprintf("%s/../lib/khost/khost.ini", *exe ? exe : "")};
    free(exe);
    char *found = NULL;
    if (!tried[0] || !tried[1]) {
        snprintf(err, errlen, "locating the registry: out of memory");
    } else {
        for (int i = 0; i < 2 && !found; i++) {
            normalize_path(tried[i]);
            if (access(tried[i], R_OK) == 0) found = realpath(tried[i], NULL);
        }
        if (!found)
            snprintf(err, errlen, "no registry found: KHOST_CONF is unset, tried %s and %s", tried[0], tried[1]);
    }
    free(tried[0]);
    free(tried[1]);
    return found;
}
