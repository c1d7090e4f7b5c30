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
 * --seeds N runs N rounds, round k every cell from seed S + k - 1 (S: --seed, else the registry's), written as
 * repetition k; a child's record (a reference runner's too) from another seed than it was given fails the cell.
 * --resume skips a cell whose record has a final status, "ok" or "unsupported" (rerunning them would give
 * the same answer), unless --epochs, --batch-size or the seed given now differ from the record's, or it was
 * measured on another machine or by another build (mx_other_machine_or_build: said, and rerun here, so that a
 * task's column never mixes machines or builds); every
 * other status (error, data, diverged, crashed, timeout) is retried, since those
 * are what a rerun after fixing something is for. Without --resume a cell's old record is deleted before
 * it runs, so a stale record can never pass for a new one.
 * Exit status: 0 when every cell ended "ok" or "unsupported", KH_EXIT_TRAIN otherwise (also when
 * interrupted); KH_EXIT_USAGE / KH_EXIT_MODULE / KH_EXIT_DEVICE / KH_EXIT_IO when the matrix cannot start.
 * This file is the command (rounds, order, children, the cells' environment); its options are
 * matrix_options.c, its module and device lists matrix_lists.c, a cell's record matrix_records.c, each child
 * base/child.c.
 */
#define _GNU_SOURCE /* environ */
#include "sched/matrix.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/exitcodes.h"
#include "base/files.h"
#include "base/escape.h"
#include "base/pinned.h"
#include "results/resultsdb.h"
#include "results/setfile.h"
#include "base/procguard.h"
#include "cell/cell.h"
#include "base/sysinfo.h"
#include "devices/blas_tune.h"
#include "cell/env.h"
#include "base/log.h"
#include "results/cellstats.h"
#include "results/lockfile.h"
#include "sched/matrix_internal.h"
#include "sched/eta.h"
#include "sched/refcell.h"
#include "base/subreaper.h"
#include "khost/kit/clock.h"
#include "khost/kit/rng.h"

extern char **environ;

static int mx_env_is(const char *kv, const char *name) {
    size_t n = strlen(name);
    return !strncmp(kv, name, n) && kv[n] == '=';
}

/* After a cell: the run's remaining time, and a measured value outside what the database has seen of this cell on
 * this machine (its last runs' range). */
static void mx_print_progress(const kh_eta *eta, const kh_cell_history *h, const kh_cell_record *r, const int *order,
                              int pos, int round) {
    int n_run, n_db, n_mean;
    double left = kh_eta_left(eta, order, pos, round, &n_run, &n_db, &n_mean);
    if (n_run + n_db + n_mean > 0 && isfinite(left)) {
        char t[48];
        kh_eta_format(left, t, sizeof t);
        printf("matrix: about %s left (%d cell(s): %d timed earlier in this run, %d from the database's history on "
               "this machine, %d from the mean so far)\n", t, n_run + n_db + n_mean, n_run, n_db, n_mean);
    }
    int is_step;
    double v = kh_record_value(r->step_s, (long)r->n_step_s, r->mean_epoch_s, &is_step);
    if (h && h->n_value >= 3 && is_step == h->value_is_step && !strcmp(r->status, "ok") && isfinite(v) &&
        (v < h->value_min || v > h->value_max))
        printf("matrix: %s x %s x %s: %.4g ms per %s is outside this machine's last %d runs of it (%.4g to %.4g ms)\n",
               r->plugin, r->task, r->device, 1e3 * v, is_step ? "step" : "epoch", h->n_value, 1e3 * h->value_min,
               1e3 * h->value_max);
    fflush(stdout);
}

/* A cell's record into the --db database as it lands; a failure is a warning (the record file stands). */
static void mx_db_add(kh_db *db, const char *out_dir, const char *json) {
    char err[4400];
    size_t l = strlen(out_dir);
    if (db && !strncmp(json, out_dir, l) && json[l] == '/' &&
        kh_db_import_file(db, out_dir, json + l + 1, json, err, sizeof err) != 0)
        kh_esc_msg("khost: matrix: warning: --db: ", err);
}

/* Whether path is still the folder st describes (not removed, not replaced by another). */
static int mx_same_folder(const char *path, const struct stat *st) {
    struct stat now;
    return stat(path, &now) == 0 && now.st_dev == st->st_dev && now.st_ino == st->st_ino;
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
    kh_matrix_opts o;
    int prc = mx_parse(argc, argv, &o);
    if (prc) return prc > 0 ? KH_EXIT_OK : KH_EXIT_USAGE;
    return kh_matrix_run(h, &o);
}

int kh_matrix_run(kh_host *h, const kh_matrix_opts *given) {
    kh_matrix_opts o = *given;
    if (!o.plugins) o.plugins = "all";
    if (!o.tasks) o.tasks = "all";

    mx_mod *plugins = NULL, *tasks = NULL;
    const kh_device **devs = NULL;
    int np = 0, nt = 0, nd = 0, rc;
    char **envp = NULL, err0[1200];
    kh_lock lock = {-1, NULL};
    kh_db *db = NULL; /* --db: opened (and checked) before any cell runs */
    char ref_runner[4200] = "";
    int no_plugins = !strcmp(o.plugins, "none"); /* --plugins none: the references alone */
    /* --seeds N: round k trains from seed S + k - 1 (S: --seed, else the registry's), one repetition per seed */
    uint64_t seed0 = o.seed ? strtoull(o.seed, NULL, 10) : h->reg.seed;
    if (o.seeds > 1) {
        if (seed0 > (uint64_t)INT64_MAX - (uint64_t)(o.seeds - 1)) { /* khost run takes seeds up to 2^63 - 1 */
            kh_logf(KH_LOG_ERROR, "matrix: --seeds %d from seed %llu: the last seed would pass %lld, the largest "
                    "--seed khost run takes", o.seeds, (unsigned long long)seed0, (long long)INT64_MAX);
            rc = KH_EXIT_USAGE;
            goto done;
        }
        o.repeat = o.seeds;
    }
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
    char out_abs[4096]; /* resolved once: a module's chdir() cannot move where records go */
    if (kh_abs_path(out_dir, out_abs, sizeof out_abs) != 0) {
        kh_logf(KH_LOG_ERROR, "matrix: %s: cannot make the path absolute: %s", out_dir, strerror(errno));
        rc = KH_EXIT_IO;
        goto done;
    }
    out_dir = out_abs;
    if (kh_set_is_packed(out_dir)) {
        kh_logf(KH_LOG_ERROR, "matrix: %s holds a packed set (%s, khost pack): a finished set takes no new results; "
                "give another --out", out_dir, KH_SETFILE_NAME);
        rc = KH_EXIT_IO;
        goto done;
    }
    if (kh_mkdirs(out_dir) != 0 || kh_pin_dir(out_dir, 0) != 0) { /* held open from here: base/pinned.h */
        kh_logf(KH_LOG_ERROR, "matrix: %s: cannot create: %s", out_dir, strerror(errno));
        rc = KH_EXIT_IO;
        goto done;
    }
    if (kh_subreaper_begin() != 0) /* a cell's orphans come back here, and end with the cell */
        kh_logf(KH_LOG_WARN, "matrix: cannot become a child subreaper: %s", strerror(errno));
    char dberr[4400];
    if (o.db && !(db = kh_db_open(o.db, KH_DB_CREATE, dberr, sizeof dberr))) {
        kh_esc_msg("khost: matrix: --db: ", dberr);
        rc = KH_EXIT_IO;
        goto done;
    }
    struct stat out_st; /* the folder itself: one removed and made again, or replaced, is another inode */
    if (kh_pinned_stat(&out_st) != 0) {
        kh_logf(KH_LOG_ERROR, "matrix: %s: %s", out_dir, strerror(errno));
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
    int vanished = 0, replaced = 0; /* times the results folder was found removed; moved or replaced */
    int n_by[7] = {0}; /* ok, unsupported, crashed, timeout, error (and data), diverged, oom */
    if (!o.quiet)
        printf("matrix: %d plugin(s) x %d task(s) x %d device(s)%s = %d cell(s)%s -> %s\n", np, nt, nd,
               o.seeds > 1 ? " x seeds" : o.repeat > 1 ? " x repetitions" : "", total,
               o.repeat_auto ? " at most" : "", out_dir);
    if (o.seeds > 1 && !o.quiet)
        printf("matrix: %d seed(s), %llu to %llu, one round each (seed k is repetition k), order seed %llu\n", o.seeds,
               (unsigned long long)seed0, (unsigned long long)(seed0 + (uint64_t)o.seeds - 1),
               (unsigned long long)o.order_seed);
    else if (o.repeat_auto && !o.quiet)
        printf("matrix: rounds until every cell's median is known to %g %% (95 %% CI half-width) or %.0f s have passed, "
               "%d to %d, order seed %llu\n", o.auto_pct, o.auto_budget_s, KH_MATRIX_AUTO_MIN_ROUNDS, o.repeat,
               (unsigned long long)o.order_seed);
    else if (o.repeat > 1 && !o.quiet)
        printf("matrix: %d round(s), order seed %llu\n", o.repeat, (unsigned long long)o.order_seed);
    if (o.timing && !o.quiet)
        printf("matrix: timing protocol: %s epoch(s) of %s timed steps after %s untimed warm-up steps, every row the "
               "same (--epochs, --steps, --warmup-steps change it)\n", o.epochs, o.steps, o.warmup_steps);
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
    kh_eta *eta = kh_eta_new(n_cells, o.repeat); /* NULL (out of memory): no estimate, nothing else lost */
    kh_cell_history *hist = db ? calloc((size_t)n_cells, sizeof *hist) : NULL;
    for (int k = 0; hist && k < n_cells; k++) { /* this machine's earlier runs of each cell */
        const kh_device *dv = devs[cells[k].d];
        char machine[600], cpu[256];
        kh_env_cpu_model(cpu, sizeof cpu);
        snprintf(machine, sizeof machine, "%s | %s | %s | ", cpu, kh_cpu_isa(), dv->name);
        if (kh_db_cell_history(db, tasks[cells[k].t].name, plugins[cells[k].p].name, dv->id, machine, &hist[k], dberr,
                               sizeof dberr) != 0) {
            kh_esc_msg("khost: matrix: warning: --db: ", dberr);
            free(hist);
            hist = NULL;
            break;
        }
        kh_eta_prior(eta, k, hist[k].wall_median);
    }
    int *active = o.repeat_auto ? malloc((size_t)n_cells * sizeof *active) : NULL; /* --repeat auto: cells going on */
    for (int k = 0; active && k < n_cells; k++) active[k] = 1;
    double t_begin = kh_now();
    int auto_stop = 0;
    for (int round = 1; round <= o.repeat && !interrupted && !replaced && !auto_stop; round++) {
        double round_start = kh_now();
        char round_seed[24];
        const char *seed_arg = o.seed; /* what every cell of this round gets as --seed (NULL: none) */
        if (o.seeds > 1) {
            snprintf(round_seed, sizeof round_seed, "%llu", (unsigned long long)(seed0 + (uint64_t)round - 1));
            seed_arg = round_seed;
        }
        for (int k = 0; k < n_cells; k++) order[k] = k;
        if (o.repeat > 1) {
            kh_rng rng;
            kh_rng_seed(&rng, kh_seed_mix(o.order_seed, 0x0DE5, (uint64_t)round, 0));
            for (int k = n_cells - 1; k > 0; k--) { /* Fisher-Yates */
                int j = (int)kh_rng_below(&rng, (uint64_t)k + 1), x = order[k];
                order[k] = order[j], order[j] = x;
            }
        }
        for (int pos = 0; pos < n_cells && !interrupted && !replaced; pos++) {
            if (kh_child_interrupted()) { /* arrived between cells: start nothing more */
                interrupted = 1;
                break;
            }
            if (active && !active[order[pos]]) continue; /* --repeat auto: its median is known well enough */
            idx++;
            int t = cells[order[pos]].t, p = cells[order[pos]].p, d = cells[order[pos]].d;
            const kh_task_info *info = tasks[t].m->task && tasks[t].m->task->info ? tasks[t].m->task->info() : NULL;
            int rep = o.repeat > 1 ? round : 0;
            mx_cell c = {&plugins[p], &tasks[t], devs[d], info, out_dir, &o, h->reg.seed, {0}, rep, round, pos, NULL,
                         seed_arg};
            kh_env_now_iso(c.started_at, sizeof c.started_at);
            char json[4200], csv[4200], log[4200], dir[4200];
            kh_record_rep_path(json, sizeof json, out_dir, c.task->name, c.plugin->name, c.dev->id, rep, "json");
            kh_record_rep_path(csv, sizeof csv, out_dir, c.task->name, c.plugin->name, c.dev->id, rep, "csv");
            kh_record_rep_path(log, sizeof log, out_dir, c.task->name, c.plugin->name, c.dev->id, rep, "log");
            kh_cell_record r;
            char err[1200];
            if (o.resume && kh_record_read(json, &r, err, sizeof err) == 0) {
                char other[600];
                int moved = mx_final_status(r.status) && mx_same_settings(&r, &o, c.seed) &&
                            mx_other_machine_or_build(&r, c.dev, other, sizeof other);
                if (moved) /* said even with --quiet: the column is being redone here */
                    printf("[%d/%d] %s x %s x %s ... rerun: %s\n", idx, total, c.plugin->name, c.task->name,
                           c.dev->id, other);
                if (!moved && mx_final_status(r.status) && mx_same_settings(&r, &o, c.seed)) {
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
            if (!mx_same_folder(out_dir, &out_st)) {
                struct stat there;
                if (!kh_pinned_gone() || lstat(out_dir, &there) == 0) {
                    /* moved away, another file or folder in its place: the records so far are in the folder
                     * that moved, and nothing goes into what now has its name */
                    kh_logf(KH_LOG_ERROR, "matrix: the results folder %s was moved or replaced while the matrix ran:"
                            " stopping (the records so far are in the folder that was there)", out_dir);
                    replaced = 1;
                    break;
                }
                kh_logf(KH_LOG_WARN, "matrix: the results folder %s is gone (removed while the matrix ran): "
                        "making it again; the records of the cells before this one are lost", out_dir);
                vanished++;
                if (kh_mkdirs(out_dir) != 0 || kh_pin_dir(out_dir, 1) != 0 || kh_pinned_stat(&out_st) != 0)
                    kh_logf(KH_LOG_ERROR, "matrix: %s: cannot create: %s", out_dir, strerror(errno));
            }
            /* only now, in the folder known to be ours: the old record goes (never through a link) */
            if (kh_unlink(json) != 0 || kh_unlink(csv) != 0)
                kh_logf(KH_LOG_WARN, "matrix: cannot remove the old record %s: %s", json, strerror(errno));
            mx_remove_partial(json);
            mx_remove_partial(csv);
            snprintf(dir, sizeof dir, "%s/%s", out_dir, c.task->name);
            if (kh_mkdirs(dir) != 0)
                kh_logf(KH_LOG_WARN, "matrix: %s: cannot create: %s", dir, strerror(errno));

            if (c.plugin->m && kh_cell_device_unavailable(c.plugin->m->backend, c.dev->kind, err, sizeof err)) {
                kh_record_init(&r); /* not scheduled: the plugin cannot use this device kind */
                mx_fill_record(&r, &c, "unsupported", err, NULL, 1);
                kh_eta_done(eta, order[pos], 0);
                if (kh_record_write(&r, out_dir, err, sizeof err) != 0)
                    kh_logf(KH_LOG_ERROR, "matrix: cannot write the record of %s x %s x %s: %s", c.plugin->name,
                            c.task->name, c.dev->id, err);
                else mx_db_add(db, out_dir, json);
                n_done++, n_final++, n_by[1]++;
                mx_print_end(&c, idx, total, &r, -1, NULL);
                kh_record_free(&r);
                continue;
            }
            char *args[40]; /* every option below given at once, and the NULL */
            int a = 0;
            char stage[4200], staged_json[4200];
            const char *cell_out = out_dir, *settle_json = json;
            if (!c.plugin->m) { /* a runner writes into a folder of its own, checked and copied from there */
                if ((size_t)snprintf(stage, sizeof stage, "%s/.reference-XXXXXX", out_dir) >= sizeof stage ||
                    !mkdtemp(stage)) {
                    snprintf(err, sizeof err, "cannot make a folder for the reference runner in %s: %s", out_dir,
                             strerror(errno));
                    kh_record_init(&r);
                    mx_fill_record(&r, &c, "error", err, NULL, 1);
                    if (kh_record_write(&r, out_dir, err, sizeof err) != 0)
                        kh_logf(KH_LOG_ERROR, "matrix: cannot write the record of %s x %s x %s: %s", c.plugin->name,
                                c.task->name, c.dev->id, err);
                    n_done++, n_by[4]++;
                    mx_print_end(&c, idx, total, &r, -1, NULL);
                    kh_record_free(&r);
                    continue;
                }
                c.stage = cell_out = stage;
                kh_record_rep_path(staged_json, sizeof staged_json, stage, c.task->name, c.plugin->name, c.dev->id,
                                   rep, "json");
                settle_json = staged_json;
            }
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
            args[a++] = (char *)cell_out;
            args[a++] = "--quiet";
            if (o.epochs) { args[a++] = "--epochs"; args[a++] = (char *)o.epochs; }
            if (o.batch_size) { args[a++] = "--batch-size"; args[a++] = (char *)o.batch_size; }
            if (o.limit_train) { args[a++] = "--limit-train"; args[a++] = (char *)o.limit_train; }
            if (o.limit_val) { args[a++] = "--limit-val"; args[a++] = (char *)o.limit_val; }
            if (c.seed) { args[a++] = "--seed"; args[a++] = (char *)c.seed; }
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
            int left = kh_subreaper_end_children(); /* orphans of a cell that died before ending its own */
            if (left > 0)
                kh_logf(KH_LOG_WARN, "matrix: %s x %s x %s left %d process(es) running after its cell: ended",
                        c.plugin->name, c.task->name, c.dev->id, left);
            if (res.outcome == KH_CHILD_INTERRUPTED) {
                if (c.stage) mx_stage_remove(c.stage);
                /* No record: the user stopped it, and --resume should run it again. */
                printf("[%d/%d] %s x %s x %s ... interrupted\n", idx, total, c.plugin->name, c.task->name,
                       c.dev->id);
                interrupted = 1;
                break;
            }
            mx_settle(&c, &res, settle_json, log, &r);
            if (c.stage) mx_stage_remove(c.stage);
            if (res.peak_rss_bytes > 0 && r.peak_rss_bytes != res.peak_rss_bytes) {
                /* the kernel's account of the exited child covers all it did, after its record too */
                r.peak_rss_bytes = res.peak_rss_bytes;
                if (kh_record_write(&r, out_dir, err, sizeof err) != 0)
                    kh_logf(KH_LOG_ERROR, "matrix: cannot write the record of %s x %s x %s: %s", c.plugin->name,
                            c.task->name, c.dev->id, err);
            }
            mx_db_add(db, out_dir, json);
            n_done++;
            mx_print_end(&c, idx, total, &r, res.wall_s, log);
            kh_eta_done(eta, order[pos], res.wall_s);
            if (!o.quiet) /* --repeat auto: the rounds to come are not known; its budget bounds them */
                mx_print_progress(o.repeat_auto ? NULL : eta, hist ? &hist[order[pos]] : NULL, &r, order, pos, round);
            if (!strcmp(r.status, "ok")) n_by[0]++, n_final++;
            else if (!strcmp(r.status, "unsupported")) n_by[1]++, n_final++;
            else if (!strcmp(r.status, "crashed")) n_by[2]++;
            else if (!strcmp(r.status, "timeout")) n_by[3]++;
            else if (!strcmp(r.status, "diverged")) n_by[5]++;
            else if (!strcmp(r.status, "oom")) n_by[6]++;
            else n_by[4]++; /* error, data, anything unexpected */
            kh_record_free(&r);
        }
        if (active && !interrupted && !replaced && round >= KH_MATRIX_AUTO_MIN_ROUNDS) {
            int left = 0, before = 0;
            for (int k = 0; k < n_cells; k++) {
                if (!active[k]) continue;
                before++;
                char base[4200], cdir[4200], serr[600];
                const kh_device *dv = devs[cells[k].d];
                kh_record_path(base, sizeof base, "", "", plugins[cells[k].p].name, dv->id, "json");
                base[strlen(base) - 5] = 0; /* "//<plugin>__<device>.json" -> its base */
                snprintf(cdir, sizeof cdir, "%s/%s", out_dir, tasks[cells[k].t].name);
                kh_cell_stats st;
                double half = INFINITY, med = NAN;
                if (kh_cell_stats_load(cdir, base + 2, &st, serr, sizeof serr) == 0) {
                    const kh_rep_stats *rs = st.step.n ? &st.step : &st.epoch;
                    med = rs->s.median;
                    if (rs->n >= 2 && isfinite(rs->ci.lo) && med > 0) half = (rs->ci.hi - rs->ci.lo) / 2 / med;
                    kh_cell_stats_free(&st);
                }
                if (100 * half <= o.auto_pct) {
                    active[k] = 0;
                    printf("matrix: %s x %s x %s: precise after %d round(s): median %.4g ms, 95 %% CI within ±%.1f %% "
                           "(target %g %%)\n", plugins[cells[k].p].name, tasks[cells[k].t].name, dv->id, round,
                           1e3 * med, 100 * half, o.auto_pct);
                } else left++;
            }
            double spent = kh_now() - t_begin, next = before ? (kh_now() - round_start) * left / before : 0;
            if (left && (spent + next > o.auto_budget_s || round == o.repeat)) {
                for (int k = 0; k < n_cells; k++)
                    if (active[k])
                        printf("matrix: %s x %s x %s: %s after %d round(s): its median is not yet known to %g %%\n",
                               plugins[cells[k].p].name, tasks[cells[k].t].name, devs[cells[k].d]->id,
                               round == o.repeat ? "stopped at the most rounds" : "the time budget is spent", round,
                               o.auto_pct);
                auto_stop = 1;
            } else if (!left) {
                printf("matrix: --repeat auto: every cell precise after %d round(s), %.0f s\n", round, spent);
                auto_stop = 1;
            }
            fflush(stdout);
        }
    }
    free(active);
    if (o.repeat_auto) total = n_done; /* the cells it chose to run */
    /* every repeated cell's statistics beside its records (<cell>.stats.json: medians, intervals, warnings) */
    for (int k = 0; o.repeat > 1 && !interrupted && k < n_cells; k++) {
        char serr[600];
        const char *tn = tasks[cells[k].t].name, *pn = plugins[cells[k].p].name, *dn = devs[cells[k].d]->id;
        if (kh_stats_write_cell_summary(out_dir, tn, pn, dn, serr, sizeof serr) != 0)
            kh_logf(KH_LOG_WARN, "matrix: statistics of %s x %s x %s: %s", pn, tn, dn, serr);
    }
    free(cells);
    free(order);
    kh_eta_free(eta);
    free(hist);
    kh_child_signals(0);
    n_ok = n_by[0];
    printf("matrix: %d of %d cell(s) done: %d ok, %d unsupported, %d crashed, %d timeout, %d error, %d diverged"
           ", %d oom%s%s -> %s\n",
           n_done, total, n_ok, n_by[1], n_by[2], n_by[3], n_by[4], n_by[5], n_by[6],
           n_skipped ? " (resumed: skipped recorded cells)" : "", interrupted ? "; interrupted" : "", out_dir);
    fflush(stdout);
    rc = !interrupted && n_final == total ? KH_EXIT_OK : KH_EXIT_TRAIN;
    if (db && !replaced) { /* the whole folder once more: cells --resume skipped, records rewritten since */
        int added, files, skipped;
        if (kh_db_import_dir(db, out_dir, NULL, &added, &files, &skipped, dberr, sizeof dberr) != 0)
            kh_esc_msg("khost: matrix: warning: --db: ", dberr);
    }
    if (!replaced && !mx_same_folder(out_dir, &out_st)) *(kh_pinned_gone() ? &vanished : &replaced) += 1;
    if (replaced) {
        kh_logf(KH_LOG_ERROR, "matrix: the results folder %s was moved or replaced while the matrix ran: its records "
                "are in the folder that was there when the matrix started", out_dir);
        rc = KH_EXIT_IO;
    } else if (vanished) {
        kh_logf(KH_LOG_ERROR, "matrix: the results folder %s was removed while the matrix ran: records are lost "
                "(run the matrix again, or with --resume)", out_dir);
        rc = KH_EXIT_IO;
    }
done:
    kh_db_close(db);
    free(envp);
    kh_lock_release(&lock);
    kh_unpin_dir();
    free(plugins);
    free(tasks);
    free(devs);
    return rc;
}
