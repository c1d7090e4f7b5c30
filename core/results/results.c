/* core/results/results.c — cell records: CSV + JSON, written atomically; JSON read back for report and resume. */
#define _POSIX_C_SOURCE 200809L
#include "results/results.h"
#include "results/record_roofline.h"

#include "base/files.h"
#include "base/grow.h"
#include "results/json_scan.h"
#include "results/setfile.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "khost/kit/regular.h"

void kh_record_init(kh_cell_record *r) {
    memset(r, 0, sizeof *r);
    snprintf(r->status, sizeof r->status, "error");
    r->metric_value = r->mean_epoch_s = r->median_epoch_s = r->time_to_target_s = NAN;
    r->flops_per_epoch = r->bytes_per_epoch = r->gflops = NAN;
    r->peak_gflops = r->peak_gbps = r->roofline_gflops = r->roofline_fraction = NAN;
    r->roofline_gbps = r->step_working_set_bytes = r->sgemm_gflops = r->fma_gflops = NAN;
    r->compile_s = r->compile_codegen_s = r->compile_cc_s = r->compile_load_s = NAN;
    r->compile_cold_s = r->compile_warm_s = NAN;
    r->compile_units = -1;
    r->target = NAN;
    r->epochs_to_target = KH_TARGET_UNKNOWN;
    r->rep_index = r->rep_of = r->rep_round = 1;
    r->peak_rss_bytes = -1;
    r->dev_free_before = r->dev_free_after = r->dev_peak_bytes = -1;
}

void kh_fmt_seconds(double s, const char *unknown, char *buf, size_t n) {
    if (!isfinite(s)) snprintf(buf, n, "%s", unknown);
    else snprintf(buf, n, s >= 1.0 ? "%.1f" : "%.3g", s);
}

void kh_record_free(kh_cell_record *r) {
    free(r->rows);
    r->rows = NULL;
    r->n_rows = r->cap_rows = 0;
    free(r->step_s);
    r->step_s = NULL;
    r->n_step_s = r->cap_step_s = 0;
    free(r->energy_json);
    r->energy_json = NULL;
}

int kh_record_add_step(kh_cell_record *r, double seconds) {
    if (r->n_step_s == r->cap_step_s) {
        double *v = kh_grow64(r->step_s, &r->cap_step_s, sizeof *v, 1024);
        if (!v) return -1;
        r->step_s = v;
    }
    r->step_s[r->n_step_s++] = seconds;
    return 0;
}

int kh_record_add_row(kh_cell_record *r, const kh_epoch_row *row) {
    return kh_append(&r->rows, &r->n_rows, &r->cap_rows, row, sizeof *row, 16);
}

void kh_record_set_env(kh_cell_record *r, const char *key, const char *value) {
    for (int i = 0; i < r->n_env; i++)
        if (strcmp(r->env_key[i], key) == 0) {
            snprintf(r->env_val[i], sizeof r->env_val[i], "%s", value ? value : "");
            return;
        }
    if (r->n_env == KH_ENV_MAX) return;
    snprintf(r->env_key[r->n_env], sizeof r->env_key[0], "%s", key);
    snprintf(r->env_val[r->n_env], sizeof r->env_val[0], "%s", value ? value : "");
    r->n_env++;
}

