/* core/cli/cmd_run.c — `khost [run] --plugin P --task T ...`: one cell in this process. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"
#include "base/pinned.h"
#include "results/setfile.h"
#include "base/args.h"
#include "cell/cell.h"
#include "cell/mapped.h"
#include "cell/mathmode.h"
#include "cli/commands.h"
#include "sched/matrix.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "modules/host_api.h"
#include "results/lockfile.h"
#include "base/procguard.h"
#include "base/subreaper.h"
#include "cell/runguard.h"

typedef struct run_args {
    const char *plugin, *task, *device, *out;
    int64_t epochs, batch, seed, limit_train, limit_val, steps, warmup_steps;
    int json, quiet, seed_set;
    uint32_t math;            /* --math fp32|tf32 (kh_math_mode; default fp32) */
    int64_t repeat;           /* --repeat N: the cell as a one-cell matrix of N repetitions */
    const char *repetition;   /* --repetition k/N/round/position/seed: this run is one (from the matrix) */
    kh_matrix_opts m;         /* what a --repeat hands on to the matrix: the numbers as parsed, in decimal */
    char num[7][24];          /* their text */
} run_args;

/* n as plain decimal text in buf (what the matrix hands its children). */
static const char *decimal(char *buf, size_t size, int64_t n) {
    snprintf(buf, size, "%lld", (long long)n);
    return buf;
}

static int parse(int argc, char **argv, run_args *r) {
    kh_args a;
    kh_args_init(&a, "run", argc, argv);
    const char *opt, *iv, *v;
    while ((opt = kh_args_next(&a, &iv))) {
        if (!strcmp(opt, "--json")) r->json = 1;
        else if (!strcmp(opt, "--quiet") || !strcmp(opt, "-q")) r->quiet = 1;
        else if (!strcmp(opt, "--repetition")) {
            if (!(r->repetition = kh_args_value(&a, opt, iv))) return -1;
        } else if (!strcmp(opt, "--repeat")) {
            if (!(v = kh_args_value(&a, opt, iv)) || kh_args_int64(opt, v, 1, &r->repeat)) return -1;
            if (r->repeat > 1000) {
                fprintf(stderr, "khost run: --repeat expects a count from 1 to 1000, got %lld\n", (long long)r->repeat);
                return -1;
            }
        } else if (!strcmp(opt, "--math")) {
            if (!(v = kh_args_value(&a, opt, iv))) return -1;
            if (kh_math_parse(v, &r->math) != 0) {
                fprintf(stderr, "khost run: --math expects fp32 or tf32, got '%s'\n", v);
                return -1;
            }
            r->m.math = v;
        } else if (!strcmp(opt, "--plugin") || !strcmp(opt, "--task") || !strcmp(opt, "--device") ||
                 !strcmp(opt, "--out")) {
            if (!(v = kh_args_value(&a, opt, iv))) return -1;
            if (!strcmp(opt, "--plugin")) r->plugin = v;
            else if (!strcmp(opt, "--task")) r->task = v;
            else if (!strcmp(opt, "--device")) r->device = v;
            else r->out = r->m.out = v;
        } else if (!strcmp(opt, "--epochs") || !strcmp(opt, "--batch-size") || !strcmp(opt, "--seed") ||
                   !strcmp(opt, "--limit-train") || !strcmp(opt, "--limit-val") || !strcmp(opt, "--steps") ||
                   !strcmp(opt, "--warmup-steps")) {
            int64_t n;
            int64_t min = !strcmp(opt, "--seed") || !strcmp(opt, "--warmup-steps") ? 0 : 1;
            if (!(v = kh_args_value(&a, opt, iv)) || kh_args_int64(opt, v, min, &n)) return -1;
#define DEC(i) decimal(r->num[i], sizeof r->num[i], n)
            if (!strcmp(opt, "--epochs")) r->epochs = n, r->m.epochs = DEC(0);
            else if (!strcmp(opt, "--batch-size")) r->batch = n, r->m.batch_size = DEC(1);
            else if (!strcmp(opt, "--seed")) r->seed = n, r->seed_set = 1, r->m.seed = DEC(2);
            else if (!strcmp(opt, "--limit-train")) r->limit_train = n, r->m.limit_train = DEC(3);
            else if (!strcmp(opt, "--steps")) r->steps = n, r->m.steps = DEC(4);
            else if (!strcmp(opt, "--warmup-steps")) r->warmup_steps = n, r->m.warmup_steps = DEC(5);
            else r->limit_val = n, r->m.limit_val = DEC(6);
#undef DEC
        } else {
            return kh_args_unknown(&a, opt);
        }
    }
    return kh_args_need_cell(&a, r->plugin, r->task);
}

