/* core/sched/matrix_lists.c — the lists of the matrix: the modules --plugins/--tasks/--references name and the
 * devices --devices names, resolved against the host (matrix_internal.h); kh_matrix_pick_modules for Slurm. */
#define _GNU_SOURCE /* strdup, strtok_r */
#include "sched/matrix_internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/exitcodes.h"
#include "base/log.h"
#include "modules/host_api.h"
#include "sched/refcell.h"

// --- the lists of the matrix ----------------------------------------------------------------------------

static int cmp_mod(const void *a, const void *b) {
    return strcmp(((const mx_mod *)a)->name, ((const mx_mod *)b)->name);
}

void mx_pin(kh_host *h, mx_mod *v, int n) {
    for (int i = 0; i < n; i++) v[i].m = v[i].idx >= 0 ? &h->mods.v[v[i].idx] : NULL; /* NULL: a reference */
}

static int mx_add_ref(mx_mod **v, int *n, const char *name) {
    for (int k = 0; k < *n; k++)
        if ((*v)[k].idx < 0 && !strcmp((*v)[k].name, name)) return 0;
    mx_mod *nv = realloc(*v, (size_t)(*n + 1) * sizeof *nv);
    if (!nv) return -1;
    *v = nv;
    nv[(*n)++] = (mx_mod){-1, NULL, name, name};
    return 0;
}

/* Appends the reference frameworks of `list` ("all" or a comma list) as plugins without a module; the
 * names point into kh_refcell_all. Returns a KH_EXIT_ code. */
int mx_references(const char *list, mx_mod **v, int *n) {
    char *copy = strdup(list), *save = NULL;
    int rc = copy ? KH_EXIT_OK : KH_EXIT_IO;
    for (char *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok && rc == KH_EXIT_OK; tok = strtok_r(NULL, ",", &save)) {
        const char *name = kh_refcell_find(tok);
        if (!strcmp(tok, "all")) {
            for (int i = 0; kh_refcell_all[i] && rc == KH_EXIT_OK; i++)
                if (mx_add_ref(v, n, kh_refcell_all[i]) != 0) rc = KH_EXIT_IO;
        } else if (!name) {
            kh_logf(KH_LOG_ERROR, "matrix: --references: unknown reference '%s' (known: pytorch, keras3-jax, "
                                  "keras3-tensorflow, keras3-torch, all)", tok);
            rc = KH_EXIT_USAGE;
        } else if (mx_add_ref(v, n, name) != 0) {
            rc = KH_EXIT_IO;
        }
    }
    if (rc == KH_EXIT_IO) kh_logf(KH_LOG_ERROR, "matrix: out of memory");
    free(copy);
    return rc;
}

static int mx_add_mod(mx_mod **v, int *n, kh_host *h, kh_module *m) {
    int idx = (int)(m - h->mods.v);
    for (int i = 0; i < *n; i++)
        if ((*v)[i].idx == idx) return 0; /* "cntk,cntk.so" is one plugin */
    mx_mod *nv = realloc(*v, (size_t)(*n + 1) * sizeof *nv);
    if (!nv) return -1;
    *v = nv;
    char err[512];
    kh_module *same = kh_modules_find(&h->mods, m->kind, m->desc->name, kh_host_api_get(), err, sizeof err);
    nv[*n] = (mx_mod){idx, NULL, m->desc->name, same == m ? m->desc->name : m->path};
    (*n)++;
    return 0;
}

