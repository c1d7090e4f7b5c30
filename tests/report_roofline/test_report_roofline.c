/* tests/report_roofline/test_report_roofline.c — `khost report` warns under the throughput table about a
 * record whose roofline_fraction exceeds 1 (physically impossible), and says nothing for one at or below it.
 * Input: a record of tests/report_html/data with its fraction rewritten. Usage: SOURCE_DIR; needs $KHOST_BIN. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"

/* the record with its roofline_fraction replaced by `value`, in DIR/mnist_cnn/cntk__cpu.json */
static void write_record(const char *src, const char *dir, const char *value) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/report_html/data/mnist_cnn/cntk__cpu.json", src);
    char *rec = kh_test_slurp(path, NULL);
    const char *key = "\"roofline_fraction\": ";
    char *at = rec ? strstr(rec, key) : NULL;
    if (!at) {
        fprintf(stderr, "test setup: no roofline_fraction in %s\n", path);
        exit(2);
    }
    char *end = strchr(at, ',');
    snprintf(path, sizeof path, "%s/mnist_cnn", dir);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/mnist_cnn/cntk__cpu.json", dir);
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "%.*s%s%s%s", (int)(at - rec), rec, key, value, end) < 0 || fclose(f) != 0) {
        fprintf(stderr, "test setup: cannot write %s\n", path);
        exit(2);
    }
    free(rec);
}

int main(int argc, char **argv) {
    const char *bin = getenv("KHOST_BIN");
    if (argc < 2) {
        fprintf(stderr, "usage: test_report_roofline SOURCE_DIR\n");
        return 2;
    }
    if (!bin || !*bin) kh_test_skip("KHOST_BIN is not set");
    struct stat st;
    if (stat(bin, &st) != 0) kh_test_skip("the khost binary is not built");
    char cmd[8192], out[65536];
    const char *over = kh_test_tmpdir("roofline-over"), *ok = kh_test_tmpdir("roofline-ok");
    write_record(argv[1], over, "2.5");
    write_record(argv[1], ok, "1.0");
    snprintf(cmd, sizeof cmd, "'%s' report '%s'", bin, over);
    int rc = kh_test_run(cmd, out, sizeof out);
    CHECK(rc == 0, "report exited %d: %s", rc, out);
    CHECK(strstr(out, "(250.0%)") != NULL, "the table shows the fraction: %s", out);
    CHECK(strstr(out, "\nWarning: cntk on cpu is at 250% of the roofline, above 100% (impossible)") != NULL,
          "warning for a fraction of 2.5: %s", out);
    snprintf(cmd, sizeof cmd, "'%s' report '%s'", bin, ok);
    rc = kh_test_run(cmd, out, sizeof out);
    CHECK(rc == 0 && strstr(out, "(100.0%)") != NULL, "report of a fraction of 1.0: %s", out);
    CHECK(!strstr(out, "Warning:"), "no warning at exactly 100 %%: %s", out);
    return kh_test_finish("test_report_roofline");
}
