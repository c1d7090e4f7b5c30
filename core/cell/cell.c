/* core/cell/cell.c — the training loop of one cell.
 *
 * Per epoch: shuffle (seeded), batch (last partial batch included, as Keras), augment (task hook), convert
 * to the backend's layout, train; then synchronise and evaluate the validation split. Time per epoch is wall
 * time from epoch start to the end of its validation pass after synchronising the device (the original
 * benchmark's definition); train and validation time are kept separately. Metrics stay in the backend and
 * are read only at progress refreshes and epoch ends. */
#define _POSIX_C_SOURCE 200809L
#include "cell/cell.h"
#include "cell/callmark.h"
#include "cell/guarded.h"
#include "cell/noise.h"
#include "modules/layer_abi.h"
#include "devices/energy.h"

#include <cjson/cJSON.h>

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "modules/caps.h"
#include "base/sysinfo.h"
#include "cell/env.h"
#include "devices/blas_tune.h"
#include "cell/mathmode.h"
#include "base/exitcodes.h"
#include "results/git_rev.h"
#include "base/log.h"
#include "modules/host_api.h"
#include "khost/kit/status.h"
#include "khost/kit/clock.h"
#include "khost/kit/rng.h"
#include "khost/kit/spec.h"
#include "khost/kit/flops.h"
#include "khost/kit/init.h"
#include "cell/layout.h"
#include "devices/peak.h"
#include "devices/roofline.h"
#include "base/procguard.h"
#include "cell/progress.h"
#include "cell/runguard.h"

typedef struct cell {
    const kh_cell_opts *o;
    kh_cell_record *rec;
    const kh_backend_api *b;
    const kh_task_api *t;
    uint32_t math; /* the session's kh_math_mode (kh_math_effective of the asked one) */
    const kh_task_info *info;
    kh_tdata *data;
    kh_bsession *sess;
    kh_bmodel *model;
    kh_model_spec spec; /* in the host's layout: spec_buf's */
    kh_spec_buf spec_buf;
    kh_model_shapes shapes;
    kh_caps caps;
    int to_nchw;
    int32_t onehot; /* expand one-hot on the host (backend lacks KH_CAP_ONEHOT_INPUT) */
    int batch;
    /* host batch buffers: task layout (x, y) and backend layout (xb) */
    void *x, *xb;
    int32_t *y;
    int64_t x_numel; /* per sample, task layout */
    int64_t xb_numel; /* per sample, backend layout */
} cell;

static int fail(cell *c, const char *status, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(cell *c, const char *status, int code, const char *fmt, ...) {
    snprintf(c->rec->status, sizeof c->rec->status, "%s", status);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->rec->reason, sizeof c->rec->reason, fmt, ap);
    va_end(ap);
    return code;
}

/* Out of memory is its own status, "oom", with the limit the cell ran under (procguard.h) when there is one,
 * so a matrix cell over --memory-limit reads as what it is. Returns code. */
static int fail_status(cell *c, kh_status st, const char *status, int code, const char *what, const char *why) {
    if (st != KH_ERR_NOMEM) return fail(c, status, code, "%s: %s", what, why);
    uint64_t lim = kh_procguard_memory_limit();
    if (lim)
        return fail(c, "oom", KH_EXIT_TRAIN, "%s: out of memory under the memory limit of %llu MiB: %s", what,
                    (unsigned long long)(lim >> 20), why);
    return fail(c, "oom", KH_EXIT_TRAIN, "%s: out of memory: %s", what, why);
}

/* SIGINT/SIGTERM/SIGHUP asked the run to stop (runguard.h): the cell ends "interrupted", keeping the
 * epochs it finished. Checked between batches and between stages, never inside a module's call. */
static int interrupted(cell *c) {
    int sig = kh_runguard_stop_signal();
    if (!sig) return 0;
    const char *name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal";
    fail(c, "interrupted", KH_EXIT_TRAIN, "interrupted by %s after %d of %d epochs", name, c->rec->n_rows,
         c->rec->epochs_requested);
    return 1;
}

static const char *berr(cell *c) {
    const char *e = c->sess ? c->b->last_error(c->sess) : NULL;
    return e && *e ? e : "no error text";
}

/* Task batch tensor for n samples (x in task layout, y labels). */
static void task_tensors(cell *c, int n, kh_tensor *x, kh_tensor *y) {
    memset(x, 0, sizeof *x);
    x->dtype = c->spec.input_dtype;
    x->rank = c->spec.input_rank + 1;
    x->dims[0] = n;
    for (int i = 0; i < c->spec.input_rank; i++) x->dims[i + 1] = c->spec.input_shape[i];
    x->layout = c->spec.input_dtype == KH_I32 ? KH_LAYOUT_NT
                : c->spec.input_rank == 3      ? KH_LAYOUT_NHWC
                : c->spec.input_rank == 2      ? KH_LAYOUT_NTC
                                               : KH_LAYOUT_NC;
    x->data = c->x;
    memset(y, 0, sizeof *y);
    y->dtype = KH_I32;
    y->layout = KH_LAYOUT_NC;
    y->rank = 1;
    y->dims[0] = n;
    y->data = c->y;
}

/* Gather, augment and convert one batch; xb receives the backend's view. */
static int load_batch(cell *c, uint32_t split, const int64_t *idx, int n, uint64_t aug_seed, kh_tensor *xb,
                      kh_tensor *y) {
    kh_tensor x;
    task_tensors(c, n, &x, y);
    kh_callmark_set('t', "get_batch");
    kh_status gs = c->t->get_batch(c->data, split, idx, n, &x, y);
    kh_callmark_set('t', "augment");
    if (gs == KH_OK && split == KH_SPLIT_TRAIN && c->t->augment) gs = c->t->augment(c->data, &x, aug_seed);
    kh_callmark_none();
    if (gs != KH_OK) return -1;
    return kh_layout_convert(xb, &x, c->to_nchw, c->onehot, c->xb);
}