/* "all" or a comma list, resolved to loaded modules of one kind. Returns a KH_EXIT_ code. */
int mx_modules(kh_host *h, int kind, const char *list, mx_mod **out, int *n) {
    const char *what = kind == KH_MODULE_BACKEND ? "plugin" : "task";
    *out = NULL;
    *n = 0;
    if (!strcmp(list, "all")) {
        kh_modules_load_kind(&h->mods, kind, kh_host_api_get());
        for (int i = 0; i < h->mods.n; i++) {
            kh_module *m = &h->mods.v[i];
            if (m->kind == kind && m->enabled && mx_add_mod(out, n, h, m)) goto oom;
        }
        if (*n == 0) {
            kh_logf(KH_LOG_ERROR, "matrix: no enabled %s modules in %s", what, h->conf_path ? h->conf_path : "the registry");
            return KH_EXIT_MODULE;
        }
    } else {
        char *copy = strdup(list), *save = NULL;
        if (!copy) goto oom;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (!*tok) continue;
            char err[1024];
            kh_module *m = kh_modules_find(&h->mods, kind, tok, kh_host_api_get(), err, sizeof err);
            if (!m) {
                kh_logf(KH_LOG_ERROR, "matrix: %s '%s': %s", what, tok, err);
                free(copy);
                return KH_EXIT_MODULE;
            }
            if (mx_add_mod(out, n, h, m)) {
                free(copy);
                goto oom;
            }
        }
        free(copy);
        if (*n == 0) {
            kh_logf(KH_LOG_ERROR, "matrix: the %s list '%s' is empty", what, list);
            return KH_EXIT_USAGE;
        }
    }
    /* tasks run in the order the user gave them ("all": by name); plugins always by name */
    if (kind == KH_MODULE_BACKEND || !strcmp(list, "all")) qsort(*out, (size_t)*n, sizeof **out, cmp_mod);
    return KH_EXIT_OK;
oom:
    kh_logf(KH_LOG_ERROR, "matrix: out of memory");
    return KH_EXIT_IO;
}

/* Devices as enumerated ids, in enumeration order; "all" = every device. Returns a KH_EXIT_ code. */
int mx_devices(kh_host *h, const char *list, const kh_device ***out, int *n) {
    kh_devices *d = kh_host_devices(h);
    *out = calloc((size_t)(d->n > 0 ? d->n : 1), sizeof **out);
    *n = 0;
    if (!*out) {
        kh_logf(KH_LOG_ERROR, "matrix: out of memory");
        return KH_EXIT_IO;
    }
    if (!list) list = h->reg.default_device ? h->reg.default_device : "auto";
    if (!strcmp(list, "all")) {
        for (int i = 0; i < d->n; i++) (*out)[(*n)++] = &d->v[i];
        if (*n == 0) {
            kh_logf(KH_LOG_ERROR, "matrix: no devices: %s", d->note);
            return KH_EXIT_DEVICE;
        }
        return KH_EXIT_OK;
    }
    char *copy = strdup(list), *save = NULL;
    if (!copy) {
        kh_logf(KH_LOG_ERROR, "matrix: out of memory");
        return KH_EXIT_IO;
    }
    int rc = KH_EXIT_OK;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!*tok) continue;
        char err[600];
        kh_device *dev = kh_devices_find(d, tok, err, sizeof err);
        if (!dev) {
            kh_logf(KH_LOG_ERROR, "matrix: %s", err);
            rc = KH_EXIT_DEVICE;
            break;
        }
        int dup = 0;
        for (int i = 0; i < *n; i++) dup |= (*out)[i] == dev;
        if (!dup) (*out)[(*n)++] = dev; /* at most d->n distinct devices: the array is large enough */
    }
    free(copy);
    if (rc == KH_EXIT_OK && *n == 0) {
        kh_logf(KH_LOG_ERROR, "matrix: the device list '%s' is empty", list);
        rc = KH_EXIT_USAGE;
    }
    return rc;
}

int kh_matrix_pick_modules(kh_host *h, int kind, const char *list, kh_matrix_pick **out, int *n) {
    mx_mod *v = NULL;
    *out = NULL;
    *n = 0;
    int rc = mx_modules(h, kind, list, &v, n);
    if (rc == KH_EXIT_OK && *n > 0) {
        if (!(*out = calloc((size_t)*n, sizeof **out))) {
            kh_logf(KH_LOG_ERROR, "matrix: out of memory");
            rc = KH_EXIT_IO;
        } else {
            for (int i = 0; i < *n; i++) (*out)[i] = (kh_matrix_pick){v[i].name, v[i].arg};
        }
    }
    free(v);
    if (rc != KH_EXIT_OK) *n = 0;
    return rc;
}
