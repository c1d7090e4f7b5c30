/* core/sched/slurm/slurm_submit.c — `khost matrix --slurm`: the selected cells as a Slurm job array (see slurm.h).
 *
 * A job array's tasks share one set of #SBATCH options, and a cuda cell needs a GPU where a cpu cell needs a
 * node's cores, so each device kind gets its own array (and plan, and collector). The scripts carry absolute
 * paths only: the array tasks start in whatever folder Slurm gives them, on another machine.
 */
#define _GNU_SOURCE /* realpath */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/files.h"
#include "base/args.h"
#include "modules/host.h"
#include "cell/env.h"
#include "cell/mathmode.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "modules/host_api.h"
#include "sched/matrix.h"
#include "results/results.h"
#include "sched/slurm/slurm.h"

#ifndef KHOST_VERSION
#define KHOST_VERSION "unknown"
#endif

/* Minutes an array task gets beyond the cell's own timeout: the child is killed at its timeout and the
 * record written well before Slurm's limit, so a cell that hangs ends "timeout" by the matrix's rules. */
#define SL_MARGIN_MIN 5
#define SL_MAX_SBATCH_ARGS 32

typedef struct sl_opts {
    const char *plugins, *tasks, *devices, *out, *data;
    const char *epochs, *batch_size, *limit_train, *limit_val, *seed, *math;
    double timeout_s;
    int seeds; /* --seeds N: N array elements per cell, element k trains from seed S + k - 1 */
    int resume, script_only, fetch_data;
    const char *partition, *account, *time_per_cell, *cpus_per_cell;
    const char *sbatch_args[SL_MAX_SBATCH_ARGS];
    int n_sbatch;
    const char *cell, *collect, *plan; /* the array task's and the collector's own options */
} sl_opts;

int kh_slurm_wanted(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "--slurm", 7)) return 1;
    return 0;
}

static void sl_usage(FILE *f) {
    fprintf(f,
            "usage: khost matrix --slurm|--slurm-script-only [--plugins LIST|all] [--tasks LIST|all]\n"
            "                    [--devices cpu,cuda|all] [--epochs N] [--batch-size N] [--limit-train N]\n"
            "                    [--limit-val N] [--seed N] [--seeds N] [--math fp32|tf32] [--out DIR]\n"
            "                    [--timeout SECONDS] [--resume] [--partition P] [--account A] [--time-per-cell T]\n"
            "                    [--cpus-per-cell N] [--data DIR] [--fetch-data] [--sbatch-arg ARG]...\n"
            "Submits the matrix as a Slurm job array, one array task per cell (per cell and seed with --seeds; one\n"
            "array per device kind), and a collector job that records cells Slurm ended without a record; prints\n"
            "the job ids.\n"
            "  --devices          cpu (default), cuda (one GPU per cell: --gres=gpu:1), all = both\n"
            "  --out DIR          the results folder, shared by every node (default: the registry's)\n"
            "  --seeds N          each cell as N array tasks, task k trained from seed --seed + k - 1 (default\n"
            "                     --seed: the registry's) and written as repetition k, as the local matrix does\n"
            "  --resume           submit only the cells without a finished (ok/unsupported) record\n"
            "  --slurm-script-only  write the scripts under DIR/slurm/ without submitting them\n"
            "  --time-per-cell T  Slurm time limit of each task (default: --timeout + %d minutes)\n"
            "  --cpus-per-cell N  cpu cells ask for N cores (default: a whole node, --exclusive: the\n"
            "                     backend uses every core it may run on)\n"
            "  --data DIR         KHOST_DATA on the nodes (default: this machine's data folder)\n"
            "  --fetch-data       each task first runs tools/fetch-datasets --data DIR for its data set\n"
            "  --sbatch-arg ARG   one more #SBATCH option for the array, e.g. --sbatch-arg=--constraint=h100\n"
            "Exit status: 0 submitted (or written); 2 bad options, or sbatch is missing or refused the job;\n"
            "3 a module cannot be found; 8 the scripts cannot be written.\n",
            SL_MARGIN_MIN);
}

static int count_ok(const char *opt, const char *v, int allow_zero) {
    int64_t x;
    return kh_args_int64(opt, v, allow_zero ? 0 : 1, &x);
}

