/* core/modules/module.h — one module file loaded and negotiated (module.c): dlopen with RTLD_NOW|RTLD_LOCAL,
 * its entry called with the host-services table, the descriptor and api table checked against this host's
 * ABI. Used by discovery (loader.h) and by the inspecting child (scan.h). */
#ifndef KHOST_CORE_MODULE_H
#define KHOST_CORE_MODULE_H

#include <stddef.h>
#include <stdint.h>

#include "khost/khost.h"

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

/* Load one module file in this process, with no inspection: for the scanner child and for tests of the
 * negotiation. On refusal returns non-zero, fills err, and leaves nothing open. */
int kh_module_load(const char *path, const kh_host_api *host, kh_module *out, char *err, size_t errlen);
/* The same; *no_entry tells a plain shared library (no entry symbol) apart from a broken module. */
int kh_module_load_ex(const char *path, const kh_host_api *host, kh_module *out, int *no_entry, char *err,
                      size_t errlen);
void kh_module_unload(kh_module *m);
/* "backend" or "task", for messages. */
const char *kh_module_kind_word(int kind);

#endif
