/* core/sched/matrix_records.c — a cell's record as the matrix settles it from its child's outcome (the table at
 * the top of matrix.c), the progress line's end, and the same rules for one Slurm array task (matrix.h). */
#define _GNU_SOURCE /* strsignal */
#include "sched/matrix_internal.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "results/identity.h"
#include "devices/blas_tune.h"
#include "base/escape.h"
#include "base/exitcodes.h"
#include "base/files.h"
#include "base/sysinfo.h"
#include "cell/callmark.h"
#include "cell/env.h"
#include "cell/mathmode.h"
#include "base/log.h"
#include "results/git_rev.h"
#include "sched/refcell.h"
#include "khost/kit/clock.h"
#include "khost/kit/regular.h"

#ifndef KHOST_VERSION
#define KHOST_VERSION "unknown"
#endif

// --- records --------------------------------------------------------------------------------------------
/* The end of a child's log, read once for everything the record says of how the cell ended. */
typedef struct log_tail {
    char text[8193];
    size_t len;
} log_tail;

static void log_tail_read(const char *path, log_tail *t) {
    t->len = 0;
    t->text[0] = 0;
    char why[64];
    FILE *f = path ? kh_fopen_regular(path, why, sizeof why) : NULL;
    if (!f) return;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    long max = (long)sizeof t->text - 1;
    if (size >= 0 && fseek(f, size > max ? size - max : 0, SEEK_SET) == 0) t->len = fread(t->text, 1, (size_t)max, f);
    fclose(f);
    t->text[t->len] = 0;
}

/* The tail's last `window` bytes (the window each reading below has always looked at). */
static const char *tail_window(const log_tail *t, size_t window) {
    return t->text + (t->len > window ? t->len - window : 0);
}

/* The last non-empty line of the child's log (its error message, usually), passing over khost's own
 * "crashed in" line (cell/callmark.h: said apart). */
static void last_log_line(const log_tail *t, char *buf, size_t n) {
    char tail[2048];
    snprintf(tail, sizeof tail, "%s", tail_window(t, sizeof tail - 1));
    size_t got = strlen(tail);
    for (;;) {
        while (got && (tail[got - 1] == '\n' || tail[got - 1] == '\r' || tail[got - 1] == ' ')) tail[--got] = 0;
        char *start = strrchr(tail, '\n');
        start = start ? start + 1 : tail;
        int ours = !strncmp(start, KH_CALLMARK_PREFIX, strlen(KH_CALLMARK_PREFIX));
        if (!ours || start == tail) {
            snprintf(buf, n, "%s", ours ? "" : start);
            return;
        }
        *start = 0;
        got = (size_t)(start - tail);
    }
}

/* The module call a crashed cell named on its way down (cell/callmark.h): "backend 'cntk' train_batch" from
 * the last such line in its log's tail, into buf; "" when there is none. */
static void crashed_in(const log_tail *t, char *buf, size_t n) {
    buf[0] = 0;
    const char *at = NULL;
    for (const char *p = t->text; (p = strstr(p, KH_CALLMARK_PREFIX)); p++) at = p;
    if (!at) return;
    at += strlen(KH_CALLMARK_PREFIX);
    snprintf(buf, n, "%.*s", (int)strcspn(at, "\r\n"), at);
}

/* Does the tail of a child's log blame memory? (libc, C++ and the host all say it in one of these ways.) */
static int mx_speaks_of_memory(const log_tail *t) {
    char tail[4097];
    snprintf(tail, sizeof tail, "%s", tail_window(t, sizeof tail - 1));
    for (char *c = tail; *c; c++)
        if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
    static const char *const words[] = {"out of memory", "bad_alloc", "cannot allocate memory", "memory exhausted"};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        if (strstr(tail, words[i])) return 1;
    return 0;
}

/* Temporary files of a cell's record (<json>.tmp.PID) left by a writer that was killed mid-write. */
void mx_remove_partial(const char *record_path) {
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
        if (kh_unlink(p) != 0)
            kh_logf(KH_LOG_WARN, "matrix: cannot remove the partial record %s: %s", p, strerror(errno));
    }
    closedir(d);
}

int mx_final_status(const char *s) { return !strcmp(s, "ok") || !strcmp(s, "unsupported"); }