/* Values end up in tab-separated plan lines and #SBATCH lines: no control characters. */
static int plain(const char *opt, const char *v) {
    for (const char *p = v; *p; p++)
        if ((unsigned char)*p < 0x20) {
            kh_logf(KH_LOG_ERROR, "matrix --slurm: %s '%s': control characters are not allowed", opt, v);
            return -1;
        }
    return 0;
}

/* One token of an #SBATCH line, v then the raw suffix: sbatch splits such a line at whitespace, groups what is in
 * quotes and takes a backslash as an escape, so a token with any of those goes out in double quotes with '"' and
 * '\\' escaped; in a file name (file_name) a '%' of v is one of Slurm's patterns and goes out as "%%", its
 * literal percent sign, while the suffix keeps its patterns (%A_%a). */
static void directive_token(FILE *f, const char *v, int file_name, const char *suffix) {
    int quote = v[strcspn(v, " \t\"'\\")] != 0;
    if (quote) fputc('"', f);
    for (const char *p = v; *p; p++) {
        if (*p == '"' || *p == '\\') fputc('\\', f);
        if (*p == '%' && file_name) fputc('%', f);
        fputc(*p, f);
    }
    fputs(suffix, f);
    fputs(quote ? "\"\n" : "\n", f);
}

/* "#SBATCH <opt>=<value>\n" with the value as one token. */
static void directive(FILE *f, const char *opt, const char *v) {
    fprintf(f, "#SBATCH %s=", opt);
    directive_token(f, v, 0, "");
}

/* Is the sbatch option of arg (--name[=v] or -x[v]) one khost sets itself? sbatch takes any unambiguous prefix
 * of a long option, so every prefix of --array, --output, --error and --job-name counts. */
static const char *owned_option(const char *arg) {
    static const char *const lng[] = {"--array", "--output", "--error", "--job-name"}, *const shrt[] = {"-a", "-o", "-e", "-J"};
    if (arg[0] == '-' && arg[1] == '-') {
        size_t l = strcspn(arg, "=");
        for (size_t i = 0; i < sizeof lng / sizeof lng[0]; i++)
            if (l > 2 && l <= strlen(lng[i]) && !strncmp(arg, lng[i], l)) return lng[i];
        return NULL;
    }
    for (size_t i = 0; i < sizeof shrt / sizeof shrt[0]; i++)
        if (arg[0] == '-' && arg[1] == shrt[i][1]) return shrt[i];
    return NULL;
}

