/* tests/records_exact/test_records_exact.c — what a record says is read exactly or refused by name: 64-bit seeds
 * keep every bit through a write and a read; a negative, fractional or too large seed, a key given twice (also
 * spelt with a \u escape), a version that is not one and a name that is not a name are errors naming the file
 * and the field; a record from a newer khost is read as far as it is understood. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "results/json_scan.h"
#include "results/results.h"
#include "testutil.h"

static char dir[] = "/tmp/khost-records-exact-XXXXXX";

/* text written to dir/name */
static void write_file(const char *name, const char *text) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* kh_record_read of dir/name: 0 or -1, with err. */
static int read_named(const char *name, kh_cell_record *r, char *err, size_t n) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int rc = kh_record_read(path, r, err, n);
    if (rc == 0) kh_record_free(r);
    return rc;
}

#define BASE_FIELDS "\"khost_record\": 2, \"plugin\": \"cntk\", \"task\": \"mnist_mlp\", \"device\": \"cpu\""

static void test_round_trip(void) {
    kh_cell_record r;
    kh_record_init(&r);
    snprintf(r.plugin, sizeof r.plugin, "cntk");
    snprintf(r.task, sizeof r.task, "mnist_mlp");
    snprintf(r.device, sizeof r.device, "cpu");
    snprintf(r.status, sizeof r.status, "ok");
    r.seed = UINT64_MAX;                           /* 18446744073709551615: a double would read 2^64 */
    r.order_seed = (UINT64_C(1) << 63) + 1;        /* 9223372036854775809: a double would drop the 1 */
    r.rep_index = 1, r.rep_of = 2, r.rep_round = 1, r.rep_position = 0;
    char *text = kh_record_to_json(&r, 1);
    CHECK(text && strstr(text, "\"seed\":18446744073709551615") != NULL, "seed written as its digits: %s", text ? text : "(none)");
    CHECK(text && strstr(text, "\"order_seed\":9223372036854775809") != NULL, "order seed as its digits");
    if (text) write_file("cntk__cpu.rep1.json", text);
    free(text);
    kh_record_free(&r);
    char path[256], err[512];
    snprintf(path, sizeof path, "%s/cntk__cpu.rep1.json", dir);
    kh_cell_record back;
    CHECK(kh_record_read(path, &back, err, sizeof err) == 0, "read back: %s", err);
    CHECK(back.seed == UINT64_MAX, "seed read back %llu", (unsigned long long)back.seed);
    CHECK(back.order_seed == (UINT64_C(1) << 63) + 1, "order seed read back %llu", (unsigned long long)back.order_seed);
    kh_record_free(&back);
}

static void refused(const char *what, const char *body, const char *expect) {
    char text[2048], err[512] = "";
    kh_cell_record r;
    snprintf(text, sizeof text, "{" BASE_FIELDS ", %s}", body);
    write_file("x__cpu.json", text);
    int rc = read_named("x__cpu.json", &r, err, sizeof err);
    CHECK(rc != 0, "%s: accepted", what);
    CHECK(strstr(err, expect) != NULL && strstr(err, "x__cpu.json") != NULL, "%s: says '%s', expected '%s'", what,
          err, expect);
}

static void test_refused(void) {
    refused("a negative seed", "\"status\": \"ok\", \"seed\": -1", "field \"seed\" is not an integer from 0 to 2^64 - 1");
    refused("a seed of 2^64", "\"status\": \"ok\", \"seed\": 18446744073709551616", "field \"seed\" is not an integer");
    refused("a fractional seed", "\"status\": \"ok\", \"seed\": 1.5", "field \"seed\" is not an integer");
    refused("an order seed in exponent form", "\"status\": \"ok\", \"repeat\": {\"index\": 1, \"order_seed\": 1e3}",
            "field \"repeat.order_seed\" is not an integer");
    refused("status twice", "\"status\": \"ok\", \"status\": \"crashed\"", "key \"status\" twice in the top-level object");
    refused("status twice, once spelt with an escape", "\"status\": \"ok\", \"st\\u0061tus\": \"crashed\"",
            "key \"status\" twice");
    refused("a key twice in a nested object", "\"status\": \"ok\", \"repeat\": {\"round\": 1, \"round\": 2}",
            "key \"round\" twice in object repeat");
    refused("plugin twice", "\"status\": \"ok\", \"plugin\": \"a|b\"", "key \"plugin\" twice");
    char err[512] = "";
    kh_cell_record r;
    write_file("v__cpu.json", "{\"khost_record\": 99, \"plugin\": \"cntk\", \"task\": \"t\", \"device\": \"cpu\", "
                              "\"status\": \"ok\"}");
    char path[256];
    snprintf(path, sizeof path, "%s/v__cpu.json", dir);
    CHECK(kh_record_read(path, &r, err, sizeof err) == 0 && r.record_version == 99 && !strcmp(r.status, "ok"),
          "a future version is read as far as it is understood: '%s'", err);
    kh_record_free(&r);
    kh_record_newer_text(path, 99, err, sizeof err);
    CHECK(strstr(err, "v__cpu.json: record version 99 is from a newer khost (this one reads 1 to 2)") != NULL,
          "the warning names the file and the version: '%s'", err);
    write_file("v0__cpu.json", "{\"khost_record\": 0.5, \"plugin\": \"cntk\", \"task\": \"t\", \"device\": \"cpu\", "
                               "\"status\": \"ok\"}");
    CHECK(read_named("v0__cpu.json", &r, err, sizeof err) != 0 && strstr(err, "not a record version"),
          "a version that is not one: '%s'", err);
    write_file("n__cpu.json", "{\"khost_record\": 2, \"plugin\": \"<b>\", \"task\": \"t\", \"device\": \"cpu\", "
                              "\"status\": \"ok\"}");
    CHECK(read_named("n__cpu.json", &r, err, sizeof err) != 0 && strstr(err, "field \"plugin\" is not a name"),
          "a plugin that is not a name: '%s'", err);
    write_file("s__cpu.json", "{\"khost_record\": 2, \"plugin\": \"a\", \"task\": \"t\", \"device\": \"cpu\", "
                              "\"status\": \"ok\\u001b[2J\"}");
    CHECK(read_named("s__cpu.json", &r, err, sizeof err) != 0 && strstr(err, "field \"status\" is not a status word"),
          "a status with an escape sequence: '%s'", err);
}

static void test_scan_direct(void) {
    kh_json_int want[2] = {{.path = "seed"}, {.path = "a.b"}};
    char err[256];
    CHECK(kh_json_scan("{\"x\": [1, {\"seed\": 5}], \"a\": {\"b\": 007, \"c\": {\"d\": 1}}, \"seed\": 0}", want, 2, err,
                       sizeof err) == 0, "scan: %s", err);
    CHECK(want[0].found == 1 && want[0].v == 0, "the top-level seed, not the one in the array (%d, %llu)", want[0].found,
          (unsigned long long)want[0].v);
    CHECK(want[1].found == 1 && want[1].v == 7, "a.b");
    CHECK(kh_json_scan("{\"a\": {\"x\": 1}, \"b\": {\"x\": 2}}", NULL, 0, err, sizeof err) == 0,
          "one key in two objects is not a duplicate");
    CHECK(kh_json_scan("[{\"k\": 1, \"k\": 2}]", NULL, 0, err, sizeof err) != 0 && strstr(err, "key \"k\" twice"),
          "a duplicate inside an array's object: %s", err);
}

int main(void) {
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip();
    test_refused();
    test_scan_direct();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", dir);
    return kh_test_finish("records_exact");
}