const char *kh_record_get_env(const kh_cell_record *r, const char *key) {
    for (int i = 0; i < r->n_env; i++)
        if (strcmp(r->env_key[i], key) == 0) return r->env_val[i];
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void kh_record_summarise(kh_cell_record *r, int target_is_max, double target) {
    r->mean_epoch_s = r->median_epoch_s = r->metric_value = r->time_to_target_s = NAN;
    r->target = target > 0 ? target : NAN;
    r->target_is_max = target > 0 && target_is_max;
    r->epochs_to_target = KH_TARGET_NEVER;
    snprintf(r->target_note, sizeof r->target_note, "%s",
             !(target > 0) ? "the task sets no target" : r->n_rows == 0 ? "no epoch finished" : "");
    if (r->n_rows == 0) return;
    double sum = 0;
    for (int i = 0; i < r->n_rows; i++) sum += r->rows[i].epoch_s;
    r->mean_epoch_s = sum / r->n_rows;
    /* median excluding the first epoch (warm-up, JIT, allocator growth) when there is more than one */
    int first = r->n_rows > 1 ? 1 : 0, n = r->n_rows - first;
    double *t = malloc((size_t)n * sizeof *t);
    if (t) {
        for (int i = 0; i < n; i++) t[i] = r->rows[first + i].epoch_s;
        qsort(t, (size_t)n, sizeof *t, cmp_double);
        r->median_epoch_s = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
        free(t);
    }
    r->gflops = r->roofline_fraction = NAN;
    if (r->flops_per_epoch > 0 && r->mean_epoch_s > 0) r->gflops = r->flops_per_epoch / r->mean_epoch_s / 1e9;
    if (r->gflops > 0 && r->roofline_gflops > 0) r->roofline_fraction = r->gflops / r->roofline_gflops;
    const kh_epoch_row *last = &r->rows[r->n_rows - 1];
    int is_loss = strcmp(r->metric, "loss") == 0;
    r->metric_value = is_loss ? last->loss : last->val_acc;
    if (!(target > 0)) return;
    double best = NAN;
    for (int i = 0; i < r->n_rows; i++) {
        double m = is_loss ? r->rows[i].loss : r->rows[i].val_acc;
        if (isnan(m)) continue;
        if (isnan(best) || (target_is_max ? m < best : m > best)) best = m;
        if (target_is_max ? m <= target : m >= target) {
            r->time_to_target_s = r->rows[i].elapsed;
            r->epochs_to_target = r->rows[i].epoch;
            r->target_note[0] = 0;
            return;
        }
    }
    const char *name = is_loss ? "loss" : "val_acc";
    if (isnan(best))
        snprintf(r->target_note, sizeof r->target_note, "%s has no value in any of %d epoch%s", name, r->n_rows,
                 r->n_rows == 1 ? "" : "s");
    else
        snprintf(r->target_note, sizeof r->target_note,
                 "%s never reached its target %.6g (%s) in %d epoch%s; best %.6g", name, target,
                 target_is_max ? "at most" : "at least", r->n_rows, r->n_rows == 1 ? "" : "s", best);
}

void kh_record_path(char *buf, size_t n, const char *out_dir, const char *task, const char *plugin,
                    const char *device, const char *ext) {
    char dev[32];
    size_t j = 0;
    for (size_t i = 0; device[i] && j + 1 < sizeof dev; i++)
        if (device[i] != ':') dev[j++] = device[i];
    dev[j] = 0;
    snprintf(buf, n, "%s/%s/%s__%s.%s", out_dir, task, plugin, dev, ext);
}

void kh_record_rep_path(char *buf, size_t n, const char *out_dir, const char *task, const char *plugin,
                        const char *device, int rep, const char *ext) {
    if (rep <= 0) {
        kh_record_path(buf, n, out_dir, task, plugin, device, ext);
        return;
    }
    char e[48];
    snprintf(e, sizeof e, "rep%d.%s", rep, ext);
    kh_record_path(buf, n, out_dir, task, plugin, device, e);
}

/* A repetition record's file: the .rep<k> name when its cell is repeated. */
static int record_rep(const kh_cell_record *r) { return r->rep_of > 1 ? r->rep_index : 0; }

/* JSON numbers cannot be NaN: absent values are null. */
/* A 64-bit integer as its exact decimal literal (cJSON's numbers are doubles: 53 bits). */
static void add_u64(cJSON *o, const char *key, uint64_t v) {
    char text[24];
    snprintf(text, sizeof text, "%llu", (unsigned long long)v);
    cJSON_AddRawToObject(o, key, text);
}

static cJSON *num_or_null(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

/* A double member under its JSON key. The writer and the reader share one table per group of figures, so
 * they cannot disagree on a name, and the order of the table is the order a record lists them in. */
typedef struct figure {
    const char *key;
    size_t at; /* offsetof the member */
} figure;
#define FIGURE(type, member) {#member, offsetof(type, member)}
#define N_FIGURES(t) (sizeof t / sizeof *t)

/* The record's figures, after "metric". */
static const figure record_figures[] = {
    FIGURE(kh_cell_record, metric_value),    FIGURE(kh_cell_record, mean_epoch_s),
    FIGURE(kh_cell_record, median_epoch_s),  FIGURE(kh_cell_record, time_to_target_s),
    FIGURE(kh_cell_record, flops_per_epoch), FIGURE(kh_cell_record, bytes_per_epoch),
    FIGURE(kh_cell_record, gflops),          FIGURE(kh_cell_record, peak_gflops),
    FIGURE(kh_cell_record, peak_gbps),       FIGURE(kh_cell_record, roofline_gflops),
    FIGURE(kh_cell_record, roofline_fraction)};
/* The backend's split of the compile time; a record holds only the known ones. */
static const figure compile_figures[] = {
    FIGURE(kh_cell_record, compile_codegen_s), FIGURE(kh_cell_record, compile_cc_s),
    FIGURE(kh_cell_record, compile_load_s),    FIGURE(kh_cell_record, compile_cold_s),
    FIGURE(kh_cell_record, compile_warm_s)};
/* An epoch row's figures, after "epoch". The CSV has all but the last (epoch_s), the columns of the original
 * benchmark's logger plus the train and validation split. */
static const figure row_figures[] = {FIGURE(kh_epoch_row, elapsed), FIGURE(kh_epoch_row, loss),
                                     FIGURE(kh_epoch_row, acc),     FIGURE(kh_epoch_row, val_loss),
                                     FIGURE(kh_epoch_row, val_acc), FIGURE(kh_epoch_row, train_s),
                                     FIGURE(kh_epoch_row, val_s),   FIGURE(kh_epoch_row, epoch_s)};
#define N_CSV_FIGURES (N_FIGURES(row_figures) - 1)

static double figure_of(const void *base, const figure *f) { return *(const double *)((const char *)base + f->at); }

static void add_figures(cJSON *o, const void *base, const figure *f, size_t n) {
    for (size_t i = 0; i < n; i++) cJSON_AddItemToObject(o, f[i].key, num_or_null(figure_of(base, &f[i])));
}

/* Six significant digits: a sample's precision is far coarser than a double's, and records stay compact. */
static cJSON *sample(double v) {
    if (!isfinite(v)) return cJSON_CreateNull();
    char b[32];
    snprintf(b, sizeof b, "%.6g", v);
    return cJSON_CreateNumber(strtod(b, NULL));
}

/* The target and the epoch that reached it; nothing where the record does not know them (KH_TARGET_UNKNOWN: a
 * record the matrix wrote for a cell that never ran), so "unknown" is never written as "never reached". */
static void add_target(cJSON *o, const kh_cell_record *r) {
    if (r->epochs_to_target == KH_TARGET_UNKNOWN) return;
    if (isfinite(r->target)) {
        cJSON *t = cJSON_AddObjectToObject(o, "target");
        if (t) {
            cJSON_AddNumberToObject(t, "value", r->target);
            cJSON_AddStringToObject(t, "reach", r->target_is_max ? "at_most" : "at_least");
        }
    } else {
        cJSON_AddNullToObject(o, "target");
    }
    if (r->epochs_to_target > 0) {
        cJSON_AddNumberToObject(o, "epochs_to_target", r->epochs_to_target);
    } else {
        cJSON_AddNullToObject(o, "epochs_to_target");
        cJSON_AddStringToObject(o, "target_note", r->target_note);
    }
}

static void add_repeat_and_samples(cJSON *o, const kh_cell_record *r) {
    cJSON *rp = cJSON_AddObjectToObject(o, "repeat");
    if (rp) {
        cJSON_AddNumberToObject(rp, "index", r->rep_index);
        cJSON_AddNumberToObject(rp, "of", r->rep_of);
        cJSON_AddNumberToObject(rp, "round", r->rep_round);
        cJSON_AddNumberToObject(rp, "position", r->rep_position);
        add_u64(rp, "order_seed", r->order_seed);
    }
    cJSON *sm = cJSON_AddObjectToObject(o, "samples");
    if (sm) {
        cJSON *st = cJSON_AddArrayToObject(sm, "step_s");
        for (int64_t i = 0; st && i < r->n_step_s; i++) cJSON_AddItemToArray(st, sample(r->step_s[i]));
        cJSON *ep = cJSON_AddArrayToObject(sm, "epoch_s");
        for (int i = 0; ep && i < r->n_rows; i++) cJSON_AddItemToArray(ep, sample(r->rows[i].epoch_s));
        cJSON_AddStringToObject(sm, "step_sync", r->step_sync[0] ? r->step_sync : "none");
        cJSON_AddNumberToObject(sm, "warmup_steps", (double)r->warmup_steps);
        cJSON_AddNumberToObject(sm, "steps_per_epoch", (double)r->steps_per_epoch);
    }
    cJSON *dm = cJSON_AddObjectToObject(o, "device_mem");
    if (dm) {
        int counted = r->dev_peak_bytes >= 0;
        cJSON_AddItemToObject(dm, "peak_bytes", counted ? cJSON_CreateNumber((double)r->dev_peak_bytes) : cJSON_CreateNull());
        cJSON_AddStringToObject(dm, "source", counted ? "backend" : "unavailable");
        /* dev_mem_what is set only with a count (cell.c memory_info, the reader) */
        cJSON_AddStringToObject(dm, "reason", r->dev_mem_what[0] ? r->dev_mem_what
                                              : counted ? "the backend's count of its own allocations"
                                              : r->dev_free_before >= 0
                                                  ? "the backend does not count its device memory (ABI 1.4 memory_info); "
                                                    "free_before - free_after bounds what the cell still held"
                                                  : "not a CUDA device, or the driver has no cuMemGetInfo");
        cJSON_AddItemToObject(dm, "free_before", r->dev_free_before >= 0 ? cJSON_CreateNumber((double)r->dev_free_before)
                                                                        : cJSON_CreateNull());
        cJSON_AddItemToObject(dm, "free_after", r->dev_free_after >= 0 ? cJSON_CreateNumber((double)r->dev_free_after)
                                                                      : cJSON_CreateNull());
    }
    cJSON *en = r->energy_json ? cJSON_Parse(r->energy_json) : NULL;
    if (en) cJSON_AddItemToObject(o, "energy", en);
    cJSON_AddItemToObject(o, "peak_rss_bytes",
                          r->peak_rss_bytes >= 0 ? cJSON_CreateNumber((double)r->peak_rss_bytes) : cJSON_CreateNull());
}

char *kh_record_to_json(const kh_cell_record *r, int compact) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "khost_record", 2);
    cJSON_AddStringToObject(o, "plugin", r->plugin);
    cJSON_AddStringToObject(o, "task", r->task);
    cJSON_AddStringToObject(o, "device", r->device);
    cJSON_AddStringToObject(o, "status", r->status);
    cJSON_AddStringToObject(o, "reason", r->reason);
    cJSON_AddNumberToObject(o, "epochs_requested", r->epochs_requested);
    cJSON_AddNumberToObject(o, "batch_size", r->batch_size);
    add_u64(o, "seed", r->seed);
    cJSON_AddNumberToObject(o, "train_samples", (double)r->train_samples);
    cJSON_AddNumberToObject(o, "val_samples", (double)r->val_samples);
    cJSON_AddStringToObject(o, "metric", r->metric);
    add_figures(o, r, record_figures, N_FIGURES(record_figures));
    add_target(o, r);
    cJSON_AddStringToObject(o, "peak_source", r->peak_source);
    kh_record_roofline_add(o, r);
    /* the FP32 math the session used (absent in records written before --math) and why an asked mode was not */
    if (r->math[0]) cJSON_AddStringToObject(o, "math", r->math);
    if (r->math_note[0]) cJSON_AddStringToObject(o, "math_note", r->math_note);
    /* compile time: compile_s in every record; the rest only where known (absent = unknown, as in records
     * written before ABI 1.2 and for backends without compile_info) */
    cJSON_AddItemToObject(o, "compile_s", num_or_null(r->compile_s));
    if (r->compile_cache[0]) cJSON_AddStringToObject(o, "compile_cache", r->compile_cache);
    if (r->compile_units >= 0) cJSON_AddNumberToObject(o, "compile_units", r->compile_units);
    for (size_t i = 0; i < N_FIGURES(compile_figures); i++) {
        double v = figure_of(r, &compile_figures[i]);
        if (isfinite(v)) cJSON_AddNumberToObject(o, compile_figures[i].key, v);
    }
    cJSON *rows = cJSON_AddArrayToObject(o, "epochs");
    for (int i = 0; rows && i < r->n_rows; i++) {
        const kh_epoch_row *e = &r->rows[i];
        cJSON *x = cJSON_CreateObject();
        if (!x) break;
        cJSON_AddNumberToObject(x, "epoch", e->epoch);
        add_figures(x, e, row_figures, N_FIGURES(row_figures));
        cJSON_AddItemToArray(rows, x);
    }
    add_repeat_and_samples(o, r);
    cJSON *env = cJSON_AddObjectToObject(o, "environment");
    for (int i = 0; env && i < r->n_env; i++) cJSON_AddStringToObject(env, r->env_key[i], r->env_val[i]);
    char *s = compact ? cJSON_PrintUnformatted(o) : cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}