/* k/N/round/position/seed, as the matrix gives a repetition's child. */
static int parse_repetition(const char *s, kh_cell_record *rec) {
    int k, n, round, pos, used = 0;
    unsigned long long seed;
    if (s[strspn(s, "0123456789/")] || /* digits alone: scanf's %llu would take "-1" as 2^64 - 1 */
        sscanf(s, "%d/%d/%d/%d/%llu%n", &k, &n, &round, &pos, &seed, &used) != 5 || s[used] || k < 1 || n < k ||
        round < 1 || pos < 0)
        return -1;
    rec->rep_index = k, rec->rep_of = n, rec->rep_round = round, rec->rep_position = pos;
    rec->order_seed = seed;
    return 0;
}

/* run --repeat N: the one cell as a matrix of N repetitions, each a fresh child process with the matrix's
 * record, resume and failure rules. */
static int run_repeated(kh_host *h, run_args *r) {
    r->m.plugins = r->plugin;
    r->m.tasks = r->task;
    r->m.devices = r->device;
    r->m.repeat = (int)r->repeat;
    r->m.quiet = r->quiet;
    return kh_matrix_run(h, &r->m);
}

int kh_cmd_run(kh_host *h, int argc, char **argv) {
    run_args r;
    memset(&r, 0, sizeof r);
    kh_matrix_opts_init(&r.m);
    if (parse(argc, argv, &r) != 0) return KH_EXIT_USAGE;
    if (r.repeat > 1) return run_repeated(h, &r);
    if (r.quiet) kh_host_set_log_level(KH_LOG_ERROR);
    char err[1024];
    /* --json: the record is the only thing on stdout. What a module prints there (from its constructor on) goes
     * to stderr instead; the record is written to the stdout khost was given. */
    FILE *json_out = NULL;
    if (r.json) {
        fflush(stdout);
        int fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
        if (fd < 0 || !(json_out = fdopen(fd, "w")) || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
            kh_logf(KH_LOG_ERROR, "run --json: cannot keep stdout for the record: %s", strerror(errno));
            if (fd >= 0 && !json_out) close(fd);
            if (json_out) fclose(json_out);
            return KH_EXIT_IO;
        }
    }
    /* the processes a module starts (a helper that setsid()s too) are this cell's: adopted, and ended below */
    if (kh_subreaper_begin() != 0) kh_logf(KH_LOG_WARN, "run: cannot become a child subreaper: %s", strerror(errno));
    const kh_host_api *api = kh_host_api_get();
    kh_module *b = kh_modules_find(&h->mods, KH_MODULE_BACKEND, r.plugin, api, err, sizeof err);
    if (!b) {
        kh_logf(KH_LOG_ERROR, "%s", err);
        return KH_EXIT_MODULE;
    }
    kh_module *t = kh_modules_find(&h->mods, KH_MODULE_TASK, r.task, api, err, sizeof err);
    if (!t) {
        kh_logf(KH_LOG_ERROR, "%s", err);
        return KH_EXIT_MODULE;
    }
    kh_devices *devs = kh_host_devices(h);
    kh_device *dev = kh_host_device(h, r.device);
    if (!dev) return KH_EXIT_DEVICE;
    char out_abs[4096]; /* resolved once: a module's chdir() cannot move where the record goes */
    const char *out_dir = r.out ? r.out : h->reg.results_dir;
    if (out_dir && kh_abs_path(out_dir, out_abs, sizeof out_abs) != 0) {
        kh_logf(KH_LOG_ERROR, "results: %s: cannot make the path absolute: %s", out_dir, strerror(errno));
        return KH_EXIT_IO;
    }
    if (out_dir) out_dir = out_abs;
    if (kh_set_is_packed(out_dir)) {
        kh_logf(KH_LOG_ERROR, "results: %s holds a packed set (%s, khost pack): a finished set takes no new results;"
                " give another --out", out_dir, KH_SETFILE_NAME);
        return KH_EXIT_IO;
    }
    /* Held open from here (base/pinned.h): a module cannot move where the record goes. A matrix cell's folder
     * is the matrix's to make. */
    if ((!kh_procguard_is_child() && kh_mkdirs(out_dir) != 0) || kh_pin_dir(out_dir, 0) != 0) {
        kh_logf(KH_LOG_ERROR, "results: %s: cannot open the results folder: %s", out_dir, strerror(errno));
        return KH_EXIT_IO;
    }
    /* Beside no matrix, and one writer per cell; a matrix cell writes under its parent's lock (lockfile.h). */
    kh_lock dir_lock = {-1, NULL}, cell_lock = {-1, NULL};
    if (!kh_procguard_is_child()) {
        char path[4200], task_dir[4200];
        snprintf(task_dir, sizeof task_dir, "%s/%s", out_dir, t->desc->name);
        if (kh_mkdirs(task_dir) != 0) {
            kh_logf(KH_LOG_ERROR, "results: %s: cannot create: %s", task_dir, strerror(errno));
            return KH_EXIT_IO;
        }
        snprintf(path, sizeof path, "%s/%s", out_dir, KH_LOCK_NAME);
        if (kh_lock_acquire(&dir_lock, path, 0, out_dir, err, sizeof err) != 0) {
            kh_logf(KH_LOG_ERROR, "results: %s", err);
            return KH_EXIT_IO;
        }
        char rec_path[4200];
        kh_record_path(rec_path, sizeof rec_path, out_dir, t->desc->name, b->desc->name, dev->id, "json");
        char *base = strrchr(rec_path, '/');
        snprintf(path, sizeof path, "%.*s/.%.*s.lock", (int)(base - rec_path), rec_path,
                 (int)(strlen(base + 1) - 5), base + 1); /* .<plugin>__<device>.lock beside the record */
        if (kh_lock_acquire(&cell_lock, path, 1, rec_path, err, sizeof err) != 0) {
            kh_logf(KH_LOG_ERROR, "results: %s", err);
            kh_lock_release(&dir_lock);
            return KH_EXIT_IO;
        }
    }

    kh_cell_record rec;
    kh_record_init(&rec);
    if (r.repetition && parse_repetition(r.repetition, &rec) != 0) {
        kh_logf(KH_LOG_ERROR, "run: --repetition expects k/N/round/position/seed with 1 <= k <= N, got '%s'",
                r.repetition);
        kh_lock_release(&cell_lock);
        kh_lock_release(&dir_lock);
        return KH_EXIT_USAGE;
    }
    int code;
    if (kh_device_activate(devs, dev, err, sizeof err) != 0) {
        snprintf(rec.plugin, sizeof rec.plugin, "%s", b->desc->name);
        snprintf(rec.task, sizeof rec.task, "%s", t->desc->name);
        snprintf(rec.device, sizeof rec.device, "%s", dev->id);
        snprintf(rec.status, sizeof rec.status, "error");
        snprintf(rec.reason, sizeof rec.reason, "device %s: %s", dev->id, err);
        code = KH_EXIT_DEVICE;
    } else {
        FILE *out = r.json ? stderr : stdout;
        kh_cell_opts o = {.backend = b, .task = t, .devs = devs, .dev = dev, .epochs = (int)r.epochs,
                          .batch_size = (int)r.batch, .seed = r.seed_set ? (uint64_t)r.seed : h->reg.seed,
                          .math = r.math,
                          .limit_train = r.limit_train, .limit_val = r.limit_val, .steps = r.steps,
                          .warmup_steps = r.warmup_steps,
                          .data_dir = kh_host_data_dir(h), .quiet = r.quiet, .out = out,
                          .checkpoint_dir = out_dir};
        if (!r.quiet)
            fprintf(out, "khost: %s x %s x %s (%s)\n", b->desc->name, t->desc->name, dev->id, dev->name);
        kh_runguard_signals();
        kh_runguard_begin(&rec, out_dir);
        code = kh_cell_run(&o, &rec);
        kh_runguard_end();
        kh_device_release(devs, dev);
        /* the shell's convention for a process stopped by a signal, after the record is safe */
        if (!strcmp(rec.status, "interrupted")) code = 128 + kh_runguard_stop_signal();
    }
    int left = kh_subreaper_end_children();
    if (left > 0) { /* said, and kept in the record: a matrix cell runs --quiet */
        char n_left[16];
        snprintf(n_left, sizeof n_left, "%d", left);
        kh_record_set_env(&rec, "processes_left_running", n_left);
        kh_logf(KH_LOG_WARN, "%s x %s x %s: the cell left %d process(es) running (started by a module): ended",
                rec.plugin, rec.task, rec.device, left);
    }
    struct rusage ru; /* this process ran the cell; a matrix parent replaces it with the exited child's */
    if (getrusage(RUSAGE_SELF, &ru) == 0) rec.peak_rss_bytes = (int64_t)ru.ru_maxrss * 1024;
    if (strcmp(rec.status, "ok") != 0)
        kh_logf(code == KH_EXIT_UNSUPPORTED ? KH_LOG_WARN : KH_LOG_ERROR, "%s x %s x %s: %s: %s", rec.plugin,
                rec.task, rec.device, rec.status, rec.reason);
    struct stat pinned, now;
    if (kh_record_write(&rec, out_dir, err, sizeof err) != 0) {
        kh_logf(KH_LOG_ERROR, "results: %s", err);
        if (code == KH_EXIT_OK) code = KH_EXIT_IO;
    } else if (kh_pinned_stat(&pinned) == 0 && (stat(out_dir, &now) != 0 || now.st_dev != pinned.st_dev ||
                                                 now.st_ino != pinned.st_ino)) {
        kh_logf(KH_LOG_ERROR, "results: the results folder %s was moved or replaced while the cell ran: the record is "
                "in the folder opened at the start, which is no longer at that path", out_dir);
        if (code == KH_EXIT_OK) code = KH_EXIT_IO;
    } else if (!r.quiet && !r.json) {
        char path[4200];
        kh_record_path(path, sizeof path, out_dir, rec.task, rec.plugin, rec.device, "json");
        printf("khost: results in %s\n", path);
    }
    if (json_out) {
        fflush(stdout); /* a module's last words, on stderr, before the record */
        char *js = kh_record_to_json(&rec, 1);
        if (!js || fprintf(json_out, "%s\n", js) < 0 || fflush(json_out) != 0) {
            kh_logf(KH_LOG_ERROR, "run --json: cannot write the record to stdout: %s", js ? strerror(errno) : "out of memory");
            if (code == KH_EXIT_OK) code = KH_EXIT_IO;
        }
        free(js);
        fclose(json_out);
    }
    kh_record_free(&rec);
    kh_lock_release(&cell_lock);
    kh_lock_release(&dir_lock);
    const char *mapped = getenv(KH_MAPPED_ENV); /* the cell is over: what it pulled in is still mapped */
    if (mapped && *mapped && kh_mapped_write(mapped, err, sizeof err) != 0) {
        kh_logf(KH_LOG_ERROR, "%s: %s", KH_MAPPED_ENV, err);
        if (code == KH_EXIT_OK) code = KH_EXIT_IO;
    }
    kh_unpin_dir();
    return code;
}
