/* core/sched/slurm/slurm_plan.c — the plan a Slurm submission leaves next to its scripts (see slurm.h). Plain text so
 * a user can read which array index is which cell, and the array tasks need nothing but this file. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/files.h"
#include "base/grow.h"
#include "results/results.h"
#include "sched/slurm/slurm.h"
#include "khost/kit/regular.h"

#define PLAN_MAGIC "khost-slurm-plan\t1"

int kh_slurm_plan_add(kh_slurm_plan *p, const kh_slurm_cell *c) {
    return kh_append(&p->cells, &p->n, &p->cap, c, sizeof *c, 16);
}

void kh_slurm_plan_free(kh_slurm_plan *p) {
    free(p->cells);
    free(p->buf);
    memset(p, 0, sizeof *p);
}

/* The plan's settings lines in the order the writer puts them (the reader takes any order): one table, so the
 * writer and the reader cannot disagree on a key. Every setting is a string but the timeout, a number. */
#define TIMEOUT_SETTING ((size_t)-1)
static const struct {
    const char *key;
    size_t at; /* offsetof the string in kh_slurm_plan */
} settings[] = {
    {"out", offsetof(kh_slurm_plan, out_dir)},        {"data", offsetof(kh_slurm_plan, data_dir)},
    {"fetch", offsetof(kh_slurm_plan, fetch)},        {"timeout", TIMEOUT_SETTING},
    {"epochs", offsetof(kh_slurm_plan, epochs)},      {"batch-size", offsetof(kh_slurm_plan, batch_size)},
    {"seed", offsetof(kh_slurm_plan, seed)},          {"limit-train", offsetof(kh_slurm_plan, limit_train)},
    {"limit-val", offsetof(kh_slurm_plan, limit_val)}, {"math", offsetof(kh_slurm_plan, math)},
};
#define N_SETTINGS (sizeof settings / sizeof *settings)

/* A string setting's line; none when it is not given. */
static void put(FILE *f, const kh_slurm_plan *p, size_t i) {
    const char *v = *(const char *const *)((const char *)p + settings[i].at);
    if (v) fprintf(f, "%s\t%s\n", settings[i].key, v);
}

int kh_slurm_plan_write(const char *path, const kh_slurm_plan *p, char *err, size_t errlen) {
    kh_memfile m;
    FILE *f = kh_memfile_open(&m, path, err, errlen);
    if (!f) return -1;
    fprintf(f, PLAN_MAGIC "\n# written by khost matrix --slurm; cell line K (from 0) is array task K\n");
    for (size_t i = 0; i < N_SETTINGS; i++) {
        if (settings[i].at == TIMEOUT_SETTING) fprintf(f, "timeout\t%.17g\n", p->timeout_s);
        else put(f, p, i);
    }
    for (int i = 0; i < p->n; i++) {
        const kh_slurm_cell *c = &p->cells[i];
        fprintf(f, "cell\t%s\t%s\t%s\t%s\t%s\t%s", c->plugin, c->plugin_arg, c->task, c->task_arg, c->device,
                c->dataset ? c->dataset : "");
        if (c->rep > 0) fprintf(f, "\t%s\t%d/%d", c->seed, c->rep, c->rep_of);
        fputc('\n', f);
    }
    return kh_memfile_write(&m, f, path, err, errlen);
}

static int read_all(const char *path, char **out, char *err, size_t errlen) {
    FILE *f = kh_fopen_regular(path, err, errlen); /* a FIFO or a device named like a plan never blocks */
    if (!f) return -1;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        snprintf(err, errlen, "%s: %s", path, bad ? "read error" : "out of memory");
        return -1;
    }
    buf[n] = 0;
    *out = buf;
    return 0;
}

/* Split s at tabs into at most max fields (in place); returns the count. */
static int fields(char *s, char **f, int max) {
    int n = 0;
    f[n++] = s;
    for (char *p = s; *p && n < max; p++)
        if (*p == '\t') {
            *p = 0;
            f[n++] = p + 1;
        }
    return n;
}

