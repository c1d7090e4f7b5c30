/* core/sched/matrix.c — `khost matrix`: every plugin x task x device cell, each in a freshly exec'ed child.
 *
 * CUDA state does not survive fork, and a crash, hang or OOM in one cell must lose nothing else, so each
 * cell is `khost run ...` started with posix_spawn (fork+exec, or vfork+exec: nothing of the parent's
 * driver state reaches the child) in its own process group, with KHOST_CONF naming the registry in use.
 * The parent only enumerates devices (cuInit, no context) to resolve names; it never touches a GPU.
 *
 * Outcome of a cell -> its record (<out>/<task>/<plugin>__<device>.json):
 *   exit 0            the child's own record (status "ok"); missing -> "error", "no record written"
 *   exit != 0         the child's own record when it wrote one (diverged/unsupported/error/data); else one
 *                     written here: "data" for KH_EXIT_DATA, "unsupported" for KH_EXIT_UNSUPPORTED,
 *                     "error" otherwise, the reason quoting the last line of the child's log
 *   killed by signal  "crashed", "signal 11 (Segmentation fault)"
 *   timeout           "timeout", "no result after N s" (the whole process group is killed)
 *   over the limit    "oom": the child's own record when a backend or the host reported out of memory
 *                     under --memory-limit; a child killed by SIGABRT/SIGSEGV/SIGBUS/SIGKILL under a limit
 *                     whose log tail speaks of memory (bad_alloc, "out of memory", ENOMEM) is "oom" too;
 *                     any other signal stays "crashed", the limit noted in the reason
 * Process safety: cells get KHOST_PARENT_PID (procguard.h: they die with this process, their group with
 * them) and KHOST_MEMORY_LIMIT (RLIMIT_AS, set by the child before it loads anything); the results
 * folder is locked exclusively for the whole matrix (lockfile.h; cells inherit the lock); a cell's leftover temporary
 * record files (a cell killed mid-write) are removed before it runs again.
 * The child's stdout and stderr go to <out>/<task>/<plugin>__<device>.log, kept for post-mortems.
 * --resume skips a cell whose record has a final status, "ok" or "unsupported" (rerunning them would give
 * the same answer), unless --epochs, --batch-size or --seed given now differ from the record's; every
 * other status (error, data, diverged, crashed, timeout) is retried, since those
 * are what a rerun after fixing something is for. Without --resume a cell's old record is deleted before
 * it runs, so a stale record can never pass for a new one.
 * Exit status: 0 when every cell ended "ok" or "unsupported", KH_EXIT_TRAIN otherwise (also when
 * interrupted); KH_EXIT_USAGE / KH_EXIT_MODULE / KH_EXIT_DEVICE / KH_EXIT_IO when the matrix cannot start.
 */
#define _GNU_SOURCE /* strsignal, environ */
#include "base/files.h"
#include "sched/matrix.h"
#include "results/cellstats.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cell/cell.h"
#include "cell/mathmode.h"
#include "modules/host.h"
#include "cell/env.h"
#include "base/exitcodes.h"
#include "results/git_rev.h"
#include "modules/host_api.h"
#include "results/lockfile.h"
#include "base/child.h"
#include "base/procguard.h"
#include "sched/refcell.h"
#include "results/results.h"
#include "khost/kit/clock.h"
#include "khost/kit/rng.h"
#include "base/args.h"

#ifndef KHOST_VERSION
#define KHOST_VERSION "unknown"
#endif

extern char **environ;

/* Six hours: the slowest published cell (theano cifar10_cnn on a Titan X, 630 s x 20 epochs = 3.5 h)
 * fits with room; a CPU run of the full benchmark needs --timeout 0 or more. */
#define KH_MATRIX_DEFAULT_TIMEOUT_S (6 * 3600.0)
/* Time a child gets between SIGTERM and SIGKILL to flush and exit on its own. */
#define KH_MATRIX_GRACE_S 5.0

// --- options --------------------------------------------------------------------------------------------
typedef struct mx_opts {
    const char *plugins, *tasks, *devices, *out;
    const char *epochs, *batch_size, *limit_train, *limit_val, *seed; /* passed through as given */
    const char *steps, *warmup_steps;                                  /* likewise */
    const char *references;  /* --references: frameworks of tools/reference run as cells (refcell.h) */
    const char *math;                                                  /* --math, checked by kh_math_parse */
    int repeat;          /* repetitions of every cell, each its own child process (default 1) */
    uint64_t order_seed; /* the rounds' orders are drawn from it */
    int order_seed_set;
    double timeout_s;
    const char *memory_limit; /* as given; checked by kh_parse_bytes */
    int resume, quiet;
} mx_opts;

