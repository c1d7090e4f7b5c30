/* tests/seeds/test_record_target.c — a record's target and epochs to target (results.h): the first epoch whose
 * metric reaches the target (val_acc rising to it, loss dropping to it) with its elapsed time; null and the
 * reason when no epoch did, when no epoch finished or when the task sets none; written and read back as they
 * are; "unknown" (not "never reached") for a record written before them; a malformed epoch or target refused
 * naming the file and the field. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results/results.h"
#include "testutil.h"

static const char *dir;

/* A record of metric m with the given per-epoch values (val_acc or loss), elapsed 10 s per epoch. */
static void make(kh_cell_record *r, const char *m, const double *v, int n) {
    kh_record_init(r);
    snprintf(r->plugin, sizeof r->plugin, "cntk");
    snprintf(r->task, sizeof r->task, "mnist_mlp");
    snprintf(r->device, sizeof r->device, "cpu");
    snprintf(r->status, sizeof r->status, "ok");
    snprintf(r->metric, sizeof r->metric, "%s", m);
    for (int i = 0; i < n; i++) {
        kh_epoch_row row = {.epoch = i + 1, .elapsed = 10.0 * (i + 1), .loss = NAN, .acc = NAN, .val_loss = NAN,
                            .val_acc = NAN, .epoch_s = 10};
        if (!strcmp(m, "loss")) row.loss = v[i];
        else row.val_acc = v[i];
        CHECK(kh_record_add_row(r, &row) == 0, "row %d", i);
    }
}

static void test_summarise(void) {
    kh_cell_record r;
    const double acc[] = {0.80, 0.949, 0.95, 0.97};
    make(&r, "val_acc", acc, 4);
    kh_record_summarise(&r, 0, 0.95);
    CHECK(r.epochs_to_target == 3, "val_acc 0.95 first reached at epoch 3, got %d", r.epochs_to_target);
    CHECK(r.time_to_target_s == 30.0, "time to target = epoch 3's elapsed, got %g", r.time_to_target_s);
    CHECK(r.target == 0.95 && !r.target_is_max && !r.target_note[0], "target kept, no note: '%s'", r.target_note);
    kh_record_summarise(&r, 0, 0.99);
    CHECK(r.epochs_to_target == KH_TARGET_NEVER && isnan(r.time_to_target_s), "0.99 never reached: %d",
          r.epochs_to_target);
    CHECK(!strcmp(r.target_note, "val_acc never reached its target 0.99 (at least) in 4 epochs; best 0.97"),
          "note: '%s'", r.target_note);
    kh_record_summarise(&r, 0, 0);
    CHECK(r.epochs_to_target == KH_TARGET_NEVER && isnan(r.target) &&
          !strcmp(r.target_note, "the task sets no target"), "no target: %d '%s'", r.epochs_to_target, r.target_note);
    kh_record_free(&r);

    const double loss[] = {2.0, 1.5, 1.44, 1.2};
    make(&r, "loss", loss, 4);
    kh_record_summarise(&r, 1, 1.45);
    CHECK(r.epochs_to_target == 3 && r.time_to_target_s == 30.0 && r.target_is_max,
          "loss drops to 1.45 at epoch 3: %d", r.epochs_to_target);
    kh_record_summarise(&r, 1, 1.0);
    CHECK(!strcmp(r.target_note, "loss never reached its target 1 (at most) in 4 epochs; best 1.2"), "loss note: '%s'",
          r.target_note);
    kh_record_free(&r);

    make(&r, "val_acc", acc, 0);
    kh_record_summarise(&r, 0, 0.95);
    CHECK(r.epochs_to_target == KH_TARGET_NEVER && !strcmp(r.target_note, "no epoch finished"), "no epoch: '%s'",
          r.target_note);
    kh_record_free(&r);
    const double none[] = {NAN, NAN};
    make(&r, "val_acc", none, 2);
    kh_record_summarise(&r, 0, 0.95);
    CHECK(!strcmp(r.target_note, "val_acc has no value in any of 2 epochs"), "no values: '%s'", r.target_note);
    kh_record_free(&r);
}

/* kh_record_read of text written to dir/name: 0 or -1 with err; r is freed by the caller on 0. */
static int read_text(const char *name, const char *text, kh_cell_record *r, char *err, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    kh_test_write_file(path, text, strlen(text));
    return kh_record_read(path, r, err, n);
}