static void csv_num(FILE *f, double v, int last) {
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    fputc(last ? '\n' : ',', f);
}

int kh_record_write(const kh_cell_record *r, const char *out_dir, char *err, size_t errlen) {
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/%s", out_dir, r->task);
    if (kh_mkdirs(dir) != 0) {
        snprintf(err, errlen, "%s: cannot create directory: %s", dir, strerror(errno));
        return -1;
    }
    /* CSV: the original benchmark's logger columns plus the split of train and validation time */
    char *csv = NULL;
    size_t csv_len = 0;
    FILE *f = open_memstream(&csv, &csv_len);
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    fprintf(f, "epoch,elapsed,loss,acc,val_loss,val_acc,train_s,val_s\n");
    for (int i = 0; i < r->n_rows; i++) {
        const kh_epoch_row *e = &r->rows[i];
        fprintf(f, "%d,", e->epoch - 1); /* Keras's CSVLogger counts epochs from 0 */
        for (size_t k = 0; k < N_CSV_FIGURES; k++) csv_num(f, figure_of(e, &row_figures[k]), k + 1 == N_CSV_FIGURES);
    }
    fclose(f);
    kh_record_rep_path(path, sizeof path, out_dir, r->task, r->plugin, r->device, record_rep(r), "csv");
    int rc = kh_write_atomic(path, csv, csv_len, err, errlen);
    free(csv);
    if (rc != 0) return rc;
    char *json = kh_record_to_json(r, 0);
    if (!json) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    kh_record_rep_path(path, sizeof path, out_dir, r->task, r->plugin, r->device, record_rep(r), "json");
    rc = kh_write_atomic(path, json, strlen(json), err, errlen);
    cJSON_free(json);
    return rc;
}