static void mx_usage(FILE *f) {
    fprintf(f,
            "usage: khost matrix [--plugins LIST|all] [--tasks LIST|all] [--devices LIST|all]\n"
            "                    [--epochs N] [--batch-size N] [--limit-train N] [--limit-val N] [--seed N]\n"
            "                    [--steps N] [--warmup-steps N] [--repeat N] [--order-seed S]\n"
            "                    [--math fp32|tf32] [--references LIST|all] [--out DIR] [--timeout SECONDS]\n"
            "                    [--memory-limit BYTES[K|M|G]] [--resume] [--quiet]\n"
            "Runs every plugin x task x device cell in its own child process (khost run).\n"
            "  LIST            comma-separated names; all = every enabled module / every device\n"
            "                  (defaults: plugins all, tasks all, devices = the registry's default_device)\n"
            "  --out DIR       results folder (default: the registry's results_dir)\n"
            "  --timeout S     per cell; 0 = none (default 21600, six hours)\n"
            "  --memory-limit  per cell address space (RLIMIT_AS), e.g. 4G; a cell over it is recorded as oom\n"
            "  --steps N       train N batches per epoch (steady-state timing); --warmup-steps N untimed before\n"
            "  --math M        FP32 math of every cell: fp32 (default, strict) or tf32 (CUDA tensor cores; a cpu\n"
            "                  cell records fp32 and that tf32 was ignored)\n"
            "  --repeat N      run every cell N times, each a fresh child, in rounds: within a round the cells\n"
            "                  run in an order shuffled from --order-seed (default: from the clock; recorded)\n"
            "                  and repetition k is written as <task>/<plugin>__<device>.rep<k>.json\n"
            "  --references L  also run these frameworks of tools/reference as cells, in the same rounds and with the\n"
            "                  same options: pytorch, keras3-jax, keras3-tensorflow, keras3-torch, or all\n"
            "                  (tools/reference/setup installs them; --plugins none runs only the references)\n"
            "  --resume        skip cells (repetitions) already recorded as ok or unsupported; rerun the others\n"
            "  --quiet         print only failed cells and the summary\n"
            "  --slurm ...     submit the cells as a Slurm job array instead (khost matrix --slurm --help)\n"
            "Exit status: 0 when every cell ended ok or unsupported, 1 otherwise.\n");
}

/* A positive decimal integer (what the child accepts); returns 0 when valid. */
static int check_count(const char *opt, const char *v, int allow_zero) {
    char *end = NULL;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (!*v || *v == '-' || *v == '+' || *end || errno || (!allow_zero && x == 0) ||
        x > (unsigned long long)kh_args_max(opt)) {
        kh_logf(KH_LOG_ERROR, "matrix: %s expects a %s integer of at most %lld, got '%s'", opt,
                allow_zero ? "non-negative" : "positive", (long long)kh_args_max(opt), v);
        return -1;
    }
    return 0;
}

static int mx_parse(int argc, char **argv, mx_opts *o) {
    memset(o, 0, sizeof *o);
    o->timeout_s = KH_MATRIX_DEFAULT_TIMEOUT_S;
    o->repeat = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        char name[64];
        const char *eq = strchr(a, '=');
        if (strncmp(a, "--", 2) == 0 && eq && (size_t)(eq - a) < sizeof name) {
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = 0;
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
        }
        if (!strcmp(name, "-h") || !strcmp(name, "--help")) {
            mx_usage(stdout);
            return 1;
        }
        if (!strcmp(name, "--resume") || !strcmp(name, "--quiet")) {
            if (val) {
                kh_logf(KH_LOG_ERROR, "matrix: %s takes no value", name);
                return -1;
            }
            *(!strcmp(name, "--resume") ? &o->resume : &o->quiet) = 1;
            continue;
        }
        static const char *const with_value[] = {"--plugins",     "--tasks",     "--devices",   "--out",
                                                 "--epochs",      "--batch-size", "--limit-train",
                                                 "--limit-val",   "--seed",      "--timeout",
                                                 "--memory-limit", "--steps",    "--warmup-steps",
                                                 "--repeat",      "--order-seed", "--math",
                                                 "--references"};
        size_t k;
        for (k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
            if (!strcmp(name, with_value[k])) break;
        if (k == sizeof with_value / sizeof with_value[0]) {
            kh_logf(KH_LOG_ERROR, "matrix: unknown option '%s' (khost matrix --help lists them)", a);
            return -1;
        }
        if (!val) {
            if (i + 1 >= argc) {
                kh_logf(KH_LOG_ERROR, "matrix: %s needs a value", name);
                return -1;
            }
            val = argv[++i];
        }
        if (!strcmp(name, "--plugins")) o->plugins = val;
        else if (!strcmp(name, "--tasks")) o->tasks = val;
        else if (!strcmp(name, "--devices")) o->devices = val;
        else if (!strcmp(name, "--out")) o->out = val;
        else if (!strcmp(name, "--references")) o->references = val;
        else if (!strcmp(name, "--timeout")) {
            char *end = NULL;
            errno = 0;
            double t = strtod(val, &end);
            if (!*val || *end || errno || !(t >= 0) || !isfinite(t)) {
                kh_logf(KH_LOG_ERROR, "matrix: --timeout expects seconds >= 0, got '%s'", val);
                return -1;
            }
            o->timeout_s = t;
        } else if (!strcmp(name, "--math")) {
            uint32_t m;
            if (kh_math_parse(val, &m) != 0) {
                kh_logf(KH_LOG_ERROR, "matrix: --math expects fp32 or tf32, got '%s'", val);
                return -1;
            }
            o->math = val;
        } else if (!strcmp(name, "--memory-limit")) {
            uint64_t bytes;
            if (kh_parse_bytes(val, &bytes) != 0 || bytes < (16u << 20)) {
                kh_logf(KH_LOG_ERROR, "matrix: --memory-limit expects a size of at least 16M (bytes, or with K, M, G), "
                                      "got '%s'", val);
                return -1;
            }
            o->memory_limit = val;
        } else if (!strcmp(name, "--repeat") || !strcmp(name, "--order-seed")) {
            char *end = NULL;
            errno = 0;
            unsigned long long x = strtoull(val, &end, 10);
            int is_repeat = !strcmp(name, "--repeat");
            if (!*val || *val == '-' || *val == '+' || *end || errno || (is_repeat && (x < 1 || x > 1000))) {
                kh_logf(KH_LOG_ERROR, "matrix: %s expects %s, got '%s'", name,
                        is_repeat ? "a count from 1 to 1000" : "a non-negative integer", val);
                return -1;
            }
            if (is_repeat) o->repeat = (int)x;
            else o->order_seed = x, o->order_seed_set = 1;
        } else {
            int allow_zero = !strcmp(name, "--seed") || !strncmp(name, "--limit", 7) || !strcmp(name, "--warmup-steps");
            if (check_count(name, val, allow_zero)) return -1;
            if (!strcmp(name, "--steps")) o->steps = val;
            else if (!strcmp(name, "--warmup-steps")) o->warmup_steps = val;
            else if (!strcmp(name, "--epochs")) o->epochs = val;
            else if (!strcmp(name, "--batch-size")) o->batch_size = val;
            else if (!strcmp(name, "--limit-train")) o->limit_train = val;
            else if (!strcmp(name, "--limit-val")) o->limit_val = val;
            else o->seed = val;
        }
    }
    if (!o->plugins) o->plugins = "all";
    if (!o->tasks) o->tasks = "all";
    return 0;
}