/* Bytes of one batch buffer, or 0 when the input shape and batch make more than the host will try to hold
 * (1 TiB, or an overflow): such a shape is a task's mistake, not the machine running out of memory. */
#define KH_MAX_BATCH_BYTES ((int64_t)1 << 40)
static int64_t batch_bytes(const cell *c) {
    int64_t n = 1, r;
    for (int i = 0; i < c->spec.input_rank; i++) {
        if (c->spec.input_shape[i] < 1 || __builtin_mul_overflow(n, (int64_t)c->spec.input_shape[i], &n)) return 0;
    }
    if (c->onehot > 0 && __builtin_mul_overflow(n, (int64_t)c->onehot, &n)) return 0;
    if (__builtin_mul_overflow(n, (int64_t)c->batch * 4, &r) || r > KH_MAX_BATCH_BYTES) return 0;
    return r;
}

static int alloc_buffers(cell *c) {
    c->x_numel = 1;
    for (int i = 0; i < c->spec.input_rank; i++) c->x_numel *= c->spec.input_shape[i];
    c->xb_numel = c->onehot ? c->x_numel * c->onehot : c->x_numel;
    /* the batches end at a guard page: a module reading or writing past one faults in that call */
    c->x = kh_guarded_alloc((size_t)(c->batch * c->x_numel) * 4);
    c->xb = kh_guarded_alloc((size_t)(c->batch * c->xb_numel) * 4);
    c->y = kh_guarded_alloc((size_t)c->batch * sizeof(int32_t));
    return c->x && c->xb && c->y ? 0 : -1;
}

int kh_cell_init_weights(const kh_backend_api *b, kh_bsession *s, kh_bmodel *m, const kh_model_spec *spec,
                         uint64_t seed, char *err, size_t errlen) {
    kh_model_shapes sh;
    if (kh_spec_infer(spec, &sh, err, errlen) != KH_OK) return -1;
    kh_rng rng;
    kh_rng_seed(&rng, kh_seed_mix(seed, 0x5EED, 0, 0));
    int rc = 0;
    for (int l = 0; l < sh.n_layers && rc == 0; l++) {
        for (int p = 0; p < sh.layers[l].n_params && rc == 0; p++) {
            const kh_param_shape *ps = &sh.layers[l].params[p];
            float *w = kh_guarded_alloc((size_t)ps->numel * sizeof *w); /* the backend reads it */
            if (!w) {
                snprintf(err, errlen, "out of memory for layer %d %s", l, ps->name);
                rc = -1;
                break;
            }
            kh_tensor t = {.dtype = KH_F32, .layout = KH_LAYOUT_ANY, .rank = ps->rank, .data = w};
            for (int d = 0; d < ps->rank; d++) t.dims[d] = ps->dims[d];
            if (kh_init_param(&rng, ps, w) != KH_OK) {
                snprintf(err, errlen, "layer %d %s: initialiser failed", l, ps->name);
                rc = -1;
            } else if (kh_callmark_set('b', "set_weight"), b->set_weight(m, l, p, &t) != KH_OK) {
                kh_callmark_none();
                snprintf(err, errlen, "set_weight layer %d %s: %s", l, ps->name, b->last_error(s));
                rc = -1;
            }
            kh_callmark_none();
            kh_guarded_free(w);
        }
    }
    kh_model_shapes_free(&sh);
    return rc;
}

static int metrics_bad(const kh_metrics *m) {
    return m->samples > 0 && !isfinite(m->loss_sum);
}

/* Sums that cannot be true (the ABI's ranges: samples >= 0, 0 <= correct <= samples): a backend bug, never a
 * recorded accuracy of 2.0 or -4.6. Returns 1 with the cell failed. */
static int metrics_impossible(cell *c, const kh_metrics *m, const char *phase) {
    if (m->samples >= 0 && !(m->correct < 0) && !(m->correct > (double)m->samples)) return 0;
    fail(c, "error", KH_EXIT_TRAIN, "read_metrics(%s) returned %g correct of %lld samples, which cannot be (the "
         "backend broke the ABI: 0 <= correct <= samples)", phase, m->correct, (long long)m->samples);
    return 1;
}

