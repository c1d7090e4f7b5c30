/* core/modules/loader.c — discovery of backend and task modules: the registry's and the search folders', each file
 * vetted, inspected in a child (scan.c) or known from the cache, then loaded through module.c.
 *
 * Choices the interface leaves open, and why:
 *  - Discovery lists; it opens nothing (kh_modules_index). A module is opened in this process when a command
 *    names it, or when a command over every module (--list, "all") loads them: a `khost run --plugin cntk`
 *    maps neither tensorflow.so nor theano.so, nor whatever they link. The inspection (child or cache) already
 *    gave each file's name and kind, so names, kinds and registry sections are checked when listing; a file
 *    whose declared name or kind changed by the time it is opened is refused.
 *  - A module whose registry section says enabled = false is still listed, marked enabled = 0:
 *    `khost --list` can then show its version, and `--plugin x` may still name it explicitly; only "all"
 *    selections skip it.
 *  - A module found in a search folder is taken with the kind it declares: plugin_dirs and task_dirs say
 *    where to look, not what must be there. Only a registry section insists on a kind ([plugin x] naming a
 *    task is an error).
 *  - A registry section's name must equal the name the module declares: modules are found, configured
 *    (config_get("plugin NAME", ...)) and recorded under that one name.
 *  - The api table is copied into a host-owned, full-size struct with the members beyond the module's
 *    struct_size zeroed, so callers may test optional members (probes, augment, ...) against NULL without
 *    reading past an older module's table. Its struct_size stays the module's own.
 *  - Names are unique across both kinds (khost/abi.h): results and --list key everything by name.
 *  - ms->v never moves once modules are listed: discovery reserves a slot for every listed module and
 *    KH_MODULES_SPARE more for loads by path, so a kh_module pointer stays valid until kh_modules_free.
 *  - Every file goes through vet_and_load: ownership/modes, then the cache or a child's inspection, then
 *    dlopen here. A file that changes between its inspection and the dlopen is a race this does not
 *    close; the rule keeps strangers from writing there, which is what makes that race harmless.
 */
#define _GNU_SOURCE /* dladdr, realpath */
#include "base/grow.h"
#include "modules/loader.h"
#include "modules/layer_abi.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "modules/modperm.h"
#include "modules/scan.h"
#include "khost/kit/pathtrust.h"

#define KH_MODULES_SPARE 8

// --- helpers --------------------------------------------------------------------------------------------------


static const char *section_word(int kind) { return kind == KH_MODULE_BACKEND ? "plugin" : "task"; }

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static void logf_host(const kh_host_api *host, kh_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void logf_host(const kh_host_api *host, kh_log_level level, const char *fmt, ...) {
    if (!host || !host->log) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    host->log(level, "khost", "%s", msg);
}

/* The safe way in: modes and ownership, then what a child learned about this very file (from the cache, or
 * inspecting it now). Nothing is opened in this process. 0 when it inspected clean: *real (malloc'ed realpath),
 * *kind and *name (malloc'ed) as the module declared them; else -1 with err (and *no_entry for a plain
 * library). */
static int vet(kh_modules *ms, const char *path, const kh_host_api *host, char **real_out, int *kind, char **name,
               char *err, size_t errlen, int *no_entry) {
    *no_entry = 0;
    *real_out = *name = NULL;
    if (!path || !*path) {
        snprintf(err, errlen, "no module path given");
        return -1;
    }
    char *real = realpath(path, NULL);
    struct stat st;
    if (!real || stat(real, &st) != 0) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        free(real);
        return -1;
    }
    if (!ms->lax_modes && kh_modperm_check(real, err, errlen) != 0) {
        free(real);
        return -1;
    }
    const kh_modcache_entry *known = kh_modcache_lookup(&ms->cache, real, &st);
    kh_modcache_entry fresh;
    memset(&fresh, 0, sizeof fresh);
    if (!known) {
        logf_host(host, KH_LOG_DEBUG, "%s: inspecting in a child process", real);
        int cacheable = kh_scan_inspect(real, ms->scan_timeout, &fresh) == 0;
        fresh.path = real;
        fresh.size = (int64_t)st.st_size;
        fresh.mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + (int64_t)st.st_mtim.tv_nsec;
        fresh.dev = (uint64_t)st.st_dev;
        fresh.ino = (uint64_t)st.st_ino;
        if (cacheable && kh_modcache_put(&ms->cache, &fresh) != 0)
            logf_host(host, KH_LOG_WARN, "%s: out of memory caching its inspection", real);
        fresh.path = NULL;
        known = &fresh;
    }
    int rc = -1;
    if (known->status == KH_SCAN_NOENTRY) {
        *no_entry = 1;
        snprintf(err, errlen, "%s: no entry symbol %s: not a khost module", real, KH_ENTRY_NAME);
    } else if (known->status != KH_SCAN_OK) {
        snprintf(err, errlen, "%s", known->message && *known->message ? known->message : "inspection failed");
    } else if (!(*name = strdup(known->name ? known->name : ""))) {
        snprintf(err, errlen, "%s: out of memory", real);
    } else {
        *kind = known->kind;
        *real_out = real;
        real = NULL;
        rc = 0;
    }
    kh_modcache_entry_free(&fresh);
    free(real);
    return rc;
}

