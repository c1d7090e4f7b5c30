/* core/modules/loader.c — dlopen discovery and ABI negotiation of backend and task modules.
 *
 * Choices the interface leaves open, and why:
 *  - A module whose registry section says enabled = false is still loaded and listed, marked enabled = 0:
 *    `khost --list` can then show its version, and `--plugin x` may still name it explicitly; only "all"
 *    selections skip it. (The ABI forbids heavy work in the entry point, so loading it costs little.)
 *  - A module found in a search folder is taken with the kind it declares: plugin_dirs and task_dirs say
 *    where to look, not what must be there. Only a registry section insists on a kind ([plugin x] naming a
 *    task is an error).
 *  - A registry section's name must equal the name the module declares: modules are found, configured
 *    (config_get("plugin NAME", ...)) and recorded under that one name.
 *  - The api table is copied into a host-owned, full-size struct with the members beyond the module's
 *    struct_size zeroed, so callers may test optional members (probes, augment, ...) against NULL without
 *    reading past an older module's table. Its struct_size stays the module's own.
 *  - Names are unique across both kinds (khost/abi.h): results and --list key everything by name.
 *  - ms->v never moves once modules are listed: discovery reserves KH_MODULES_SPARE extra slots for
 *    on-demand loads, so a kh_module pointer stays valid until kh_modules_free.
 *  - Every file goes through vet_and_load: ownership/modes, then the cache or a child's inspection, then
 *    dlopen here. A file that changes between its inspection and the dlopen is a race this does not
 *    close; the rule keeps strangers from writing there, which is what makes that race harmless.
 */
#define _GNU_SOURCE /* dladdr, realpath */
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
#include "guard/cachetrust.h"

#define KH_MODULES_SPARE 8

// --- helpers --------------------------------------------------------------------------------------------------

static const char *kind_word(int kind) {
    return kind == KH_MODULE_BACKEND ? "backend" : kind == KH_MODULE_TASK ? "task" : "unknown";
}

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

/* Same rule as the registry's section names; bounded because results records keep names in 64 bytes. */
static int valid_name(const char *s) {
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return 0;
        if (n >= 63) return 0;
    }
    return n > 0;
}

/* ISO C has no conversion from void * to a function pointer; POSIX guarantees the representation. */
static kh_entry_fn to_entry(void *sym) {
    kh_entry_fn fn;
    memcpy(&fn, &sym, sizeof fn);
    return fn;
}

// --- negotiation -------------------------------------------------------------------------------------------

/* Names of the members a backend/task must provide (the rest are optional), with their offsets. */
#define REQ(type, m) {#m, offsetof(type, m)}
typedef struct req_fn { const char *name; size_t off; } req_fn;
static const req_fn backend_required[] = {
    REQ(kh_backend_api, get_caps),    REQ(kh_backend_api, open),        REQ(kh_backend_api, close),
    REQ(kh_backend_api, last_error),  REQ(kh_backend_api, environment), REQ(kh_backend_api, compile),
    REQ(kh_backend_api, model_free),  REQ(kh_backend_api, set_weight),  REQ(kh_backend_api, get_weight),
    REQ(kh_backend_api, train_batch), REQ(kh_backend_api, eval_batch),  REQ(kh_backend_api, read_metrics),
    REQ(kh_backend_api, sync),
};
static const req_fn task_required[] = {
    REQ(kh_task_api, info),       REQ(kh_task_api, load),  REQ(kh_task_api, unload),
    REQ(kh_task_api, last_error), REQ(kh_task_api, model), REQ(kh_task_api, count),
    REQ(kh_task_api, get_batch),  REQ(kh_task_api, describe),
};
#undef REQ

static const char *missing_function(const void *table, const req_fn *req, size_t n) {
    for (size_t i = 0; i < n; i++) {
        void (*fn)(void);
        memcpy(&fn, (const char *)table + req[i].off, sizeof fn);
        if (!fn) return req[i].name;
    }
    return NULL;
}

/* A data set name becomes a folder under the data directory (sized, fetched, recorded): a plain name only. */
static int plain_dataset_name(const char *s) {
    if (!*s || !strcmp(s, ".") || !strcmp(s, "..") || strlen(s) > 63) return 0;
    for (; *s; s++)
        if (*s == '/' || (unsigned char)*s < 0x20 || *s == 0x7f) return 0;
    return 1;
}

