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
#include "modules/module.h"
#include "modules/registry.h"


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

/* Load everything the registry names or its search directories hold. Never fails as a whole. */
void kh_modules_discover(const kh_registry *reg, const kh_host_api *host, kh_modules *out);
/* Find by registry name ("cntk"), file name ("cntk.so") or path; kind KH_MODULE_BACKEND / _TASK.
 * A path not yet loaded is vetted, inspected and loaded on demand (err says why not). */
kh_module *kh_modules_find(kh_modules *ms, int kind, const char *what, const kh_host_api *host, char *err,
                           size_t errlen);
void kh_modules_free(kh_modules *ms);
#endif