/* vet, then dlopen here. Same contract as kh_module_load_ex. */
static int vet_and_load(kh_modules *ms, const char *path, const kh_host_api *host, kh_module *out, char *err,
                        size_t errlen, int *no_entry) {
    memset(out, 0, sizeof *out);
    char *real, *name;
    int kind;
    if (vet(ms, path, host, &real, &kind, &name, err, errlen, no_entry) != 0) return -1;
    int rc = kh_module_load_ex(real, host, out, no_entry, err, errlen);
    free(name);
    free(real);
    return rc;
}

/* Write the cache when it changed; a cache that cannot be written costs only speed, so say it once. */
static void save_cache(kh_modules *ms, const kh_host_api *host) {
    static int warned;
    char err[1200];
    if (kh_modcache_save(&ms->cache, err, sizeof err) != 0 && !warned) {
        warned = 1;
        logf_host(host, KH_LOG_WARN, "module cache: %s (modules will be inspected again next time)", err);
    }
}


// --- the module list ------------------------------------------------------------------------------------------

static void add_error(kh_modules *ms, const kh_host_api *host, const char *path, const char *msg) {
    kh_load_error *ne = realloc(ms->errors, (size_t)(ms->n_errors + 1) * sizeof *ne);
    char *p = strdup(path ? path : ""), *m = strdup(msg);
    if (!ne || !p || !m) {
        if (ne) ms->errors = ne;
        free(p);
        free(m);
        logf_host(host, KH_LOG_ERROR, "out of memory recording: %s", msg);
        return;
    }
    ms->errors = ne;
    ne[ms->n_errors].path = p;
    ne[ms->n_errors].message = m;
    ms->n_errors++;
}

static kh_module *find_by_name(kh_modules *ms, const char *name) {
    for (int i = 0; i < ms->n; i++)
        if (!strcmp(ms->v[i].desc->name, name)) return &ms->v[i];
    return NULL;
}

/* A module listed but not opened yet, by declared name or path (NULL: any). */
static kh_pending *pending_named(kh_modules *ms, const char *name, const char *real) {
    for (int i = 0; i < ms->n_pending; i++) {
        kh_pending *p = &ms->pending[i];
        if (p->state == KH_PENDING_WAITING && (!name || !strcmp(p->name, name)) && (!real || !strcmp(p->path, real)))
            return p;
    }
    return NULL;
}

static kh_module *find_by_path(kh_modules *ms, const char *real) {
    for (int i = 0; i < ms->n; i++)
        if (!strcmp(ms->v[i].path, real)) return &ms->v[i];
    return NULL;
}