/* One epoch: returns KH_EXIT_OK or a failure code with rec filled. */
static int run_epoch(cell *c, int epoch, int epochs, int64_t *order, int64_t n_train, int64_t per_epoch,
                     double t_start, kh_epoch_row *row) {
    const kh_cell_opts *o = c->o;
    kh_rng rng;
    kh_rng_seed(&rng, kh_seed_mix(o->seed, 0x5AFF1E, (uint64_t)epoch, 0));
    for (int64_t i = 0; i < n_train; i++) order[i] = i;
    kh_rng_shuffle_i64(&rng, order, n_train);

    kh_progress pr;
    kh_progress_begin(&pr, o->out, o->quiet, epoch, epochs, per_epoch);
    double t0 = kh_now(), t_prev = t0;
    kh_metrics m;
    int64_t done = 0;
    for (int64_t bi = 0; done < per_epoch; bi++) {
        int n = (int)(per_epoch - done < c->batch ? per_epoch - done : c->batch);
        kh_tensor xb, y;
        if (load_batch(c, KH_SPLIT_TRAIN, order + done, n, kh_seed_mix(o->seed, 0xA06, (uint64_t)epoch, (uint64_t)bi),
                       &xb, &y) != 0) {
            const char *e = c->t->last_error(c->data);
            return fail(c, "data", KH_EXIT_DATA, "batch: %s", e && *e ? e : "bad input index for one-hot");
        }
        if (interrupted(c)) return KH_EXIT_TRAIN;
        kh_callmark_set('b', "train_batch");
        kh_status ts = c->b->train_batch(c->model, &xb, &y);
        kh_callmark_none();
        if (ts != KH_OK) return fail_status(c, ts, "error", KH_EXIT_TRAIN, "train_batch", berr(c));
        /* every step's own time, the device synchronised: a sample is what the step cost (on a GPU this
         * gives up the overlap of the next batch's staging with the last kernels, as the epoch rule does) */
        if (c->b->sync(c->model) != KH_OK) return fail(c, "error", KH_EXIT_TRAIN, "sync: %s", berr(c));
        double t_step = kh_now();
        if (kh_record_add_step(c->rec, t_step - t_prev) != 0) return fail(c, "error", KH_EXIT_TRAIN, "out of memory");
        t_prev = t_step;
        done += n;
        if (kh_progress_due(&pr)) {
            if (c->b->read_metrics(c->model, KH_PHASE_TRAIN, &m, 0) != KH_OK)
                return fail(c, "error", KH_EXIT_TRAIN, "read_metrics: %s", berr(c));
            if (metrics_bad(&m)) break;
            kh_progress_update(&pr, done, m.loss_sum / (double)m.samples,
                               c->spec.loss == KH_LOSS_NONE ? NAN : m.correct / (double)m.samples);
        }
    }
    if (c->b->sync(c->model) != KH_OK) return fail(c, "error", KH_EXIT_TRAIN, "sync: %s", berr(c));
    double t1 = kh_now();
    if (c->b->read_metrics(c->model, KH_PHASE_TRAIN, &m, 1) != KH_OK)
        return fail(c, "error", KH_EXIT_TRAIN, "read_metrics: %s", berr(c));
    if (metrics_impossible(c, &m, "training")) return KH_EXIT_TRAIN;
    row->epoch = epoch;
    row->loss = m.samples ? m.loss_sum / (double)m.samples : NAN;
    row->acc = m.samples ? m.correct / (double)m.samples : NAN;
    row->val_loss = row->val_acc = NAN;
    row->train_s = t1 - t0;
    if (metrics_bad(&m) || !isfinite(row->loss)) {
        row->val_s = 0;
        row->epoch_s = row->train_s;
        row->elapsed = kh_now() - t_start;
        char msg[128];
        snprintf(msg, sizeof msg, "training loss became %s in epoch %d", isnan(m.loss_sum) ? "NaN" : "Inf", epoch);
        kh_progress_end(&pr, done, row->train_s, msg);
        return fail(c, "diverged", KH_EXIT_TRAIN, "%s", msg);
    }

    int64_t n_val = c->info->has_validation ? c->t->count(c->data, KH_SPLIT_VAL) : 0;
    if (n_val > 0) {
        int64_t *vidx = kh_guarded_alloc((size_t)c->batch * sizeof *vidx); /* the task reads it */
        if (!vidx) return fail(c, "error", KH_EXIT_TRAIN, "out of memory");
        for (int64_t s = 0; s < n_val; s += c->batch) {
            int n = (int)(n_val - s < c->batch ? n_val - s : c->batch);
            for (int i = 0; i < n; i++) vidx[i] = s + i;
            kh_tensor xb, y;
            if (load_batch(c, KH_SPLIT_VAL, vidx, n, 0, &xb, &y) != 0) {
                kh_guarded_free(vidx);
                return fail(c, "data", KH_EXIT_DATA, "validation batch: %s", c->t->last_error(c->data));
            }
            kh_callmark_set('b', "eval_batch");
            kh_status es = c->b->eval_batch(c->model, &xb, &y);
            kh_callmark_none();
            if (es != KH_OK) {
                kh_guarded_free(vidx);
                return fail_status(c, es, "error", KH_EXIT_TRAIN, "eval_batch", berr(c));
            }
        }
        kh_guarded_free(vidx);
        if (c->b->sync(c->model) != KH_OK) return fail(c, "error", KH_EXIT_TRAIN, "sync: %s", berr(c));
        if (c->b->read_metrics(c->model, KH_PHASE_EVAL, &m, 1) != KH_OK)
            return fail(c, "error", KH_EXIT_TRAIN, "read_metrics: %s", berr(c));
        if (metrics_impossible(c, &m, "validation")) return KH_EXIT_TRAIN;
        row->val_loss = m.samples ? m.loss_sum / (double)m.samples : NAN;
        row->val_acc = m.samples ? m.correct / (double)m.samples : NAN;
        /* a NaN or Inf validation metric is a diverged model, whatever the training loss said */
        if (!isfinite(row->val_loss) || (c->spec.loss != KH_LOSS_NONE && !isfinite(row->val_acc))) {
            double t2 = kh_now();
            row->val_s = t2 - t1;
            row->epoch_s = t2 - t0;
            row->elapsed = t2 - t_start;
            char msg[160];
            double bad = !isfinite(row->val_loss) ? row->val_loss : row->val_acc;
            snprintf(msg, sizeof msg, "validation %s became %s in epoch %d", !isfinite(row->val_loss) ? "loss" : "accuracy",
                     isnan(bad) ? "NaN" : "Inf", epoch);
            kh_progress_end(&pr, done, row->epoch_s, msg);
            return fail(c, "diverged", KH_EXIT_TRAIN, "%s", msg);
        }
    }
    double t2 = kh_now();
    row->val_s = t2 - t1;
    row->epoch_s = t2 - t0;
    row->elapsed = t2 - t_start;

    char line[256];
    int len = snprintf(line, sizeof line, "loss: %.4f - acc: %.4f", row->loss, row->acc);
    if (n_val > 0)
        snprintf(line + len, sizeof line - (size_t)len, " - val_loss: %.4f - val_acc: %.4f", row->val_loss,
                 row->val_acc);
    kh_progress_end(&pr, done, row->epoch_s, line);
    return KH_EXIT_OK;
}

/* The record's energy member from the counter and the epochs so far (kh_energy_json). */
static void set_energy(kh_cell_record *rec, const kh_energy *h, const double *epoch_j, const double *epoch_w, int n) {
    if (!h) return;
    cJSON *o = kh_energy_json(h, epoch_j, epoch_w, n);
    char *t = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!t) return;
    free(rec->energy_json);
    rec->energy_json = strdup(t);
    cJSON_free(t);
}

