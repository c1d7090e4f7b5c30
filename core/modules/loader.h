/* core/modules/loader.h — dlopen discovery and ABI negotiation of backend and task modules.
 *
 * Discovery: every module named in the registry, plus every *.so in the search directories that exports
 * KH_ENTRY_NAME (dropping a plugin in is enough). A file is first checked for safe ownership and modes
 * (modperm.h), then inspected in a child process unless the module cache (modcache.h) already knows this
 * version of it (scan.h); only a module that inspected clean is opened here, with RTLD_NOW|RTLD_LOCAL, and
 * its entry called with the host-services table — when a command first names it (kh_modules_index). Refusals (each message names the file and, where relevant, both
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

/* A module found and inspected clean, not yet opened in this process. */
enum { KH_PENDING_WAITING, KH_PENDING_TRIED };
typedef struct kh_pending {
    char *path;  /* absolute */
    char *name;  /* as the module declared it to the inspecting child */
    int kind;
    int enabled, from_registry;
    char *origin; /* " ([plugin x] at FILE:LINE)" for a registry section, else "": appended to load errors */
    int state;    /* KH_PENDING_ */
} kh_pending;

typedef struct kh_modules {
    kh_module *v; int n; /* the modules opened in this process */
    kh_pending *pending; int n_pending; /* every module listed by kh_modules_index, opened or not */
    kh_load_error *errors; int n_errors;
    int cap; /* slots in v; discovery reserves spares so v never moves: kh_module pointers stay valid */
    /* How files are vetted (from the registry at discovery; zero = the safe defaults). */
    int lax_modes;       /* strict_modes = false: skip the ownership/permission check */
    double scan_timeout; /* seconds per inspection; 0 = KH_SCAN_DEFAULT_TIMEOUT_S */
    kh_modcache cache;
} kh_modules;

/* List everything the registry names or its search directories hold: each file vetted and inspected (or known
 * from the cache), none opened in this process. Never fails as a whole. A command opens only the modules it
 * names (kh_modules_find), so a cell maps only its own backend and task (and a cpu cell no GPU library that
 * another backend would pull in); what iterates over every module loads them first (kh_modules_load_kind). */
void kh_modules_index(const kh_registry *reg, const kh_host_api *host, kh_modules *out);
/* Open every listed module of one kind (-1: both) that is not open yet; failures become load errors. */
void kh_modules_load_kind(kh_modules *ms, int kind, const kh_host_api *host);
/* kh_modules_index, then every module opened. */
void kh_modules_discover(const kh_registry *reg, const kh_host_api *host, kh_modules *out);
/* Find by registry name ("cntk"), file name ("cntk.so") or path; kind KH_MODULE_BACKEND / _TASK.
 * A listed module is opened on the first find that names it; a path not yet listed is vetted, inspected and
 * loaded on demand (err says why not). */
kh_module *kh_modules_find(kh_modules *ms, int kind, const char *what, const kh_host_api *host, char *err,
                           size_t errlen);
/* The same for a name read from a file khost did not write itself (a record's task or plugin): only a module of
 * the registry or the search path, never a path, so nothing a record says makes khost load code. */
kh_module *kh_modules_find_named(kh_modules *ms, int kind, const char *name, const kh_host_api *host, char *err,
                                 size_t errlen);
void kh_modules_free(kh_modules *ms);
#endif
