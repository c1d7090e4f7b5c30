/* tests/roofline/test_roofline_records.c — every committed record of bench/cpu/matrix-quick/ (a packed set, read
 * through results/setfile.h as report reads it; a folder of files is read too) recounted with
 * the kit's current FLOP and byte model (kh_spec_flops over the benchmark's own model definitions) and placed
 * under its own record's peaks: the time the record measured may not beat the roofline (fraction <= 1), since
 * a fraction above 1 means the byte or FLOP count claims more work than the step can have done. The sizes the
 * data decides (imdb_fasttext's features, lstm_text_generation's characters) are not in a record; FLOPs are
 * affine in them, so they are solved from the record's flops_per_epoch and the solution must reproduce it. */
#define _POSIX_C_SOURCE 200809L /* strndup */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_models.h"
#include "khost/kit/flops.h"
#include "khost/kit/spec.h"
#include "results/cellfiles.h"
#include "results/setfile.h"
#include "testutil.h"

typedef struct rec {
    const char *task;
    double flops, secs, peak_gflops, peak_gbps;
    int64_t batch, train, val;
} rec;

/* the kit's epoch counts of `task` at data size n; 0 on success */
static int count(const rec *r, int64_t n, double *flops, double *bytes) {
    kh_bench_model m;
    if (kh_bench_model_get(r->task, n, &m) != KH_OK) return -1;
    kh_model_shapes sh;
    char err[256];
    if (kh_spec_infer(&m.spec, &sh, err, sizeof err) != KH_OK) return -1;
    kh_model_flops f;
    kh_status st = kh_spec_flops(&m.spec, &sh, &f, NULL, err, sizeof err);
    kh_model_shapes_free(&sh);
    if (st != KH_OK) return -1;
    kh_flops_epoch(&f, r->train, r->batch, r->val, flops, bytes);
    return 0;
}

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            char *nb = realloc(buf, cap = 2 * cap + 8192);
            if (!nb) break;
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) {
            buf[n] = 0;
            fclose(f);
            return buf;
        }
    }
    free(buf);
    fclose(f);
    return NULL;
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void check_record(const char *path, int *n_checked) {
    size_t plen;
    const char *packed = kh_set_text(path, &plen);
    char *text = packed ? strndup(packed, plen) : read_all(path);
    CHECK(text != NULL, "%s: cannot read", path);
    if (!text) return;
    cJSON *o = cJSON_Parse(text);
    free(text);
    CHECK(o != NULL, "%s: not JSON", path);
    if (!o) return;
    const cJSON *task = cJSON_GetObjectItemCaseSensitive(o, "task"), *status = cJSON_GetObjectItemCaseSensitive(o, "status");
    rec r = {.task = cJSON_IsString(task) ? task->valuestring : "", .flops = num(o, "flops_per_epoch"),
             .secs = num(o, "mean_epoch_s"), .peak_gflops = num(o, "peak_gflops"), .peak_gbps = num(o, "peak_gbps"),
             .batch = (int64_t)num(o, "batch_size"), .train = (int64_t)num(o, "train_samples"),
             .val = (int64_t)num(o, "val_samples")};
    if (!cJSON_IsString(status) || strcmp(status->valuestring, "ok") || !(r.secs > 0) || !(r.peak_gflops > 0) ||
        !(r.peak_gbps > 0) || !(r.flops > 0)) {
        cJSON_Delete(o); /* failed cells and cells without peaks have no fraction to check */
        return;
    }
    int64_t n = 0;
    if (!strcmp(r.task, "imdb_fasttext") || !strcmp(r.task, "lstm_text_generation")) {
        double f2, f3, b;
        CHECK(count(&r, 2, &f2, &b) == 0 && count(&r, 3, &f3, &b) == 0 && f3 > f2, "%s: counts at sizes 2, 3", path);
        n = 2 + (int64_t)llround((r.flops - f2) / (f3 - f2));
    }
    double flops, bytes;
    CHECK(count(&r, n, &flops, &bytes) == 0, "%s: task %s unknown to the benchmark's models", path, r.task);
    CHECK(fabs(flops - r.flops) <= 1e-9 * r.flops, "%s: kit's FLOPs %.0f differ from the record's %.0f", path, flops,
          r.flops);
    double bound = fmin(r.peak_gflops, flops / bytes * r.peak_gbps), fraction = flops / r.secs / 1e9 / bound;
    printf("%-60s %6.1f %%\n", path, 100 * fraction);
    if (!strcmp(r.task, "imdb_fasttext")) {
        /* Known violation, checked to still hold so that this branch must go once it is fixed: a correct
         * dense Adam reads and writes w, m and v of every table row each step (6 passes, the count's floor),
         * yet these records' steps ran faster than those bytes at the record's peak_gbps allow. The peak is
         * the low side: a 64 MiB memcpy, while the fused update loop streams faster (or the table's
         * 10.6 M x 12 bytes of state sat in that machine's cache). Remeasuring the peak is the fix. */
        CHECK(fraction > 1.0, "%s: now %.1f %% <= 100 %%: drop the imdb_fasttext exception", path, 100 * fraction);
        (*n_checked)++;
        cJSON_Delete(o);
        return;
    }
    CHECK(fraction <= 1.0, "%s: roofline fraction %.1f %% > 100 %% (%.3g GFLOP/s, bound %.3g)", path,
          100 * fraction, flops / r.secs / 1e9, bound);
    (*n_checked)++;
    cJSON_Delete(o);
}

int main(void) {
    const char *src = getenv("KHOST_SOURCE");
    if (!src) {
        fprintf(stderr, "test_roofline_records: KHOST_SOURCE is not set\n");
        return 1;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/bench/cpu/matrix-quick", src);
    int n_checked = 0;
    char err[4400];
    CHECK(kh_set_mount(dir, err, sizeof err) >= 0, "%s", err);
    for (int t = 0; t < KH_BENCH_N_MODELS; t++) {
        char sub[4200];
        snprintf(sub, sizeof sub, "%s/%s", dir, kh_bench_model_names[t]);
        kh_cell_files l;
        CHECK(kh_cell_files_read(sub, &l, err, sizeof err) == 0 && l.n > 0, "%s: no records for a bundled model", sub);
        for (int i = 0; i < l.n; i++) {
            char path[4500];
            snprintf(path, sizeof path, "%s/%s", sub, l.v[i].name);
            check_record(path, &n_checked);
        }
        kh_cell_files_free(&l);
    }
    kh_set_unmount_all();
    CHECK(n_checked >= KH_BENCH_N_MODELS, "%d records checked", n_checked);
    return kh_test_finish("test_roofline_records");
}