static double get_num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void get_figures(const cJSON *o, void *base, const figure *f, size_t n) {
    for (size_t i = 0; i < n; i++) *(double *)((char *)base + f[i].at) = get_num(o, f[i].key);
}

static int get_str(const cJSON *o, const char *key, char *dst, size_t n) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v)) return -1;
    snprintf(dst, n, "%s", v->valuestring);
    return 0;
}

/* A name field as the record holds it (before any truncation to the record's buffer). */
static int name_field_ok(const cJSON *o, const char *key, size_t max) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) && kh_record_name_ok(v->valuestring, max);
}

int kh_record_target_read(const cJSON *o, double *target, int *target_is_max, int *epochs, char *note, size_t nn,
                          const char *path, char *err, size_t errlen) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "target");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "epochs_to_target");
    *target = NAN;
    *target_is_max = 0;
    *epochs = KH_TARGET_UNKNOWN;
    if (nn) note[0] = 0;
    if (!e) return 0; /* written before the epochs to target were */
    if (t && !cJSON_IsNull(t)) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(t, "value");
        const cJSON *reach = cJSON_GetObjectItemCaseSensitive(t, "reach");
        const char *rs = cJSON_IsString(reach) ? reach->valuestring : "";
        if (!cJSON_IsObject(t) || !cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble <= 0 ||
            (strcmp(rs, "at_least") && strcmp(rs, "at_most"))) {
            snprintf(err, errlen, "%s: field \"target\" is not {\"value\": a positive number, \"reach\": "
                     "\"at_least\" or \"at_most\"} or null", path);
            return -1;
        }
        *target = v->valuedouble;
        *target_is_max = !strcmp(rs, "at_most");
    }
    if (cJSON_IsNull(e)) {
        *epochs = KH_TARGET_NEVER;
        get_str(o, "target_note", note, nn);
        return 0;
    }
    double ev = cJSON_IsNumber(e) ? e->valuedouble : NAN;
    if (!(ev >= 1) || ev > 1e9 || ev != floor(ev)) {
        snprintf(err, errlen, "%s: field \"epochs_to_target\" is not an epoch (a whole number from 1) or null", path);
        return -1;
    }
    *epochs = (int)ev;
    return 0;
}

