/* core/modules/registry.h — the INI registry (conf/khost.ini), parsed with inih.
 *
 * Sections: [khost] (plugin_dirs, task_dirs: ':'-separated; data_dir, results_dir, default_device, seed;
 * strict_modes, scan_timeout, module_cache: how module files are vetted, see loader.h),
 * [plugin NAME] and [task NAME] (path, enabled, plus module-specific keys readable through
 * kh_host_api.config_get). Relative paths resolve against the INI file's folder. Unknown keys in [khost],
 * and keys other than path/enabled in module sections that the module never asks for, are reported as
 * warnings with file:line; malformed lines are errors with file:line.
 */
#ifndef KHOST_CORE_REGISTRY_H
#define KHOST_CORE_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

typedef struct kh_reg_module {
    char *name;
    int kind;     /* kh_module_kind */
    char *path;   /* absolute, or NULL when the section gives none (found by search) */
    int enabled;
    int line;     /* line of the section header */
} kh_reg_module;

typedef struct kh_reg_kv { /* every key=value seen, for config_get */
    char *section, *key, *value;
    int line;
} kh_reg_kv;

typedef struct kh_registry {
    char *file;         /* absolute path of the INI */
    char *dir;          /* its folder */
    char **plugin_dirs; int n_plugin_dirs; /* absolute */
    char **task_dirs;   int n_task_dirs;
    char *data_dir;     /* absolute; KHOST_DATA overrides */
    char *results_dir;  /* absolute */
    char *default_device; /* "auto" unless set */
    uint64_t seed;
    int strict_modes;   /* 1 unless strict_modes = false: refuse group/world-writable or foreign modules */
    double scan_timeout; /* seconds a module's inspection may take (default 10) */
    char *module_cache; /* absolute; NULL = the XDG default (modcache.h) */
    kh_reg_module *modules; int n_modules;
    kh_reg_kv *kv; int n_kv;
    char **warnings; int n_warnings; /* "file:line: unknown key 'x' in [khost]" */
} kh_registry;

/* Where the registry is: $KHOST_CONF, else <exe dir>/khost.ini, else <exe dir>/../lib/khost/khost.ini.
 * Returns a malloc'ed absolute path, or NULL with err filled. */
char *kh_registry_locate(const char *exe_path, char *err, size_t errlen);
/* Parse; on error returns non-zero with err = "file:line: what is wrong" (or "file: cannot open: why"). */
int kh_registry_load(const char *path, kh_registry *out, char *err, size_t errlen);
void kh_registry_free(kh_registry *r);
/* Value of key in section ("khost", "plugin cntk", "task mnist_mlp"); NULL when absent. */
const char *kh_registry_get(const kh_registry *r, const char *section, const char *key);
#endif
