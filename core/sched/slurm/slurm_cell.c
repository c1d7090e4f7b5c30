/* core/sched/slurm/slurm_cell.c — the two jobs a Slurm submission runs: the array task (one cell, as the local matrix
 * runs it) and the collector (a record for every cell the array left without one).
 *
 * Array task: Slurm ends a task that hits its time limit or is cancelled with SIGTERM to every process of
 * the task, then SIGKILL KillWait seconds later (30 s by default). The matrix's handlers turn the SIGTERM
 * into an interrupt: the cell's process group is killed and this process writes the cell's record itself,
 * with the status Slurm's own message in the task's output file names ("*** JOB 12 ON node1 CANCELLED AT
 * ... DUE TO TIME LIMIT ***", written by slurmstepd before it signals), keeping the epochs the cell
 * checkpointed. Collector: runs after the whole array (afterany), asks sacct (accounting) and scontrol (the
 * controller's memory of finished jobs) for each array task's final state, and records every cell whose own
 * task left no record, or only a checkpoint: cancelled while pending, SIGKILLed, a node that died under it.
 * The array is submitted --no-requeue, so a node failure ends the task NODE_FAIL rather than restarting it.
 */
#define _GNU_SOURCE /* setenv, flock */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "base/files.h"
#include "base/args.h"
#include "modules/host.h"
#include "base/sysinfo.h"
#include "cell/env.h"
#include "base/exitcodes.h"
#include "results/git_rev.h"
#include "base/log.h"
#include "modules/host_api.h"
#include "sched/matrix.h"
#include "results/results.h"
#include "sched/slurm/slurm.h"
#include "khost/kit/regular.h"

#ifndef KHOST_VERSION
#define KHOST_VERSION "unknown"
#endif

/* As the local matrix: time a cell gets between SIGTERM and SIGKILL. Well inside Slurm's KillWait. */
#define SC_GRACE_S 5.0

static int is_final(const char *s) { return !strcmp(s, "ok") || !strcmp(s, "unsupported"); }

/* A record for a cell nothing ran for (or whose modules cannot be loaded here): what the plan says. */
static void bare_record(kh_cell_record *r, const kh_slurm_plan *p, const kh_slurm_cell *c, uint64_t reg_seed) {
    snprintf(r->plugin, sizeof r->plugin, "%s", c->plugin);
    snprintf(r->task, sizeof r->task, "%s", c->task);
    snprintf(r->device, sizeof r->device, "%s", c->device);
    r->epochs_requested = p->epochs ? atoi(p->epochs) : 0;
    r->batch_size = p->batch_size ? atoi(p->batch_size) : 0;
    const char *seed = c->seed ? c->seed : p->seed;
    r->seed = seed ? strtoull(seed, NULL, 10) : reg_seed;
    if (c->rep > 0) /* seed k of N: the local matrix's repetition k, alone in round k */
        r->rep_index = r->rep_round = c->rep, r->rep_of = c->rep_of, r->rep_position = 0;
    kh_record_set_env(r, "khost_version", KHOST_VERSION);
    kh_record_set_env(r, "git_rev", kh_git_rev());
    kh_record_set_env(r, "dataset", c->dataset);
}

static void plan_dir(const char *plan_path, char *buf, size_t n) {
    snprintf(buf, n, "%s", plan_path);
    char *slash = strrchr(buf, '/');
    if (slash) *slash = 0;
    else snprintf(buf, n, ".");
}

// --- the array task ---------------------------------------------------------------------------------------
/* slurmstepd's "*** JOB 12 ON vm CANCELLED AT <time> [DUE TO ...] ***" in the task's output file, if it is
 * there yet; the status it means, and the message for the reason. NULL when there is none. */