/* Append m (taking ownership) unless its name is taken; on refusal m is unloaded and err explains. */
static int append(kh_modules *ms, kh_module *m, int may_grow, char *err, size_t errlen) {
    kh_module *other = find_by_name(ms, m->desc->name);
    if (other) {
        snprintf(err, errlen, "%s: module name '%s' is already used by %s", m->path, m->desc->name, other->path);
        kh_module_unload(m);
        return -1;
    }
    if (ms->n == ms->cap) {
        /* Growing moves v; only allowed while nobody can hold a pointer into it (discovery, or empty). */
        if (!may_grow && ms->n > 0) {
            snprintf(err, errlen, "%s: too many modules loaded on demand (at most %d)", m->path, KH_MODULES_SPARE);
            kh_module_unload(m);
            return -1;
        }
        kh_module *nv = kh_grow(ms->v, &ms->cap, sizeof *nv, 16);
        if (!nv) {
            snprintf(err, errlen, "%s: out of memory", m->path);
            kh_module_unload(m);
            return -1;
        }
        ms->v = nv;
    }
    ms->v[ms->n++] = *m;
    return 0;
}

// --- discovery ----------------------------------------------------------------------------------------------

typedef struct seen_set { char **v; int n; } seen_set;

static int seen_has(const seen_set *s, const char *p) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i], p)) return 1;
    return 0;
}

static void seen_add(seen_set *s, const char *p) {
    char **nv = realloc(s->v, (size_t)(s->n + 1) * sizeof *nv);
    if (!nv) return; /* worst case a file is tried twice and reported as a duplicate */
    s->v = nv;
    if ((nv[s->n] = strdup(p))) s->n++;
}

static const kh_reg_module *reg_section(const kh_registry *reg, const char *name, int kind) {
    for (int i = 0; reg && i < reg->n_modules; i++)
        if (reg->modules[i].kind == kind && !strcmp(reg->modules[i].name, name)) return &reg->modules[i];
    return NULL;
}

/* List a file that inspected clean, to be opened when a command names it (load_pending). Takes real and name.
 * Refused (err) when another module, listed or loaded, declares the same name. */
static int add_pending(kh_modules *ms, char *real, char *name, int kind, int enabled, int from_registry,
                       const char *origin, char *err, size_t errlen) {
    const kh_pending *op = pending_named(ms, name, NULL);
    const kh_module *om = find_by_name(ms, name);
    kh_pending *np = NULL;
    char *o = NULL;
    if (op || om) {
        snprintf(err, errlen, "%s: module name '%s' is already used by %s", real, name, op ? op->path : om->path);
    } else if (!(np = realloc(ms->pending, (size_t)(ms->n_pending + 1) * sizeof *np)) || !(o = strdup(origin))) {
        if (np) ms->pending = np;
        snprintf(err, errlen, "%s: out of memory", real);
    } else {
        ms->pending = np;
        np[ms->n_pending++] = (kh_pending){real, name, kind, enabled, from_registry, o, KH_PENDING_WAITING};
        return 0;
    }
    free(real);
    free(name);
    return -1;
}

/* Open a listed module in this process; on failure the reason is also recorded as a load error (kh_modules_find
 * quotes it). v has room reserved for every listed module, so it never moves. */
static kh_module *load_pending(kh_modules *ms, kh_pending *p, const kh_host_api *host, char *err, size_t errlen) {
    char e[1024], msg[1400];
    kh_module m;
    int no_entry;
    p->state = KH_PENDING_TRIED;
    if (vet_and_load(ms, p->path, host, &m, e, sizeof e, &no_entry) == 0) {
        if (m.kind == p->kind && !strcmp(m.desc->name, p->name)) {
            m.enabled = p->enabled;
            m.from_registry = p->from_registry;
            if (append(ms, &m, 0, e, sizeof e) == 0) return &ms->v[ms->n - 1];
        } else {
            snprintf(e, sizeof e, "%s: changed since it was inspected (now the %s '%s', was the %s '%s')", m.path,
                     kh_module_kind_word(m.kind), m.desc->name, kh_module_kind_word(p->kind), p->name);
            kh_module_unload(&m);
        }
    }
    snprintf(msg, sizeof msg, "%s%s", e, p->origin);
    add_error(ms, host, p->path, msg);
    snprintf(err, errlen, "%s", msg);
    return NULL;
}