/* Untimed training batches before epoch 1, from their own shuffle; their metrics are discarded. They do
 * update the weights: a benchmark's warm-up, not part of the task's training. */
static int warmup(cell *c, int64_t *order, int64_t n_train) {
    kh_rng rng;
    kh_rng_seed(&rng, kh_seed_mix(c->o->seed, 0x3A7E, 0, 0));
    for (int64_t i = 0; i < n_train; i++) order[i] = i;
    kh_rng_shuffle_i64(&rng, order, n_train);
    int64_t done = 0;
    for (int64_t s = 0; s < c->o->warmup_steps; s++) {
        if (interrupted(c)) return KH_EXIT_TRAIN; /* a signal in a long warm-up stops the run as in an epoch */
        if (done + c->batch > n_train) done = 0;
        int n = (int)(n_train < c->batch ? n_train : c->batch);
        kh_tensor xb, y;
        if (load_batch(c, KH_SPLIT_TRAIN, order + done, n, kh_seed_mix(c->o->seed, 0xA06, 0, (uint64_t)s), &xb, &y) != 0)
            return fail(c, "data", KH_EXIT_DATA, "warm-up batch: %s", c->t->last_error(c->data));
        kh_callmark_set('b', "train_batch (warm-up)");
        kh_status ws = c->b->train_batch(c->model, &xb, &y);
        kh_callmark_none();
        if (ws != KH_OK) return fail(c, "error", KH_EXIT_TRAIN, "train_batch: %s", berr(c));
        done += n;
    }
    kh_metrics m;
    if (c->b->sync(c->model) != KH_OK || c->b->read_metrics(c->model, KH_PHASE_TRAIN, &m, 1) != KH_OK)
        return fail(c, "error", KH_EXIT_TRAIN, "warm-up: %s", berr(c));
    return KH_EXIT_OK;
}

/* The backend's environment() text into buf[n]: 1 when it gave one, 0 when it has none, -1 with the cell
 * failed when it broke the ABI (no terminating NUL within the n bytes, or a write past them: the call writes
 * into a copy followed by a guard band, so a short overrun is found here instead of corrupting the stack). */
static int backend_environment(cell *c, char *buf, size_t n) {
    enum { GUARD = 4096 };
    if (!c->b->environment) return 0;
    unsigned char *g = malloc(n + GUARD);
    if (!g) return 0;
    memset(g, 0xA5, n + GUARD);
    g[0] = 0;
    kh_callmark_set('b', "environment");
    int rc = c->b->environment(c->sess, (char *)g, n) == KH_OK;
    kh_callmark_none();
    size_t k = n;
    while (k < n + GUARD && g[k] == 0xA5) k++;
    if (k < n + GUARD || !memchr(g, 0, n)) {
        fail(c, "error", KH_EXIT_TRAIN, "environment() %s (the backend broke the ABI)",
             k < n + GUARD ? "wrote past the buffer it was given" : "gave text without its terminating NUL");
        free(g);
        return -1;
    }
    if (rc) memcpy(buf, g, n);
    free(g);
    return rc;
}

/* after_training hook: predictions through the backend with the same input conversion. */
typedef struct pred_ctx { cell *c; } pred_ctx;

static kh_status pred_predict(void *ctx, const kh_tensor *x, kh_tensor *out) {
    cell *c = ((pred_ctx *)ctx)->c;
    if (!c->b->predict) return KH_ERR_UNSUPPORTED; /* optional in the ABI */
    /* the task's tensors, checked against the ABI before anything reads their dims */
    for (const kh_tensor *t = x; t; t = t == x ? out : NULL) {
        if (t->rank < 1 || t->rank > KH_MAX_RANK) return KH_ERR_INVALID;
        for (int i = 0; i < t->rank; i++)
            if (t->dims[i] < 1) return KH_ERR_INVALID;
    }
    if (x->dims[0] > c->batch || out->dims[0] != x->dims[0]) return KH_ERR_INVALID;
    kh_tensor xb;
    if (kh_layout_convert(&xb, x, c->to_nchw, c->onehot, c->xb) != 0) return KH_ERR_INVALID;
    kh_callmark_set('b', "predict");
    kh_status ps = c->b->predict(c->model, &xb, out);
    kh_callmark_set('t', "after_training");
    return ps;
}

static void pred_print(void *ctx, const char *text) {
    cell *c = ((pred_ctx *)ctx)->c;
    fputs(text, c->o->out);
    fflush(c->o->out);
}