void kh_record_newer_text(const char *path, int version, char *buf, size_t n) {
    snprintf(buf, n, "%s: record version %d is from a newer khost (this one reads 1 to %d): read as far as it is "
             "understood", path, version, KH_RECORD_VERSION);
}

char *kh_record_text(const char *path, size_t *len_out, char *err, size_t errlen) {
    size_t plen;
    const char *packed = kh_set_text(path, &plen);
    if (packed) {
        char *t = malloc(plen + 1);
        if (!t) snprintf(err, errlen, "%s: out of memory", path);
        else memcpy(t, packed, plen), t[plen] = 0, *len_out = plen;
        return t;
    }
    FILE *f = kh_fopen_regular(path, err, errlen); /* a FIFO or a device named like a record never blocks */
    if (!f) return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 65536 + 1 > cap) {
            cap = cap ? cap * 2 : 131072;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                snprintf(err, errlen, "%s: out of memory", path);
                return NULL;
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, 65536, f);
        len += got;
        if (got < 65536) break;
    }
    int read_err = ferror(f);
    fclose(f);
    if (read_err) {
        free(buf);
        snprintf(err, errlen, "%s: read error", path);
        return NULL;
    }
    buf[len] = 0;
    *len_out = len;
    return buf;
}

cJSON *kh_record_json_read(const char *path, kh_json_int *ints, int n, int *version, char *err, size_t errlen) {
    size_t len;
    char *buf = kh_record_text(path, &len, err, errlen);
    if (!buf) return NULL;
    cJSON *o = cJSON_Parse(buf);
    char why[160];
    if (!o) {
        snprintf(err, errlen, "%s: not valid JSON", path);
    } else if (kh_json_scan(buf, ints, n, why, sizeof why) != 0) {
        snprintf(err, errlen, "%s: %s", path, why);
        cJSON_Delete(o);
        o = NULL;
    } else {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "khost_record");
        double ver = cJSON_IsNumber(v) ? v->valuedouble : NAN;
        if (ver >= 1 && ver < 1e9 && ver == floor(ver)) {
            *version = (int)ver;
        } else {
            snprintf(err, errlen, "%s: field \"khost_record\" missing or not a record version (an integer from 1)",
                     path);
            cJSON_Delete(o);
            o = NULL;
        }
    }
    free(buf);
    return o;
}