// --- the lists of the matrix ----------------------------------------------------------------------------
/* Modules are kept by index until every list is resolved: loading one on demand (a path) may realloc
 * the module array, so pointers are only taken afterwards (mx_pin). */
typedef struct mx_mod {
    int idx;
    kh_module *m;
    const char *name; /* descriptor name: records and output use it */
    const char *arg;  /* what the child gets: the name when it resolves to this module, else the path */
} mx_mod;

static int cmp_mod(const void *a, const void *b) {
    return strcmp(((const mx_mod *)a)->name, ((const mx_mod *)b)->name);
}

static void mx_pin(kh_host *h, mx_mod *v, int n) {
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
static int mx_references(const char *list, mx_mod **v, int *n) {
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
static int mx_modules(kh_host *h, int kind, const char *list, mx_mod **out, int *n) {
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
static int mx_devices(kh_host *h, const char *list, const kh_device ***out, int *n) {
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

// --- records --------------------------------------------------------------------------------------------
/* "12.3" for seconds, with more digits below a second so short smoke runs do not print 0.0. */
static void fmt_seconds(double s, char *buf, size_t n) {
    if (!isfinite(s))
        snprintf(buf, n, "?");
    else if (s >= 1.0)
        snprintf(buf, n, "%.1f", s);
    else
        snprintf(buf, n, "%.3g", s);
}

/* The last non-empty line of the child's log (its error message, usually). */
static void last_log_line(const char *path, char *buf, size_t n) {
    buf[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return;
    char tail[2048];
    long size = (fseek(f, 0, SEEK_END) == 0) ? ftell(f) : -1;
    long from = size > (long)sizeof tail - 1 ? size - (long)sizeof tail + 1 : 0;
    size_t got = 0;
    if (size >= 0 && fseek(f, from, SEEK_SET) == 0) got = fread(tail, 1, sizeof tail - 1, f);
    fclose(f);
    tail[got] = 0;
    while (got && (tail[got - 1] == '\n' || tail[got - 1] == '\r' || tail[got - 1] == ' ')) tail[--got] = 0;
    char *start = strrchr(tail, '\n');
    start = start ? start + 1 : tail;
    snprintf(buf, n, "%s", start);
}

/* Does the tail of a child's log blame memory? (libc, C++ and the host all say it in one of these ways.) */
static int mx_speaks_of_memory(const char *path) {
    char tail[4097];
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    size_t got = 0;
    if (size >= 0 && fseek(f, size > 4096 ? size - 4096 : 0, SEEK_SET) == 0) got = fread(tail, 1, 4096, f);
    fclose(f);
    tail[got] = 0;
    for (size_t i = 0; i < got; i++)
        if (tail[i] >= 'A' && tail[i] <= 'Z') tail[i] = (char)(tail[i] - 'A' + 'a');
    static const char *const words[] = {"out of memory", "bad_alloc", "cannot allocate memory", "memory exhausted"};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        if (strstr(tail, words[i])) return 1;
    return 0;
}

/* Temporary files of a cell's record (<json>.tmp.PID) left by a writer that was killed mid-write. */
static void mx_remove_partial(const char *record_path) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", record_path);
    char *slash = strrchr(dir, '/');
    if (!slash) return;
    *slash = 0;
    const char *base = record_path + (slash - dir) + 1;
    size_t blen = strlen(base);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, base, blen) || strncmp(e->d_name + blen, ".tmp.", 5)) continue;
        char p[4500];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p) != 0 && errno != ENOENT)
            kh_logf(KH_LOG_WARN, "matrix: cannot remove the partial record %s: %s", p, strerror(errno));
    }
    closedir(d);
}

