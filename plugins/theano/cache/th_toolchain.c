/* plugins/theano/cache/th_toolchain.c — compiler identity, -march=native resolution, the C builder. */
#define _GNU_SOURCE /* realpath */
#include "th_toolchain.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "th_spawn.h"

#define NOT_FOUND_FMT "theano: C compiler '%s' not found (set [plugin theano] cc = /path/to/compiler in khost.ini)"

/* --- growable text --------------------------------------------------------------------------------------- */
typedef struct {
    char *s;
    size_t len, cap;
    int oom;
} tbuf;

static void tb_add(tbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->oom = 1;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}
static void tb_str(tbuf *b, const char *s) { tb_add(b, s, strlen(s)); }

/* --- PATH lookup ------------------------------------------------------------------------------------------- */
static int is_exec_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

/* malloc'ed path of the executable, or NULL (errno ENOENT when not found, ENOMEM). */
static char *find_program(const char *name) {
    if (strchr(name, '/')) {
        if (!is_exec_file(name)) {
            errno = ENOENT;
            return NULL;
        }
        return strdup(name);
    }
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path;;) {
        const char *colon = strchr(p, ':');
        size_t n = colon ? (size_t)(colon - p) : strlen(p);
        size_t need = (n ? n : 1) + 1 + strlen(name) + 1;
        char *cand = malloc(need);
        if (!cand) return NULL;
        snprintf(cand, need, "%.*s/%s", (int)(n ? n : 1), n ? p : ".", name);
        if (is_exec_file(cand)) return cand;
        free(cand);
        if (!colon) break;
        p = colon + 1;
    }
    errno = ENOENT;
    return NULL;
}

/* The compiler's diagnostic, at most 300 bytes, in buf: the first line with "error:" (gcc and clang write
 * "cc1: error: ...", "gcc: error: ..."), else the first line containing "error" that is not the "Configured
 * with:" banner of `cc -v` (which holds --disable-werror), else the first non-blank line. */
static void first_error_line(const char *text, char *buf, size_t buflen) {
    const char *pick = NULL, *loose = NULL, *first = NULL;
    for (const char *l = text; l && *l;) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) : strlen(l);
        if (!first && n > 0 && strspn(l, " \t") < n) first = l;
        if (memmem(l, n, "error:", 6)) {
            pick = l;
            break;
        }
        if (!loose && memmem(l, n, "error", 5) && strncmp(l, "Configured with:", 16)) loose = l;
        l = nl ? nl + 1 : NULL;
    }
    if (!pick) pick = loose;
    if (!pick) pick = first;
    if (!pick) {
        snprintf(buf, buflen, "no output");
        return;
    }
    size_t n = strcspn(pick, "\n");
    if (n > 300) n = 300;
    snprintf(buf, buflen, "%.*s", (int)n, pick);
}