/* What the host reads from a task's info() before any data is loaded. Called here, at load (in the
 * inspection child first, where a crash in info() costs only that child), so that --list, run and matrix
 * never meet a NULL table or counts that would divide by zero or loop forever. */
static int check_task_info(const char *file, const char *name, const kh_task_api *t, char *err, size_t errlen) {
    const kh_task_info *i = t->info();
    const char *bad = NULL;
    char what[160];
    if (!i) bad = "info() returned NULL";
    else if (i->struct_size < offsetof(kh_task_info, published) + sizeof i->published)
        snprintf(what, sizeof what, "info() struct_size %u is smaller than kh_task_info (%zu bytes)",
                 (unsigned)i->struct_size, offsetof(kh_task_info, published) + sizeof i->published), bad = what;
    else if (!i->dataset) bad = "info()->dataset is NULL";
    else if (!plain_dataset_name(i->dataset)) {
        char shown[48];
        size_t k = 0;
        for (; i->dataset[k] && k < 40; k++)
            shown[k] = (unsigned char)i->dataset[k] >= 0x20 && (unsigned char)i->dataset[k] < 0x7f ? i->dataset[k] : '?';
        shown[k] = 0;
        snprintf(what, sizeof what,
                 "info()->dataset '%s' is not a plain name (1-63 characters, no '/', not '.' or '..')", shown);
        bad = what;
    } else if (i->epochs < 1)
        snprintf(what, sizeof what, "info()->epochs is %d (must be at least 1)", (int)i->epochs), bad = what;
    else if (i->batch_size < 1)
        snprintf(what, sizeof what, "info()->batch_size is %d (must be at least 1)", (int)i->batch_size), bad = what;
    else if (i->train_samples_per_epoch < 0)
        snprintf(what, sizeof what, "info()->train_samples_per_epoch is %lld (must be 0 or more)",
                 (long long)i->train_samples_per_epoch), bad = what;
    else if (i->n_published < 0 || (i->n_published > 0 && !i->published))
        snprintf(what, sizeof what, "info() lists %d published figures %s", (int)i->n_published,
                 i->n_published < 0 ? "(negative)" : "but published is NULL"), bad = what;
    if (!bad) return 0;
    snprintf(err, errlen, "%s: task '%s': %s", file, name, bad);
    return -1;
}