int kh_record_read(const char *path, kh_cell_record *r, char *err, size_t errlen) {
    kh_record_init(r);
    kh_json_int exact[2] = {{.path = "seed"}, {.path = "repeat.order_seed"}};
    cJSON *o = kh_record_json_read(path, exact, 2, &r->record_version, err, errlen);
    if (!o) return -1;
    int rc = -1;
    const char *missing = NULL;
    if (get_str(o, "plugin", r->plugin, sizeof r->plugin)) missing = "plugin";
    else if (get_str(o, "task", r->task, sizeof r->task)) missing = "task";
    else if (get_str(o, "device", r->device, sizeof r->device)) missing = "device";
    else if (get_str(o, "status", r->status, sizeof r->status)) missing = "status";
    if (missing) {
        snprintf(err, errlen, "%s: field \"%s\" missing or of the wrong type", path, missing);
        goto done;
    }
    const char *bad = !name_field_ok(o, "plugin", sizeof r->plugin - 1) ? "plugin"
                    : !name_field_ok(o, "task", sizeof r->task - 1)     ? "task"
                    : !name_field_ok(o, "device", sizeof r->device - 1) ? "device"
                                                                        : NULL;
    if (bad) {
        snprintf(err, errlen, "%s: field \"%s\" is not a name (1 to %zu of " KH_RECORD_NAME_CHARS ")", path, bad,
                 !strcmp(bad, "device") ? sizeof r->device - 1 : sizeof r->plugin - 1);
        goto done;
    }
    if (!r->status[0] || r->status[strspn(r->status, "abcdefghijklmnopqrstuvwxyz_")]) {
        snprintf(err, errlen, "%s: field \"status\" is not a status word (a-z and _)", path);
        goto done;
    }
    get_str(o, "reason", r->reason, sizeof r->reason);
    get_str(o, "metric", r->metric, sizeof r->metric);
    double v;
    if (isfinite(v = get_num(o, "epochs_requested"))) r->epochs_requested = (int)v;
    if (isfinite(v = get_num(o, "batch_size"))) r->batch_size = (int)v;
    /* seeds are 64-bit integers: read from their digits (a double keeps 53 bits), never from a negative */
    for (int i = 0; i < 2; i++)
        if (exact[i].found < 0) {
            snprintf(err, errlen, "%s: field \"%s\" is not an integer from 0 to 2^64 - 1", path, exact[i].path);
            goto done;
        }
    if (exact[0].found) r->seed = exact[0].v;
    if (isfinite(v = get_num(o, "train_samples"))) r->train_samples = (int64_t)v;
    if (isfinite(v = get_num(o, "val_samples"))) r->val_samples = (int64_t)v;
    get_figures(o, r, record_figures, N_FIGURES(record_figures));
    if (kh_record_target_read(o, &r->target, &r->target_is_max, &r->epochs_to_target, r->target_note,
                              sizeof r->target_note, path, err, errlen) != 0)
        goto done;
    get_str(o, "peak_source", r->peak_source, sizeof r->peak_source);
    {
        char why[160];
        if (kh_record_roofline_read(o, r, why, sizeof why) != 0) {
            snprintf(err, errlen, "%s: %s", path, why);
            goto done;
        }
    }
    get_str(o, "math", r->math, sizeof r->math);
    get_str(o, "math_note", r->math_note, sizeof r->math_note);
    r->compile_s = get_num(o, "compile_s");
    get_str(o, "compile_cache", r->compile_cache, sizeof r->compile_cache);
    if (isfinite(v = get_num(o, "compile_units")) && v >= 0 && v < 1e9) r->compile_units = (int)v;
    get_figures(o, r, compile_figures, N_FIGURES(compile_figures));
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(o, "epochs"), *e;
    if (rows && !cJSON_IsArray(rows)) {
        snprintf(err, errlen, "%s: field \"epochs\" is not an array", path);
        goto done;
    }
    cJSON_ArrayForEach(e, rows) {
        kh_epoch_row row = {.epoch = (int)get_num(e, "epoch")};
        get_figures(e, &row, row_figures, N_FIGURES(row_figures));
        if (kh_record_add_row(r, &row) != 0) {
            snprintf(err, errlen, "%s: out of memory", path);
            goto done;
        }
    }
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(o, "repeat");
    if (cJSON_IsObject(rp)) {
        if (isfinite(v = get_num(rp, "index")) && v >= 1 && v < 1e6) r->rep_index = (int)v;
        if (isfinite(v = get_num(rp, "of")) && v >= 1 && v < 1e6) r->rep_of = (int)v;
        if (isfinite(v = get_num(rp, "round")) && v >= 1 && v < 1e6) r->rep_round = (int)v;
        if (isfinite(v = get_num(rp, "position")) && v >= 0 && v < 1e6) r->rep_position = (int)v;
        if (exact[1].found) r->order_seed = exact[1].v;
    }
    const cJSON *sm = cJSON_GetObjectItemCaseSensitive(o, "samples");
    if (cJSON_IsObject(sm)) {
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(sm, "step_s");
        cJSON_ArrayForEach(e, st) {
            if (kh_record_add_step(r, cJSON_IsNumber(e) ? e->valuedouble : NAN) != 0) {
                snprintf(err, errlen, "%s: out of memory", path);
                goto done;
            }
        }
        get_str(sm, "step_sync", r->step_sync, sizeof r->step_sync);
        if (isfinite(v = get_num(sm, "warmup_steps")) && v >= 0) r->warmup_steps = (int64_t)v;
        if (isfinite(v = get_num(sm, "steps_per_epoch")) && v >= 0) r->steps_per_epoch = (int64_t)v;
    }
    if (isfinite(v = get_num(o, "peak_rss_bytes")) && v >= 0) r->peak_rss_bytes = (int64_t)v;
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(o, "energy");
    if (cJSON_IsObject(en)) {
        char *t = cJSON_PrintUnformatted(en);
        if (t) r->energy_json = strdup(t);
        cJSON_free(t);
    }
    const cJSON *dm = cJSON_GetObjectItemCaseSensitive(o, "device_mem");
    if (cJSON_IsObject(dm)) {
        if (isfinite(v = get_num(dm, "free_before")) && v >= 0) r->dev_free_before = (int64_t)v;
        if (isfinite(v = get_num(dm, "free_after")) && v >= 0) r->dev_free_after = (int64_t)v;
        if (isfinite(v = get_num(dm, "peak_bytes")) && v >= 0) r->dev_peak_bytes = (int64_t)v;
        const cJSON *src = cJSON_GetObjectItemCaseSensitive(dm, "source");
        if (r->dev_peak_bytes >= 0 && cJSON_IsString(src) && !strcmp(src->valuestring, "backend"))
            get_str(dm, "reason", r->dev_mem_what, sizeof r->dev_mem_what);
    }
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(o, "environment");
    cJSON_ArrayForEach(e, env) {
        if (cJSON_IsString(e) && e->string) kh_record_set_env(r, e->string, e->valuestring);
    }
    rc = 0;
done:
    cJSON_Delete(o);
    if (rc != 0) kh_record_free(r);
    return rc;
}
