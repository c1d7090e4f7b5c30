/* core/results/cellfiles.c — a folder's record files grouped into cells (cellfiles.h). */
#define _POSIX_C_SOURCE 200809L
#include "base/grow.h"
#include "results/cellfiles.h"
#include "results/setfile.h"
#include "results/results.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bases compared as byte strings of their lengths (a shorter prefix first), then k. */
static int cmp_base(const char *a, int la, const char *b, int lb) {
    int c = memcmp(a, b, (size_t)(la < lb ? la : lb));
    return c ? c : (la > lb) - (la < lb);
}

static int cmp_file(const void *a, const void *b) {
    const kh_cell_file *x = a, *y = b;
    int c = cmp_base(x->name, x->base_len, y->name, y->base_len);
    return c ? c : (x->k > y->k) - (x->k < y->k);
}

void kh_cell_files_free(kh_cell_files *l) {
    for (int i = 0; i < l->n; i++) free(l->v[i].name);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* One name of the folder into l (or counted as odd); 0 ok, -1 out of memory. */
static int add_name(kh_cell_files *l, int *cap, const char *name) {
    char base[256];
    int k;
    if (!kh_cell_parse_name(name, base, sizeof base, &k)) {
        size_t len = strlen(name); /* a .json that is neither a record nor a summary: the reader says so */
        if (name[0] != '.' && len > 5 && !strcmp(name + len - 5, ".json") &&
            !(len > 11 && !strcmp(name + len - 11, ".stats.json")) && l->n_odd++ == 0)
            snprintf(l->odd, sizeof l->odd, "%s", name);
        return 0;
    }
    if (l->n == *cap) {
        kh_cell_file *nv = kh_grow(l->v, cap, sizeof *nv, 64);
        if (!nv) return -1;
        l->v = nv;
    }
    kh_cell_file *f = &l->v[l->n];
    if (!(f->name = strdup(name))) return -1;
    f->base_len = (int)strlen(base);
    f->k = k;
    l->n++;
    return 0;
}

int kh_cell_files_read(const char *dir, kh_cell_files *l, char *err, size_t errlen) {
    memset(l, 0, sizeof *l);
    int cap = 0, rc = 0, n_packed, oom;
    char **packed = kh_set_names(dir, 0, &n_packed, &oom); /* a packed folder's task folder: setfile.h */
    if (packed || oom) {
        for (int i = 0; rc == 0 && i < n_packed; i++) rc = add_name(l, &cap, packed[i]);
        kh_set_names_free(packed);
        if (oom) rc = -1;
    } else {
        DIR *d = opendir(dir);
        if (!d) {
            snprintf(err, errlen, "%s: cannot read: %s", dir, strerror(errno));
            return -1;
        }
        struct dirent *e;
        while (rc == 0 && (e = readdir(d))) rc = add_name(l, &cap, e->d_name);
        closedir(d);
    }
    if (rc != 0) {
        snprintf(err, errlen, "%s: out of memory", dir);
        kh_cell_files_free(l);
        return -2;
    }
    if (l->n > 1) qsort(l->v, (size_t)l->n, sizeof *l->v, cmp_file);
    return 0;
}

int kh_cell_files_run_end(const kh_cell_files *l, int i) {
    int j = i + 1;
    while (j < l->n && !cmp_base(l->v[j].name, l->v[j].base_len, l->v[i].name, l->v[i].base_len)) j++;
    return j;
}

int kh_cell_files_find(const kh_cell_files *l, const char *base) {
    int lb = (int)strlen(base), lo = 0, hi = l->n; /* the first file whose base is not below base */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (cmp_base(l->v[mid].name, l->v[mid].base_len, base, lb) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo < l->n && !cmp_base(l->v[lo].name, l->v[lo].base_len, base, lb) ? lo : -1;
}
