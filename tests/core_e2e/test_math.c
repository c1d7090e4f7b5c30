/* tests/core_e2e/test_math.c — the math mode (--math fp32|tf32, kh_device.math, ABI 1.4) from the command line
 * to the backend and back into the record and the report, without a GPU: the fake driver of tests/core_devices
 * lists cuda:0 and the fixture backend fixture_cuda (which computes on the host) says in its environment string
 * which math it was opened with.
 *   1. kh_math_parse / kh_math_name / kh_math_effective: cuda gets what was asked, the cpu and a module older
 *      than ABI 1.4 get fp32 with a note;
 *   2. khost run: --math tf32 reaches the backend on cuda:0 (math=1), the default is fp32 (math=0), a cpu cell
 *      asked for tf32 opens fp32 and its record says tf32 was ignored, an ABI 1.3 module gets fp32 with a note,
 *      a bad value is a usage error naming --math;
 *   3. khost matrix hands --math to every cell, and --resume reruns a cell recorded with another math;
 *   4. khost report (text and --html) shows each column's math and says when a column mixes modes;
 *   5. khost verify prints the session's math;
 *   and the device memory a backend counts (ABI 1.4 memory_info) reaches the record's device_mem, through a
 *   matrix too.
 * Usage: KHOST_BIN=khost test_math khost-test.ini FAKE_LIBCUDA */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell/mathmode.h"
#include "base/exitcodes.h"
#include "results/results.h"
#include "testutil.h"

static const char *bin, *ini, *fake;
static char out[1 << 16];

static int khost(const char *args) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "KHOST_CONF='%s' KHOST_LIBCUDA='%s' '%s' %s 2>&1", ini, fake, bin, args);
    return kh_test_run(cmd, out, sizeof out);
}

/* the record of plugin x fixture_blobs x device under dir; 0 when read */
static int record(const char *dir, const char *plugin, const char *device, kh_cell_record *r) {
    char path[4096], err[512];
    kh_record_path(path, sizeof path, dir, "fixture_blobs", plugin, device, "json");
    if (kh_record_read(path, r, err, sizeof err) != 0) {
        CHECK(0, "read %s: %s", path, err);
        return -1;
    }
    return 0;
}

static void check_cell(const char *dir, const char *plugin, const char *device, const char *math, const char *env_math,
                       const char *note_part) {
    kh_cell_record r;
    if (record(dir, plugin, device, &r) != 0) return;
    const char *be = kh_record_get_env(&r, "backend_env");
    CHECK(!strcmp(r.status, "ok"), "%s %s: status %s (%s)", plugin, device, r.status, r.reason);
    CHECK(!strcmp(r.math, math), "%s %s: record math '%s', expected %s", plugin, device, r.math, math);
    CHECK(be && strstr(be, env_math), "%s %s: the backend was opened with '%s', expected %s", plugin, device,
          be ? be : "(none)", env_math);
    if (note_part) CHECK(strstr(r.math_note, note_part) != NULL, "%s %s: math_note '%s' lacks '%s'", plugin, device,
                         r.math_note, note_part);
    else CHECK(r.math_note[0] == 0, "%s %s: unexpected math_note '%s'", plugin, device, r.math_note);
    kh_record_free(&r);
}

static void unit(void) {
    uint32_t m = 99;
    CHECK(kh_math_parse("fp32", &m) == 0 && m == KH_MATH_FP32, "parse fp32");
    CHECK(kh_math_parse("tf32", &m) == 0 && m == KH_MATH_TF32, "parse tf32");
    CHECK(kh_math_parse("bf16", &m) != 0 && kh_math_parse("", &m) != 0 && kh_math_parse(NULL, &m) != 0 &&
              kh_math_parse("TF32", &m) != 0,
          "only fp32 and tf32 parse");
    CHECK(!strcmp(kh_math_name(KH_MATH_TF32), "tf32") && !strcmp(kh_math_name(KH_MATH_FP32), "fp32") &&
              !strcmp(kh_math_name(7), "unknown"),
          "names");
    kh_device cuda = {.struct_size = sizeof cuda, .kind = KH_DEVICE_CUDA, .id = "cuda:0"};
    kh_device cpu = {.struct_size = sizeof cpu, .kind = KH_DEVICE_CPU, .id = "cpu"};
    char note[192];
    CHECK(kh_math_effective(KH_MATH_TF32, &cuda, KH_ABI_MINOR, "x", note, sizeof note) == KH_MATH_TF32 && !note[0],
          "tf32 on cuda: tf32 (%s)", note);
    CHECK(kh_math_effective(KH_MATH_TF32, &cpu, KH_ABI_MINOR, "x", note, sizeof note) == KH_MATH_FP32 &&
              strstr(note, "tf32 ignored on cpu"),
          "tf32 on the cpu: fp32 (%s)", note);
    CHECK(kh_math_effective(KH_MATH_TF32, &cuda, 3, "old", note, sizeof note) == KH_MATH_FP32 &&
              strstr(note, "old was built against ABI 1.3"),
          "tf32 for an ABI 1.3 module: fp32 (%s)", note);
    CHECK(kh_math_effective(KH_MATH_FP32, &cpu, 0, "old", note, sizeof note) == KH_MATH_FP32 && !note[0],
          "fp32 anywhere: fp32 without a note (%s)", note);
}

