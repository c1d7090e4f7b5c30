/* core/cmd_run.c — `khost [run] --plugin P --task T ...`: one cell in this process. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cell.h"
#include "commands.h"
#include "exitcodes.h"
#include "host_api.h"
#include "lockfile.h"
#include "procguard.h"
#include "runguard.h"

typedef struct run_args {
    const char *plugin, *task, *device, *out;
    int64_t epochs, batch, seed, limit_train, limit_val, steps, warmup_steps;
    int json, quiet, seed_set;
} run_args;

static int parse(int argc, char **argv, run_args *r) {
    kh_args a;
    kh_args_init(&a, "run", argc, argv);
    const char *opt, *iv, *v;
    while ((opt = kh_args_next(&a, &iv))) {
        if (!strcmp(opt, "--json")) r->json = 1;
        else if (!strcmp(opt, "--quiet") || !strcmp(opt, "-q")) r->quiet = 1;
        else if (!strcmp(opt, "--plugin") || !strcmp(opt, "--task") || !strcmp(opt, "--device") ||
                 !strcmp(opt, "--out")) {
            if (!(v = kh_args_value(&a, opt, iv))) return -1;
            if (!strcmp(opt, "--plugin")) r->plugin = v;
            else if (!strcmp(opt, "--task")) r->task = v;
            else if (!strcmp(opt, "--device")) r->device = v;
            else r->out = v;
        } else if (!strcmp(opt, "--epochs") || !strcmp(opt, "--batch-size") || !strcmp(opt, "--seed") ||
                   !strcmp(opt, "--limit-train") || !strcmp(opt, "--limit-val") || !strcmp(opt, "--steps") ||
                   !strcmp(opt, "--warmup-steps")) {
            int64_t n;
            int64_t min = !strcmp(opt, "--seed") || !strcmp(opt, "--warmup-steps") ? 0 : 1;
            if (!(v = kh_args_value(&a, opt, iv)) || kh_args_int64(opt, v, min, &n)) return -1;
            if (!strcmp(opt, "--epochs")) r->epochs = n;
            else if (!strcmp(opt, "--batch-size")) r->batch = n;
            else if (!strcmp(opt, "--seed")) r->seed = n, r->seed_set = 1;
            else if (!strcmp(opt, "--limit-train")) r->limit_train = n;
            else if (!strcmp(opt, "--steps")) r->steps = n;
            else if (!strcmp(opt, "--warmup-steps")) r->warmup_steps = n;
            else r->limit_val = n;
        } else {
            fprintf(stderr, "khost run: unknown option '%s' (see khost --help)\n", opt);
            return -1;
        }
    }
    if (!r->plugin || !r->task) {
        fprintf(stderr, "khost run: --plugin and --task are required (see khost --help)\n");
        return -1;
    }
    return 0;
}

int kh_cmd_run(kh_host *h, int argc, char **argv) {
    run_args r;
    memset(&r, 0, sizeof r);
    if (parse(argc, argv, &r) != 0) return KH_EXIT_USAGE;
    if (r.quiet) kh_host_set_log_level(KH_LOG_ERROR);
    char err[1024];
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
    const char *dev_spec = r.device ? r.device : h->reg.default_device;
    kh_device *dev = kh_devices_find(devs, dev_spec ? dev_spec : "auto", err, sizeof err);
    if (!dev) {
        kh_logf(KH_LOG_ERROR, "%s", err);
        return KH_EXIT_DEVICE;
    }
    const char *out_dir = r.out ? r.out : h->reg.results_dir;
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
    if (strcmp(rec.status, "ok") != 0)
        kh_logf(code == KH_EXIT_UNSUPPORTED ? KH_LOG_WARN : KH_LOG_ERROR, "%s x %s x %s: %s: %s", rec.plugin,
                rec.task, rec.device, rec.status, rec.reason);
    if (kh_record_write(&rec, out_dir, err, sizeof err) != 0) {
        kh_logf(KH_LOG_ERROR, "results: %s", err);
        if (code == KH_EXIT_OK) code = KH_EXIT_IO;
    } else if (!r.quiet && !r.json) {
        char path[4200];
        kh_record_path(path, sizeof path, out_dir, rec.task, rec.plugin, rec.device, "json");
        printf("khost: results in %s\n", path);
    }
    if (r.json) {
        char *js = kh_record_to_json(&rec, 1);
        if (js) {
            printf("%s\n", js);
            free(js);
        }
    }
    kh_record_free(&rec);
    kh_lock_release(&cell_lock);
    kh_lock_release(&dir_lock);
    return code;
}