static int final_status(const char *s) { return !strcmp(s, "ok") || !strcmp(s, "unsupported"); }

/* --resume reuses a record only when the settings given now match what it was measured with. */
static int mx_same_settings(const kh_cell_record *r, const mx_opts *o) {
    if (o->epochs && r->epochs_requested != atoi(o->epochs)) return 0;
    if (o->batch_size && r->batch_size != atoi(o->batch_size)) return 0;
    if (o->seed && r->seed != strtoull(o->seed, NULL, 10)) return 0;
    /* the data limits (recorded in the environment by the cell when set): a record of 2000 samples is no
     * answer for a run on all of them, nor the other way round */
    const char *lt = kh_record_get_env(r, "limit_train"), *lv = kh_record_get_env(r, "limit_val");
    if (strtoll(lt ? lt : "0", NULL, 10) != (o->limit_train ? strtoll(o->limit_train, NULL, 10) : 0)) return 0;
    if (strtoll(lv ? lv : "0", NULL, 10) != (o->limit_val ? strtoll(o->limit_val, NULL, 10) : 0)) return 0;
    if (!kh_math_record_matches(r, o->math)) return 0;
    /* an "ok" that holds no finished epochs or no metric is not a result (a hand-edited or truncated record) */
    if (!strcmp(r->status, "ok") &&
        (r->n_rows < 1 || r->n_rows < r->epochs_requested || !isfinite(r->metric_value))) return 0;
    return 1;
}

typedef struct mx_cell {
    const mx_mod *plugin, *task;
    const kh_device *dev;
    const kh_task_info *info; /* may be NULL */
    const char *out_dir;
    const mx_opts *o;
    uint64_t reg_seed;
    char started_at[32];
    int rep, round, position; /* repetition rep (0: the cell is not repeated) of round, position in it */
} mx_cell;

/* A record for a cell whose child could not write one (or was killed): what we know, from the parent. */
static void mx_fill_record(kh_cell_record *r, const mx_cell *c, const char *status, const char *reason,
                           const char *log_path, int fresh) {
    snprintf(r->plugin, sizeof r->plugin, "%s", c->plugin->name);
    snprintf(r->task, sizeof r->task, "%s", c->task->name);
    snprintf(r->device, sizeof r->device, "%s", c->dev->id);
    snprintf(r->status, sizeof r->status, "%s", status);
    snprintf(r->reason, sizeof r->reason, "%s", reason);
    if (c->rep > 0) {
        r->rep_index = c->rep, r->rep_of = c->o->repeat, r->rep_round = c->round, r->rep_position = c->position;
        r->order_seed = c->o->order_seed;
    }
    char buf[256];
    if (fresh) { /* otherwise the child's record already says all this, more precisely */
        r->epochs_requested = c->o->epochs ? atoi(c->o->epochs) : c->info ? c->info->epochs : 0;
        r->batch_size = c->o->batch_size ? atoi(c->o->batch_size) : c->info ? c->info->batch_size : 0;
        r->seed = c->o->seed ? strtoull(c->o->seed, NULL, 10) : c->reg_seed;
        if (c->info && c->info->metric) snprintf(r->metric, sizeof r->metric, "%s", c->info->metric);
        kh_record_set_env(r, "khost_version", KHOST_VERSION);
        kh_record_set_env(r, "git_rev", kh_git_rev());
        if (c->plugin->m)
            kh_record_set_env(r, "plugin_version", c->plugin->m->desc->version ? c->plugin->m->desc->version : "");
        else /* the report labels reference rows by this member, failed ones too */
            kh_record_set_env(r, "reference", c->plugin->name);
        kh_record_set_env(r, "task_version", c->task->m->desc->version ? c->task->m->desc->version : "");
        kh_record_set_env(r, "device_name", c->dev->name);
        kh_record_set_env(r, "device_pci_bus_id", c->dev->pci_bus_id);
        if (gethostname(buf, sizeof buf) == 0) {
            buf[sizeof buf - 1] = 0;
            kh_record_set_env(r, "hostname", buf);
        }
        kh_record_set_env(r, "started_at", c->started_at);
        kh_env_add_slurm(r);
    }
    kh_env_now_iso(buf, sizeof buf);
    kh_record_set_env(r, "finished_at", buf);
    if (log_path) kh_record_set_env(r, "log", log_path);
}