static const char *slurm_marker(const char *out_file, char *msg, size_t n) {
    msg[0] = 0;
    char why[64];
    FILE *f = kh_fopen_regular(out_file, why, sizeof why);
    if (!f) return NULL;
    char tail[8192];
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    long from = size > (long)sizeof tail - 1 ? size - (long)sizeof tail + 1 : 0;
    size_t got = size >= 0 && fseek(f, from, SEEK_SET) == 0 ? fread(tail, 1, sizeof tail - 1, f) : 0;
    fclose(f);
    tail[got] = 0;
    char *hit = NULL;
    for (char *s = strstr(tail, "*** JOB "); s; s = strstr(s + 1, "*** JOB ")) hit = s;
    if (!hit || !strstr(hit, " CANCELLED AT ")) return NULL;
    char *end = strstr(hit + 4, " ***");
    if (!end) return NULL;
    snprintf(msg, n, "%.*s", (int)(end - hit - 4), hit + 4);
    if (strstr(msg, "DUE TO TIME LIMIT")) return "timeout";
    if (strstr(msg, "DUE TO PREEMPTION")) return "preempted";
    if (strstr(msg, "DUE TO NODE FAIL")) return "node_fail";
    if (strstr(msg, "DUE TO")) return "killed";
    return "cancelled";
}

/* After Slurm's SIGTERM: the status and reason of the cell, from the marker (which may trail the signal). */
static const char *killed_status(const char *plan_path, char *reason, size_t n) {
    const char *aj = getenv("SLURM_ARRAY_JOB_ID"), *at = getenv("SLURM_ARRAY_TASK_ID");
    char dir[4096], out_file[4300], msg[400];
    plan_dir(plan_path, dir, sizeof dir);
    snprintf(out_file, sizeof out_file, "%s/%s_%s.out", dir, aj ? aj : "?", at ? at : "?");
    for (int tries = 0; tries < 10; tries++) {
        const char *st = slurm_marker(out_file, msg, sizeof msg);
        if (st) {
            snprintf(reason, n, "Slurm: %s (array task %s_%s)", msg, aj ? aj : "?", at ? at : "?");
            return st;
        }
        struct timespec ts = {0, 200000000};
        nanosleep(&ts, NULL);
    }
    if (aj)
        snprintf(reason, n, "SIGTERM from Slurm (array task %s_%s): time limit, scancel or preemption; no reason "
                 "from Slurm in %s", aj, at ? at : "?", out_file);
    else
        snprintf(reason, n, "SIGTERM: stopped before the cell finished");
    return "killed";
}

