/* tests/core_units/test_results_layout.c — result records (write, read back, summaries with GFLOP/s and
 * roofline, atomic files, malformed JSON named), device peaks, and the layout negotiation (NHWC->NCHW,
 * one-hot). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cell/layout.h"
#include "base/sysinfo.h"
#include "cell/env.h"
#include "devices/blas_tune.h"
#include "devices/peak.h"
#include "results/results.h"
#include "testutil.h"

static void test_record_roundtrip(void) {
    const char *dir = kh_test_tmpdir("results");
    kh_cell_record r;
    kh_record_init(&r);
    snprintf(r.plugin, sizeof r.plugin, "cntk");
    snprintf(r.task, sizeof r.task, "mnist_mlp");
    snprintf(r.device, sizeof r.device, "cuda:0");
    snprintf(r.status, sizeof r.status, "ok");
    snprintf(r.metric, sizeof r.metric, "val_acc");
    double times[] = {5.0, 2.0, 3.0, 4.0};
    for (int e = 0; e < 4; e++) {
        kh_epoch_row row = {.epoch = e + 1, .loss = 1.0 / (e + 1), .acc = 0.9, .val_loss = 0.5,
                            .val_acc = 0.96 + 0.01 * e, .train_s = times[e] - 0.5, .val_s = 0.5, .epoch_s = times[e]};
        row.elapsed = (e ? r.rows[e - 1].elapsed : 0) + times[e];
        CHECK(kh_record_add_row(&r, &row) == 0, "add row");
    }
    kh_record_set_env(&r, "cpu_model", "Test CPU");
    /* 7 GFLOP per epoch over a mean of 3.5 s = 2 GFLOP/s; a 20 GFLOP/s roof at this intensity: 10 % */
    r.flops_per_epoch = 7e9;
    r.roofline_gflops = 20;
    snprintf(r.peak_source, sizeof r.peak_source, "published: test");
    kh_record_summarise(&r, 0, 0.98);
    CHECK_CLOSE(r.gflops, 2.0, 1e-12, 0, "achieved GFLOP/s = flops_per_epoch / mean_epoch_s");
    CHECK_CLOSE(r.roofline_fraction, 0.1, 1e-12, 0, "fraction of the roofline");
    CHECK_CLOSE(r.mean_epoch_s, 3.5, 1e-12, 0, "mean over all epochs");
    CHECK_CLOSE(r.median_epoch_s, 3.0, 1e-12, 0, "median excluding the first");
    CHECK_CLOSE(r.metric_value, 0.99, 1e-12, 0, "metric = last val_acc");
    CHECK_CLOSE(r.time_to_target_s, 10.0, 1e-12, 0, "time to 0.98 = elapsed at epoch 3");
    char err[512], path[2048];
    CHECK(kh_record_write(&r, dir, err, sizeof err) == 0, "write: %s", err);
    kh_record_path(path, sizeof path, dir, "mnist_mlp", "cntk", "cuda:0", "json");
    CHECK(strstr(path, "/mnist_mlp/cntk__cuda0.json") != NULL, "path %s", path);
    kh_cell_record b;
    CHECK(kh_record_read(path, &b, err, sizeof err) == 0, "read: %s", err);
    CHECK(b.n_rows == 4 && !strcmp(b.device, "cuda:0") && b.rows[3].val_acc == r.rows[3].val_acc,
          "round trip lost data");
    CHECK(b.flops_per_epoch == 7e9 && b.gflops == r.gflops && b.roofline_fraction == r.roofline_fraction &&
              !strcmp(b.peak_source, "published: test") && isnan(b.peak_gbps),
          "round trip of the work counts (peak_gbps unknown stays unknown)");
    CHECK(isnan(b.compile_s) && !b.compile_cache[0] && b.compile_units == -1 && isnan(b.compile_warm_s),
          "no compile times written, none read (compile_s %g)", b.compile_s);
    kh_record_free(&b);

    /* model-compile times (ABI 1.2): a miss with its split, cold and warm round-trip; a record without them
     * (written before 1.2) reads as unknown, not as zero */
    r.compile_s = r.compile_cold_s = 41.25;
    r.compile_warm_s = 0.375;
    snprintf(r.compile_cache, sizeof r.compile_cache, "miss");
    r.compile_units = 12;
    r.compile_codegen_s = 0.75;
    r.compile_cc_s = 40.0;
    r.compile_load_s = 0.5;
    CHECK(kh_record_write(&r, dir, err, sizeof err) == 0, "write: %s", err);
    CHECK(kh_record_read(path, &b, err, sizeof err) == 0, "read: %s", err);
    CHECK(b.compile_s == 41.25 && b.compile_cold_s == 41.25 && b.compile_warm_s == 0.375 &&
              !strcmp(b.compile_cache, "miss") && b.compile_units == 12 && b.compile_codegen_s == 0.75 &&
              b.compile_cc_s == 40.0 && b.compile_load_s == 0.5,
          "compile times round trip: %g %g %g %s %d %g %g %g", b.compile_s, b.compile_cold_s, b.compile_warm_s,
          b.compile_cache, b.compile_units, b.compile_codegen_s, b.compile_cc_s, b.compile_load_s);
    kh_record_free(&b);
    char *js = kh_record_to_json(&r, 1);
    CHECK(js && strstr(js, "\"compile_cache\":\"miss\"") && strstr(js, "\"compile_cold_s\":41.25"), "JSON: %s", js ? js : "");
    free(js);
    r.compile_cold_s = NAN; /* a hit: the cold time is unknown and its key absent */
    js = kh_record_to_json(&r, 1);
    CHECK(js && !strstr(js, "compile_cold_s") && strstr(js, "\"compile_warm_s\":0.375"), "JSON: %s", js ? js : "");
    free(js);
    kh_record_free(&r);
    /* malformed files are named, never crash */
    char bad[2048];
    snprintf(bad, sizeof bad, "%s/bad.json", dir);
    kh_test_write_file(bad, "{\"khost_record\":1,\"plugin\":3", 28);
    CHECK(kh_record_read(bad, &b, err, sizeof err) != 0 && strstr(err, "bad.json"), "malformed: %s", err);
    kh_test_write_file(bad, "{\"khost_record\":1,\"plugin\":3}", 29);
    CHECK(kh_record_read(bad, &b, err, sizeof err) != 0 && strstr(err, "\"plugin\""), "wrong type: %s", err);
}