/* Turn the child's outcome into the cell's record (reading the child's, or writing one). */
static void mx_settle(const mx_cell *c, const kh_child_result *res, const char *json_path, const char *log_path,
                      kh_cell_record *r) {
    char err[1200], reason[600], line[400];
    int have = kh_record_read(json_path, r, err, sizeof err) == 0;
    if (!have) kh_record_init(r);
    const char *status = NULL;
    reason[0] = 0;
    switch (res->outcome) {
    case KH_CHILD_EXITED:
        if (have) return; /* the child's own account, whatever its exit code */
        last_log_line(log_path, line, sizeof line);
        if (res->code == 0) {
            status = "error";
            snprintf(reason, sizeof reason, "no record written (exit 0)%s%s", line[0] ? ": " : "", line);
        } else {
            status = res->code == KH_EXIT_DATA ? "data" : res->code == KH_EXIT_UNSUPPORTED ? "unsupported" : "error";
            snprintf(reason, sizeof reason, "exit %d without a record%s%s", res->code, line[0] ? ": " : "", line);
        }
        break;
    case KH_CHILD_SIGNALED: {
        const char *sn = strsignal(res->code);
        status = "crashed";
        snprintf(reason, sizeof reason, "signal %d (%s)", res->code, sn ? sn : "unknown signal");
        if (c->o->memory_limit) {
            int s = res->code;
            last_log_line(log_path, line, sizeof line);
            if ((s == SIGABRT || s == SIGSEGV || s == SIGBUS || s == SIGKILL) && mx_speaks_of_memory(log_path))
                status = "oom";
            size_t len = strlen(reason);
            snprintf(reason + len, sizeof reason - len, " under --memory-limit %s%s%s", c->o->memory_limit,
                     line[0] ? ": " : "", line);
        }
        break;
    }
    case KH_CHILD_INTERRUPTED:
        /* the cell's own "interrupted" record when it stopped in time; else its checkpoint, relabelled */
        if (have && !strcmp(r->status, "interrupted")) return;
        status = "interrupted";
        snprintf(reason, sizeof reason, "the matrix was interrupted after %d of %d epochs of this cell", have ? r->n_rows : 0,
                 have ? r->epochs_requested : 0);
        break;
    case KH_CHILD_TIMEOUT:
        status = "timeout";
        snprintf(reason, sizeof reason, "no result after %g s", c->o->timeout_s);
        break;
    default:
        status = "error";
        snprintf(reason, sizeof reason, "%s", res->err);
        break;
    }
    /* A record the child wrote before dying keeps its epochs and environment; the status is ours. */
    mx_fill_record(r, c, status, reason, log_path, !have);
    if (kh_record_write(r, c->out_dir, err, sizeof err) != 0)
        kh_logf(KH_LOG_ERROR, "matrix: cannot write the record of %s x %s x %s: %s", c->plugin->name, c->task->name,
                c->dev->id, err);
}

static void mx_print_end(const mx_cell *c, int i, int n, const kh_cell_record *r, double wall_s, const char *log_path) {
    int ok = !strcmp(r->status, "ok");
    if (c->o->quiet && final_status(r->status)) return;
    printf("[%d/%d] %s x %s x %s ... ", i, n, c->plugin->name, c->task->name, c->dev->id);
    if (ok) {
        char t[32];
        fmt_seconds(r->mean_epoch_s, t, sizeof t);
        printf("ok %s s/epoch", t);
        if (r->metric[0] && isfinite(r->metric_value)) printf(" %s %.4f", r->metric, r->metric_value);
    } else {
        size_t sl = strlen(r->status);
        /* "unsupported: conv2d ..." already names its status */
        if (r->reason[0] && !(strncmp(r->reason, r->status, sl) == 0 && r->reason[sl] == ':'))
            printf("%s: %s", r->status, r->reason);
        else
            printf("%s", r->reason[0] ? r->reason : r->status);
    }
    if (wall_s >= 0) printf(" (%.1f s)", wall_s);
    if (!final_status(r->status) && log_path) printf(" log: %s", log_path);
    printf("\n");
    fflush(stdout);
}

static int mx_env_is(const char *kv, const char *name) {
    size_t n = strlen(name);
    return !strncmp(kv, name, n) && kv[n] == '=';
}

/* The cells' environment: ours, with KHOST_CONF (the registry in use), KHOST_PARENT_PID and
 * KHOST_MEMORY_LIMIT set. The owned strings live in one block after the pointers: one free. */
static char **mx_env(const char *conf_path, const char *memory_limit) {
    size_t n = 0;
    while (environ[n]) n++;
    size_t extra = (conf_path ? strlen(conf_path) : 0) + (memory_limit ? strlen(memory_limit) : 0) + 128;
    char **e = malloc((n + 4) * sizeof *e + extra);
    if (!e) return NULL;
    char *w = (char *)(e + n + 4), *end = w + extra;
    size_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (!mx_env_is(environ[i], "KHOST_CONF") && !mx_env_is(environ[i], KH_PARENT_PID_ENV) &&
            !mx_env_is(environ[i], KH_MEMORY_LIMIT_ENV))
            e[j++] = environ[i];
    if (conf_path) {
        e[j++] = w;
        w += snprintf(w, (size_t)(end - w), "KHOST_CONF=%s", conf_path) + 1;
    }
    e[j++] = w;
    w += snprintf(w, (size_t)(end - w), "%s=%ld", KH_PARENT_PID_ENV, (long)getpid()) + 1;
    if (memory_limit) {
        e[j++] = w;
        snprintf(w, (size_t)(end - w), "%s=%s", KH_MEMORY_LIMIT_ENV, memory_limit);
    }
    e[j] = NULL;
    return e;
}