static void fill_environment(cell *c) {
    const kh_cell_opts *o = c->o;
    kh_cell_record *r = c->rec;
    char buf[512];
    kh_record_set_env(r, "khost_version", KHOST_VERSION);
    kh_record_set_env(r, "git_rev", kh_git_rev());
    kh_record_set_env(r, "plugin_version", o->backend->desc->version);
    kh_record_set_env(r, "task_version", o->task->desc->version);
    kh_record_set_env(r, "device_name", o->dev->name);
    kh_record_set_env(r, "device_pci_bus_id", o->dev->pci_bus_id);
    if (o->dev->kind == KH_DEVICE_CUDA) {
        snprintf(buf, sizeof buf, "%d.%d", o->dev->cc_major, o->dev->cc_minor);
        kh_record_set_env(r, "compute_capability", buf);
        snprintf(buf, sizeof buf, "%lld", (long long)o->dev->total_mem);
        kh_record_set_env(r, "device_memory_bytes", buf);
        snprintf(buf, sizeof buf, "%d", o->dev->multiprocessors);
        kh_record_set_env(r, "multiprocessors", buf);
    }
    kh_devices_driver_string(o->devs, buf, sizeof buf);
    kh_record_set_env(r, "driver_version", buf);
    kh_env_cpu_model(buf, sizeof buf);
    kh_record_set_env(r, "cpu_model", buf);
    kh_record_set_env(r, "cpu_isa", kh_cpu_isa()); /* one model name ("AMD EPYC") can hide two ISAs */
    snprintf(buf, sizeof buf, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
    kh_record_set_env(r, "cpu_threads", buf);
    if (gethostname(buf, sizeof buf) == 0) kh_record_set_env(r, "hostname", buf);
    kh_record_set_env(r, "dataset", c->info->dataset);
    kh_record_set_env(r, "data_dir", o->data_dir);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", o->data_dir, c->info->dataset);
    snprintf(buf, sizeof buf, "%lld", (long long)kh_env_tree_bytes(path));
    kh_record_set_env(r, "dataset_bytes", buf);
    kh_env_add_slurm(r);
    /* what --resume compares: a record made on fewer samples answers a different question */
    if (o->limit_train > 0) {
        snprintf(buf, sizeof buf, "%lld", (long long)o->limit_train);
        kh_record_set_env(r, "limit_train", buf);
    }
    if (o->limit_val > 0) {
        snprintf(buf, sizeof buf, "%lld", (long long)o->limit_val);
        kh_record_set_env(r, "limit_val", buf);
    }
}

/* What an epoch's time means: the kit's FLOP and compulsory byte count of this model for the epoch's samples,
 * and the device's hierarchical roofline for them (devices/roofline.h: each phase held to the ceiling of the
 * memory level its step's working set lives in); kh_record_summarise turns them into GFLOP/s and a fraction
 * of the roofline. Unknown figures stay NAN and the record says why. */
static void count_work(cell *c, int64_t per_epoch, int64_t n_val) {
    kh_cell_record *r = c->rec;
    kh_model_flops f;
    char err[256];
    if (kh_spec_flops(&c->spec, &c->shapes, &f, NULL, err, sizeof err) != KH_OK) {
        kh_logf(KH_LOG_WARN, "%s: no FLOP count: %s", c->o->task->desc->name, err);
        return;
    }
    kh_flops_epoch(&f, per_epoch, c->batch, n_val, &r->flops_per_epoch, &r->bytes_per_epoch);
    kh_flops_phase train, eval;
    kh_flops_phases(&f, per_epoch, c->batch, n_val, &train, &eval);
    kh_peak pk;
    int known = kh_peak_get(c->o->dev, &pk) == 0;
    snprintf(r->peak_source, sizeof r->peak_source, "%s", pk.source);
    if (!known) return;
    r->peak_gflops = kh_peak_flop_ceiling(&pk); /* the compute ceiling the roofline uses */
    r->sgemm_gflops = pk.gflops > 0 ? pk.gflops : NAN;
    r->fma_gflops = pk.fma_gflops > 0 ? pk.fma_gflops : NAN;
    if (pk.gbps > 0) r->peak_gbps = pk.gbps;
    kh_roofline rl;
    if (kh_roofline_bound(&pk, &train, &eval, &rl) != 0) return;
    r->roofline_gflops = rl.gflops;
    r->step_working_set_bytes = rl.working_set;
    if (rl.level >= 0) {
        snprintf(r->roofline_level, sizeof r->roofline_level, "%s", pk.levels[rl.level].name);
        r->roofline_gbps = rl.gbps;
        r->n_mem_levels = pk.n_levels;
        memcpy(r->mem_levels, pk.levels, sizeof r->mem_levels);
    }
}

static const char *cache_word(int32_t cache) {
    return cache == KH_COMPILE_HIT ? "hit" : cache == KH_COMPILE_MISS ? "miss" : cache == KH_COMPILE_NO_CACHE ? "none" : NULL;
}

/* A backend's seconds: NAN when negative or not finite (unknown, never a fake zero). */
static double seconds_or_nan(double s) { return isfinite(s) && s >= 0 ? s : NAN; }

/* The device memory the model held at its peak, as the backend counts its own allocations (ABI 1.4
 * memory_info), into the record's device_mem. A module that does not count leaves the record's null. */
static void memory_info(cell *c, kh_cell_record *rec) {
    const kh_backend_api *b = c->b;
    if (!KH_HAS_MEMBER(kh_backend_api, b->struct_size, memory_info) || !b->memory_info || !c->model) return;
    kh_memory_info mi;
    memset(&mi, 0, sizeof mi);
    mi.struct_size = sizeof mi;
    mi.device_bytes = mi.device_peak_bytes = -1;
    kh_status st = b->memory_info(c->model, &mi);
    if (st != KH_OK) {
        kh_logf(KH_LOG_WARN, "%s: memory_info: %s: %s", c->o->backend->desc->name, kh_status_name(st), berr(c));
        return;
    }
    if (mi.device_peak_bytes < 0) return; /* not counted: the record keeps its null and reason */
    mi.what[sizeof mi.what - 1] = 0;     /* a module's text is not trusted to end */
    rec->dev_peak_bytes = mi.device_peak_bytes;
    snprintf(rec->dev_mem_what, sizeof rec->dev_mem_what, "%s", mi.what);
}

/* Model-compile time (ABI 1.2). compile_s is the wall time of the compile call that made the trained model,
 * for every backend. A backend with compile_info also says whether its generated code came from its cache
 * and how the time splits; after a miss the host compiles the same spec once more, right away and before any
 * training, expecting a hit, and records that call's wall time as the warm time beside the cold one (the
 * second model is freed at once). A second compile that is not a hit gives no warm time: it would not be one. */
static void compile_times(cell *c, const kh_compile_opts *co, double wall) {
    kh_cell_record *rec = c->rec;
    const kh_backend_api *b = c->b;
    const char *who = c->o->backend->desc->name;
    rec->compile_s = wall;
    if (!KH_HAS_MEMBER(kh_backend_api, b->struct_size, compile_info) || !b->compile_info) return;
    kh_compile_info ci;
    memset(&ci, 0, sizeof ci);
    ci.struct_size = sizeof ci;
    kh_status st = b->compile_info(c->model, &ci);
    if (st != KH_OK) {
        kh_logf(KH_LOG_WARN, "%s: compile_info: %s: %s", who, kh_status_name(st), berr(c));
        return;
    }
    const char *word = cache_word(ci.cache);
    if (!word) {
        kh_logf(KH_LOG_WARN, "%s: compile_info: unknown cache value %d: ignored", who, (int)ci.cache);
        return;
    }
    snprintf(rec->compile_cache, sizeof rec->compile_cache, "%s", word);
    rec->compile_units = ci.units >= 0 ? ci.units : -1;
    rec->compile_codegen_s = seconds_or_nan(ci.codegen_s);
    rec->compile_cc_s = seconds_or_nan(ci.compile_s);
    rec->compile_load_s = seconds_or_nan(ci.load_s);
    if (ci.cache == KH_COMPILE_HIT) rec->compile_warm_s = wall;
    if (ci.cache != KH_COMPILE_MISS) return;

    rec->compile_cold_s = wall;
    kh_bmodel *m2 = NULL;
    double t0 = kh_now();
    char rerr[256] = "";
    st = kh_backend_compile(c->o->backend, c->sess, &c->spec, co, &m2, rerr, sizeof rerr);
    double t1 = kh_now();
    if (st != KH_OK) {
        kh_logf(KH_LOG_WARN, "%s: the second compile (for the warm compile time) failed: %s: %s; no warm time", who,
                kh_status_name(st), rerr[0] ? rerr : berr(c));
        return;
    }
    kh_compile_info c2;
    memset(&c2, 0, sizeof c2);
    c2.struct_size = sizeof c2;
    st = b->compile_info(m2, &c2);
    if (st == KH_OK && c2.cache == KH_COMPILE_HIT)
        rec->compile_warm_s = t1 - t0;
    else
        kh_logf(KH_LOG_WARN, "%s: the second compile of the same model was %s, not a cache hit: no warm time recorded",
                who, st != KH_OK ? "not described (compile_info failed)" : cache_word(c2.cache) ? cache_word(c2.cache) : "unknown");
    b->model_free(m2);
}

/* One line before the first epoch for backends with generated code: where the compile time went. */
static void print_compile(cell *c) {
    const kh_cell_record *r = c->rec;
    if (c->o->quiet || !r->compile_cache[0]) return;
    FILE *f = c->o->out;
    int none = !strcmp(r->compile_cache, "none");
    fprintf(f, "compile: %.3g s (%s%s", r->compile_s, none ? "no generated code" : "cache ", none ? "" : r->compile_cache);
    if (r->compile_units >= 0) fprintf(f, ", %d unit%s", r->compile_units, r->compile_units == 1 ? "" : "s");
    if (isfinite(r->compile_cold_s) && isfinite(r->compile_warm_s)) fprintf(f, "; warm %.3g s", r->compile_warm_s);
    fputs(")\n", f);
    fflush(f);
}

/* The record so far, as status "running"; a failure to write it is only warned about here (the final write
 * reports it as an error). */
static void checkpoint(cell *c, int epoch, int epochs) {
    kh_cell_record *rec = c->rec;
    char err[512];
    snprintf(rec->status, sizeof rec->status, "running");
    snprintf(rec->reason, sizeof rec->reason, "%d of %d epochs done", epoch, epochs);
    kh_record_summarise(rec, c->info->target_is_max, c->info->target);
    if (kh_record_write(rec, c->o->checkpoint_dir, err, sizeof err) != 0) kh_logf(KH_LOG_WARN, "checkpoint: %s", err);
    snprintf(rec->status, sizeof rec->status, "error");
    rec->reason[0] = 0;
}

static int run(cell *c) {
    const kh_cell_opts *o = c->o;
    kh_cell_record *rec = c->rec;
    char err[1024];
    c->info = c->t->info();
    if (!c->info) return fail(c, "error", KH_EXIT_MODULE, "task %s: info() returned NULL", o->task->desc->name);
    c->batch = o->batch_size > 0 ? o->batch_size : c->info->batch_size;
    int epochs = o->epochs > 0 ? o->epochs : c->info->epochs;
    rec->epochs_requested = epochs;
    rec->batch_size = c->batch;
    rec->seed = o->seed;
    snprintf(rec->metric, sizeof rec->metric, "%s", c->info->metric ? c->info->metric : "val_acc");
    fill_environment(c);

    /* capabilities first: an unsupported cell costs no data loading */
    memset(&c->caps, 0, sizeof c->caps);
    c->caps.struct_size = sizeof c->caps;
    if (c->b->get_caps(o->dev->kind, &c->caps) != KH_OK)
        return fail(c, "error", KH_EXIT_MODULE, "get_caps failed");
    /* an unavailable device kind (no BLAS, no driver) is known before any data set is read */
    char why[256];
    if (!c->caps.available) {
        kh_caps_unavailable_reason(&c->caps, why, sizeof why);
        snprintf(rec->status, sizeof rec->status, "unsupported");
        snprintf(rec->reason, sizeof rec->reason, "unsupported: %s", why);
        return KH_EXIT_UNSUPPORTED;
    }

    kh_load_opts lo = {.struct_size = sizeof lo, .data_dir = o->data_dir, .limit_train = o->limit_train,
                       .limit_val = o->limit_val, .seed = o->seed};
    err[0] = 0;
    kh_callmark_set('t', "load");
    kh_status st = c->t->load(kh_host_api_get(), &lo, &c->data, err, sizeof err);
    kh_callmark_none();
    if (st != KH_OK) {
        c->data = NULL;
        return fail_status(c, st, "data", KH_EXIT_DATA, "load", err[0] ? err : kh_status_name(st));
    }
    err[0] = 0;
    st = kh_task_model(o->task, c->data, &c->spec_buf, err, sizeof err);
    if (st != KH_OK) return fail(c, "error", KH_EXIT_DATA, "task model spec: %s", err);
    c->spec = c->spec_buf.spec;
    if (kh_spec_infer(&c->spec, &c->shapes, err, sizeof err) != KH_OK)
        return fail(c, "error", KH_EXIT_DATA, "task model spec: %s", err);
    if (kh_caps_check(&c->caps, &c->spec, why, sizeof why) != 0) {
        snprintf(rec->status, sizeof rec->status, "unsupported");
        snprintf(rec->reason, sizeof rec->reason, "%s", why);
        return KH_EXIT_UNSUPPORTED;
    }
    c->to_nchw = c->caps.image_layout == KH_LAYOUT_NCHW;
    c->onehot = (c->spec.input_onehot > 0 && !(c->caps.flags & KH_CAP_ONEHOT_INPUT)) ? c->spec.input_onehot : 0;

    int64_t n_train = c->t->count(c->data, KH_SPLIT_TRAIN);
    rec->train_samples = n_train;
    rec->val_samples = c->info->has_validation ? c->t->count(c->data, KH_SPLIT_VAL) : 0;
    if (rec->val_samples < 0)
        return fail(c, "data", KH_EXIT_DATA, "task %s: count(validation) returned %lld", o->task->desc->name,
                    (long long)rec->val_samples);
    if (n_train <= 0) return fail(c, "data", KH_EXIT_DATA, "%s", "the training split is empty");
    int64_t per_epoch = c->info->train_samples_per_epoch > 0 && c->info->train_samples_per_epoch < n_train
                            ? c->info->train_samples_per_epoch
                            : n_train;
    if (o->steps > 0 && o->steps * c->batch < per_epoch) {
        per_epoch = o->steps * c->batch;
    } else if (o->steps > 0) { /* more steps than an epoch has: said, and the record says how many ran */
        int64_t have = (per_epoch + c->batch - 1) / c->batch;
        kh_logf(KH_LOG_WARN, "--steps %lld: an epoch of %s has %lld step(s) of %d samples; running %lld",
                (long long)o->steps, o->task->desc->name, (long long)have, c->batch, (long long)have);
        char note[160];
        snprintf(note, sizeof note, "--steps %lld asked, the epoch has %lld", (long long)o->steps, (long long)have);
        kh_record_set_env(rec, "steps_note", note);
    }
    snprintf(rec->step_sync, sizeof rec->step_sync, "device");
    rec->warmup_steps = o->warmup_steps;
    rec->steps_per_epoch = (per_epoch + c->batch - 1) / c->batch;
    if (!batch_bytes(c)) {
        char shape[160];
        int w = 0;
        for (int i = 0; i < c->spec.input_rank && w < (int)sizeof shape - 24; i++)
            w += snprintf(shape + w, sizeof shape - (size_t)w, "%s%lld", i ? "x" : "", (long long)c->spec.input_shape[i]);
        return fail(c, "error", KH_EXIT_DATA,
                    "task model spec: input shape %s%s with batch size %d needs more than %lld bytes per batch buffer",
                    shape, c->onehot ? " (one-hot expanded)" : "", c->batch, (long long)KH_MAX_BATCH_BYTES);
    }
    if (alloc_buffers(c) != 0)
        return fail_status(c, KH_ERR_NOMEM, "error", KH_EXIT_TRAIN, "batch buffers", "host allocation failed");
    count_work(c, per_epoch, rec->val_samples);

    err[0] = 0;
    /* the session's FP32 math: what was asked where the device and the module can apply it, recorded */
    kh_device sdev = *o->dev;
    sdev.struct_size = sizeof sdev;
    sdev.math = c->math;
    kh_callmark_set('b', "open");
    kh_status os = c->b->open(kh_host_api_get(), &sdev, &c->sess, err, sizeof err);
    kh_callmark_none();
    if (os != KH_OK) {
        c->sess = NULL;
        return fail_status(c, os, "error", KH_EXIT_DEVICE, "open session", err[0] ? err : "no reason given");
    }
    int env_rc = backend_environment(c, err, sizeof err);
    if (env_rc < 0) return KH_EXIT_TRAIN;
    if (env_rc > 0) kh_record_set_env(rec, "backend_env", err);
    int64_t dev_total;
    if (kh_device_mem_info(o->dev, &rec->dev_free_before, &dev_total) != 0) rec->dev_free_before = -1;
    kh_compile_opts co = {.struct_size = sizeof co, .max_batch = c->batch, .seed = o->seed, .deterministic = 0};
    double tc = kh_now();
    err[0] = 0;
    kh_callmark_set('b', "compile");
    kh_status cs = kh_backend_compile(o->backend, c->sess, &c->spec, &co, &c->model, err, sizeof err);
    kh_callmark_none();
    double compile_wall = kh_now() - tc;
    if (cs != KH_OK) {
        c->model = NULL;
        if (interrupted(c)) return KH_EXIT_TRAIN; /* the compile failed because the run was told to stop */
        return fail_status(c, cs, "error", KH_EXIT_TRAIN, "compile", err[0] ? err : berr(c));
    }
    if (!c->model) /* the ABI: KH_OK comes with a model */
        return fail(c, "error", KH_EXIT_TRAIN, "compile returned OK without a model (the backend broke the ABI)");
    compile_times(c, &co, compile_wall);
    /* again after compile: a GPU backend appends " cudnn_algos=..." (its choice per convolution layer), kept
     * under its own key so the versions before it are not cut at the record's value length */
    if ((env_rc = backend_environment(c, err, sizeof err)) < 0) return KH_EXIT_TRAIN;
    if (env_rc > 0) {
        char *algos = strstr(err, " cudnn_algos=");
        if (algos) {
            kh_record_set_env(rec, "cudnn_algos", algos + strlen(" cudnn_algos="));
            *algos = 0;
        }
        kh_record_set_env(rec, "backend_env", err);
    }
    if (interrupted(c)) return KH_EXIT_TRAIN;
    print_compile(c);
    if (kh_cell_init_weights(c->b, c->sess, c->model, &c->spec, o->seed, err, sizeof err) != 0)
        return fail(c, "error", KH_EXIT_TRAIN, "%s", err);

    int64_t *order = kh_guarded_alloc((size_t)n_train * sizeof *order); /* the task reads slices */
    if (!order) return fail_status(c, KH_ERR_NOMEM, "error", KH_EXIT_TRAIN, "shuffle order", "host allocation failed");
    if (o->warmup_steps > 0) {
        int wc = warmup(c, order, n_train);
        if (wc != KH_EXIT_OK) {
            kh_guarded_free(order);
            return wc;
        }
    }
    char started[64];
    kh_env_now_iso(started, sizeof started);
    kh_record_set_env(rec, "started_at", started);
    /* energy per timed epoch: the counter is read around each epoch only, so compile and warm-up are outside */
    kh_energy *energy = kh_energy_open(o->dev);
    double *epoch_j = calloc((size_t)epochs + 1, sizeof *epoch_j), *epoch_w = calloc((size_t)epochs + 1, sizeof *epoch_w);
    if (!epoch_j || !epoch_w) {
        free(epoch_j), free(epoch_w), kh_guarded_free(order);
        kh_energy_close(energy);
        return fail_status(c, KH_ERR_NOMEM, "error", KH_EXIT_TRAIN, "energy samples", "host allocation failed");
    }
    kh_noise noise0, noise1; /* the machine's load over the timed epochs: on the record, beside the times */
    kh_noise_before(rec);
    kh_cpuload_sample(&noise0);
    double t_start = kh_now();
    int code = KH_EXIT_OK;
    for (int e = 1; e <= epochs && code == KH_EXIT_OK; e++) {
        kh_epoch_row row;
        memset(&row, 0, sizeof row);
        double j0 = -1, j1 = -1;
        if (energy && kh_energy_read(energy, &j0) != 0) j0 = -1;
        code = interrupted(c) ? KH_EXIT_TRAIN : run_epoch(c, e, epochs, order, n_train, per_epoch, t_start, &row);
        if (energy && kh_energy_read(energy, &j1) != 0) j1 = -1;
        if (row.epoch > 0 && kh_record_add_row(rec, &row) != 0) code = fail(c, "error", KH_EXIT_TRAIN, "out of memory");
        if (row.epoch > 0) {
            kh_energy_epoch(j0, j1, row.epoch_s, &epoch_j[rec->n_rows - 1], &epoch_w[rec->n_rows - 1]);
            set_energy(rec, energy, epoch_j, epoch_w, rec->n_rows);
        }
        if (code == KH_EXIT_OK && o->checkpoint_dir && e < epochs) checkpoint(c, e, epochs);
    }
    kh_cpuload_sample(&noise1);
    kh_noise_after(rec, &noise0, &noise1);
    if (rec->n_rows == 0) set_energy(rec, energy, epoch_j, epoch_w, 0);
    kh_energy_close(energy);
    free(epoch_j), free(epoch_w);
    kh_guarded_free(order);
    memory_info(c, rec);
    if (kh_device_mem_info(o->dev, &rec->dev_free_after, &dev_total) != 0) rec->dev_free_after = -1;
    char finished[64];
    kh_env_now_iso(finished, sizeof finished);
    kh_record_set_env(rec, "finished_at", finished);
    if (code != KH_EXIT_OK) return code;

    snprintf(rec->status, sizeof rec->status, "ok");
    rec->reason[0] = 0;
    if (c->t->after_training && !c->b->predict) {
        kh_logf(KH_LOG_WARN, "%s: the task's after-training step needs predict, which backend %s does not provide: skipped",
                o->task->desc->name, o->backend->desc->name);
    } else if (c->t->after_training) {
        pred_ctx pc = {c};
        kh_predictor p = {.ctx = &pc, .predict = pred_predict, .print = pred_print, .seed = o->seed};
        kh_callmark_set('t', "after_training");
        kh_status as = c->t->after_training(c->data, &p);
        kh_callmark_none();
        if (as != KH_OK)
            kh_logf(KH_LOG_WARN, "%s: after-training step failed: %s", o->task->desc->name, c->t->last_error(c->data));
    }
    return KH_EXIT_OK;
}

int kh_cell_device_unavailable(const kh_backend_api *b, uint32_t device_kind, char *why, size_t n) {
    kh_caps caps;
    memset(&caps, 0, sizeof caps);
    caps.struct_size = sizeof caps;
    if (!b || !b->get_caps || b->get_caps(device_kind, &caps) != KH_OK || caps.available) return 0;
    char r[200];
    kh_caps_unavailable_reason(&caps, r, sizeof r);
    snprintf(why, n, "unsupported: %s", r);
    return 1;
}

int kh_cell_run(const kh_cell_opts *o, kh_cell_record *rec) {
    cell c;
    memset(&c, 0, sizeof c);
    c.o = o;
    c.rec = rec;
    c.b = o->backend->backend;
    c.t = o->task->task;
    snprintf(rec->plugin, sizeof rec->plugin, "%s", o->backend->desc->name);
    snprintf(rec->task, sizeof rec->task, "%s", o->task->desc->name);
    snprintf(rec->device, sizeof rec->device, "%s", o->dev->id);
    /* the session's FP32 math (every record says it, a cell that never opened one too) */
    c.math = kh_math_effective(o->math, o->dev, o->backend->desc->abi_minor, o->backend->desc->name, rec->math_note,
                               sizeof rec->math_note);
    snprintf(rec->math, sizeof rec->math, "%s", kh_math_name(c.math));
    kh_callmark_install(o->backend->desc->name, o->task->desc->name);
    int code = run(&c);
    const kh_task_info *info = c.info;
    kh_record_summarise(rec, info ? info->target_is_max : 0, info ? info->target : 0);
    kh_callmark_set('b', "model_free / close");
    if (c.model) c.b->model_free(c.model);
    if (c.sess) c.b->close(c.sess);
    kh_callmark_set('t', "unload");
    if (c.data) c.t->unload(c.data);
    kh_callmark_none();
    kh_model_shapes_free(&c.shapes);
    kh_spec_buf_free(&c.spec_buf);
    kh_guarded_free(c.x);
    kh_guarded_free(c.xb);
    kh_guarded_free(c.y);
    return code;
}
