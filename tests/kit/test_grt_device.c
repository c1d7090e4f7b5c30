/* tests/kit/test_grt_device.c — the graph runtime's device storage (khost/kit/graph_runtime_cuda.h) against the
 * fake driver of fake_session_driver.c, whose "device" memory is host memory: what prepare allocates (arena,
 * variables with their optimizer slots, accumulators, feeds, pinned staging, events, metrics), that it is zeroed
 * and counted, a weight's round trip, staging (the bytes that reach the device feeds, a label out of range refused
 * on the host before anything is uploaded), the metric slots and their reset, an out-of-memory that names the
 * buffer and leaves nothing behind, and a release that frees everything.
 *   test_grt_device LIBRARY     (the fake driver) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/graph_runtime_cuda.h"
#include "testutil.h"

static void (*fake_memory)(int *dev, int *host, int *events);
static void (*fake_fail_at)(int k);
static void *(*fake_context)(int dev);

static kh_session_backend g_backend = {.name = "fakebackend"};
static kh_session g_session;
static kh_gvar g_vars[2] = {{.layer = 0, .slot = 0, .numel = 12, .name = "dense_kernel"},
                            {.layer = 0, .slot = 1, .numel = 3, .name = "dense_bias"}};
static int64_t g_pers_bytes[1] = {64};
static kh_gplan g_train_plan = {.n_persistent = 1, .persistent_bytes = g_pers_bytes};

/* A compiled model as the runtime leaves it after the backend's compile step: two variables under Adam (two slots
 * each), input 4 floats and output 3 per sample, batches of up to 8, one accumulator in the training function. */
static void model(kh_grt_model *m) {
    memset(m, 0, sizeof *m);
    m->s = &g_session;
    m->max_batch = 8;
    m->arena_bytes = 1024;
    m->mg.n_vars = 2;
    m->mg.vars = g_vars;
    m->mg.opt.kind = KH_OPT_ADAM;
    m->mg.input_dtype = KH_F32;
    m->mg.input_numel = 4;
    m->mg.out_numel = 3;
    m->plan[KH_GFN_TRAIN] = &g_train_plan;
}

static int all_zero(CUdeviceptr p, size_t n) {
    const unsigned char *b = KH_DEVPTR(p);
    for (size_t i = 0; i < n; i++)
        if (b[i]) return 0;
    return 1;
}

static void live(int *dev, int *host, int *events) { fake_memory(dev, host, events); }

static CUstream open_stream(void) {
    CUstream s = NULL;
    kh_cu.CtxSetCurrent(fake_context(0));
    CHECK(kh_cu.StreamCreate(&s, 0) == CUDA_SUCCESS, "a stream on the fake driver");
    return s;
}