/* List a file the registry names in section rm. */
static void load_named(const kh_registry *reg, const kh_reg_module *rm, const kh_host_api *host, kh_modules *ms,
                       seen_set *seen) {
    char err[1024], msg[1400], origin[600];
    char *real, *name;
    int kind, no_entry;
    char *seen_path = realpath(rm->path, NULL);
    if (seen_path) {
        seen_add(seen, seen_path);
        free(seen_path);
    }
    snprintf(origin, sizeof origin, " ([%s %s] at %s:%d)", section_word(rm->kind), rm->name, reg->file, rm->line);
    if (vet(ms, rm->path, host, &real, &kind, &name, err, sizeof err, &no_entry)) {
        snprintf(msg, sizeof msg, "%s%s", err, origin);
        add_error(ms, host, rm->path, msg);
        return;
    }
    if (kind != rm->kind) {
        snprintf(msg, sizeof msg, "%s: is a %s module, but [%s %s] at %s:%d expects a %s", real, kh_module_kind_word(kind),
                 section_word(rm->kind), rm->name, reg->file, rm->line, kh_module_kind_word(rm->kind));
        add_error(ms, host, real, msg);
    } else if (strcmp(name, rm->name)) {
        snprintf(msg, sizeof msg, "%s: the module calls itself '%s', but its registry section is [%s %s] at %s:%d",
                 real, name, section_word(rm->kind), rm->name, reg->file, rm->line);
        add_error(ms, host, real, msg);
    } else {
        char *path = strdup(real);
        if (add_pending(ms, real, name, kind, rm->enabled, 1, origin, err, sizeof err))
            add_error(ms, host, path ? path : rm->path, err);
        free(path);
        return;
    }
    free(real);
    free(name);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every *.so of one search folder, in byte order of their names so discovery is deterministic. */
static void scan_dir(const kh_registry *reg, const char *dir, const kh_host_api *host, kh_modules *ms,
                     seen_set *seen) {
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT || errno == ENOTDIR) {
            logf_host(host, KH_LOG_DEBUG, "search folder %s: %s", dir, strerror(errno));
        } else {
            char msg[1200];
            snprintf(msg, sizeof msg, "%s: cannot read search folder: %s", dir, strerror(errno));
            add_error(ms, host, dir, msg);
        }
        return;
    }
    char **names = NULL;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len <= 3 || strcmp(e->d_name + len - 3, ".so")) continue;
        char **nn = realloc(names, (size_t)(n + 1) * sizeof *nn);
        if (!nn) break;
        names = nn;
        if ((names[n] = strdup(e->d_name))) n++;
    }
    closedir(d);
    if (n > 1) qsort(names, (size_t)n, sizeof *names, cmp_str);

    for (int i = 0; i < n; i++) {
        char *full = malloc(strlen(dir) + strlen(names[i]) + 2);
        char *real = NULL;
        struct stat st;
        if (!full) goto next;
        sprintf(full, "%s/%s", dir, names[i]);
        if (stat(full, &st) || !S_ISREG(st.st_mode)) goto next;
        real = realpath(full, NULL);
        if (!real || seen_has(seen, real)) goto next; /* named in the registry, or a second folder entry */
        seen_add(seen, real);

        char err[1024];
        char *vreal, *name;
        int kind, no_entry;
        if (vet(ms, real, host, &vreal, &kind, &name, err, sizeof err, &no_entry)) {
            if (no_entry) logf_host(host, KH_LOG_DEBUG, "%s (skipped)", err);
            else add_error(ms, host, real, err);
            goto next;
        }
        /* A path-less registry section configures the module that carries its name. */
        const kh_reg_module *rm = reg_section(reg, name, kind);
        if (add_pending(ms, vreal, name, kind, rm ? rm->enabled : 1, rm ? rm->path == NULL : 0, "", err, sizeof err))
            add_error(ms, host, real, err);
        else
            logf_host(host, KH_LOG_DEBUG, "%s: %s '%s' found in %s", real, kh_module_kind_word(kind),
                      ms->pending[ms->n_pending - 1].name, dir);
    next:
        free(real);
        free(full);
        free(names[i]);
    }
    free(names);
}