/* --- -march=native ----------------------------------------------------------------------------------------- */
static int is_native_flag(const char *f) {
    return (!strncmp(f, "-march=", 7) || !strncmp(f, "-mtune=", 7) || !strncmp(f, "-mcpu=", 6)) &&
           !strcmp(strchr(f, '=') + 1, "native");
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Splits a line at blanks into malloc'ed tokens (one surrounding pair of double quotes removed). */
static char **split_blanks(const char *s, size_t n, size_t *count) {
    size_t cap = 16, k = 0;
    char **v = malloc(cap * sizeof *v);
    if (!v) return NULL;
    size_t i = 0;
    while (i < n) {
        while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
        if (i >= n) break;
        size_t j = i;
        while (j < n && s[j] != ' ' && s[j] != '\t') j++;
        size_t a = i, b = j;
        if (b - a >= 2 && s[a] == '"' && s[b - 1] == '"') a++, b--;
        if (k + 2 > cap) {
            char **nv = realloc(v, cap * 2 * sizeof *v);
            if (!nv) goto oom;
            v = nv;
            cap *= 2;
        }
        if (!(v[k] = strndup(s + a, b - a))) goto oom;
        k++;
        i = j;
    }
    v[k] = NULL;
    *count = k;
    return v;
oom:
    for (size_t q = 0; q < k; q++) free(v[q]);
    free(v);
    return NULL;
}

static void free_tokens(char **v, size_t n) {
    if (!v) return;
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

/* The target options of the cc1 line in the output of `cc FLAGS -E -v`, one per line, into out.
 * Returns 1 found, 0 no cc1 line / no target options, -1 out of memory. */
static int native_target(const char *verbose, tbuf *out) {
    for (const char *l = verbose; l && *l;) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) : strlen(l);
        size_t nt = 0;
        char **t = NULL;
        int clang = memmem(l, n, " -cc1 ", 6) != NULL;
        int gcc = 0;
        if (!clang) {
            size_t first = strspn(l, " ");
            size_t w = strcspn(l + first, " \n");
            gcc = w >= 3 && !strncmp(l + first + w - 3, "cc1", 3) && (w == 3 || l[first + w - 4] == '/');
        }
        if (clang || gcc) {
            if (!(t = split_blanks(l, n, &nt))) return -1;
            size_t nlines = 0;
            char **lines = calloc(nt + 1, sizeof *lines);
            if (!lines) {
                free_tokens(t, nt);
                return -1;
            }
            int oom = 0;
            for (size_t i = 1; i < nt && !oom; i++) {
                const char *a = t[i];
                char *line = NULL;
                if (clang && i + 1 < nt &&
                    (!strcmp(a, "-target-cpu") || !strcmp(a, "-target-feature") || !strcmp(a, "-tune-cpu"))) {
                    size_t m = strlen(a) + 1 + strlen(t[i + 1]) + 1;
                    if ((line = malloc(m))) snprintf(line, m, "%s %s", a, t[i + 1]);
                    i++;
                } else if (gcc && !strcmp(a, "--param") && i + 1 < nt) {
                    size_t m = strlen(a) + 1 + strlen(t[i + 1]) + 1;
                    if ((line = malloc(m))) snprintf(line, m, "%s %s", a, t[i + 1]);
                    i++;
                } else if (gcc && (!strncmp(a, "-m", 2) || !strncmp(a, "--param=", 8))) {
                    line = strdup(a);
                } else {
                    continue;
                }
                if (!line) oom = 1;
                else lines[nlines++] = line;
            }
            if (!oom && clang) qsort(lines, nlines, sizeof *lines, cmp_str);
            for (size_t i = 0; i < nlines; i++) {
                tb_str(out, lines[i]);
                tb_str(out, "\n");
            }
            free_tokens(lines, nlines);
            free_tokens(t, nt);
            if (oom || out->oom) return -1;
            return nlines > 0;
        }
        l = nl ? nl + 1 : NULL;
    }
    return 0;
}

/* --- probe ------------------------------------------------------------------------------------------------- */
typedef struct memo {
    struct memo *next;
    char *cc, *flags;
    th_toolchain tc;
} memo;

static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;
static memo *memo_head;

static void memo_free(memo *m) {
    if (!m) return;
    free(m->cc);
    free(m->flags);
    free((char *)m->tc.path);
    free((char *)m->tc.identity);
    free((char *)m->tc.resolved_flags);
    free_tokens((char **)m->tc.argv_flags, m->tc.nflags);
    free(m);
}

/* The probes live as long as the library that made them: released when it is unloaded (a plugin is dlclosed
 * at exit), so no probe outlives the code that owns it and leak checkers see them freed. */
__attribute__((destructor)) static void memo_release(void) {
    pthread_mutex_lock(&memo_lock);
    while (memo_head) {
        memo *next = memo_head->next;
        memo_free(memo_head);
        memo_head = next;
    }
    pthread_mutex_unlock(&memo_lock);
}