/* The device memory the backend counted (ABI 1.4 memory_info) lands in the record's device_mem: the
 * fixture's figure on cuda, nothing on the cpu or from a module older than 1.4. */
static void check_device_mem(const char *dir, const char *plugin, const char *device, int64_t expect) {
    kh_cell_record r;
    if (record(dir, plugin, device, &r) != 0) return;
    CHECK(r.dev_peak_bytes == expect, "%s %s: device_mem.peak_bytes %lld, expected %lld", plugin, device,
          (long long)r.dev_peak_bytes, (long long)expect);
    if (expect >= 0)
        CHECK(strstr(r.dev_mem_what, "fixture: weights") != NULL, "%s %s: device_mem reason '%s'", plugin, device,
              r.dev_mem_what);
    kh_record_free(&r);
}

static void run_cells(const char *dir) {
    char a[4096];
    snprintf(a, sizeof a, "run --plugin fixture_cuda --task fixture_blobs --device cuda:0 --math tf32 --out '%s' --quiet", dir);
    CHECK(khost(a) == 0, "run cuda:0 --math tf32: %s", out);
    check_cell(dir, "fixture_cuda", "cuda:0", "tf32", "math=1 kind=1", NULL);
    snprintf(a, sizeof a, "run --plugin fixture_cuda --task fixture_blobs --device cpu --math tf32 --out '%s' --quiet", dir);
    CHECK(khost(a) == 0, "run cpu --math tf32: %s", out);
    check_cell(dir, "fixture_cuda", "cpu", "fp32", "math=0 kind=0", "tf32 ignored on cpu");
    snprintf(a, sizeof a, "run --plugin fixture_cuda13 --task fixture_blobs --device cuda:0 --math=tf32 --out '%s' --quiet",
             dir);
    CHECK(khost(a) == 0, "run ABI 1.3 module --math tf32: %s", out);
    check_cell(dir, "fixture_cuda13", "cuda:0", "fp32", "math=0", "ABI 1.3");
    /* fixture_blobs: 8 dimensions x 4 classes; weights and RMSprop accumulators, plus the fixture's 1 MiB */
    check_device_mem(dir, "fixture_cuda", "cuda:0", 2 * (8 * 4 + 4) * 4 + (1 << 20));
    check_device_mem(dir, "fixture_cuda", "cpu", -1);
    check_device_mem(dir, "fixture_cuda13", "cuda:0", -1);
    /* the report of those three: cuda:0 mixes tf32 and fp32 */
    snprintf(a, sizeof a, "report '%s'", dir);
    CHECK(khost(a) == 0, "report: %s", out);
    CHECK(strstr(out, "FP32 math: cpu = fp32; cuda:0 = mixed (fixture_cuda: tf32; fixture_cuda13: fp32).") != NULL,
          "report names each column's math: %s", out);
    CHECK(strstr(out, "Peak memory:") != NULL && strstr(out, " + 1 MiB dev |") != NULL,
          "report shows the backend's device memory beside the peak RSS: %s", out);
    CHECK(strstr(out, "Note: the cuda:0 column mixes math modes, (fixture_cuda: tf32; fixture_cuda13: fp32)") != NULL,
          "report notes the mixed column: %s", out);
    char html[4200];
    snprintf(html, sizeof html, "%s/report.html", dir);
    snprintf(a, sizeof a, "report '%s' --html '%s'", dir, html);
    CHECK(khost(a) == 0, "report --html: %s", out);
    FILE *f = fopen(html, "r");
    static char page[1 << 20];
    size_t n = f ? fread(page, 1, sizeof page - 1, f) : 0;
    if (f) fclose(f);
    page[n] = 0;
    CHECK(strstr(page, "<p class=\"math\">FP32 math: cpu = fp32; cuda:0 = <strong>mixed") != NULL,
          "html report shows the math line");
    CHECK(strstr(page, "<th>FP32 math</th><td>fp32 (tf32 ignored on cpu") != NULL, "html environment shows the note");
    /* the default is strict fp32 */
    snprintf(a, sizeof a, "run --plugin fixture_cuda --task fixture_blobs --device cuda:0 --out '%s' --quiet", dir);
    CHECK(khost(a) == 0, "run cuda:0: %s", out);
    check_cell(dir, "fixture_cuda", "cuda:0", "fp32", "math=0 kind=1", NULL);
    snprintf(a, sizeof a, "run --plugin fixture_cuda --task fixture_blobs --device cuda:0 --math bf16 --out '%s'", dir);
    CHECK(khost(a) == KH_EXIT_USAGE && strstr(out, "--math expects fp32 or tf32, got 'bf16'"), "run --math bf16: %s", out);
}