void kh_modules_index(const kh_registry *reg, const kh_host_api *host, kh_modules *out) {
    memset(out, 0, sizeof *out);
    if (!reg) return;
    out->lax_modes = !reg->strict_modes;
    out->scan_timeout = reg->scan_timeout;
    char *cache_file = reg->module_cache ? strdup(reg->module_cache) : kh_modcache_default_path();
    char cerr[1200];
    if (cache_file && !reg->module_cache && kh_path_trusted_file(cache_file, cerr, sizeof cerr) != 0) {
        logf_host(host, KH_LOG_WARN, "module cache: not used: %s (khost/kit/pathtrust.h; modules are inspected every time)", cerr);
        free(cache_file);
        cache_file = NULL;
    }
    if (cache_file && kh_modcache_load(&out->cache, cache_file, cerr, sizeof cerr) != 0)
        logf_host(host, KH_LOG_WARN, "module cache: %s (starting afresh)", cerr);
    free(cache_file);
    seen_set seen = {NULL, 0};
    for (int i = 0; i < reg->n_modules; i++)
        if (reg->modules[i].path) load_named(reg, &reg->modules[i], host, out, &seen);
    for (int i = 0; i < reg->n_plugin_dirs; i++) scan_dir(reg, reg->plugin_dirs[i], host, out, &seen);
    for (int i = 0; i < reg->n_task_dirs; i++) scan_dir(reg, reg->task_dirs[i], host, out, &seen);
    for (int i = 0; i < seen.n; i++) free(seen.v[i]);
    free(seen.v);
    save_cache(out, host);

    /* Sections without a path rely on the search; say so when it found nothing. */
    for (int i = 0; i < reg->n_modules; i++) {
        const kh_reg_module *rm = &reg->modules[i];
        if (rm->path) continue;
        const kh_pending *p = pending_named(out, rm->name, NULL);
        if (p && p->kind == rm->kind) continue;
        char msg[1400];
        snprintf(msg, sizeof msg, "%s:%d: [%s %s] has no path and no %s module named '%s' was found in the %s",
                 reg->file, rm->line, section_word(rm->kind), rm->name, kh_module_kind_word(rm->kind), rm->name,
                 rm->kind == KH_MODULE_BACKEND ? "plugin_dirs" : "task_dirs");
        add_error(out, host, reg->file, msg);
    }

    /* Room for every listed module and for loads by path, so that v never moves once callers hold pointers. */
    int want = out->n_pending + KH_MODULES_SPARE;
    kh_module *nv = realloc(out->v, (size_t)want * sizeof *nv);
    if (nv) {
        out->v = nv;
        out->cap = want;
    }
}

void kh_modules_load_kind(kh_modules *ms, int kind, const kh_host_api *host) {
    char err[1400];
    for (int i = 0; i < ms->n_pending; i++)
        if (ms->pending[i].state == KH_PENDING_WAITING && (kind < 0 || ms->pending[i].kind == kind))
            load_pending(ms, &ms->pending[i], host, err, sizeof err);
}

void kh_modules_discover(const kh_registry *reg, const kh_host_api *host, kh_modules *out) {
    kh_modules_index(reg, host, out);
    kh_modules_load_kind(out, -1, host);
}

// --- lookup ----------------------------------------------------------------------------------------------------

kh_module *kh_modules_find_named(kh_modules *ms, int kind, const char *name, const kh_host_api *host, char *err,
                                 size_t errlen) {
    if (name && strchr(name, '/')) {
        snprintf(err, errlen, "'%s' is a path, not the name of a %s module of the registry or the search path: not "
                 "loaded", name, kh_module_kind_word(kind));
        return NULL;
    }
    return kh_modules_find(ms, kind, name, host, err, errlen);
}