/* --resume reuses a record only when the settings given now match what it was measured with. */
int mx_same_settings(const kh_cell_record *r, const kh_matrix_opts *o, const char *seed) {
    if (o->epochs && r->epochs_requested != atoi(o->epochs)) return 0;
    if (o->batch_size && r->batch_size != atoi(o->batch_size)) return 0;
    if (seed && r->seed != strtoull(seed, NULL, 10)) return 0;
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


int mx_other_machine_or_build(const kh_cell_record *r, const kh_device *dev, char *why, size_t n) {
    kh_identity was, now;
    kh_identity_set(&was, r->device, kh_record_get_env(r, "cpu_model"), kh_record_get_env(r, "cpu_isa"),
                    kh_record_get_env(r, "device_name"), kh_record_get_env(r, "khost_version"),
                    kh_record_get_env(r, "git_rev"), kh_record_get_env(r, "reference"));
    char model[256];
    kh_env_cpu_model(model, sizeof model);
    kh_identity_set(&now, dev->id, model, kh_cpu_isa(), dev->name, KHOST_VERSION, kh_git_rev(),
                    kh_record_get_env(r, "reference"));
    int machine = kh_identity_machine_differs(&was, &now), build = !machine && kh_identity_build_differs(&was, &now);
    if (!machine && !build) return 0;
    char a[256], b[256];
    if (machine) kh_identity_machine_text(&was, a, sizeof a), kh_identity_machine_text(&now, b, sizeof b);
    else kh_identity_build_text(&was, a, sizeof a), kh_identity_build_text(&now, b, sizeof b);
    snprintf(why, n, "recorded on %s, this is %s", a, b);
    return 1;
}

/* A record for a cell whose child could not write one (or was killed): what we know, from the parent. */
void mx_fill_record(kh_cell_record *r, const mx_cell *c, const char *status, const char *reason,
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
        r->seed = c->seed ? strtoull(c->seed, NULL, 10) : c->reg_seed;
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
/* Whether r is the record of cell c (its plugin, task, device and repetition); 0 with why when it is not. */
static int record_is_cell(const kh_cell_record *r, const mx_cell *c, const char *path, char *why, size_t n) {
    const char *field = NULL, *got = NULL, *want = NULL;
    if (strcmp(r->plugin, c->plugin->name)) field = "plugin", got = r->plugin, want = c->plugin->name;
    else if (strcmp(r->task, c->task->name)) field = "task", got = r->task, want = c->task->name;
    else if (strcmp(r->device, c->dev->id)) field = "device", got = r->device, want = c->dev->id;
    const char *writer = c->plugin->m ? "khost run" : "the reference runner (tools/reference/run)";
    if (field) {
        snprintf(why, n, "%s wrote %s naming %s '%s', not this cell's '%s': not this cell's record", writer, path,
                 field, got, want);
        return 0;
    }
    int rep_ok = c->rep > 0 ? r->rep_index == c->rep && r->rep_of == c->o->repeat && r->rep_round == c->round
                            : r->rep_of <= 1;
    if (!rep_ok) {
        snprintf(why, n, "%s wrote %s as repetition %d of %d (round %d), not this cell's %d of %d (round %d)", writer,
                 path, r->rep_index, r->rep_of, r->rep_round, c->rep ? c->rep : 1, c->rep ? c->o->repeat : 1,
                 c->rep ? c->round : 1);
        return 0;
    }
    /* a run from another seed than the one it was given answers another question (the rows across seeds
     * compare the backends seed by seed) */
    if (c->seed && r->seed != strtoull(c->seed, NULL, 10)) {
        snprintf(why, n, "%s wrote %s with seed %llu, not this cell's --seed %s", writer, path,
                 (unsigned long long)r->seed, c->seed);
        return 0;
    }
    return 1;
}

void mx_settle(const mx_cell *c, const kh_child_result *res, const char *json_path, const char *log_path,
               kh_cell_record *r) {
    char err[1200], reason[600], line[400], wrong[600] = "";
    log_tail lt; /* read where an ending needs it */
    int have = kh_record_read(json_path, r, err, sizeof err) == 0;
    if (have && !record_is_cell(r, c, json_path, wrong, sizeof wrong)) {
        kh_record_free(r); /* another cell's record, or another repetition's: never taken as this one's */
        have = 0;
    }
    if (!have) kh_record_init(r);
    const char *status = NULL;
    reason[0] = 0;
    switch (res->outcome) {
    case KH_CHILD_EXITED:
        if (have && c->stage) { /* the runner's record, checked, into the results folder */
            if (kh_record_write(r, c->out_dir, err, sizeof err) != 0)
                kh_logf(KH_LOG_ERROR, "matrix: cannot write the record of %s x %s x %s: %s", c->plugin->name,
                        c->task->name, c->dev->id, err);
            return;
        }
        if (have) return; /* the child's own account, whatever its exit code */
        if (wrong[0]) {
            status = "error";
            snprintf(reason, sizeof reason, "%s", wrong);
            break;
        }
        log_tail_read(log_path, &lt);
        crashed_in(&lt, line, sizeof line);
        if (line[0]) { /* a fatal signal in a module, turned into an exit by a handler (a sanitizer's report) */
            status = "crashed";
            snprintf(reason, sizeof reason, "exit %d after a fatal signal in %s", res->code, line);
            break;
        }
        last_log_line(&lt, line, sizeof line);
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
        char in[300];
        log_tail_read(log_path, &lt);
        crashed_in(&lt, in, sizeof in);
        if (c->o->memory_limit) {
            int s = res->code;
            last_log_line(&lt, line, sizeof line);
            if ((s == SIGABRT || s == SIGSEGV || s == SIGBUS || s == SIGKILL) && mx_speaks_of_memory(&lt))
                status = "oom";
            size_t len = strlen(reason);
            snprintf(reason + len, sizeof reason - len, " under --memory-limit %s%s%s", c->o->memory_limit,
                     line[0] ? ": " : "", line);
        }
        if (in[0]) { /* the module call it died in */
            size_t len = strlen(reason);
            snprintf(reason + len, sizeof reason - len, c->o->memory_limit ? " (in %s)" : " in %s", in);
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
        /* within 256 MiB of its address-space limit: stuck for want of memory (OpenBLAS, for one, retries a
         * failing mmap of a 128 MiB buffer forever), so out of memory rather than slow */
        if (res->as_limit_bytes > 0 && res->vm_size_bytes >= 0 &&
            res->vm_size_bytes + (256ll << 20) >= res->as_limit_bytes) {
            status = "oom";
            snprintf(reason, sizeof reason, "no result after %g s, stuck at its address-space limit (%lld of %lld MiB "
                     "mapped: ulimit -v or --memory-limit): a library retried a failing allocation", c->o->timeout_s,
                     (long long)(res->vm_size_bytes >> 20), (long long)(res->as_limit_bytes >> 20));
        }
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

void mx_print_end(const mx_cell *c, int i, int n, const kh_cell_record *r, double wall_s, const char *log_path) {
    int ok = !strcmp(r->status, "ok");
    if (c->o->quiet && mx_final_status(r->status)) return;
    printf("[%d/%d] %s x %s x %s ... ", i, n, c->plugin->name, c->task->name, c->dev->id);
    if (ok) {
        char t[32];
        kh_fmt_seconds(r->mean_epoch_s, "?", t, sizeof t);
        printf("ok %s s/epoch", t);
        if (r->metric[0] && isfinite(r->metric_value)) {
            putchar(' ');
            kh_esc_line(stdout, r->metric);
            printf(" %.4f", r->metric_value);
        }
    } else {
        size_t sl = strlen(r->status);
        /* "unsupported: conv2d ..." already names its status */
        if (r->reason[0] && !(strncmp(r->reason, r->status, sl) == 0 && r->reason[sl] == ':'))
            printf("%s: ", r->status);
        kh_esc_line(stdout, r->reason[0] ? r->reason : r->status); /* a module's or runner's text */
    }
    if (wall_s >= 0) printf(" (%.1f s)", wall_s);
    if (!mx_final_status(r->status) && log_path) printf(" log: %s", log_path);
    printf("\n");
    fflush(stdout);
}

// --- one cell's record, for the Slurm array task (slurm_cell.c) ----------------------------------------
static void mx_from_ref(const kh_matrix_cell_ref *ref, mx_mod *p, mx_mod *t, kh_matrix_opts *o, mx_cell *c) {
    *p = (mx_mod){0, ref->plugin, ref->plugin->desc->name, ref->plugin->desc->name};
    *t = (mx_mod){0, ref->task, ref->task->desc->name, ref->task->desc->name};
    memset(o, 0, sizeof *o);
    o->epochs = ref->epochs;
    o->batch_size = ref->batch_size;
    o->seed = ref->seed;
    o->timeout_s = ref->timeout_s;
    const kh_task_info *info = ref->task->task && ref->task->task->info ? ref->task->task->info() : NULL;
    *c = (mx_cell){p, t, ref->dev, info, ref->out_dir, o, ref->reg_seed, {0}, 0, 1, 0, NULL, ref->seed};
    o->repeat = 1;
    if (ref->rep > 0) { /* seed k of N: the matrix's repetition k of N, alone in round k */
        o->repeat = o->seeds = ref->rep_of;
        c->rep = c->round = ref->rep;
    }
    snprintf(c->started_at, sizeof c->started_at, "%s", ref->started_at);
}

void kh_matrix_settle(const kh_matrix_cell_ref *ref, const kh_child_result *res, kh_cell_record *r) {
    mx_mod p, t;
    kh_matrix_opts o;
    mx_cell c;
    mx_from_ref(ref, &p, &t, &o, &c);
    char json[4200], log[4200];
    kh_record_rep_path(json, sizeof json, ref->out_dir, t.name, p.name, ref->dev->id, ref->rep, "json");
    kh_record_rep_path(log, sizeof log, ref->out_dir, t.name, p.name, ref->dev->id, ref->rep, "log");
    mx_settle(&c, res, json, log, r);
}

void kh_matrix_fill(const kh_matrix_cell_ref *ref, kh_cell_record *r, const char *status, const char *reason,
                    int fresh) {
    mx_mod p, t;
    kh_matrix_opts o;
    mx_cell c;
    mx_from_ref(ref, &p, &t, &o, &c);
    char log[4200];
    kh_record_rep_path(log, sizeof log, ref->out_dir, t.name, p.name, ref->dev->id, ref->rep, "log");
    mx_fill_record(r, &c, status, reason, log, fresh);
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st, (void)ftw;
    if ((type == FTW_DP ? rmdir(path) : unlink(path)) != 0)
        kh_logf(KH_LOG_WARN, "matrix: cannot remove %s: %s", path, strerror(errno));
    return 0;
}

void mx_stage_remove(const char *dir) {
    if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT)
        kh_logf(KH_LOG_WARN, "matrix: cannot remove %s: %s", dir, strerror(errno));
}