/* tools/fetch-datasets for the cell's data set into the node's data folder, one task at a time per folder. */
static int fetch_data(const kh_slurm_plan *p, const kh_slurm_cell *c) {
    if (kh_mkdirs(p->data_dir) != 0) {
        kh_logf(KH_LOG_ERROR, "slurm: %s: cannot create: %s", p->data_dir, strerror(errno));
        return -1;
    }
    char lock[4200];
    snprintf(lock, sizeof lock, "%s/.khost-fetch.lock", p->data_dir);
    char why[128] = "";
    int fd = kh_create_regular(lock, O_RDWR | O_CLOEXEC, 0666, why, sizeof why);
    if (fd < 0 || flock(fd, LOCK_EX) != 0) {
        kh_logf(KH_LOG_ERROR, "slurm: %s: cannot lock: %s", lock, why[0] ? why : strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    char *out = malloc(1 << 16);
    int rc = -1;
    if (out) {
        char *argv[] = {(char *)p->fetch, "--data", (char *)p->data_dir, (char *)c->dataset, NULL};
        rc = kh_slurm_exec(argv, out, 1 << 16, 4 * 3600.0);
        fputs(out, stdout);
        if (rc != 0) kh_logf(KH_LOG_ERROR, "slurm: %s --data %s %s failed (%d)", p->fetch, p->data_dir, c->dataset, rc);
        free(out);
    }
    close(fd); /* releases the lock */
    return rc == 0 ? 0 : -1;
}

static int write_record(const kh_cell_record *r, const char *out_dir) {
    char err[1200];
    if (kh_record_write(r, out_dir, err, sizeof err) != 0) {
        kh_logf(KH_LOG_ERROR, "slurm: cannot write the record of %s x %s x %s: %s", r->plugin, r->task, r->device,
                err);
        return -1;
    }
    return 0;
}

/* The record of a cell that could not start here (module, device, data): status error or data. */
static int cell_failed(const kh_slurm_plan *p, const kh_slurm_cell *c, uint64_t reg_seed, const char *status,
                       const char *why) {
    kh_cell_record r;
    kh_record_init(&r);
    bare_record(&r, p, c, reg_seed);
    snprintf(r.status, sizeof r.status, "%s", status);
    snprintf(r.reason, sizeof r.reason, "%s", why);
    kh_env_add_slurm(&r);
    char buf[256];
    if (gethostname(buf, sizeof buf) == 0) {
        buf[sizeof buf - 1] = 0;
        kh_record_set_env(&r, "hostname", buf);
    }
    kh_env_now_iso(buf, sizeof buf);
    kh_record_set_env(&r, "finished_at", buf);
    int rc = write_record(&r, p->out_dir);
    printf("slurm: %s x %s x %s ... %s: %s\n", c->plugin, c->task, c->device, status, why);
    kh_record_free(&r);
    return rc == 0 ? KH_EXIT_TRAIN : KH_EXIT_IO;
}

int kh_slurm_run_cell(kh_host *h, const char *plan_path, const char *index) {
    kh_slurm_plan p;
    char err[1400];
    if (kh_slurm_plan_read(plan_path, &p, err, sizeof err) != 0) {
        kh_logf(KH_LOG_ERROR, "slurm: %s", err);
        return KH_EXIT_IO;
    }
    int64_t k;
    if (kh_args_int64("--slurm-cell", index, 0, &k) != 0 || k >= p.n) {
        kh_logf(KH_LOG_ERROR, "slurm: --slurm-cell %s: %s has cells 0-%d", index, plan_path, p.n - 1);
        kh_slurm_plan_free(&p);
        return KH_EXIT_USAGE;
    }
    const kh_slurm_cell *c = &p.cells[k];
    int rc = KH_EXIT_TRAIN;
    kh_device *dev = NULL;
    kh_module *plugin = NULL, *task = NULL;
    /* The child inherits both: the registry this task loaded, the data folder the plan names. */
    if ((p.data_dir && *p.data_dir && setenv("KHOST_DATA", p.data_dir, 1) != 0) ||
        (h->conf_path && setenv("KHOST_CONF", h->conf_path, 1) != 0)) {
        rc = cell_failed(&p, c, h->reg.seed, "error", "setenv failed (out of memory)");
        goto done;
    }
    if (p.fetch && *p.fetch && p.data_dir && *p.data_dir && *c->dataset && fetch_data(&p, c) != 0) {
        snprintf(err, sizeof err, "%s --data %s %s failed on this node (see the task's output)", p.fetch,
                 p.data_dir, c->dataset);
        rc = cell_failed(&p, c, h->reg.seed, "data", err);
        goto done;
    }
    const kh_host_api *api = kh_host_api_get();
    if (!(plugin = kh_modules_find(&h->mods, KH_MODULE_BACKEND, c->plugin_arg, api, err, sizeof err)) ||
        !(task = kh_modules_find(&h->mods, KH_MODULE_TASK, c->task_arg, api, err, sizeof err)) ||
        !(dev = kh_devices_find(kh_host_devices(h), c->device, err, sizeof err))) {
        rc = cell_failed(&p, c, h->reg.seed, "error", err);
        goto done;
    }

    const char *seed = c->seed ? c->seed : p.seed; /* --seeds: the element's own */
    kh_matrix_cell_ref ref = {plugin, task, dev, p.out_dir, p.epochs, p.batch_size, seed, p.timeout_s,
                              h->reg.seed, {0}, c->rep, c->rep_of};
    kh_env_now_iso(ref.started_at, sizeof ref.started_at);
    char json[4200], csv[4200], log[4200], dir[4200];
    kh_record_rep_path(json, sizeof json, p.out_dir, c->task, c->plugin, c->device, c->rep, "json");
    kh_record_rep_path(csv, sizeof csv, p.out_dir, c->task, c->plugin, c->device, c->rep, "csv");
    kh_record_rep_path(log, sizeof log, p.out_dir, c->task, c->plugin, c->device, c->rep, "log");
    snprintf(dir, sizeof dir, "%s/%s", p.out_dir, c->task);
    /* As the local matrix without --resume: a stale record can never pass for this run's. */
    if ((unlink(json) != 0 && errno != ENOENT) || (unlink(csv) != 0 && errno != ENOENT))
        kh_logf(KH_LOG_WARN, "slurm: cannot remove the old record %s: %s", json, strerror(errno));
    if (kh_mkdirs(dir) != 0) kh_logf(KH_LOG_WARN, "slurm: %s: cannot create: %s", dir, strerror(errno));

    char *args[26];
    int a = 0;
    args[a++] = h->exe_path;
    args[a++] = "run";
    args[a++] = "--plugin";
    args[a++] = (char *)c->plugin_arg;
    args[a++] = "--task";
    args[a++] = (char *)c->task_arg;
    args[a++] = "--device";
    args[a++] = (char *)c->device;
    args[a++] = "--out";
    args[a++] = (char *)p.out_dir;
    args[a++] = "--quiet";
    const char *pass[6][2] = {{"--epochs", p.epochs}, {"--batch-size", p.batch_size}, {"--limit-train", p.limit_train},
                              {"--limit-val", p.limit_val}, {"--seed", seed}, {"--math", p.math}};
    for (int i = 0; i < 6; i++)
        if (pass[i][1]) {
            args[a++] = (char *)pass[i][0];
            args[a++] = (char *)pass[i][1];
        }
    char repetition[64];
    if (c->rep > 0) { /* k/N/round/position/order seed, as the local matrix gives it */
        snprintf(repetition, sizeof repetition, "%d/%d/%d/0/0", c->rep, c->rep_of, c->rep);
        args[a++] = "--repetition";
        args[a++] = repetition;
    }
    args[a] = NULL;

    printf("slurm: cell %lld: %s x %s x %s ...\n", (long long)k, c->plugin, c->task, c->device);
    fflush(stdout);
    kh_child_signals(1); /* kept until the record is written: a second SIGTERM must not cut that short */
    kh_child_result res;
    kh_child_run(args, NULL, log, p.timeout_s, SC_GRACE_S, &res);
    kh_cell_record r;
    if (res.outcome == KH_CHILD_INTERRUPTED || kh_child_interrupted()) {
        int have = kh_record_read(json, &r, err, sizeof err) == 0;
        if (!have) kh_record_init(&r);
        if (!have || !is_final(r.status)) { /* a cell that finished just before the signal keeps its record */
            char reason[600];
            const char *st = killed_status(plan_path, reason, sizeof reason);
            kh_matrix_fill(&ref, &r, st, reason, !have);
            kh_env_add_slurm(&r);
            if (write_record(&r, p.out_dir) != 0) rc = KH_EXIT_IO;
        }
    } else {
        kh_matrix_settle(&ref, &res, &r);
    }
    size_t sl = strlen(r.status); /* "unsupported: conv2d ..." already names its status */
    int named = r.reason[0] && !strncmp(r.reason, r.status, sl) && r.reason[sl] == ':';
    printf("slurm: cell %lld: %s x %s x %s ... %s%s%s (%.1f s)\n", (long long)k, c->plugin, c->task, c->device,
           named ? "" : r.status, r.reason[0] && !named ? ": " : "", r.reason, res.wall_s);
    fflush(stdout);
    if (rc != KH_EXIT_IO) rc = is_final(r.status) ? KH_EXIT_OK : KH_EXIT_TRAIN;
    kh_record_free(&r);
    kh_child_signals(0);
done:
    kh_slurm_plan_free(&p);
    return rc;
}

// --- the collector ----------------------------------------------------------------------------------------
typedef struct sc_state {
    char state[48], job_id[32], node[64];
} sc_state;

static void copy_field(char *dst, size_t n, const char *src, size_t len) {
    if (len >= n) len = n - 1;
    memcpy(dst, src, len);
    dst[len] = 0;
}

/* "Key=value" in a one-line `scontrol show job -o` record; the value's length, 0 when absent. */
static size_t kv(const char *line, const char *key, const char **val) {
    size_t kl = strlen(key);
    for (const char *s = line; (s = strstr(s, key)); s++)
        if ((s == line || s[-1] == ' ') && s[kl] == '=') {
            *val = s + kl + 1;
            return strcspn(*val, " \n");
        }
    return 0;
}

/* sacct -X -P: "12_3|CANCELLED by 0|node1" per array task (the parent job only). Number of states found, -1
 * when sacct fails (no accounting database). Until the controller has told slurmdbd about each task, sacct
 * lists the array as one pending job ("12|PENDING"): no task's state. */
static int from_sacct(const char *job, sc_state *st, int n, char *buf, size_t bn) {
    char *argv[] = {"sacct", "-n", "-P", "-X", "-j", (char *)job, "--format=JobID,State,NodeList,JobIDRaw", NULL};
    if (kh_slurm_exec(argv, buf, bn, 60) != 0) return -1;
    int found = 0;
    size_t jl = strlen(job);
    char *save = NULL;
    for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char *f[4] = {l, NULL, NULL, NULL};
        for (int i = 1; i < 4 && f[i - 1]; i++) {
            char *bar = strchr(f[i - 1], '|');
            if (bar) *bar = 0;
            f[i] = bar ? bar + 1 : NULL;
        }
        if (!f[3] || strncmp(f[0], job, jl) || f[0][jl] != '_') continue;
        char *end;
        long idx = strtol(f[0] + jl + 1, &end, 10);
        if (*end || idx < 0 || idx >= n) continue; /* "12_[3-5]": still pending, not final */
        copy_field(st[idx].state, sizeof st[idx].state, f[1], strlen(f[1]));
        copy_field(st[idx].node, sizeof st[idx].node, f[2], strlen(f[2]));
        copy_field(st[idx].job_id, sizeof st[idx].job_id, f[3], strlen(f[3]));
        found++;
    }
    return found;
}

/* scontrol show job -o: one line per job record; a pending range is one record ("ArrayTaskId=3-5"). */
static int from_scontrol(const char *job, sc_state *st, int n, char *buf, size_t bn) {
    char *argv[] = {"scontrol", "show", "job", "-o", (char *)job, NULL};
    if (kh_slurm_exec(argv, buf, bn, 60) != 0) return 0;
    int found = 0;
    char *save = NULL;
    for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        const char *aj = NULL, *at = NULL, *js = NULL, *id = NULL, *node = NULL;
        size_t ajl = kv(l, "ArrayJobId", &aj), atl = kv(l, "ArrayTaskId", &at), jsl = kv(l, "JobState", &js);
        size_t idl = kv(l, "JobId", &id), nl = kv(l, "BatchHost", &node);
        if (!ajl || !atl || !jsl || ajl != strlen(job) || strncmp(aj, job, ajl)) continue;
        char list[256];
        copy_field(list, sizeof list, at, atl);
        char *save2 = NULL;
        for (char *r = strtok_r(list, ",", &save2); r; r = strtok_r(NULL, ",", &save2)) {
            char *end;
            long lo = strtol(r, &end, 10), hi = lo;
            if (*end == '-') hi = strtol(end + 1, &end, 10);
            for (long i = lo; i <= hi && i < n; i++) {
                if (i < 0) continue;
                copy_field(st[i].state, sizeof st[i].state, js, jsl);
                if (lo == hi) copy_field(st[i].job_id, sizeof st[i].job_id, id, idl);
                if (nl) copy_field(st[i].node, sizeof st[i].node, node, nl);
                found++;
            }
        }
    }
    return found;
}