static int sl_parse(int argc, char **argv, sl_opts *o) {
    memset(o, 0, sizeof *o);
    o->timeout_s = 6 * 3600.0; /* the local matrix's default */
    kh_args a;
    kh_args_init(&a, "matrix", argc, argv);
    const char *opt, *iv, *v;
    while ((opt = kh_args_next(&a, &iv))) {
        if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) {
            sl_usage(stdout);
            return 1;
        }
        if (!strcmp(opt, "--slurm") || !strcmp(opt, "--slurm-script-only") || !strcmp(opt, "--resume") ||
            !strcmp(opt, "--quiet") || !strcmp(opt, "--fetch-data")) {
            if (iv) {
                kh_logf(KH_LOG_ERROR, "matrix: %s takes no value", opt);
                return -1;
            }
            if (!strcmp(opt, "--slurm-script-only")) o->script_only = 1;
            else if (!strcmp(opt, "--resume")) o->resume = 1;
            else if (!strcmp(opt, "--fetch-data")) o->fetch_data = 1;
            continue;
        }
        static const char *const known[] = {"--plugins", "--tasks", "--devices", "--out", "--data", "--epochs",
                                            "--batch-size", "--limit-train", "--limit-val", "--seed", "--timeout",
                                            "--partition", "--account", "--time-per-cell", "--cpus-per-cell",
                                            "--sbatch-arg", "--slurm-cell", "--slurm-collect", "--slurm-plan",
                                            "--math", "--seeds"};
        size_t k, nk = sizeof known / sizeof known[0];
        for (k = 0; k < nk && strcmp(opt, known[k]); k++) {
        }
        if (k == nk) {
            kh_logf(KH_LOG_ERROR, "matrix: unknown option '%s' with --slurm (khost matrix --slurm --help)", opt);
            return -1;
        }
        if (!(v = kh_args_value(&a, opt, iv)) || plain(opt, v)) return -1;
        if (!strcmp(opt, "--plugins")) o->plugins = v;
        else if (!strcmp(opt, "--tasks")) o->tasks = v;
        else if (!strcmp(opt, "--devices")) o->devices = v;
        else if (!strcmp(opt, "--out")) o->out = v;
        else if (!strcmp(opt, "--data")) o->data = v;
        else if (!strcmp(opt, "--partition")) o->partition = v;
        else if (!strcmp(opt, "--account")) o->account = v;
        else if (!strcmp(opt, "--slurm-cell")) o->cell = v;
        else if (!strcmp(opt, "--slurm-collect")) o->collect = v;
        else if (!strcmp(opt, "--slurm-plan")) o->plan = v;
        else if (!strcmp(opt, "--math")) {
            uint32_t m;
            if (kh_math_parse(v, &m) != 0) {
                kh_logf(KH_LOG_ERROR, "matrix: --math expects fp32 or tf32, got '%s'", v);
                return -1;
            }
            o->math = v;
        }
        else if (!strcmp(opt, "--sbatch-arg")) {
            if (o->n_sbatch == SL_MAX_SBATCH_ARGS || v[0] != '-') {
                kh_logf(KH_LOG_ERROR, "matrix: --sbatch-arg '%s': %s", v,
                        v[0] != '-' ? "expects an sbatch option (--constraint=h100)" : "too many");
                return -1;
            }
            /* The array tasks and the collector rely on these being khost's own, however spelled. */
            const char *own = owned_option(v);
            if (own) {
                kh_logf(KH_LOG_ERROR, "matrix: --sbatch-arg '%s': khost sets %s itself", v, own);
                return -1;
            }
            o->sbatch_args[o->n_sbatch++] = v;
        } else if (!strcmp(opt, "--seeds")) {
            int64_t n;
            if (kh_args_int64(opt, v, 1, &n) != 0) return -1;
            if (n > 1000) {
                kh_logf(KH_LOG_ERROR, "matrix: --seeds expects a count from 1 to 1000, got '%s'", v);
                return -1;
            }
            o->seeds = (int)n;
        } else if (!strcmp(opt, "--time-per-cell")) {
            if (!*v || strspn(v, "0123456789:-") != strlen(v)) {
                kh_logf(KH_LOG_ERROR, "matrix: --time-per-cell expects a Slurm time (minutes, H:MM:SS, "
                                      "D-HH:MM), got '%s'", v);
                return -1;
            }
            o->time_per_cell = v;
        } else if (!strcmp(opt, "--timeout")) {
            if (kh_args_seconds(v, &o->timeout_s) != 0) {
                kh_logf(KH_LOG_ERROR, "matrix: --timeout expects seconds >= 0, got '%s'", v);
                return -1;
            }
            if (ceil(o->timeout_s / 60.0) + SL_MARGIN_MIN > (double)INT32_MAX) { /* the --time written below */
                kh_logf(KH_LOG_ERROR, "matrix --slurm: --timeout '%s': longer than a Slurm time limit can be", v);
                return -1;
            }
        } else {
            int zero = !strcmp(opt, "--seed") || !strncmp(opt, "--limit", 7);
            if (count_ok(opt, v, zero)) return -1;
            if (!strcmp(opt, "--epochs")) o->epochs = v;
            else if (!strcmp(opt, "--batch-size")) o->batch_size = v;
            else if (!strcmp(opt, "--limit-train")) o->limit_train = v;
            else if (!strcmp(opt, "--limit-val")) o->limit_val = v;
            else if (!strcmp(opt, "--seed")) o->seed = v;
            else o->cpus_per_cell = v;
        }
    }
    if ((o->cell || o->collect) && !o->plan) {
        kh_logf(KH_LOG_ERROR, "matrix: %s needs --slurm-plan FILE", o->cell ? "--slurm-cell" : "--slurm-collect");
        return -1;
    }
    if (!o->plugins) o->plugins = "all";
    if (!o->tasks) o->tasks = "all";
    return 0;
}

/* --devices with Slurm: kinds, not this machine's devices (the login node may have no GPU). */
static int sl_devices(const char *list, int *cpu, int *cuda) {
    *cpu = *cuda = 0;
    if (!list) list = "cpu";
    char *copy = strdup(list), *save = NULL;
    if (!copy) return -1;
    int rc = 0;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "all")) *cpu = *cuda = 1;
        else if (!strcmp(t, "cpu")) *cpu = 1;
        else if (!strcmp(t, "cuda") || !strcmp(t, "cuda:0")) *cuda = 1;
        else {
            kh_logf(KH_LOG_ERROR, "matrix --slurm: device '%s': give cpu, cuda or all (each cuda cell runs on the "
                                  "one GPU Slurm gives its array task, cuda:0 inside the job)", t);
            rc = -1;
        }
    }
    free(copy);
    if (rc == 0 && !*cpu && !*cuda) {
        kh_logf(KH_LOG_ERROR, "matrix --slurm: the device list '%s' is empty", list);
        rc = -1;
    }
    return rc;
}

