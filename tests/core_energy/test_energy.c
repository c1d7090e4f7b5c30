/* tests/core_energy/test_energy.c — core/devices/energy.c without hardware. Modes (one per ctest entry):
 *   rapl: fake powercap folders in the temp dir: two packages summed (one wrapping around between reads), a
 *         sub-domain that must not be added, an unreadable energy_uj, no domain, no folder;
 *   nvml LIB / nvml_initfail LIB / nvml_nolib LIB: the fake NVML's scripted counter, a wrong PCI bus id, a
 *         failing nvmlInit_v2, a library that is not there. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "devices/energy.h"
#include "testutil.h"

#define RANGE 262143999999.0 /* max_energy_range_uj of a typical package */

static void put(const char *root, const char *dom, const char *file, double v) {
    char p[1024], text[64];
    snprintf(p, sizeof p, "%s/%s", root, dom);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/%s/%s", root, dom, file);
    int n = snprintf(text, sizeof text, "%.0f\n", v);
    kh_test_write_file(p, text, (size_t)n);
}

static kh_energy *open_cpu(void) {
    kh_device cpu = {.struct_size = sizeof cpu, .kind = KH_DEVICE_CPU, .ordinal = -1, .id = "cpu"};
    return kh_energy_open(&cpu);
}

static void expect_unavailable(kh_energy *h, const char *needle, const char *what) {
    double j;
    CHECK(kh_energy_read(h, &j) == -1 && isnan(j), "%s: no reading", what);
    char src[KH_ENERGY_SOURCE_LEN], why[KH_ENERGY_REASON_LEN];
    kh_energy_describe(h, src, why);
    CHECK(!strcmp(src, "unavailable"), "%s: source %s (%s)", what, src, why);
    CHECK(strstr(why, needle) != NULL, "%s: reason '%s' names '%s'", what, why, needle);
}

static void expect_json(const kh_energy *h, const double *j, const double *w, int n, const char *want) {
    cJSON *o = kh_energy_json(h, j, w, n);
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    CHECK(text && !strcmp(text, want), "energy member %s, want %s", text ? text : "(none)", want);
    free(text);
    cJSON_Delete(o);
}

static void test_rapl(void) {
    const char *root = kh_test_tmpdir("energy");
    setenv("KHOST_POWERCAP_ROOT", root, 1);
    put(root, "intel-rapl:0", "max_energy_range_uj", RANGE);
    put(root, "intel-rapl:0", "energy_uj", 1e6);
    put(root, "intel-rapl:1", "max_energy_range_uj", RANGE);
    put(root, "intel-rapl:1", "energy_uj", RANGE - 1e6); /* 1 J below the wrap */
    put(root, "intel-rapl:0:0", "max_energy_range_uj", RANGE); /* core sub-domain: inside package 0's count */
    put(root, "intel-rapl:0:0", "energy_uj", 5e5);
    put(root, "dummy", "energy_uj", 7e5);
    kh_energy *h = open_cpu();
    CHECK(h != NULL, "open");
    if (!h) return;
    char src[KH_ENERGY_SOURCE_LEN], why[KH_ENERGY_REASON_LEN];
    kh_energy_describe(h, src, why);
    CHECK(!strcmp(src, "rapl"), "source %s (%s)", src, why);
    CHECK(!strcmp(why, "intel-rapl:0+intel-rapl:1"), "domains '%s'", why);
    double j0, j1, j2, joules, watts;
    CHECK(kh_energy_read(h, &j0) == 0 && j0 == 0, "first read %g J", j0);
    put(root, "intel-rapl:0", "energy_uj", 3e6);          /* +2 J */
    put(root, "intel-rapl:1", "energy_uj", 2e6 - 1);      /* +3 J, across the wrap (range + 1 values) */
    put(root, "intel-rapl:0:0", "energy_uj", 9e8);        /* +899.5 J if it were (wrongly) added */
    CHECK(kh_energy_read(h, &j1) == 0, "second read");
    CHECK_CLOSE(j1 - j0, 5.0, 0, 1e-9, "joules over the wrap");
    CHECK(kh_energy_epoch(j0, j1, 2.0, &joules, &watts) == 0, "epoch");
    CHECK_CLOSE(joules, 5.0, 0, 1e-9, "epoch joules");
    CHECK_CLOSE(watts, 2.5, 0, 1e-9, "epoch watts");
    CHECK(kh_energy_read(h, &j2) == 0 && j2 == j1, "no change, no energy (%g vs %g)", j2, j1);
    /* the record's member: a missing epoch figure is null */
    double ej[2] = {joules, NAN}, ew[2] = {watts, NAN};
    expect_json(h, ej, ew, 2,
                "{\"source\":\"rapl\",\"reason\":\"\",\"domain\":\"intel-rapl:0+intel-rapl:1\","
                "\"epoch_j\":[5,null],\"epoch_w\":[2.5,null]}");
    /* the counter becomes unreadable mid-run: the handle says so and stays unavailable */
    char p[1024];
    snprintf(p, sizeof p, "%s/intel-rapl:1/energy_uj", root);
    CHECK(unlink(p) == 0 && mkdir(p, 0755) == 0, "replace %s by a folder", p);
    expect_unavailable(h, "intel-rapl:1/energy_uj", "unreadable mid-run");
    kh_energy_close(h);
    /* unreadable at open: a folder where energy_uj should be (reads fail even as root) */
    expect_unavailable(h = open_cpu(), "intel-rapl:1/energy_uj", "unreadable at open");
    kh_energy_close(h);
    if (geteuid() != 0) { /* permission, the common case on a desktop: only root may read energy_uj */
        CHECK(rmdir(p) == 0, "rmdir %s", p);
        put(root, "intel-rapl:1", "energy_uj", 1e6);
        CHECK(chmod(p, 0) == 0, "chmod %s", p);
        expect_unavailable(h = open_cpu(), "Permission denied", "energy_uj mode 000");
        kh_energy_close(h);
    }
    /* no package domain, no folder */
    const char *empty = kh_test_tmpdir("energy-empty");
    setenv("KHOST_POWERCAP_ROOT", empty, 1);
    expect_unavailable(h = open_cpu(), "no intel-rapl:N package domain", "empty powercap folder");
    kh_energy_close(h);
    setenv("KHOST_POWERCAP_ROOT", "/nonexistent/powercap", 1);
    expect_unavailable(h = open_cpu(), "no powercap folder /nonexistent/powercap", "no powercap folder");
    expect_json(h, NULL, NULL, 0,
                "{\"source\":\"unavailable\",\"reason\":\"no powercap folder /nonexistent/powercap (No such file "
                "or directory)\",\"domain\":\"\",\"epoch_j\":[],\"epoch_w\":[]}");
    kh_energy_close(h);
    /* the per-epoch helper refuses what is not an epoch */
    CHECK(kh_energy_epoch(5, 4, 1, &joules, &watts) == -1 && isnan(joules) && isnan(watts), "counter backwards");
    CHECK(kh_energy_epoch(-1, 4, 1, &joules, &watts) == -1, "missing start");
    CHECK(kh_energy_epoch(1, 4, 0, &joules, &watts) == -1, "zero seconds");
}