static void prepared_storage(CUstream stream) {
    kh_grt_model m;
    model(&m);
    kh_grt_dev d;
    memset(&d, 0, sizeof d);
    kh_status st = kh_grt_dev_prepare(&m, &d, fake_context(0), stream);
    CHECK(st == KH_OK, "prepare: %s", g_session.err);
    int dev, host, ev;
    live(&dev, &host, &ev);
    /* arena + 2 variables x (weights + 2 slots) + 1 accumulator + 3 feeds + metrics */
    CHECK(dev == 1 + 6 + 1 + 3 + 1 && host == 3 && ev == 4, "live buffers %d (want 12), pinned %d (3), events %d (4)",
          dev, host, ev);
    int64_t want_bytes = 1024 + 3 * (12 + 3) * 4 + 64 + (8 * 4 * 4 + 8 * 4 + 8 * 3 * 4) + 4 * 8;
    CHECK(m.dev_mem.now == want_bytes, "counted %lld bytes (want %lld)", (long long)m.dev_mem.now,
          (long long)want_bytes);
    CHECK(all_zero(d.arena, 1024) && all_zero(d.w[0], 48) && all_zero(d.s2[1], 12) && all_zero(d.pers[KH_GFN_TRAIN][0], 64) &&
              all_zero(d.met, 32),
          "every buffer zeroed");
    CHECK(d.pers[KH_GFN_EVAL] == NULL && d.n_pers[KH_GFN_EVAL] == 0, "no accumulators where the plan has none");

    float w[12], back[12];
    for (int i = 0; i < 12; i++) w[i] = (float)i - 5.5f;
    CHECK(kh_grt_dev_set_var(&m, &d, 0, w) == KH_OK && kh_grt_dev_get_var(&m, &d, 0, back) == KH_OK &&
              !memcmp(w, back, sizeof w),
          "a weight's round trip");

    float x[2 * 4];
    int32_t labels[2] = {2, 0};
    for (int i = 0; i < 8; i++) x[i] = (float)i;
    CHECK(kh_grt_dev_stage(&m, &d, 2, x, labels, NULL) == KH_OK, "stage: %s", g_session.err);
    CHECK(!memcmp(KH_DEVPTR(d.feed[KH_GIN_X]), x, sizeof x) && !memcmp(KH_DEVPTR(d.feed[KH_GIN_LABELS]), labels, 8),
          "the staged batch reached the device feeds");
    CHECK(d.stage.next == 1, "the next batch goes through the other pinned buffer");

    d.label_bound = 3; /* kh_graph_feed_bounds' job: a 3-class model */
    int32_t bad[2] = {1, 3};
    float y2[8] = {0};
    st = kh_grt_dev_stage(&m, &d, 2, y2, bad, NULL);
    CHECK(st == KH_ERR_INVALID && strstr(g_session.err, "fakebackend run on cuda:0: label 3 of sample 1 outside [0, 3)"),
          "a label out of range is refused on the host: %d '%s'", st, g_session.err);
    CHECK(!memcmp(KH_DEVPTR(d.feed[KH_GIN_X]), x, sizeof x), "and nothing of that batch was uploaded");

    double sums[4] = {1.5, 2.0, 7.25, 3.0}; /* as a training and an evaluation kernel would have added */
    memcpy(KH_DEVPTR(d.met), sums, sizeof sums);
    CHECK(kh_grt_dev_metric_slot(&d, KH_GFN_TRAIN) == d.met && kh_grt_dev_metric_slot(&d, KH_GFN_EVAL) == d.met + 16 &&
              kh_grt_dev_metric_slot(&d, KH_GFN_PREDICT) == 0,
          "the metric slots of train and eval, none for predict");
    kh_grt_dev_count(&d, KH_GFN_TRAIN, 2);
    kh_grt_dev_count(&d, KH_GFN_PREDICT, 5);
    kh_metrics mt;
    CHECK(kh_grt_dev_read_metrics(&m, &d, KH_PHASE_TRAIN, &mt, 1) == KH_OK && mt.loss_sum == 1.5 && mt.correct == 2.0 &&
              mt.samples == 2,
          "train metrics: %g %g %lld", mt.loss_sum, mt.correct, (long long)mt.samples);
    CHECK(kh_grt_dev_read_metrics(&m, &d, KH_PHASE_EVAL, &mt, 0) == KH_OK && mt.loss_sum == 7.25 && mt.samples == 0,
          "eval metrics untouched by the train reset");
    CHECK(all_zero(d.met, 16) && d.samples[KH_PHASE_TRAIN] == 0, "the train reset zeroed its sums and count");

    memset(KH_DEVPTR(d.pers[KH_GFN_TRAIN][0]), 7, 64);
    CHECK(kh_grt_dev_clear_accumulators(&m, &d, KH_GFN_TRAIN) == KH_OK && all_zero(d.pers[KH_GFN_TRAIN][0], 64),
          "clearing the accumulators");

    kh_grt_dev_release(&m, &d);
    live(&dev, &host, &ev);
    CHECK(dev == 0 && host == 0 && ev == 0, "release frees everything (%d device, %d pinned, %d events left)", dev, host, ev);
}

/* The k-th allocation fails: the error names the buffer, and a release after the failed prepare frees the rest. */
static void out_of_memory(CUstream stream, int k, const char *names) {
    kh_grt_model m;
    model(&m);
    kh_grt_dev d;
    memset(&d, 0, sizeof d);
    fake_fail_at(k);
    kh_status st = kh_grt_dev_prepare(&m, &d, fake_context(0), stream);
    CHECK(st == KH_ERR_NOMEM && strstr(g_session.err, "fakebackend compile on cuda:0: out of device memory for ") &&
              strstr(g_session.err, names) && strstr(g_session.err, "MiB free"),
          "allocation %d out of memory: %d '%s'", k, st, g_session.err);
    kh_grt_dev_release(&m, &d);
    fake_fail_at(0);
    int dev, host, ev;
    live(&dev, &host, &ev);
    CHECK(dev == 0 && host == 0 && ev == 0, "allocation %d: nothing left (%d, %d, %d)", k, dev, host, ev);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_grt_device FAKE_DRIVER\n");
        return 2;
    }
    setenv("KHOST_LIBCUDA", argv[1], 1);
    char why[512] = "";
    CHECK(kh_cu_load(why, sizeof why), "the fake driver loads: %s", why);
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
    CHECK(lib != NULL, "the fake driver is the loaded one");
    if (!lib) return kh_test_finish("test_grt_device");
    *(void **)&fake_memory = dlsym(lib, "fake_memory_state");
    *(void **)&fake_fail_at = dlsym(lib, "fake_memory_fail_at");
    *(void **)&fake_context = dlsym(lib, "fake_session_context");
    CHECK(fake_memory && fake_fail_at && fake_context, "the fake driver's test hooks");
    if (!fake_memory || !fake_fail_at || !fake_context) return kh_test_finish("test_grt_device");
    g_session.backend = &g_backend;
    snprintf(g_session.dev.id, sizeof g_session.dev.id, "cuda:0");
    CUstream stream = open_stream();
    prepared_storage(stream);
    out_of_memory(stream, 1, "the arena");
    out_of_memory(stream, 3, "an optimizer slot");
    out_of_memory(stream, 9, "the staged labels");
    kh_cu.StreamDestroy(stream);
    return kh_test_finish("test_grt_device");
}