/* An absolute path for a folder that may not exist yet, symbolic links kept (a link to shared storage is
 * what every node can follow); NULL when out of memory. */
static char *absolute(const char *path) {
    if (path[0] == '/') return strdup(path);
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return NULL;
    size_t n = strlen(cwd) + strlen(path) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s/%s", cwd, path);
    return s;
}

/* 'text' for a shell: single quotes, each ' as '\'' */
static void shq(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++)
        if (*s == '\'') fputs("'\\''", f);
        else fputc(*s, f);
    fputc('\'', f);
}

/* seed: the one the cell is submitted with (NULL: any) */
static int final_and_same(const char *json, const sl_opts *o, const char *seed) {
    kh_cell_record r;
    char err[1200];
    if (kh_record_read(json, &r, err, sizeof err) != 0) return 0;
    int keep = (!strcmp(r.status, "ok") || !strcmp(r.status, "unsupported")) &&
               (!o->epochs || r.epochs_requested == atoi(o->epochs)) &&
               (!o->batch_size || r.batch_size == atoi(o->batch_size)) &&
               (!seed || r.seed == strtoull(seed, NULL, 10)) && kh_math_record_matches(&r, o->math);
    kh_record_free(&r);
    return keep;
}

typedef struct sl_ctx {
    kh_host *h;
    const sl_opts *o;
    const char *out_dir, *data_dir, *fetch, *stamp, *conf;
    uint64_t seed0; /* --seeds: the first seed (--seed, else the registry's) */
} sl_ctx;