int kh_slurm_plan_read(const char *path, kh_slurm_plan *p, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    if (read_all(path, &p->buf, err, errlen) != 0) return -1;
    if (strncmp(p->buf, PLAN_MAGIC "\n", sizeof PLAN_MAGIC) != 0) {
        snprintf(err, errlen, "%s: not a khost Slurm plan (first line is not '%s')", path, "khost-slurm-plan 1");
        goto bad;
    }
    int line = 0;
    char *save = NULL;
    for (char *l = strtok_r(p->buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        line++;
        if (line == 1 || l[0] == '#') continue;
        char *f[10];
        int nf = fields(l, f, 10);
        if (!strcmp(f[0], "cell")) {
            if (nf != 7 && nf != 9) {
                snprintf(err, errlen, "%s:%d: a cell line has 6 tab-separated fields (8 with a seed), this one %d",
                         path, line, nf - 1);
                goto bad;
            }
            kh_slurm_cell c = {f[1], f[2], f[3], f[4], f[5], f[6], NULL, 0, 0};
            if (nf == 9) { /* --seeds: the element's seed (digits, as the plan's seed) and k/N */
                int used = 0;
                c.seed = f[7];
                if (!*f[7] || f[7][strspn(f[7], "0123456789")] || strlen(f[7]) > 19 ||
                    f[8][strspn(f[8], "0123456789/")] || sscanf(f[8], "%d/%d%n", &c.rep, &c.rep_of, &used) != 2 ||
                    f[8][used] || c.rep < 1 || c.rep > c.rep_of || c.rep_of > 1000) {
                    snprintf(err, errlen, "%s:%d: a cell's seed '%s' and k/N '%s': expected digits and 1 <= k <= N <= "
                             "1000", path, line, f[7], f[8]);
                    goto bad;
                }
            }
            if (kh_slurm_plan_add(p, &c) != 0) {
                snprintf(err, errlen, "%s: out of memory", path);
                goto bad;
            }
            continue;
        }
        if (nf != 2) {
            snprintf(err, errlen, "%s:%d: expected 'key<TAB>value'", path, line);
            goto bad;
        }
        const char *v = f[1];
        size_t k = 0;
        while (k < N_SETTINGS && strcmp(f[0], settings[k].key)) k++;
        if (k == N_SETTINGS) {
            snprintf(err, errlen, "%s:%d: unknown key '%s'", path, line, f[0]);
            goto bad;
        }
        /* counts and the seed are decimal digits: "-1" must never be read as 2^64 - 1 further down */
        int count = !strcmp(f[0], "epochs") || !strcmp(f[0], "batch-size") || !strcmp(f[0], "seed") ||
                    !strncmp(f[0], "limit-", 6);
        if (count && (!*v || v[strspn(v, "0123456789")] || strlen(v) > 19)) {
            snprintf(err, errlen, "%s:%d: %s '%s' is not a non-negative integer", path, line, f[0], v);
            goto bad;
        }
        if (settings[k].at != TIMEOUT_SETTING) {
            *(const char **)((char *)p + settings[k].at) = v;
            continue;
        }
        char *end = NULL;
        p->timeout_s = strtod(v, &end);
        if (end == v || *end || !(p->timeout_s >= 0) || !isfinite(p->timeout_s)) {
            snprintf(err, errlen, "%s:%d: timeout '%s' is not seconds >= 0", path, line, v);
            goto bad;
        }
    }
    if (!p->out_dir || !*p->out_dir) {
        snprintf(err, errlen, "%s: no 'out' line (the results folder)", path);
        goto bad;
    }
    if (p->n == 0) {
        snprintf(err, errlen, "%s: no cell lines", path);
        goto bad;
    }
    return 0;
bad:
    kh_slurm_plan_free(p);
    return -1;
}