/* Check a descriptor; on success *api_copy holds the host-owned copy of its api table. */
static int validate(const char *file, const kh_module_desc *d, void **api_copy, char *err, size_t errlen) {
    *api_copy = NULL;
    if (!d) {
        snprintf(err, errlen, "%s: %s returned NULL: the module refused to load", file, KH_ENTRY_NAME);
        return -1;
    }
    /* The versions come first when they can be read: a different major may mean a different layout, and
     * "ABI 2.0 vs 1.0" says more than a size. */
    if (d->struct_size >= offsetof(kh_module_desc, kind)) {
        if (d->abi_major != KH_ABI_MAJOR) {
            snprintf(err, errlen, "%s: module ABI %u.%u, host ABI %d.%d: major version differs", file,
                     (unsigned)d->abi_major, (unsigned)d->abi_minor, KH_ABI_MAJOR, KH_ABI_MINOR);
            return -1;
        }
        if (d->abi_minor > KH_ABI_MINOR) {
            snprintf(err, errlen,
                     "%s: module ABI %u.%u, host ABI %d.%d: the module needs a newer host (minor version is newer)",
                     file, (unsigned)d->abi_major, (unsigned)d->abi_minor, KH_ABI_MAJOR, KH_ABI_MINOR);
            return -1;
        }
    }
    if (d->struct_size < KH_MODULE_DESC_MIN_SIZE) {
        snprintf(err, errlen, "%s: descriptor struct_size %u is smaller than the ABI 1.0 descriptor (%zu bytes)",
                 file, (unsigned)d->struct_size, (size_t)KH_MODULE_DESC_MIN_SIZE);
        return -1;
    }
    if (d->kind != KH_MODULE_BACKEND && d->kind != KH_MODULE_TASK) {
        snprintf(err, errlen, "%s: unknown module kind %u (1 backend, 2 task)", file, (unsigned)d->kind);
        return -1;
    }
    if (!d->name || !valid_name(d->name)) {
        char shown[48] = "";
        if (d->name) {
            size_t i = 0;
            for (; d->name[i] && i < 40; i++) {
                unsigned char c = (unsigned char)d->name[i];
                shown[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
            }
            shown[i] = 0;
        }
        snprintf(err, errlen, "%s: invalid module name '%s' (must be 1-63 characters of [a-z0-9_])", file,
                 d->name ? shown : "(null)");
        return -1;
    }
    if (!d->version || !d->description) {
        snprintf(err, errlen, "%s: %s '%s' has a NULL %s string", file, kind_word((int)d->kind), d->name,
                 d->version ? "description" : "version");
        return -1;
    }
    if (!d->api) {
        snprintf(err, errlen, "%s: %s '%s' has no api table", file, kind_word((int)d->kind), d->name);
        return -1;
    }
    uint32_t api_size;
    memcpy(&api_size, d->api, sizeof api_size); /* every table starts with its struct_size */
    size_t full, need;
    const req_fn *req;
    size_t n_req;
    if (d->kind == KH_MODULE_BACKEND) {
        full = sizeof(kh_backend_api);
        need = offsetof(kh_backend_api, sync) + sizeof(((kh_backend_api *)0)->sync);
        req = backend_required;
        n_req = sizeof backend_required / sizeof *backend_required;
    } else {
        full = sizeof(kh_task_api);
        need = offsetof(kh_task_api, describe) + sizeof(((kh_task_api *)0)->describe);
        req = task_required;
        n_req = sizeof task_required / sizeof *task_required;
    }
    if (api_size < need) {
        snprintf(err, errlen,
                 "%s: %s '%s': api struct_size %u is smaller than the smallest %s table the host accepts (%zu bytes, "
                 "the ABI 1.0 members up to the last required one; sizeof(kh_%s_api) is %zu in ABI %d.%d)",
                 file, kind_word((int)d->kind), d->name, (unsigned)api_size, kind_word((int)d->kind), need,
                 d->kind == KH_MODULE_BACKEND ? "backend" : "task", full, KH_ABI_MAJOR, KH_ABI_MINOR);
        return -1;
    }
    void *copy = calloc(1, full);
    if (!copy) {
        snprintf(err, errlen, "%s: out of memory", file);
        return -1;
    }
    memcpy(copy, d->api, api_size < full ? api_size : full);
    const char *missing = missing_function(copy, req, n_req);
    if (missing) {
        snprintf(err, errlen, "%s: %s '%s': required function '%s' is NULL", file, kind_word((int)d->kind),
                 d->name, missing);
        free(copy);
        return -1;
    }
    if (d->kind == KH_MODULE_TASK && check_task_info(file, d->name, copy, err, errlen) != 0) {
        free(copy);
        return -1;
    }
    *api_copy = copy;
    return 0;
}

/* Open, find the entry, negotiate. *no_entry tells a plain shared library (no entry symbol) apart from a
 * broken module, which discovery treats differently. */
static int load_impl(const char *path, const kh_host_api *host, kh_module *out, char *err, size_t errlen,
                     int *no_entry) {
    *no_entry = 0;
    memset(out, 0, sizeof *out);
    if (!path || !*path) {
        snprintf(err, errlen, "no module path given");
        return -1;
    }
    char *real = realpath(path, NULL);
    if (!real) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    dlerror();
    void *h = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        snprintf(err, errlen, "%s: cannot load: %s", real, why ? why : "dlopen failed");
        free(real);
        return -1;
    }
    dlerror();
    void *sym = dlsym(h, KH_ENTRY_NAME);
    /* dlsym also searches the library's dependencies: the symbol must be the file's own. */
    Dl_info info;
    char *owner = NULL;
    if (sym && dladdr(sym, &info) && info.dli_fname) owner = realpath(info.dli_fname, NULL);
    int own = owner && !strcmp(owner, real);
    free(owner);
    if (!sym || !own) {
        *no_entry = 1;
        snprintf(err, errlen, "%s: no entry symbol %s: not a khost module", real, KH_ENTRY_NAME);
        dlclose(h);
        free(real);
        return -1;
    }
    if (!host) {
        snprintf(err, errlen, "%s: no host-services table to pass to the module", real);
        dlclose(h);
        free(real);
        return -1;
    }
    const kh_module_desc *d = to_entry(sym)(host);
    void *api = NULL;
    uint32_t layer_spec_size = 0;
    if (validate(real, d, &api, err, errlen) || kh_desc_layer_spec_size(real, d, &layer_spec_size, err, errlen)) {
        free(api);
        dlclose(h);
        free(real);
        return -1;
    }
    out->layer_spec_size = layer_spec_size;
    out->path = real;
    out->handle = h;
    out->desc = d;
    out->kind = (int)d->kind;
    if (out->kind == KH_MODULE_BACKEND) out->backend = api;
    else out->task = api;
    out->enabled = 1;
    out->from_registry = 0;
    return 0;
}

