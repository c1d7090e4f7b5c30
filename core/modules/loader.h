/* core/modules/loader.h — dlopen discovery and ABI negotiation of backend and task modules.
 *
 * Discovery: every module named in the registry, plus every *.so in the search directories that exports
 * KH_ENTRY_NAME (dropping a plugin in is enough). A file is first checked for safe ownership and modes
 * (modperm.h), then inspected in a child process unless the module cache (modcache.h) already knows this
 * version of it (scan.h); only a module that inspected clean is opened here, with RTLD_NOW|RTLD_LOCAL, and
 * its entry called with the host-services table. Refusals (each message names the file and, where relevant, both
 * versions): missing entry symbol, NULL descriptor, struct_size too small, different major, newer minor,
 * unknown kind, missing api table, duplicate name. A refused module is recorded as a load error, not fatal.
 */
#ifndef KHOST_CORE_LOADER_H
#define KHOST_CORE_LOADER_H

#include <stddef.h>

#include "khost/khost.h"
#include "modules/modcache.h"
#include "modules/registry.h"

typedef struct kh_module {
    char *path;                 /* absolute path of the .so */
    void *handle;               /* dlopen handle */
    const kh_module_desc *desc; /* valid while loaded */
    int kind;                   /* kh_module_kind */
    /* Host-owned copies of the module's api table, zero past the module's struct_size: optional members
     * may be tested against NULL directly. */
    const kh_backend_api *backend; /* when kind == KH_MODULE_BACKEND */
    const kh_task_api *task;       /* when kind == KH_MODULE_TASK */
    uint32_t layer_spec_size;   /* element size of its kh_layer_spec arrays (modules/layer_abi.h) */
    int enabled;                /* from the registry (default 1) */
    int from_registry;          /* 1: named in the INI; 0: discovered in a search directory */
} kh_module;

typedef struct kh_load_error {
    char *path;
    char *message; /* "plugins/x.so: ABI 2.0 is not supported by this host (ABI 1.0): major differs" */
} kh_load_error;

typedef struct kh_modules {
    kh_module *v; int n;
    kh_load_error *errors; int n_errors;
    int cap; /* slots in v; discovery reserves spares so v never moves: kh_module pointers stay valid */
    /* How files are vetted (from the registry at discovery; zero = the safe defaults). */
    int lax_modes;       /* strict_modes = false: skip the ownership/permission check */
    double scan_timeout; /* seconds per inspection; 0 = KH_SCAN_DEFAULT_TIMEOUT_S */
    kh_modcache cache;
} kh_modules;

/* Load one module file in this process, with no inspection: for the scanner child and for tests of the
 * negotiation. On refusal returns non-zero, fills err, and leaves nothing open. */
int kh_module_load(const char *path, const kh_host_api *host, kh_module *out, char *err, size_t errlen);
/* The same; *no_entry tells a plain shared library (no entry symbol) apart from a broken module. */
int kh_module_load_ex(const char *path, const kh_host_api *host, kh_module *out, int *no_entry, char *err,
                      size_t errlen);
void kh_module_unload(kh_module *m);
/* Load everything the registry names or its search directories hold. Never fails as a whole. */
void kh_modules_discover(const kh_registry *reg, const kh_host_api *host, kh_modules *out);
/* Find by registry name ("cntk"), file name ("cntk.so") or path; kind KH_MODULE_BACKEND / _TASK.
 * A path not yet loaded is vetted, inspected and loaded on demand (err says why not). */
kh_module *kh_modules_find(kh_modules *ms, int kind, const char *what, const kh_host_api *host, char *err,
                           size_t errlen);
void kh_modules_free(kh_modules *ms);
#endif