static int is_over(const sc_state *s) { return s->state[0] && kh_slurm_status(s->state); }

/* Each array task's final state, and where it came from ("sacct" or "scontrol"; NULL when neither lists the
 * task). sacct (the accounting database) is the source of record, but slurmctld tells slurmdbd asynchronously:
 * right after the array ends, which is when this runs, the controller may know a task's end before sacct
 * does. So both are asked, and while the controller knows an end that sacct does not yet, sacct is asked
 * again (every 5 s, at most 60 s); what sacct still lacks then is taken from the controller. scontrol alone
 * answers where there is no accounting database; sacct alone once the controller has forgotten the jobs
 * (MinJobAge). 0 ok, -1 out of memory. */
static int states(const char *job, sc_state *st, const char **source, int n, char *buf, size_t bn) {
    sc_state *ctl = calloc((size_t)n, sizeof *ctl);
    if (!ctl) return -1;
    for (int tries = 0;; tries++) {
        memset(st, 0, (size_t)n * sizeof *st);
        memset(ctl, 0, (size_t)n * sizeof *ctl);
        int acct = from_sacct(job, st, n, buf, bn);
        from_scontrol(job, ctl, n, buf, bn);
        int behind = 0;
        for (int i = 0; i < n; i++) behind += is_over(&ctl[i]) && !is_over(&st[i]);
        if (acct < 0 || !behind || tries == 12) break;
        if (tries == 0)
            printf("slurm: the accounting database does not have the end of %d array task(s) yet: waiting for it\n",
                   behind);
        fflush(stdout);
        sleep(5);
    }
    for (int i = 0; i < n; i++) {
        if (is_over(&st[i]) || (st[i].state[0] && !ctl[i].state[0])) source[i] = "sacct";
        else if (ctl[i].state[0]) {
            st[i] = ctl[i];
            source[i] = "scontrol";
        } else source[i] = NULL;
    }
    free(ctl);
    return 0;
}