int kh_module_load(const char *path, const kh_host_api *host, kh_module *out, char *err, size_t errlen) {
    int no_entry;
    return kh_module_load_ex(path, host, out, &no_entry, err, errlen);
}

int kh_module_load_ex(const char *path, const kh_host_api *host, kh_module *out, int *no_entry, char *err,
                      size_t errlen) {
    char dummy[8];
    if (!err || !errlen) err = dummy, errlen = sizeof dummy;
    err[0] = 0;
    return load_impl(path, host, out, err, errlen, no_entry);
}

/* The safe way in: modes and ownership, then what a child learned about this very file (from the cache,
 * or inspecting it now), and only then dlopen here. Same contract as load_impl. */
static int vet_and_load(kh_modules *ms, const char *path, const kh_host_api *host, kh_module *out, char *err,
                        size_t errlen, int *no_entry) {
    *no_entry = 0;
    memset(out, 0, sizeof *out);
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
    } else {
        rc = load_impl(real, host, out, err, errlen, no_entry);
    }
    kh_modcache_entry_free(&fresh);
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

void kh_module_unload(kh_module *m) {
    if (!m) return;
    if (m->handle) dlclose(m->handle);
    free(m->path);
    free((void *)m->backend);
    free((void *)m->task);
    memset(m, 0, sizeof *m);
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
        int ncap = ms->cap ? ms->cap * 2 : 16;
        kh_module *nv = realloc(ms->v, (size_t)ncap * sizeof *nv);
        if (!nv) {
            snprintf(err, errlen, "%s: out of memory", m->path);
            kh_module_unload(m);
            return -1;
        }
        ms->v = nv;
        ms->cap = ncap;
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

/* Load a file the registry names in section rm. */
static void load_named(const kh_registry *reg, const kh_reg_module *rm, const kh_host_api *host, kh_modules *ms,
                       seen_set *seen) {
    char err[1024], msg[1400];
    kh_module m;
    int no_entry;
    char *real = realpath(rm->path, NULL);
    if (real) {
        seen_add(seen, real);
        free(real);
    }
    if (vet_and_load(ms, rm->path, host, &m, err, sizeof err, &no_entry)) {
        snprintf(msg, sizeof msg, "%s ([%s %s] at %s:%d)", err, section_word(rm->kind), rm->name, reg->file,
                 rm->line);
        add_error(ms, host, rm->path, msg);
        return;
    }
    if (m.kind != rm->kind) {
        snprintf(msg, sizeof msg, "%s: is a %s module, but [%s %s] at %s:%d expects a %s", m.path, kind_word(m.kind),
                 section_word(rm->kind), rm->name, reg->file, rm->line, kind_word(rm->kind));
        add_error(ms, host, m.path, msg);
        kh_module_unload(&m);
        return;
    }
    if (strcmp(m.desc->name, rm->name)) {
        snprintf(msg, sizeof msg, "%s: the module calls itself '%s', but its registry section is [%s %s] at %s:%d",
                 m.path, m.desc->name, section_word(rm->kind), rm->name, reg->file, rm->line);
        add_error(ms, host, m.path, msg);
        kh_module_unload(&m);
        return;
    }
    m.enabled = rm->enabled;
    m.from_registry = 1;
    char *path = strdup(m.path);
    if (append(ms, &m, 1, err, sizeof err)) add_error(ms, host, path ? path : rm->path, err);
    free(path);
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

        char err[1024], msg[1400];
        kh_module m;
        int no_entry;
        if (vet_and_load(ms, real, host, &m, err, sizeof err, &no_entry)) {
            if (no_entry) logf_host(host, KH_LOG_DEBUG, "%s (skipped)", err);
            else add_error(ms, host, real, err);
            goto next;
        }
        /* A path-less registry section configures the module that carries its name. */
        const kh_reg_module *rm = reg_section(reg, m.desc->name, m.kind);
        if (rm) {
            m.enabled = rm->enabled;
            m.from_registry = rm->path == NULL;
        }
        if (append(ms, &m, 1, err, sizeof err)) {
            snprintf(msg, sizeof msg, "%s", err);
            add_error(ms, host, real, msg);
        } else {
            logf_host(host, KH_LOG_DEBUG, "%s: %s '%s' found in %s", real, kind_word(m.kind), m.desc->name, dir);
        }
    next:
        free(real);
        free(full);
        free(names[i]);
    }
    free(names);
}

