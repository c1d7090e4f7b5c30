/* tests/testutil.h — a minimal assertion kit for khost's C tests.
 * CHECK records a failure with file:line and carries on; kh_test_finish() prints the closing
 * "N passed, N failed" line and returns the exit code (1 on any failure). Skips exit 77 (ctest skip). */
#ifndef KHOST_TESTUTIL_H
#define KHOST_TESTUTIL_H

#include <stdio.h>

#include "khost/model.h"

extern int kh_test_passed, kh_test_failed;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (cond) {                                                                        \
            kh_test_passed++;                                                              \
        } else {                                                                           \
            kh_test_failed++;                                                              \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
        }                                                                                  \
    } while (0)

/* |a-b| <= atol + rtol*|b| */
#define CHECK_CLOSE(a, b, rtol, atol, what)                                                 \
    CHECK(kh_test_close((double)(a), (double)(b), (rtol), (atol)), "%s: %.9g vs %.9g", (what), \
          (double)(a), (double)(b))

int kh_test_close(double a, double b, double rtol, double atol);
int kh_test_finish(const char *name);
/* Print why and exit 77 so ctest reports the test as skipped (never as passed). */
void kh_test_skip(const char *why);
/* Write bytes to a file (tests generate their inputs); aborts the test on failure. */
void kh_test_write_file(const char *path, const void *data, size_t n);
/* A fresh temporary directory under $TMPDIR (or /tmp); the string is static per call site use. */
const char *kh_test_tmpdir(const char *tag);
/* How many lines of /proc/self/maps name needle (-1 when it cannot be read): which libraries are mapped. */
int kh_test_mapped(const char *needle);
/* Run a shell command, capture stdout+stderr into out (truncated), return its exit status (or 128+sig). */
int kh_test_run(const char *cmd, char *out, size_t outlen);
/* Seconds on the monotonic clock. */
double kh_test_now(void);
/* 1 when path exists (of any type). */
int kh_test_exists(const char *path);
/* The whole file, NUL-terminated, in malloc'd memory (its length in *len unless NULL); NULL when it
 * cannot be read. */
char *kh_test_slurp(const char *path, size_t *len);
/* kh_test_tmpdir, remembered (the first 8) for kh_test_remove_tmpdirs: a test calls that at the end when
 * everything passed, so a failure leaves its folders for inspection. Read-only folders inside are removed too. */
const char *kh_test_tmpdir_kept(const char *tag);
void kh_test_remove_tmpdirs(void);
/* A model spec of these members, every other one zero (the optimizer too): input (s0, s1, s2) of `rank`. */
kh_model_spec kh_test_spec(const char *name, uint32_t dtype, int rank, int s0, int s1, int s2, int onehot,
                           const kh_layer_spec *layers, int n, uint32_t loss, int classes);

#endif