/* A script composed in m put in place, executable. */
static int write_script(const char *path, kh_memfile *m, FILE *f, char *err, size_t errlen) {
    if (kh_memfile_write(m, f, path, err, errlen) != 0) return -1;
    if (chmod(path, 0755) != 0) {
        snprintf(err, errlen, "%s: chmod: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static void env_lines(FILE *f, const sl_ctx *x) {
    fputs("export KHOST_CONF=", f);
    shq(f, x->conf);
    fputs("\nexport KHOST_DATA=", f);
    shq(f, x->data_dir);
    fputc('\n', f);
}

/* The array and the collector scripts of one device kind; 0 ok. */
static int write_scripts(const sl_ctx *x, const char *dir, const char *kind, int n, char *err, size_t errlen) {
    const sl_opts *o = x->o;
    char path[4400], plan[4400];
    snprintf(plan, sizeof plan, "%s/cells", dir);
    kh_memfile m;
    FILE *f = kh_memfile_open(&m, dir, err, errlen);
    if (!f) return -1;
    fprintf(f, "#!/bin/bash\n# khost %s matrix on Slurm: array task K runs cell K of %s (written by khost matrix"
               " --slurm)\n", kind, plan);
    fprintf(f, "#SBATCH --job-name=khost-%s\n#SBATCH --array=0-%d\n#SBATCH --output=", kind, n - 1);
    directive_token(f, dir, 1, "/%A_%a.out");
    /* A cell Slurm requeued (node failure, preemption) would start again from nothing and its new record
     * would hide the failure: it is recorded instead, and --resume runs it again. */
    fputs("#SBATCH --no-requeue\n", f);
    if (o->time_per_cell) fprintf(f, "#SBATCH --time=%s\n", o->time_per_cell);
    else if (o->timeout_s > 0) fprintf(f, "#SBATCH --time=%d\n", (int)ceil(o->timeout_s / 60.0) + SL_MARGIN_MIN);
    if (!strcmp(kind, "cuda")) fprintf(f, "#SBATCH --gres=gpu:1\n");
    if (o->cpus_per_cell) fprintf(f, "#SBATCH --cpus-per-task=%s\n", o->cpus_per_cell);
    else if (!strcmp(kind, "cpu")) fprintf(f, "#SBATCH --exclusive\n");
    if (o->partition) directive(f, "--partition", o->partition);
    if (o->account) directive(f, "--account", o->account);
    for (int i = 0; i < o->n_sbatch; i++) {
        fputs("#SBATCH ", f);
        directive_token(f, o->sbatch_args[i], 0, "");
    }
    env_lines(f, x);
    fputs("# exec: khost is the task's own process, so Slurm's SIGTERM (time limit, scancel) reaches it and it\n"
          "# records the cell before the SIGKILL\nexec ", f);
    shq(f, x->h->exe_path);
    fputs(" matrix --slurm-cell \"$SLURM_ARRAY_TASK_ID\" --slurm-plan ", f);
    shq(f, plan);
    fputc('\n', f);
    snprintf(path, sizeof path, "%s/array.sh", dir);
    if (write_script(path, &m, f, err, errlen) != 0) return -1;

    if (!(f = kh_memfile_open(&m, dir, err, errlen))) return -1;
    fprintf(f, "#!/bin/bash\n# khost: after the array (argument: its job id), records every cell it left without"
               " a record\n#SBATCH --job-name=khost-%s-collect\n#SBATCH --output=", kind);
    directive_token(f, dir, 1, "/collect-%j.out");
    fputs("#SBATCH --time=10\n", f);
    if (o->partition) directive(f, "--partition", o->partition);
    if (o->account) directive(f, "--account", o->account);
    env_lines(f, x);
    fputs("exec ", f);
    shq(f, x->h->exe_path);
    fputs(" matrix --slurm-collect \"$1\" --slurm-plan ", f);
    shq(f, plan);
    fputc('\n', f);
    snprintf(path, sizeof path, "%s/collect.sh", dir);
    return write_script(path, &m, f, err, errlen);
}

/* sbatch --parsable ... -> the job id ("123", from "123;cluster"); 0 ok. */
static int sbatch(char *const argv[], char *id, size_t n) {
    char out[4096];
    int rc = kh_slurm_exec(argv, out, sizeof out, 120);
    size_t digits = strspn(out, "0123456789");
    if (rc != 0 || digits == 0 || digits >= n) {
        size_t l = strlen(out);
        while (l && (out[l - 1] == '\n' || out[l - 1] == ' ')) out[--l] = 0;
        char cmd[600] = "";
        for (int i = 0; argv[i]; i++)
            snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), "%s%s", i ? " " : "", argv[i]);
        kh_logf(KH_LOG_ERROR, "matrix --slurm: %s: %s%s", cmd,
                rc == -2 ? "no answer in 120 s" : rc == -1 ? "" : "failed: ", out[0] ? out : "no output");
        return -1;
    }
    memcpy(id, out, digits);
    id[digits] = 0;
    return 0;
}