static memo *probe(const char *cc, const char *flags, char *err, size_t errlen) {
    memo *m = calloc(1, sizeof *m);
    char *vout = NULL, *eout = NULL;
    char **argv = NULL;
    tbuf id = {0}, rf = {0};
    if (!m || !(m->cc = strdup(cc)) || !(m->flags = strdup(flags))) goto oom;
    m->tc.cc = m->cc;
    m->tc.flags = m->flags;
    char *path = find_program(cc);
    if (!path) {
        if (errno == ENOMEM) goto oom;
        snprintf(err, errlen, NOT_FOUND_FMT, cc);
        goto fail;
    }
    m->tc.path = path;
    size_t nf = 0;
    char **fv = split_blanks(flags, strlen(flags), &nf);
    if (!fv) goto oom;
    m->tc.argv_flags = fv;
    m->tc.nflags = nf;

    /* identity: the real path and `cc -v` */
    char real[PATH_MAX];
    tb_str(&id, "path ");
    tb_str(&id, realpath(path, real) ? real : path);
    tb_str(&id, "\n");
    char *vargv[] = {(char *)cc, (char *)"-v", NULL};
    int st = 0;
    char why[128];
    if (th_spawn(path, vargv, &vout, NULL, &st, err, errlen) != 0) {
        if (errno == ENOENT) snprintf(err, errlen, NOT_FOUND_FMT, cc);
        goto fail;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        char line[320];
        first_error_line(vout, line, sizeof line);
        th_spawn_describe(st, why, sizeof why);
        snprintf(err, errlen, "theano: C compiler '%s': '%s -v' failed (%s): %s", cc, cc, why, line);
        goto fail;
    }
    tb_str(&id, vout);

    /* the flags, checked by the compiler, with native resolved from its cc1 line */
    if (!(argv = calloc(nf + 9, sizeof *argv))) goto oom;
    size_t k = 0;
    argv[k++] = (char *)cc;
    for (size_t i = 0; i < nf; i++) argv[k++] = fv[i];
    const char *tail[] = {"-E", "-v", "-x", "c", "/dev/null", "-o", "/dev/null"};
    for (size_t i = 0; i < sizeof tail / sizeof *tail; i++) argv[k++] = (char *)tail[i];
    argv[k] = NULL;
    if (th_spawn(path, argv, &eout, NULL, &st, err, errlen) != 0) {
        if (errno == ENOENT) snprintf(err, errlen, NOT_FOUND_FMT, cc);
        goto fail;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        char line[320];
        first_error_line(eout, line, sizeof line);
        th_spawn_describe(st, why, sizeof why);
        snprintf(err, errlen, "theano: C compiler '%s' rejects the flags '%s' (%s): %s", cc, flags, why, line);
        goto fail;
    }
    int native_done = 0;
    for (size_t i = 0; i < nf; i++) {
        if (!is_native_flag(fv[i])) {
            tb_str(&rf, fv[i]);
            tb_str(&rf, "\n");
            continue;
        }
        if (native_done) continue; /* one resolution covers -march and -mtune */
        int r = native_target(eout, &rf);
        if (r < 0) goto oom;
        if (r == 0) {
            snprintf(err, errlen,
                     "theano: cannot tell what %s means for C compiler '%s' (no target options on the cc1 line "
                     "of '%s -E -v'); give an explicit -march in [plugin theano] flags",
                     fv[i], cc, cc);
            goto fail;
        }
        native_done = 1;
    }
    if (!rf.s) tb_str(&rf, "");
    if (id.oom || rf.oom) goto oom;
    m->tc.identity = id.s;
    m->tc.resolved_flags = rf.s;
    free(vout);
    free(eout);
    free(argv);
    return m;
oom:
    snprintf(err, errlen, "theano: probing C compiler '%s': out of memory", cc);
fail:
    free(vout);
    free(eout);
    free(argv);
    free(id.s);
    free(rf.s);
    memo_free(m);
    return NULL;
}

const th_toolchain *th_toolchain_probe(const char *cc, const char *flags, char *err, size_t errlen) {
    if (!cc || !*cc) cc = "cc";
    if (!flags) flags = "";
    pthread_mutex_lock(&memo_lock);
    memo *m = memo_head;
    while (m && (strcmp(m->cc, cc) != 0 || strcmp(m->flags, flags) != 0)) m = m->next;
    if (!m && (m = probe(cc, flags, err, errlen))) {
        m->next = memo_head;
        memo_head = m;
    }
    pthread_mutex_unlock(&memo_lock);
    return m ? &m->tc : NULL;
}

/* --- the C builder ----------------------------------------------------------------------------------------- */
static char *read_head(const char *path, size_t max) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(max + 1);
    size_t n = buf ? fread(buf, 1, max, f) : 0;
    fclose(f);
    if (buf) buf[n] = 0;
    return buf;
}

int th_toolchain_build_so(void *ctx, const char *src_path, const char *out_path, const char *log_path, char *err,
                          size_t errlen) {
    const th_toolchain *tc = ctx;
    char **argv = calloc(tc->nflags + 8, sizeof *argv);
    if (!argv) {
        snprintf(err, errlen, "theano: compiling %s: out of memory", src_path);
        return -1;
    }
    size_t k = 0;
    argv[k++] = (char *)tc->cc;
    for (size_t i = 0; i < tc->nflags; i++) argv[k++] = tc->argv_flags[i];
    argv[k++] = (char *)"-shared";
    argv[k++] = (char *)"-fPIC";
    argv[k++] = (char *)"-o";
    argv[k++] = (char *)out_path;
    argv[k++] = (char *)src_path;
    argv[k] = NULL;
    int st = 0;
    char serr[512];
    int rc = th_spawn(tc->path, argv, NULL, log_path, &st, serr, sizeof serr);
    free(argv);
    if (rc != 0) {
        if (errno == ENOENT) snprintf(err, errlen, NOT_FOUND_FMT, tc->cc);
        else snprintf(err, errlen, "theano: %s", serr);
        return -1;
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    char why[128], line[320];
    th_spawn_describe(st, why, sizeof why);
    char *log = read_head(log_path, 16384);
    first_error_line(log ? log : "", line, sizeof line);
    free(log);
    snprintf(err, errlen, "theano: %s failed on %s: %s (%s; full output in %s)", tc->cc, src_path, line, why,
             log_path);
    return -1;
}