int kh_slurm_collect(kh_host *h, const char *plan_path, const char *job) {
    kh_slurm_plan p;
    char err[1400];
    if (!*job || strspn(job, "0123456789") != strlen(job)) {
        kh_logf(KH_LOG_ERROR, "slurm: --slurm-collect expects the array's job id, got '%s'", job);
        return KH_EXIT_USAGE;
    }
    if (kh_slurm_plan_read(plan_path, &p, err, sizeof err) != 0) {
        kh_logf(KH_LOG_ERROR, "slurm: %s", err);
        return KH_EXIT_IO;
    }
    int rc = KH_EXIT_OK, own = 0, written = 0;
    size_t bn = (size_t)p.n * 2048 + 65536;
    sc_state *st = calloc((size_t)p.n, sizeof *st);
    char *buf = malloc(bn);
    if (!st || !buf) {
        kh_logf(KH_LOG_ERROR, "slurm: out of memory");
        rc = KH_EXIT_IO;
        goto done;
    }
    char pdir[4096];
    plan_dir(plan_path, pdir, sizeof pdir);
    const char **source = calloc((size_t)p.n, sizeof *source);
    if (!source || states(job, st, source, p.n, buf, bn) != 0) {
        kh_logf(KH_LOG_ERROR, "slurm: out of memory");
        rc = KH_EXIT_IO;
        free(source);
        goto done;
    }
    int n_acct = 0, n_ctl = 0, any = 0;
    for (int i = 0; i < p.n; i++) any |= source[i] != NULL;
    for (int i = 0; i < p.n; i++) {
        const kh_slurm_cell *c = &p.cells[i];
        char json[4200], idx[16], reason[600];
        snprintf(idx, sizeof idx, "%d", i);
        kh_record_rep_path(json, sizeof json, p.out_dir, c->task, c->plugin, c->device, c->rep, "json");
        kh_cell_record r;
        int have = kh_record_read(json, &r, err, sizeof err) == 0;
        const char *rj = have ? kh_record_get_env(&r, "slurm_array_job_id") : NULL;
        const char *rt = have ? kh_record_get_env(&r, "slurm_array_task_id") : NULL;
        int mine = have && rj && rt && !strcmp(rj, job) && !strcmp(rt, idx);
        const char *status = st[i].state[0] ? kh_slurm_status(st[i].state) : "missing";
        if (source[i]) *(source[i][1] == 'a' ? &n_acct : &n_ctl) += 1;
        if (mine && strcmp(r.status, "running") && (strcmp(r.status, "killed") || !status || !*status ||
                                                     !strcmp(status, "missing"))) {
            own++; /* the task's own account stands */
            kh_record_free(&r);
            continue;
        }
        if (!status) {
            kh_logf(KH_LOG_WARN, "slurm: array task %s_%d is still %s: left alone", job, i, st[i].state);
            if (have) kh_record_free(&r);
            continue;
        }
        if (!*status) {
            status = "error";
            snprintf(reason, sizeof reason, "array task %s_%d completed without writing a record", job, i);
        } else if (!strcmp(status, "missing")) {
            /* Slurm drops an array element cancelled while pending from the array's records without a
             * trace; its output file is what shows whether it ever started. */
            char out_file[4300];
            snprintf(out_file, sizeof out_file, "%s/%s_%d.out", pdir, job, i);
            if (access(out_file, F_OK) != 0) {
                status = "cancelled";
                snprintf(reason, sizeof reason, "array task %s_%d never started (no %s_%d.out) and %s: cancelled "
                         "while pending", job, i, job, i, any ? "Slurm does not list it" : "Slurm gave no states");
            } else {
                snprintf(reason, sizeof reason, "array task %s_%d started but left no record, and %s", job, i,
                         any ? "Slurm no longer lists it" : "neither sacct nor scontrol answered");
            }
        } else {
            snprintf(reason, sizeof reason, "Slurm state %s (array task %s_%d, from %s)", st[i].state, job, i,
                     source[i]);
        }
        if (!mine) { /* nothing of this run to keep: a stale record from an earlier one is replaced */
            if (have) kh_record_free(&r);
            kh_record_init(&r);
            bare_record(&r, &p, c, h->reg.seed);
        }
        snprintf(r.status, sizeof r.status, "%s", status);
        snprintf(r.reason, sizeof r.reason, "%s", reason);
        if (st[i].job_id[0]) kh_record_set_env(&r, "slurm_job_id", st[i].job_id);
        kh_record_set_env(&r, "slurm_array_job_id", job);
        kh_record_set_env(&r, "slurm_array_task_id", idx);
        if (st[i].node[0] && strcmp(st[i].node, "None assigned") && strcmp(st[i].node, "(null)"))
            kh_record_set_env(&r, "slurm_node", st[i].node);
        char now[64];
        kh_env_now_iso(now, sizeof now);
        kh_record_set_env(&r, "finished_at", now);
        if (write_record(&r, p.out_dir) != 0) rc = KH_EXIT_IO;
        else written++;
        printf("slurm: cell %d: %s x %s x %s ... %s: %s\n", i, c->plugin, c->task, c->device, status, reason);
        kh_record_free(&r);
    }
    printf("slurm: job %s: %d cell(s): %d recorded by their array task, %d recorded here (states: %d from sacct, %d "
           "from scontrol)\n", job, p.n, own, written, n_acct, n_ctl);
    free(source);
done:
    free(st);
    free(buf);
    kh_slurm_plan_free(&p);
    return rc;
}