/* One device kind: plan, scripts, submission. Returns a KH_EXIT_ code. */
static int submit_kind(const sl_ctx *x, const char *kind, const kh_matrix_pick *pl, int np,
                       const kh_matrix_pick *tk, int nt) {
    const sl_opts *o = x->o;
    const char *dev = !strcmp(kind, "cuda") ? "cuda:0" : "cpu";
    kh_slurm_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.out_dir = x->out_dir;
    plan.data_dir = x->data_dir;
    plan.fetch = x->fetch;
    plan.timeout_s = o->timeout_s;
    plan.epochs = o->epochs;
    plan.batch_size = o->batch_size;
    plan.seed = o->seed;
    plan.limit_train = o->limit_train;
    plan.limit_val = o->limit_val;
    plan.math = o->math;
    int skipped = 0, rc = KH_EXIT_OK, n_seeds = o->seeds > 1 ? o->seeds : 1;
    /* --seeds: each element's own seed, S + k - 1, in storage that outlives the plan's writing */
    char(*seeds)[24] = calloc((size_t)n_seeds, sizeof *seeds);
    if (!seeds) {
        kh_logf(KH_LOG_ERROR, "matrix --slurm: out of memory");
        return KH_EXIT_IO;
    }
    for (int k = 0; k < n_seeds; k++)
        snprintf(seeds[k], sizeof seeds[k], "%llu", (unsigned long long)(x->seed0 + (uint64_t)k));
    for (int t = 0; t < nt; t++) {
        char err[1024];
        kh_module *tm = kh_modules_find(&x->h->mods, KH_MODULE_TASK, tk[t].arg, kh_host_api_get(), err, sizeof err);
        const kh_task_info *info = tm && tm->task && tm->task->info ? tm->task->info() : NULL;
        for (int p = 0; p < np; p++)
            for (int k = 0; k < n_seeds; k++) {
                int rep = n_seeds > 1 ? k + 1 : 0;
                const char *seed = n_seeds > 1 ? seeds[k] : o->seed;
                char json[4200];
                kh_record_rep_path(json, sizeof json, x->out_dir, tk[t].name, pl[p].name, dev, rep, "json");
                if (o->resume && final_and_same(json, o, seed)) {
                    skipped++;
                    continue;
                }
                kh_slurm_cell c = {pl[p].name, pl[p].arg, tk[t].name, tk[t].arg, dev,
                                   info && info->dataset ? info->dataset : "", rep ? seed : NULL, rep,
                                   rep ? n_seeds : 0};
                if (plain("--plugins", c.plugin_arg) || plain("--tasks", c.task_arg)) {
                    kh_slurm_plan_free(&plan);
                    free(seeds);
                    return KH_EXIT_USAGE;
                }
                if (kh_slurm_plan_add(&plan, &c) != 0) {
                    kh_logf(KH_LOG_ERROR, "matrix --slurm: out of memory");
                    kh_slurm_plan_free(&plan);
                    free(seeds);
                    return KH_EXIT_IO;
                }
            }
    }
    if (skipped) printf("slurm: %s: %d cell(s) skipped (recorded ok or unsupported)\n", kind, skipped);
    if (plan.n == 0) {
        printf("slurm: %s: every cell has a finished record: nothing to submit\n", kind);
        kh_slurm_plan_free(&plan);
        free(seeds);
        return KH_EXIT_OK;
    }
    char dir[4200], path[4400], err[1400];
    snprintf(dir, sizeof dir, "%s/slurm/%s-%s", x->out_dir, x->stamp, kind);
    snprintf(path, sizeof path, "%s/cells", dir);
    if (kh_mkdirs(dir) != 0) {
        kh_logf(KH_LOG_ERROR, "matrix --slurm: %s: cannot create: %s", dir, strerror(errno));
        rc = KH_EXIT_IO;
    } else if (kh_slurm_plan_write(path, &plan, err, sizeof err) != 0 ||
               write_scripts(x, dir, kind, plan.n, err, sizeof err) != 0) {
        kh_logf(KH_LOG_ERROR, "matrix --slurm: %s", err);
        rc = KH_EXIT_IO;
    }
    int n = plan.n;
    kh_slurm_plan_free(&plan);
    free(seeds);
    if (rc != KH_EXIT_OK) return rc;
    if (o->script_only) {
        /* the line is meant to be pasted into a shell: the paths go in single quotes */
        char a_sh[4400], c_sh[4400];
        snprintf(a_sh, sizeof a_sh, "%s/array.sh", dir);
        snprintf(c_sh, sizeof c_sh, "%s/collect.sh", dir);
        printf("slurm: %s: %d cell(s): wrote %s and %s; submit with:\n  J=$(sbatch --parsable ", kind, n, a_sh, c_sh);
        shq(stdout, a_sh);
        fputs(") && sbatch --dependency=afterany:$J ", stdout);
        shq(stdout, c_sh);
        fputs(" \"$J\"\n", stdout);
        return KH_EXIT_OK;
    }
    char job[64], coll[64], dep[96], array_sh[4400], collect_sh[4400];
    snprintf(array_sh, sizeof array_sh, "%s/array.sh", dir);
    snprintf(collect_sh, sizeof collect_sh, "%s/collect.sh", dir);
    char *a1[] = {"sbatch", "--parsable", array_sh, NULL};
    if (sbatch(a1, job, sizeof job) != 0) return KH_EXIT_USAGE;
    snprintf(dep, sizeof dep, "--dependency=afterany:%s", job);
    char *a2[] = {"sbatch", "--parsable", dep, collect_sh, job, NULL};
    if (sbatch(a2, coll, sizeof coll) != 0) {
        printf("slurm: %s: %d cell(s) -> job %s (array 0-%d), but no collector job; plan %s\n", kind, n, job,
               n - 1, path);
        return KH_EXIT_USAGE;
    }
    /* For khost report: which array a plan became (a cell without a record names its array task). */
    char jpath[4400], jtext[160];
    snprintf(jpath, sizeof jpath, "%s/job", dir);
    int jl = snprintf(jtext, sizeof jtext, "%s %s\n", job, coll);
    if (kh_write_atomic(jpath, jtext, (size_t)jl, err, sizeof err) != 0)
        kh_logf(KH_LOG_WARN, "matrix --slurm: %s", err);
    printf("slurm: %s: %d cell(s) -> job %s (array 0-%d), collector job %s; plan %s\n", kind, n, job, n - 1, coll,
           path);
    fflush(stdout);
    return KH_EXIT_OK;
}