void kh_modules_discover(const kh_registry *reg, const kh_host_api *host, kh_modules *out) {
    memset(out, 0, sizeof *out);
    if (!reg) return;
    out->lax_modes = !reg->strict_modes;
    out->scan_timeout = reg->scan_timeout;
    char *cache_file = reg->module_cache ? strdup(reg->module_cache) : kh_modcache_default_path();
    char cerr[1200];
    if (cache_file && !reg->module_cache && kh_cachetrust_check_file(cache_file, cerr, sizeof cerr) != 0) {
        logf_host(host, KH_LOG_WARN, "module cache: not used: %s (cachetrust.h; modules are inspected every time)", cerr);
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
        kh_module *m = find_by_name(out, rm->name);
        if (m && m->kind == rm->kind) continue;
        char msg[1400];
        snprintf(msg, sizeof msg, "%s:%d: [%s %s] has no path and no %s module named '%s' was found in the %s",
                 reg->file, rm->line, section_word(rm->kind), rm->name, kind_word(rm->kind), rm->name,
                 rm->kind == KH_MODULE_BACKEND ? "plugin_dirs" : "task_dirs");
        add_error(out, host, reg->file, msg);
    }

    /* Reserve room for on-demand loads so that v never moves once callers hold pointers into it. */
    if (out->cap < out->n + KH_MODULES_SPARE) {
        kh_module *nv = realloc(out->v, (size_t)(out->n + KH_MODULES_SPARE) * sizeof *nv);
        if (nv) {
            out->v = nv;
            out->cap = out->n + KH_MODULES_SPARE;
        }
    }
}

// --- lookup ----------------------------------------------------------------------------------------------------

kh_module *kh_modules_find(kh_modules *ms, int kind, const char *what, const kh_host_api *host, char *err,
                           size_t errlen) {
    char dummy[8];
    if (!err || !errlen) err = dummy, errlen = sizeof dummy;
    err[0] = 0;
    if (!what || !*what) {
        snprintf(err, errlen, "no %s module named '' (an empty name: give a registry name, a file name or a path)",
                 kind_word(kind));
        return NULL;
    }
    if (strchr(what, '/')) {
        char *real = realpath(what, NULL);
        if (!real) {
            snprintf(err, errlen, "%s: cannot open: %s", what, strerror(errno));
            return NULL;
        }
        kh_module *m = find_by_path(ms, real);
        free(real);
        if (!m) {
            kh_module nm;
            int no_entry;
            int failed = vet_and_load(ms, what, host, &nm, err, errlen, &no_entry);
            save_cache(ms, host);
            if (failed) return NULL;
            if (nm.kind != kind) {
                snprintf(err, errlen, "%s: is a %s module, not a %s", nm.path, kind_word(nm.kind), kind_word(kind));
                kh_module_unload(&nm);
                return NULL;
            }
            if (append(ms, &nm, 0, err, errlen)) return NULL;
            return &ms->v[ms->n - 1];
        }
        if (m->kind != kind) {
            snprintf(err, errlen, "%s: is a %s module, not a %s", m->path, kind_word(m->kind), kind_word(kind));
            return NULL;
        }
        return m;
    }

    kh_module *other = NULL;
    for (int pass = 0; pass < 2; pass++) { /* registry name first, then file name */
        for (int i = 0; i < ms->n; i++) {
            kh_module *m = &ms->v[i];
            if (strcmp(pass == 0 ? m->desc->name : base_name(m->path), what)) continue;
            if (m->kind == kind) return m;
            other = m;
        }
    }
    if (other) {
        snprintf(err, errlen, "'%s' is a %s module (%s), not a %s", what, kind_word(other->kind), other->path,
                 kind_word(kind));
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
    size_t w = (size_t)snprintf(err, errlen, "no %s module named '%s' (available:", kind_word(kind), what);
    int any = 0;
    for (int i = 0; i < ms->n && w < errlen; i++) {
        if (ms->v[i].kind != kind) continue;
        w += (size_t)snprintf(err + w, errlen - w, " %s", ms->v[i].desc->name);
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
    kh_modcache_free(&ms->cache);
    memset(ms, 0, sizeof *ms);
}