// --- the command ----------------------------------------------------------------------------------------
int kh_matrix_local(kh_host *h, int argc, char **argv) {
    mx_opts o;
    int prc = mx_parse(argc, argv, &o);
    if (prc) return prc > 0 ? KH_EXIT_OK : KH_EXIT_USAGE;

    mx_mod *plugins = NULL, *tasks = NULL;
    const kh_device **devs = NULL;
    int np = 0, nt = 0, nd = 0, rc;
    char **envp = NULL, err0[1200];
    kh_lock lock = {-1, NULL};
    char ref_runner[4200] = "";
    int no_plugins = !strcmp(o.plugins, "none"); /* --plugins none: the references alone */
    if (no_plugins && !o.references) {
        kh_logf(KH_LOG_ERROR, "matrix: --plugins none needs --references (there is nothing to run)");
        rc = KH_EXIT_USAGE;
        goto done;
    }
    if (!no_plugins && (rc = mx_modules(h, KH_MODULE_BACKEND, o.plugins, &plugins, &np)) != KH_EXIT_OK) goto done;
    if (o.references) {
        if ((rc = mx_references(o.references, &plugins, &np)) != KH_EXIT_OK) goto done;
        if (kh_refcell_runner(h->exe_path, ref_runner, sizeof ref_runner, err0, sizeof err0) != 0) {
            kh_logf(KH_LOG_ERROR, "matrix: --references: %s", err0);
            rc = KH_EXIT_USAGE;
            goto done;
        }
    }
    if ((rc = mx_modules(h, KH_MODULE_TASK, o.tasks, &tasks, &nt)) != KH_EXIT_OK) goto done;
    mx_pin(h, plugins, np);
    mx_pin(h, tasks, nt);
    if ((rc = mx_devices(h, o.devices, &devs, &nd)) != KH_EXIT_OK) goto done;
    const char *out_dir = o.out ? o.out : h->reg.results_dir;
    if (!out_dir || !*out_dir) {
        kh_logf(KH_LOG_ERROR, "matrix: no results folder: give --out DIR or set results_dir in %s",
                h->conf_path ? h->conf_path : "the registry");
        rc = KH_EXIT_USAGE;
        goto done;
    }
    if (kh_mkdirs(out_dir) != 0) {
        kh_logf(KH_LOG_ERROR, "matrix: %s: cannot create: %s", out_dir, strerror(errno));
        rc = KH_EXIT_IO;
        goto done;
    }
    char lock_path[4200];
    snprintf(lock_path, sizeof lock_path, "%s/%s", out_dir, KH_LOCK_NAME);
    if (kh_lock_acquire(&lock, lock_path, 1, out_dir, err0, sizeof err0) != 0) {
        kh_logf(KH_LOG_ERROR, "matrix: %s", err0);
        rc = KH_EXIT_IO;
        goto done;
    }
    if (!(envp = mx_env(h->conf_path, o.memory_limit))) {
        kh_logf(KH_LOG_ERROR, "matrix: out of memory");
        rc = KH_EXIT_IO;
        goto done;
    }

    if (o.repeat > 1 && !o.order_seed_set) o.order_seed = (uint64_t)time(NULL);
    int total = np * nt * nd * o.repeat, idx = 0, n_done = 0, n_final = 0, n_ok = 0, n_skipped = 0, interrupted = 0;
    int n_by[7] = {0}; /* ok, unsupported, crashed, timeout, error (and data), diverged, oom */
    if (!o.quiet)
        printf("matrix: %d plugin(s) x %d task(s) x %d device(s)%s = %d cell(s) -> %s\n", np, nt, nd,
               o.repeat > 1 ? " x repetitions" : "", total, out_dir);
    if (o.repeat > 1 && !o.quiet) printf("matrix: %d round(s), order seed %llu\n", o.repeat, (unsigned long long)o.order_seed);
    fflush(stdout);
    kh_child_signals(1);
    /* Rounds of every cell; with --repeat N > 1 each round runs the cells in its own order, drawn from the
     * order seed, so that drift of the machine's speed spreads over every backend instead of landing on the
     * one that always runs last. One round keeps the listed order (tasks, then plugins, then devices). */
    int n_cells = np * nt * nd;
    struct { int t, p, d; } *cells = malloc(((size_t)n_cells + 1) * sizeof *cells);
    int *order = malloc(((size_t)n_cells + 1) * sizeof *order);
    if (!cells || !order) {
        free(cells), free(order);
        kh_logf(KH_LOG_ERROR, "matrix: out of memory");
        rc = KH_EXIT_IO;
        goto done;
    }
    for (int t = 0, k = 0; t < nt; t++)
        for (int p = 0; p < np; p++)
            for (int d = 0; d < nd; d++, k++) cells[k].t = t, cells[k].p = p, cells[k].d = d;
    for (int round = 1; round <= o.repeat && !interrupted; round++) {
        for (int k = 0; k < n_cells; k++) order[k] = k;
        if (o.repeat > 1) {
            kh_rng rng;
            kh_rng_seed(&rng, kh_seed_mix(o.order_seed, 0x0DE5, (uint64_t)round, 0));
            for (int k = n_cells - 1; k > 0; k--) { /* Fisher-Yates */
                int j = (int)kh_rng_below(&rng, (uint64_t)k + 1), x = order[k];
                order[k] = order[j], order[j] = x;
            }
        }
        for (int pos = 0; pos < n_cells && !interrupted; pos++) {
            if (kh_child_interrupted()) { /* arrived between cells: start nothing more */
                interrupted = 1;
                break;
            }
            idx++;
            int t = cells[order[pos]].t, p = cells[order[pos]].p, d = cells[order[pos]].d;
            const kh_task_info *info = tasks[t].m->task && tasks[t].m->task->info ? tasks[t].m->task->info() : NULL;
            int rep = o.repeat > 1 ? round : 0;
            mx_cell c = {&plugins[p], &tasks[t], devs[d], info, out_dir, &o, h->reg.seed, {0}, rep, round, pos};
            kh_env_now_iso(c.started_at, sizeof c.started_at);
            char json[4200], csv[4200], log[4200], dir[4200];
            kh_record_rep_path(json, sizeof json, out_dir, c.task->name, c.plugin->name, c.dev->id, rep, "json");
            kh_record_rep_path(csv, sizeof csv, out_dir, c.task->name, c.plugin->name, c.dev->id, rep, "csv");
            kh_record_rep_path(log, sizeof log, out_dir, c.task->name, c.plugin->name, c.dev->id, rep, "log");
            kh_cell_record r;
            char err[1200];
            if (o.resume && kh_record_read(json, &r, err, sizeof err) == 0) {
                if (final_status(r.status) && mx_same_settings(&r, &o)) {
                    if (!o.quiet) {
                        printf("[%d/%d] %s x %s x %s ... skipped (recorded %s)\n", idx, total, c.plugin->name,
                               c.task->name, c.dev->id, r.status);
                        fflush(stdout);
                    }
                    n_final++;
                    n_skipped++;
                    n_done++;
                    n_by[strcmp(r.status, "ok") ? 1 : 0]++;
                    kh_record_free(&r);
                    continue;
                }
                kh_record_free(&r);
            }
            if ((unlink(json) != 0 && errno != ENOENT) || (unlink(csv) != 0 && errno != ENOENT))
                kh_logf(KH_LOG_WARN, "matrix: cannot remove the old record %s: %s", json, strerror(errno));
            mx_remove_partial(json);
            mx_remove_partial(csv);
            snprintf(dir, sizeof dir, "%s/%s", out_dir, c.task->name);
            if (kh_mkdirs(dir) != 0)
                kh_logf(KH_LOG_WARN, "matrix: %s: cannot create: %s", dir, strerror(errno));

            if (c.plugin->m && kh_cell_device_unavailable(c.plugin->m->backend, c.dev->kind, err, sizeof err)) {
                kh_record_init(&r); /* not scheduled: the plugin cannot use this device kind */
                mx_fill_record(&r, &c, "unsupported", err, NULL, 1);
                if (kh_record_write(&r, out_dir, err, sizeof err) != 0)
                    kh_logf(KH_LOG_ERROR, "matrix: cannot write the record of %s x %s x %s: %s", c.plugin->name,
                            c.task->name, c.dev->id, err);
                n_done++, n_final++, n_by[1]++;
                mx_print_end(&c, idx, total, &r, -1, NULL);
                kh_record_free(&r);
                continue;
            }
            char *args[40]; /* every option below given at once, and the NULL */
            int a = 0;
            if (c.plugin->m) {
                args[a++] = h->exe_path;
                args[a++] = "run";
                args[a++] = "--plugin";
                args[a++] = (char *)c.plugin->arg;
                args[a++] = "--task";
                args[a++] = (char *)c.task->arg;
            } else { /* tools/reference/run FRAMEWORK TASK: the same options follow */
                args[a++] = ref_runner;
                args[a++] = (char *)c.plugin->name;
                args[a++] = (char *)c.task->name;
            }
            args[a++] = "--device";
            args[a++] = (char *)c.dev->id;
            args[a++] = "--out";
            args[a++] = (char *)out_dir;
            args[a++] = "--quiet";
            if (o.epochs) { args[a++] = "--epochs"; args[a++] = (char *)o.epochs; }
            if (o.batch_size) { args[a++] = "--batch-size"; args[a++] = (char *)o.batch_size; }
            if (o.limit_train) { args[a++] = "--limit-train"; args[a++] = (char *)o.limit_train; }
            if (o.limit_val) { args[a++] = "--limit-val"; args[a++] = (char *)o.limit_val; }
            if (o.seed) { args[a++] = "--seed"; args[a++] = (char *)o.seed; }
            if (o.steps) { args[a++] = "--steps"; args[a++] = (char *)o.steps; }
            if (o.warmup_steps) { args[a++] = "--warmup-steps"; args[a++] = (char *)o.warmup_steps; }
            if (o.math) { args[a++] = "--math"; args[a++] = (char *)o.math; }
            char repetition[96];
            if (rep) { /* k/N/round/position/order seed, for the child's record */
                snprintf(repetition, sizeof repetition, "%d/%d/%d/%d/%llu", rep, o.repeat, round, pos,
                         (unsigned long long)o.order_seed);
                args[a++] = "--repetition";
                args[a++] = repetition;
            }
            args[a] = NULL;

            if (!o.quiet) {
                printf("[%d/%d] %s x %s x %s ...\n", idx, total, c.plugin->name, c.task->name, c.dev->id);
                fflush(stdout);
            }
            kh_child_result res;
            kh_child_run(args, envp, log, o.timeout_s, KH_MATRIX_GRACE_S, &res);
            if (res.outcome == KH_CHILD_INTERRUPTED) {
                /* No record: the user stopped it, and --resume should run it again. */
                printf("[%d/%d] %s x %s x %s ... interrupted\n", idx, total, c.plugin->name, c.task->name,
                       c.dev->id);
                interrupted = 1;
                break;
            }
            mx_settle(&c, &res, json, log, &r);
            if (res.peak_rss_bytes > 0 && r.peak_rss_bytes != res.peak_rss_bytes) {
                /* the kernel's account of the exited child covers all it did, after its record too */
                r.peak_rss_bytes = res.peak_rss_bytes;
                if (kh_record_write(&r, out_dir, err, sizeof err) != 0)
                    kh_logf(KH_LOG_ERROR, "matrix: cannot write the record of %s x %s x %s: %s", c.plugin->name,
                            c.task->name, c.dev->id, err);
            }
            n_done++;
            mx_print_end(&c, idx, total, &r, res.wall_s, log);
            if (!strcmp(r.status, "ok")) n_by[0]++, n_final++;
            else if (!strcmp(r.status, "unsupported")) n_by[1]++, n_final++;
            else if (!strcmp(r.status, "crashed")) n_by[2]++;
            else if (!strcmp(r.status, "timeout")) n_by[3]++;
            else if (!strcmp(r.status, "diverged")) n_by[5]++;
            else if (!strcmp(r.status, "oom")) n_by[6]++;
            else n_by[4]++; /* error, data, anything unexpected */
            kh_record_free(&r);
        }
    }
    /* every repeated cell's statistics beside its records (<cell>.stats.json: medians, intervals, warnings) */
    for (int k = 0; o.repeat > 1 && !interrupted && k < n_cells; k++) {
        char serr[600];
        const char *tn = tasks[cells[k].t].name, *pn = plugins[cells[k].p].name, *dn = devs[cells[k].d]->id;
        if (kh_stats_write_cell_summary(out_dir, tn, pn, dn, serr, sizeof serr) != 0)
            kh_logf(KH_LOG_WARN, "matrix: statistics of %s x %s x %s: %s", pn, tn, dn, serr);
    }
    free(cells);
    free(order);
    kh_child_signals(0);
    n_ok = n_by[0];
    printf("matrix: %d of %d cell(s) done: %d ok, %d unsupported, %d crashed, %d timeout, %d error, %d diverged"
           ", %d oom%s%s -> %s\n",
           n_done, total, n_ok, n_by[1], n_by[2], n_by[3], n_by[4], n_by[5], n_by[6],
           n_skipped ? " (resumed: skipped recorded cells)" : "", interrupted ? "; interrupted" : "", out_dir);
    fflush(stdout);
    rc = !interrupted && n_final == total ? KH_EXIT_OK : KH_EXIT_TRAIN;
done:
    free(envp);
    kh_lock_release(&lock);
    free(plugins);
    free(tasks);
    free(devs);
    return rc;
}