static kh_energy *open_gpu(const char *bus) {
    kh_device gpu = {.struct_size = sizeof gpu, .kind = KH_DEVICE_CUDA, .ordinal = 0, .id = "cuda:0"};
    snprintf(gpu.pci_bus_id, sizeof gpu.pci_bus_id, "%s", bus);
    return kh_energy_open(&gpu);
}

static void test_nvml(const char *mode, const char *lib) {
    setenv("KHOST_LIBNVML", lib, 1);
    kh_energy *h;
    if (!strcmp(mode, "nvml_nolib")) {
        setenv("KHOST_LIBNVML", "/nonexistent/libnvidia-ml.so.1", 1);
        expect_unavailable(h = open_gpu("0000:3b:00.0"), "/nonexistent/libnvidia-ml.so.1 not loaded", "no library");
        kh_energy_close(h);
        return;
    }
    if (!strcmp(mode, "nvml_initfail")) {
        setenv("FAKE_NVML_INIT_FAILS", "1", 1);
        expect_unavailable(h = open_gpu("0000:3b:00.0"), "nvmlInit_v2 failed (NVML error 9)", "init fails");
        kh_energy_close(h);
        return;
    }
    h = open_gpu("0000:3b:00.0");
    char src[KH_ENERGY_SOURCE_LEN], why[KH_ENERGY_REASON_LEN];
    kh_energy_describe(h, src, why);
    CHECK(!strcmp(src, "nvml") && !strcmp(why, "0000:3b:00.0"), "source %s (%s)", src, why);
    double j0, j1, joules, watts;
    /* the open probed the counter once (5000 mJ); the reads see 5250 and 5500 mJ */
    CHECK(kh_energy_read(h, &j0) == 0, "read");
    CHECK_CLOSE(j0, 5.25, 0, 1e-12, "first reading in J");
    CHECK(kh_energy_read(h, &j1) == 0, "read");
    CHECK(kh_energy_epoch(j0, j1, 0.5, &joules, &watts) == 0, "epoch");
    CHECK_CLOSE(joules, 0.25, 0, 1e-12, "epoch joules");
    CHECK_CLOSE(watts, 0.5, 0, 1e-12, "epoch watts");
    kh_energy_close(h);
    expect_unavailable(h = open_gpu("0000:af:00.0"), "no device at PCI bus id 0000:af:00.0", "wrong bus id");
    kh_energy_close(h);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "rapl";
    if (!strcmp(mode, "rapl")) test_rapl();
    else if (argc > 2) test_nvml(mode, argv[2]);
    else {
        fprintf(stderr, "usage: core_energy rapl | nvml|nvml_initfail|nvml_nolib FAKE_LIBNVML\n");
        return 2;
    }
    return kh_test_finish("core_energy");
}