kh_module *kh_modules_find(kh_modules *ms, int kind, const char *what, const kh_host_api *host, char *err,
                           size_t errlen) {
    char dummy[8];
    if (!err || !errlen) err = dummy, errlen = sizeof dummy;
    err[0] = 0;
    if (!what || !*what) {
        snprintf(err, errlen, "no %s module named '' (an empty name: give a registry name, a file name or a path)",
                 kh_module_kind_word(kind));
        return NULL;
    }
    if (strchr(what, '/')) {
        char *real = realpath(what, NULL);
        if (!real) {
            snprintf(err, errlen, "%s: cannot open: %s", what, strerror(errno));
            return NULL;
        }
        kh_module *m = find_by_path(ms, real);
        kh_pending *p = m ? NULL : pending_named(ms, NULL, real);
        free(real);
        if (p) {
            if (p->kind != kind) {
                snprintf(err, errlen, "%s: is a %s module, not a %s", p->path, kh_module_kind_word(p->kind),
                         kh_module_kind_word(kind));
                return NULL;
            }
            return load_pending(ms, p, host, err, errlen);
        }
        if (!m) {
            kh_module nm;
            int no_entry;
            int failed = vet_and_load(ms, what, host, &nm, err, errlen, &no_entry);
            save_cache(ms, host);
            if (failed) return NULL;
            if (nm.kind != kind) {
                snprintf(err, errlen, "%s: is a %s module, not a %s", nm.path, kh_module_kind_word(nm.kind), kh_module_kind_word(kind));
                kh_module_unload(&nm);
                return NULL;
            }
            if (append(ms, &nm, 0, err, errlen)) return NULL;
            return &ms->v[ms->n - 1];
        }
        if (m->kind != kind) {
            snprintf(err, errlen, "%s: is a %s module, not a %s", m->path, kh_module_kind_word(m->kind), kh_module_kind_word(kind));
            return NULL;
        }
        return m;
    }

    const char *other = NULL; /* the path of a module of the other kind with that name */
    int other_kind = 0;
    for (int pass = 0; pass < 2; pass++) { /* registry name first, then file name; loaded, then listed */
        for (int i = 0; i < ms->n; i++) {
            kh_module *m = &ms->v[i];
            if (strcmp(pass == 0 ? m->desc->name : base_name(m->path), what)) continue;
            if (m->kind == kind) return m;
            other = m->path, other_kind = m->kind;
        }
        for (int i = 0; i < ms->n_pending; i++) {
            kh_pending *p = &ms->pending[i];
            if (p->state != KH_PENDING_WAITING || strcmp(pass == 0 ? p->name : base_name(p->path), what)) continue;
            if (p->kind == kind) return load_pending(ms, p, host, err, errlen);
            other = p->path, other_kind = p->kind;
        }
    }
    if (other) {
        snprintf(err, errlen, "'%s' is a %s module (%s), not a %s", what, kh_module_kind_word(other_kind), other,
                 kh_module_kind_word(kind));
        return NULL;
    }
    /* Not loaded: if it failed to load, that reason is the useful answer. */
    for (int i = 0; i < ms->n_errors; i++) {
        const char *b = base_name(ms->errors[i].path);
        size_t wl = strlen(what);
        /* "my_task" names my_task.so as well: the refusal explains more than "no module named" */
        char sect[96];
        snprintf(sect, sizeof sect, "[%s %s]", section_word(kind), what);
        if (!strcmp(b, what) || (!strncmp(b, what, wl) && !strcmp(b + wl, ".so")) ||
            strstr(ms->errors[i].message, sect)) { /* a registry section of that name, refused */
            snprintf(err, errlen, "%s", ms->errors[i].message);
            return NULL;
        }
    }
    size_t w = (size_t)snprintf(err, errlen, "no %s module named '%s' (available:", kh_module_kind_word(kind), what);
    int any = 0;
    for (int i = 0; i < ms->n && w < errlen; i++) {
        if (ms->v[i].kind != kind) continue;
        w += (size_t)snprintf(err + w, errlen - w, " %s", ms->v[i].desc->name);
        any = 1;
    }
    for (int i = 0; i < ms->n_pending && w < errlen; i++) {
        if (ms->pending[i].kind != kind || ms->pending[i].state != KH_PENDING_WAITING) continue;
        w += (size_t)snprintf(err + w, errlen - w, " %s", ms->pending[i].name);
        any = 1;
    }
    if (w < errlen) snprintf(err + w, errlen - w, "%s)", any ? "" : " none");
    return NULL;
}

void kh_modules_free(kh_modules *ms) {
    if (!ms) return;
    for (int i = 0; i < ms->n; i++) kh_module_unload(&ms->v[i]);
    free(ms->v);
    for (int i = 0; i < ms->n_errors; i++) {
        free(ms->errors[i].path);
        free(ms->errors[i].message);
    }
    free(ms->errors);
    for (int i = 0; i < ms->n_pending; i++) {
        free(ms->pending[i].path);
        free(ms->pending[i].name);
        free(ms->pending[i].origin);
    }
    free(ms->pending);
    kh_modcache_free(&ms->cache);
    memset(ms, 0, sizeof *ms);
}