static void test_layout(void) {
    float src[2 * 2 * 3 * 2], dst[24], back[24];
    for (int i = 0; i < 24; i++) src[i] = (float)i;
    kh_layout_nhwc_to_nchw(dst, src, 2, 2, 3, 2);
    /* element (n=1, h=1, w=2, c=1): NHWC offset ((n*H+h)*W+w)*C+c, NCHW ((n*C+c)*H+h)*W+w */
    CHECK(dst[((1 * 2 + 1) * 2 + 1) * 3 + 2] == src[((1 * 2 + 1) * 3 + 2) * 2 + 1], "nhwc->nchw element");
    CHECK(dst[1] == src[2], "nchw (0,0,0,1) = nhwc (0,0,1,0)");
    kh_layout_nchw_to_nhwc(back, dst, 2, 2, 2, 3);
    CHECK(memcmp(back, src, sizeof src) == 0, "round trip");
    int32_t idx[3] = {2, 0, 1};
    float oh[9];
    CHECK(kh_layout_onehot(oh, idx, 3, 3) == 0 && oh[2] == 1 && oh[3] == 1 && oh[7] == 1 && oh[0] == 0, "onehot");
    idx[1] = 3;
    CHECK(kh_layout_onehot(oh, idx, 3, 3) == -1, "out-of-range index accepted");
}

/* Peaks: published CUDA figures by name, unknown devices named, the cpu cache read instead of measuring. */
static void test_peak(void) {
    kh_device d;
    memset(&d, 0, sizeof d);
    d.kind = KH_DEVICE_CUDA;
    snprintf(d.name, sizeof d.name, "NVIDIA H200");
    kh_peak p;
    CHECK(kh_peak_get(&d, &p) == 0 && p.gflops == 67000 && p.gbps == 4800 && strstr(p.source, "published"),
          "H200: %g %g %s", p.gflops, p.gbps, p.source);
    CHECK_CLOSE(kh_peak_bound(&p, 1.0), 4800, 1e-12, 0, "memory-bound at intensity 1");
    CHECK_CLOSE(kh_peak_bound(&p, 100.0), 67000, 1e-12, 0, "compute-bound at intensity 100");
    snprintf(d.name, sizeof d.name, "Mystery GPU 9000");
    CHECK(kh_peak_get(&d, &p) != 0 && p.gflops == 0 && strstr(p.source, "Mystery GPU 9000"), "unknown: %s", p.source);
    /* a cached line for this machine is used as is (no calibration run) */
    const char *cache = kh_test_tmpdir("peak-cache");
    char file[2048], model[256], line[512];
    snprintf(file, sizeof file, "%s/khost", cache);
    mkdir(file, 0700);
    snprintf(file, sizeof file, "%s/khost/peak-cpu-levels.txt", cache);
    kh_env_cpu_model(model, sizeof model);
    const char *core = getenv("OPENBLAS_CORETYPE");
    int n = snprintf(line, sizeof line,
                     "%s [%s] x%ld openblas=%s\t123.5\t150.25\tL1:65536:32768:400.5:triad,L3:1048576:524288:150:update,"
                     "DRAM:0:12582912:45.25:update\t2026-01-01T00:00:00Z\n",
                     model, kh_cpu_isa(), sysconf(_SC_NPROCESSORS_ONLN), core && *core ? core : "default");
    kh_test_write_file(file, line, (size_t)n);
    setenv("XDG_CACHE_HOME", cache, 1);
    d.kind = KH_DEVICE_CPU;
    CHECK(kh_peak_get(&d, &p) == 0 && p.gflops == 123.5 && p.gbps == 45.25 && strstr(p.source, "cached in") &&
              strstr(p.source, "2026-01-01"),
          "cpu from cache: %g %g %s", p.gflops, p.gbps, p.source);
    CHECK(p.fma_gflops == 150.25 && kh_peak_flop_ceiling(&p) == 150.25, "the FMA figure, the higher: the ceiling");
    CHECK(p.n_levels == 3 && !strcmp(p.levels[0].name, "L1") && p.levels[0].gbps == 400.5 &&
              p.levels[1].bytes == 1048576 && !strcmp(p.levels[2].kernel, "update"),
          "the cached levels: %d", p.n_levels);
    /* a CUDA device has one level, its memory at the published figure */
    d.kind = KH_DEVICE_CUDA;
    snprintf(d.name, sizeof d.name, "NVIDIA H100 80GB HBM3");
    CHECK(kh_peak_get(&d, &p) == 0 && p.n_levels == 1 && !strcmp(p.levels[0].name, "DRAM") && p.levels[0].gbps == 3350,
          "H100: one level at %g GB/s", p.levels[0].gbps);
}

int main(void) {
    test_peak();
    test_record_roundtrip();
    test_layout();
    return kh_test_finish("test_results_layout");
}
