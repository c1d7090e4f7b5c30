/* tests/roofline/test_roofline_levels.c — the hierarchical roofline (devices/roofline.h) on planted ceilings:
 * which memory level a working set is held to, the bound of an epoch's two phases computed by hand, and the
 * record's "roofline" object written, read back, and refused by field when malformed. */
#define _GNU_SOURCE /* mkstemps */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices/roofline.h"
#include "results/results.h"
#include "testutil.h"

static kh_peak planted(void) {
    kh_peak p;
    memset(&p, 0, sizeof p);
    p.gflops = 100; /* GFLOP/s */
    const kh_mem_level lv[] = {{"L1", 64e3, 32e3, 400, "triad", {0}}, {"L2", 2e6, 1e6, 200, "update", {0}},
                               {"L3", 32e6, 16e6, 100, "update", {0}}, {"DRAM", 0, 384e6, 25, "update", {0}}};
    memcpy(p.levels, lv, sizeof lv);
    p.n_levels = 4;
    p.gbps = 25;
    return p;
}

static int read_text(const char *text, kh_cell_record *r, char *err, size_t n) {
    char path[] = "/tmp/khost-roofline-XXXXXX.json";
    int fd = mkstemps(path, 5);
    if (fd < 0) return -2;
    ssize_t w = write(fd, text, strlen(text));
    close(fd);
    int rc = w == (ssize_t)strlen(text) ? kh_record_read(path, r, err, n) : -2;
    unlink(path);
    return rc;
}

int main(void) {
    kh_peak p = planted();
    /* a level holds a working set up to twice its capacity; beyond the last cache, DRAM */
    CHECK(kh_roofline_level(&p, 100e3) == 0, "100 kB: L1 (64 kB x 2)");
    CHECK(kh_roofline_level(&p, 129e3) == 1, "129 kB: L2");
    CHECK(kh_roofline_level(&p, 4e6) == 1 && kh_roofline_level(&p, 4.1e6) == 2, "4 MB: L2, 4.1 MB: L3");
    CHECK(kh_roofline_level(&p, 64e6) == 2 && kh_roofline_level(&p, 65e6) == 3, "64 MB: L3, 65 MB: DRAM");
    kh_peak none;
    memset(&none, 0, sizeof none);
    CHECK(kh_roofline_level(&none, 1) == -1, "no levels: none");

    /* training: 10 GFLOP, 20 GB over a 1 GB working set (DRAM: 20 GB / 25 GB/s = 0.8 s beats 0.1 s of FLOPs);
     * evaluation: 30 GFLOP, 1 GB over 1 MB (L2: 5 ms; FLOPs 0.3 s). Bound = 40 GFLOP / 1.1 s. */
    kh_flops_phase tr = {10e9, 20e9, 1e9}, ev = {30e9, 1e9, 1e6};
    kh_roofline rl;
    CHECK(kh_roofline_bound(&p, &tr, &ev, &rl) == 0, "bound computed");
    CHECK_CLOSE(rl.gflops, 40.0 / 1.1, 1e-12, 0, "two-phase bound");
    CHECK(rl.level == 3 && rl.gbps == 25 && rl.working_set == 1e9, "held to DRAM (level %d, %.0f GB/s)", rl.level,
          rl.gbps);
    /* the same training step from L3 (working set 20 MB): 0.2 s of bytes, 0.3 s of evaluation FLOPs */
    tr.working_set = 20e6;
    kh_roofline_bound(&p, &tr, &ev, &rl);
    CHECK_CLOSE(rl.gflops, 40.0 / 0.5, 1e-12, 0, "L3 bound");
    CHECK(rl.level == 2 && rl.gbps == 100, "held to L3");
    /* compute-bound: the peak */
    kh_flops_phase c = {100e9, 1e6, 1e6}, z = {0, 0, 0};
    kh_roofline_bound(&p, &c, &z, &rl);
    CHECK_CLOSE(rl.gflops, 100, 1e-12, 0, "compute-bound: the peak");
    p.fma_gflops = 125; /* FMA chains above the sgemm: the compute ceiling is the higher */
    kh_roofline_bound(&p, &c, &z, &rl);
    CHECK_CLOSE(rl.gflops, 125, 1e-12, 0, "compute-bound: the FMA ceiling");
    p.fma_gflops = 0;
    p.gflops = 0;
    CHECK(kh_roofline_bound(&p, &c, &z, &rl) == -1 && rl.gflops == 0, "no FLOP peak: no bound");

    /* the record's object: written, read back */
    p = planted();
    kh_cell_record r, back;
    kh_record_init(&r);
    snprintf(r.plugin, sizeof r.plugin, "cntk"), snprintf(r.task, sizeof r.task, "mnist_mlp");
    snprintf(r.device, sizeof r.device, "cpu"), snprintf(r.status, sizeof r.status, "ok");
    snprintf(r.roofline_level, sizeof r.roofline_level, "L3");
    r.roofline_gbps = 100, r.step_working_set_bytes = 9.5e6, r.n_mem_levels = p.n_levels;
    memcpy(r.mem_levels, p.levels, sizeof r.mem_levels);
    char *json = kh_record_to_json(&r, 0), err[512];
    CHECK(json && strstr(json, "\"roofline\""), "the record has a roofline object");
    int rc = json ? read_text(json, &back, err, sizeof err) : -2;
    CHECK(rc == 0, "read back: %s", rc ? err : "");
    if (rc == 0) {
        CHECK(!strcmp(back.roofline_level, "L3") && back.roofline_gbps == 100 && back.step_working_set_bytes == 9.5e6,
              "level, ceiling and working set read back");
        CHECK(back.n_mem_levels == 4 && !strcmp(back.mem_levels[3].name, "DRAM") && back.mem_levels[0].gbps == 400 &&
                  !strcmp(back.mem_levels[1].kernel, "update"),
              "levels read back");
        kh_record_free(&back);
    }
    free(json);
    /* an older record has none: nothing read, nothing invented */
    r.roofline_level[0] = 0;
    json = kh_record_to_json(&r, 0);
    CHECK(json && !strstr(json, "\"roofline\""), "no level: no object");
    rc = json ? read_text(json, &back, err, sizeof err) : -2;
    CHECK(rc == 0 && !back.roofline_level[0] && isnan(back.roofline_gbps) && back.n_mem_levels == 0,
          "absent: empty, NAN, 0");
    if (rc == 0) kh_record_free(&back);
    free(json);
    /* malformed: refused, naming the field */
    static const char *bad[] = {
        "\"roofline\": 3",
        "\"roofline\": {\"level\": \"L3; rm\", \"levels\": []}",
        "\"roofline\": {\"level\": \"L3\", \"levels\": {}}",
        "\"roofline\": {\"level\": \"L3\", \"levels\": [{\"level\": \"L1\", \"bytes\": -1, \"buffer_bytes\": 1, "
        "\"gbps\": 1, \"kernel\": \"copy\"}]}",
        "\"roofline\": {\"level\": \"L3\", \"levels\": [{},{},{},{},{},{}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "{\"khost_record\": 2, \"plugin\": \"cntk\", \"task\": \"t\", \"device\": \"cpu\", \"status\": \"ok\", "
                 "%s}", bad[i]);
        rc = read_text(text, &back, err, sizeof err);
        CHECK(rc != 0 && strstr(err, "\"roofline\""), "malformed %zu refused naming the field: %s", i,
              rc ? err : "(read)");
        if (rc == 0) kh_record_free(&back);
    }
    kh_record_free(&r);
    return kh_test_finish("test_roofline_levels");
}