static int submit(kh_host *h, const sl_opts *o) {
    int cpu, cuda;
    if (sl_devices(o->devices, &cpu, &cuda) != 0) return KH_EXIT_USAGE;
    kh_matrix_pick *pl = NULL, *tk = NULL;
    int np = 0, nt = 0, rc;
    char *out_dir = NULL, *data_dir = NULL, *fetch = NULL, *conf = NULL;
    if ((rc = kh_matrix_pick_modules(h, KH_MODULE_BACKEND, o->plugins, &pl, &np)) != KH_EXIT_OK) goto done;
    if ((rc = kh_matrix_pick_modules(h, KH_MODULE_TASK, o->tasks, &tk, &nt)) != KH_EXIT_OK) goto done;
    const char *out = o->out ? o->out : h->reg.results_dir;
    if (!out || !*out) {
        kh_logf(KH_LOG_ERROR, "matrix --slurm: no results folder: give --out DIR or set results_dir in %s",
                h->conf_path ? h->conf_path : "the registry");
        rc = KH_EXIT_USAGE;
        goto done;
    }
    if (kh_mkdirs(out) != 0) {
        kh_logf(KH_LOG_ERROR, "matrix --slurm: %s: cannot create: %s", out, strerror(errno));
        rc = KH_EXIT_IO;
        goto done;
    }
    const char *data = o->data ? o->data : kh_host_data_dir(h);
    if (!(out_dir = absolute(out)) || !(data_dir = absolute(data && *data ? data : "data")) ||
        !(conf = absolute(h->conf_path ? h->conf_path : "khost.ini"))) {
        kh_logf(KH_LOG_ERROR, "matrix --slurm: cannot make the paths of the results, data and registry absolute");
        rc = KH_EXIT_IO;
        goto done;
    }
    if (o->fetch_data) {
        /* The build tree and the source tree: build/khost and tools/fetch-datasets share a parent. */
        char guess[PATH_MAX + 64];
        snprintf(guess, sizeof guess, "%s", h->exe_path);
        char *slash = strrchr(guess, '/');
        if (slash) *slash = 0;
        snprintf(guess + strlen(guess), sizeof guess - strlen(guess), "/../tools/fetch-datasets");
        if (!(fetch = realpath(guess, NULL)) || access(fetch, X_OK) != 0) {
            kh_logf(KH_LOG_ERROR, "matrix --slurm: --fetch-data: %s: %s", guess, "not found or not executable");
            rc = KH_EXIT_USAGE;
            goto done;
        }
    }
    char stamp[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    size_t sl = strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    snprintf(stamp + sl, sizeof stamp - sl, "-%ld", (long)getpid());
    uint64_t seed0 = o->seed ? strtoull(o->seed, NULL, 10) : h->reg.seed;
    sl_ctx x = {h, o, out_dir, data_dir, fetch ? fetch : "", stamp, conf, seed0};
    if (o->seeds > 1 && x.seed0 > (uint64_t)INT64_MAX - (uint64_t)(o->seeds - 1)) {
        kh_logf(KH_LOG_ERROR, "matrix --slurm: --seeds %d from seed %llu: the last seed would pass %lld, the largest "
                "--seed khost run takes", o->seeds, (unsigned long long)x.seed0, (long long)INT64_MAX);
        rc = KH_EXIT_USAGE;
        goto done;
    }
    if (cpu && (rc = submit_kind(&x, "cpu", pl, np, tk, nt)) != KH_EXIT_OK) goto done;
    if (cuda) rc = submit_kind(&x, "cuda", pl, np, tk, nt);
done:
    free(pl);
    free(tk);
    free(out_dir);
    free(data_dir);
    free(fetch);
    free(conf);
    return rc;
}

int kh_cmd_matrix_slurm(kh_host *h, int argc, char **argv) {
    sl_opts o;
    int prc = sl_parse(argc, argv, &o);
    if (prc) return prc > 0 ? KH_EXIT_OK : KH_EXIT_USAGE;
    if (o.cell) return kh_slurm_run_cell(h, o.plan, o.cell);
    if (o.collect) return kh_slurm_collect(h, o.plan, o.collect);
    return submit(h, &o);
}