static void matrix(const char *dir) {
    char a[4096];
    snprintf(a, sizeof a,
             "matrix --plugins fixture_cuda --tasks fixture_blobs --devices cpu,cuda:0 --math tf32 --out '%s' --quiet", dir);
    CHECK(khost(a) == 0, "matrix --math tf32: %s", out);
    check_cell(dir, "fixture_cuda", "cuda:0", "tf32", "math=1", NULL);
    check_cell(dir, "fixture_cuda", "cpu", "fp32", "math=0", "tf32 ignored");
    /* the matrix rewrites a child's record (the kernel's peak RSS): the backend's count survives it */
    check_device_mem(dir, "fixture_cuda", "cuda:0", 2 * (8 * 4 + 4) * 4 + (1 << 20));
    /* --resume keeps a record only when it was measured with the math asked now */
    snprintf(a, sizeof a,
             "matrix --plugins fixture_cuda --tasks fixture_blobs --devices cuda:0 --math fp32 --resume --out '%s' --quiet",
             dir);
    CHECK(khost(a) == 0, "matrix --math fp32 --resume: %s", out);
    check_cell(dir, "fixture_cuda", "cuda:0", "fp32", "math=0", NULL);
    snprintf(a, sizeof a, "report '%s'", dir);
    CHECK(khost(a) == 0 && strstr(out, "FP32 math: cpu = fp32; cuda:0 = fp32."), "report after the rerun: %s", out);
    snprintf(a, sizeof a, "matrix --plugins fixture_cuda --tasks fixture_blobs --math bf16 --out '%s'", dir);
    CHECK(khost(a) == KH_EXIT_USAGE && strstr(out, "--math expects fp32 or tf32"), "matrix --math bf16: %s", out);
}

static void verify(void) {
    CHECK(khost("verify --plugin fixture_cuda --device cuda:0 --task none --math tf32") >= 0 &&
              strstr(out, "math tf32\n"),
          "verify prints the math: %s", out);
    CHECK(khost("verify --plugin fixture_cuda --device cpu --task none --math tf32") >= 0 &&
              strstr(out, "math fp32: tf32 ignored on cpu"),
          "verify on the cpu: %s", out);
    CHECK(khost("verify --plugin fixture_cuda --math x") == KH_EXIT_USAGE, "verify --math x: %s", out);
}

int main(int argc, char **argv) {
    bin = getenv("KHOST_BIN");
    ini = argc > 1 ? argv[1] : NULL;
    fake = argc > 2 ? argv[2] : NULL;
    if (!bin || !ini || !fake) {
        fprintf(stderr, "usage: KHOST_BIN=khost test_math khost-test.ini FAKE_LIBCUDA\n");
        return 2;
    }
    unit();
    const char *dir = kh_test_tmpdir("math");
    run_cells(dir);
    char d2[4200];
    snprintf(d2, sizeof d2, "%s/matrix", dir);
    matrix(d2);
    verify();
    return kh_test_finish("test_math");
}
