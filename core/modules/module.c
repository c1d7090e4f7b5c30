/* core/modules/module.c — one module file: dlopen, its entry point, and the negotiation of its descriptor
 * and api table against this host's ABI (module.h). Discovery (loader.c) and the inspecting child
 * (scan.c) both load through here. */
#define _GNU_SOURCE /* dladdr, realpath */
#include "modules/module.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modules/layer_abi.h"

const char *kh_module_kind_word(int kind) {
    return kind == KH_MODULE_BACKEND ? "backend" : kind == KH_MODULE_TASK ? "task" : "unknown";
}

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
        snprintf(err, errlen, "%s: %s '%s' has a NULL %s string", file, kh_module_kind_word((int)d->kind), d->name,
                 d->version ? "description" : "version");
        return -1;
    }
    if (!d->api) {
        snprintf(err, errlen, "%s: %s '%s' has no api table", file, kh_module_kind_word((int)d->kind), d->name);
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
                 file, kh_module_kind_word((int)d->kind), d->name, (unsigned)api_size, kh_module_kind_word((int)d->kind), need,
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
        snprintf(err, errlen, "%s: %s '%s': required function '%s' is NULL", file, kh_module_kind_word((int)d->kind),
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

void kh_module_unload(kh_module *m) {
    if (!m) return;
    if (m->handle) dlclose(m->handle);
    free(m->path);
    free((void *)m->backend);
    free((void *)m->task);
    memset(m, 0, sizeof *m);
}
