/* tests/hostile/hostile_backend.c — a backend without the optional predict: it wraps the working backend
 * named by HOSTILE_INNER (a path, fixed at compile time) and hands the host a copy of its table with
 * predict set to NULL, under the name "hostile_nopredict". Compiled by test_hostile.sh. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "khost/khost.h"

static kh_backend_api api;
static kh_module_desc desc;

__attribute__((visibility("default"))) const kh_module_desc *khost_module_entry(const kh_host_api *host) {
    void *h = dlopen(HOSTILE_INNER, RTLD_NOW | RTLD_LOCAL);
    if (!h) return NULL;
    const kh_module_desc *(*entry)(const kh_host_api *);
    void *sym = dlsym(h, "khost_module_entry");
    if (!sym) return NULL;
    memcpy(&entry, &sym, sizeof entry);
    const kh_module_desc *inner = entry(host);
    if (!inner || !inner->api) return NULL;
    memcpy(&api, inner->api, sizeof api);
    api.predict = NULL;
    desc = *inner;
    desc.name = "hostile_nopredict";
    desc.api = &api;
    return &desc;
}