static void test_round_trip(void) {
    const double acc[] = {0.80, 0.96};
    char err[600], path[4096];
    for (int reached = 0; reached < 2; reached++) {
        kh_cell_record r, back;
        make(&r, "val_acc", acc, 2);
        kh_record_summarise(&r, 0, reached ? 0.95 : 0.99);
        char *json = kh_record_to_json(&r, 1);
        CHECK(json && strstr(json, "\"target\":{\"value\":") && strstr(json, "\"reach\":\"at_least\"}"), "target: %s",
              json ? json : "");
        if (reached)
            CHECK(json && strstr(json, "\"epochs_to_target\":2,") && !strstr(json, "target_note"), "reached: %s",
                  json ? json : "");
        else
            CHECK(json && strstr(json, "\"epochs_to_target\":null,\"target_note\":\"val_acc never reached its target "
                                       "0.99 (at least) in 2 epochs; best 0.96\""),
                  "never reached: %s", json ? json : "");
        free(json);
        CHECK(kh_record_write(&r, dir, err, sizeof err) == 0, "write: %s", err);
        kh_record_path(path, sizeof path, dir, "mnist_mlp", "cntk", "cpu", "json");
        CHECK(kh_record_read(path, &back, err, sizeof err) == 0, "read back: %s", err);
        CHECK(back.epochs_to_target == (reached ? 2 : KH_TARGET_NEVER) && back.target == r.target &&
              !back.target_is_max && !strcmp(back.target_note, r.target_note),
              "read back %d, target %g, note '%s'", back.epochs_to_target, back.target, back.target_note);
        kh_record_free(&back);
        kh_record_free(&r);
    }
    /* a record the matrix wrote for a cell that never ran knows nothing of the target: it says nothing */
    kh_cell_record r;
    make(&r, "val_acc", acc, 0);
    char *json = kh_record_to_json(&r, 1);
    CHECK(json && !strstr(json, "target\"") && !strstr(json, "epochs_to_target"), "unknown written as absent: %s",
          json ? json : "");
    free(json);
    kh_record_free(&r);
}

#define HEAD                                                                                                 \
    "{\"khost_record\": 2, \"plugin\": \"cntk\", \"task\": \"mnist_mlp\", \"device\": \"cpu\", \"status\": \"ok\""

static void test_read(void) {
    kh_cell_record r;
    char err[600] = "";
    /* written before epochs to target: unknown, never counted as "never reached" */
    CHECK(read_text("old__cpu.json", HEAD ", \"time_to_target_s\": null}", &r, err, sizeof err) == 0, "old: %s", err);
    if (!err[0]) {
        CHECK(r.epochs_to_target == KH_TARGET_UNKNOWN && isnan(r.target), "old record: %d", r.epochs_to_target);
        kh_record_free(&r);
    }
    CHECK(read_text("loss__cpu.json", HEAD ", \"target\": {\"value\": 1.45, \"reach\": \"at_most\"}, "
                                      "\"epochs_to_target\": 7}", &r, err, sizeof err) == 0, "loss: %s", err);
    if (!err[0]) {
        CHECK(r.epochs_to_target == 7 && r.target == 1.45 && r.target_is_max, "loss record: %d", r.epochs_to_target);
        kh_record_free(&r);
    }
    static const struct { const char *body, *expect; } bad[] = {
        {", \"target\": null, \"epochs_to_target\": 0}", "field \"epochs_to_target\" is not an epoch"},
        {", \"target\": null, \"epochs_to_target\": 2.5}", "field \"epochs_to_target\" is not an epoch"},
        {", \"target\": null, \"epochs_to_target\": \"3\"}", "field \"epochs_to_target\" is not an epoch"},
        {", \"target\": {\"value\": -1, \"reach\": \"at_least\"}, \"epochs_to_target\": 3}", "field \"target\" is not"},
        {", \"target\": {\"value\": 0.9, \"reach\": \"up\"}, \"epochs_to_target\": 3}", "field \"target\" is not"},
        {", \"target\": 0.9, \"epochs_to_target\": 3}", "field \"target\" is not"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, HEAD "%s", bad[i].body);
        err[0] = 0;
        int rc = read_text("bad__cpu.json", text, &r, err, sizeof err);
        if (rc == 0) kh_record_free(&r);
        CHECK(rc != 0 && strstr(err, bad[i].expect) && strstr(err, "bad__cpu.json"), "%s: rc %d, '%s'", bad[i].body, rc,
              err);
    }
}

int main(void) {
    dir = kh_test_tmpdir_kept("record-target");
    test_summarise();
    test_round_trip();
    test_read();
    if (!kh_test_failed) kh_test_remove_tmpdirs();
    return kh_test_finish("record_target");
}
