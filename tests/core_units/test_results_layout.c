/* tests/core_units/test_results_layout.c — result records (write, read back, summaries, atomic files,
 * malformed JSON named) and the layout negotiation (NHWC->NCHW, one-hot). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "results.h"
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
    kh_record_summarise(&r, 0, 0.98);
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
    kh_record_free(&b);
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

int main(void) {
    test_record_roundtrip();
    test_layout();
    return kh_test_finish("test_results_layout");
}