// --- one cell's record, for the Slurm array task (slurm_cell.c) ----------------------------------------
static void mx_from_ref(const kh_matrix_cell_ref *ref, mx_mod *p, mx_mod *t, mx_opts *o, mx_cell *c) {
    *p = (mx_mod){0, ref->plugin, ref->plugin->desc->name, ref->plugin->desc->name};
    *t = (mx_mod){0, ref->task, ref->task->desc->name, ref->task->desc->name};
    memset(o, 0, sizeof *o);
    o->epochs = ref->epochs;
    o->batch_size = ref->batch_size;
    o->seed = ref->seed;
    o->timeout_s = ref->timeout_s;
    const kh_task_info *info = ref->task->task && ref->task->task->info ? ref->task->task->info() : NULL;
    *c = (mx_cell){p, t, ref->dev, info, ref->out_dir, o, ref->reg_seed, {0}, 0, 1, 0};
    o->repeat = 1;
    snprintf(c->started_at, sizeof c->started_at, "%s", ref->started_at);
}

void kh_matrix_settle(const kh_matrix_cell_ref *ref, const kh_child_result *res, kh_cell_record *r) {
    mx_mod p, t;
    mx_opts o;
    mx_cell c;
    mx_from_ref(ref, &p, &t, &o, &c);
    char json[4200], log[4200];
    kh_record_path(json, sizeof json, ref->out_dir, t.name, p.name, ref->dev->id, "json");
    kh_record_path(log, sizeof log, ref->out_dir, t.name, p.name, ref->dev->id, "log");
    mx_settle(&c, res, json, log, r);
}

void kh_matrix_fill(const kh_matrix_cell_ref *ref, kh_cell_record *r, const char *status, const char *reason,
                    int fresh) {
    mx_mod p, t;
    mx_opts o;
    mx_cell c;
    mx_from_ref(ref, &p, &t, &o, &c);
    char log[4200];
    kh_record_path(log, sizeof log, ref->out_dir, t.name, p.name, ref->dev->id, "log");
    mx_fill_record(r, &c, status, reason, log, fresh);
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
