/* tests/kit/test_cuda_session.c — the kit's CUDA session (kh_cuda_session_open) against a fake driver
 * (fake_session_driver.c): the ordinal, the math, the host's context (wrong context, another device's, none:
 * retained), the architecture, and that a failed open leaves nothing held (no retain, no stream). With no GPU
 * here cuBLAS cannot start, so an open that gets as far as the handles fails there, and the test checks the
 * clean-up; where cuBLAS does start, the opened session is checked and closed instead.
 *   test_cuda_session nolib            the driver library is missing: unsupported, with the reason
 *   test_cuda_session fake LIBRARY     every case against the fake driver
 * One mode per process: the kit loads the driver table once per process. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/cuda.h"
#include "khost/kit/cuda_driver.h"
#include "testutil.h"

static void (*fake_state)(int dev, int *retains, int *current_device, int *live_streams);
static void *(*fake_context)(int dev);

static kh_device device(int ordinal) {
    kh_device d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.kind = KH_DEVICE_CUDA;
    d.ordinal = ordinal;
    snprintf(d.id, sizeof d.id, "cuda:%d", ordinal);
    snprintf(d.name, sizeof d.name, "Fake GPU");
    d.cc_major = ordinal == 0 ? 9 : 8;
    d.math = KH_MATH_FP32;
    return d;
}

static void caps_unusable(kh_caps *c) {
    c->available = 0;
    snprintf(c->note, sizeof c->note, "no usable device here");
}
static void caps_usable(kh_caps *c) { c->available = 1; }

/* A backend's session state through kh_cuda_session_new: refused by its caps before anything is opened, or opened
 * (or failed at the libraries) with *out set only on success and nothing held after a failure. */
static void session_state(kh_device d) {
    const kh_cuda_open_opts o = {.plugin = "p", .min_arch = 90};
    void *state = (void *)&o;
    char err[512] = "";
    kh_status st = kh_cuda_session_new(&d, &o, caps_unusable, 2 * sizeof(kh_cuda_session), &state, err, sizeof err);
    CHECK(st == KH_ERR_UNSUPPORTED && state == NULL && !strcmp(err, "p open on cuda:0: no usable device here"),
          "state refused by the caps: %d '%s'", st, err);
    st = kh_cuda_session_new(&d, &o, caps_usable, 2 * sizeof(kh_cuda_session), &state, err, sizeof err);
    int r, cur, live;
    fake_state(d.ordinal, &r, &cur, &live);
    CHECK(st == KH_OK ? state != NULL : state == NULL && live == 0, "state opened, or nothing held: %d '%s'", st, err);
    kh_cuda_session_free(state);
    fake_state(d.ordinal, &r, &cur, &live);
    CHECK(live == 0, "freeing the state closes its streams (%d live)", live);
}

static void expect_refused(const char *what, kh_device d, int min_arch, kh_status want, const char *text) {
    kh_cuda_session cs;
    char err[512] = "";
    const kh_cuda_open_opts o = {.plugin = "p", .min_arch = min_arch};
    kh_status st = kh_cuda_session_open(&d, &o, &cs, err, sizeof err);
    CHECK(st == want && strstr(err, text), "%s: status %d, '%s' (want %d and '%s')", what, st, err, want, text);
    if (st == KH_OK) kh_cuda_session_close(&cs);
    int r0, r1, cur, live;
    fake_state(0, &r0, &cur, &live);
    fake_state(1, &r1, &cur, &live);
    CHECK(r0 == 0 && r1 == 0 && live == 0, "%s: nothing left held (retains %d/%d, streams %d)", what, r0, r1, live);
}

/* An open that reaches the handles: fails at cuBLAS/cuDNN with nothing held, or opens a session as asked. */
static void expect_opened_or_clean(const char *what, kh_device d, int host_retains, int want_retained) {
    kh_cuda_session cs;
    char err[512] = "";
    const kh_cuda_open_opts o = {.plugin = "p", .min_arch = 90, .copy_stream = 1};
    kh_status st = kh_cuda_session_open(&d, &o, &cs, err, sizeof err);
    int r, cur, live;
    fake_state(d.ordinal, &r, &cur, &live);
    if (st != KH_OK) {
        CHECK(strstr(err, "p open on cuda:0: ") && (strstr(err, "cublas") || strstr(err, "cudnn")),
              "%s: the failure is the libraries' and names the call: %s", what, err);
        CHECK(r == host_retains && live == 0, "%s: a failed open holds nothing (retains %d, want %d; streams %d)", what,
              r, host_retains, live);
        CHECK(cur == (want_retained ? -1 : d.ordinal), "%s: the current context as open found it (device %d)", what, cur);
        return;
    }
    CHECK(cs.retained == want_retained && r == host_retains + want_retained, "%s: retained %d (retains %d)", what,
          cs.retained, r);
    CHECK(live == 2 && cs.stream && cs.copy && cs.blas && cs.dnn, "%s: two streams and both handles", what);
    CHECK(cs.cc == 90 && !strcmp(cs.arch, "sm_90") && cs.tf32 == 0, "%s: cc %d arch %s tf32 %d", what, cs.cc, cs.arch,
          cs.tf32);
    kh_cuda_session_close(&cs);
    fake_state(d.ordinal, &r, &cur, &live);
    CHECK(r == host_retains && live == 0, "%s: close releases what open took (retains %d, streams %d)", what, r, live);
    CHECK(cur == (want_retained ? -1 : d.ordinal), "%s: the current context as open found it (device %d)", what, cur);
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "nolib")) {
        setenv("KHOST_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
        kh_device d = device(0);
        kh_cuda_session cs;
        char err[512] = "";
        const kh_cuda_open_opts o = {.plugin = "p", .min_arch = 90};
        kh_status st = kh_cuda_session_open(&d, &o, &cs, err, sizeof err);
        CHECK(st == KH_ERR_UNSUPPORTED && strstr(err, "p open on cuda:0: no CUDA driver (/nonexistent/libcuda.so.1"),
              "no driver: %d '%s'", st, err);
        return kh_test_finish("test_cuda_session nolib");
    }
    if (argc < 3 || strcmp(argv[1], "fake")) {
        fprintf(stderr, "usage: test_cuda_session nolib | fake LIBRARY\n");
        return 2;
    }
    setenv("KHOST_LIBCUDA", argv[2], 1);
    void *lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "test_cuda_session: %s\n", dlerror());
        return 1;
    }
    *(void **)&fake_state = dlsym(lib, "fake_session_state");
    *(void **)&fake_context = dlsym(lib, "fake_session_context");
    if (!fake_state || !fake_context) {
        fprintf(stderr, "test_cuda_session: %s is not the fake driver\n", argv[2]);
        return 1;
    }
    char why[400];
    CHECK(kh_cu_load(why, sizeof why) && kh_cu.version == 13000, "the fake driver loads: %s", why);

    kh_device d = device(5);
    expect_refused("ordinal 5", d, 90, KH_ERR_INVALID, "p open on cuda:5: ordinal 5, 2 CUDA device(s)");
    d = device(0);
    d.math = 7;
    expect_refused("math 7", d, 90, KH_ERR_UNSUPPORTED, "p open on cuda:0: math mode 7 (fp32 and tf32 only)");

    /* the host passed device 0's context, but device 1's is current */
    d = device(0);
    d.cu_context = fake_context(0);
    kh_cu.CtxSetCurrent(fake_context(1));
    expect_refused("another context current", d, 90, KH_ERR_DEVICE,
                   "not the device's primary context the host retained");
    d.cu_context = NULL; /* no host: the current context is still another device's */
    expect_refused("another device's context", d, 90, KH_ERR_DEVICE, "the current CUDA context belongs to another device");

    /* device 1 is compute capability 8.0; the module's kernels are sm_90 */
    d = device(1);
    d.cu_context = fake_context(1);
    expect_refused("too old", d, 90, KH_ERR_UNSUPPORTED, "compute capability 8.0, built for sm_90 and newer");
    kh_device any = device(1);
    any.cu_context = fake_context(1);
    kh_cuda_session cs;
    char err[512] = "";
    const kh_cuda_open_opts o_any = {.plugin = "p", .min_arch = 0};
    kh_status st = kh_cuda_session_open(&any, &o_any, &cs, err, sizeof err);
    CHECK(st == KH_OK || !strstr(err, "compute capability"), "min_arch 0 takes any architecture: %s", err);
    if (st == KH_OK) kh_cuda_session_close(&cs);

    /* nothing current (a harness without the host): the primary context is retained, and given back */
    kh_cu.CtxSetCurrent(NULL);
    expect_opened_or_clean("nothing current", device(0), 0, 1);

    /* the host's context current: used as it is, never retained again */
    d = device(0);
    int host_ctx_retains = 0, cur, live;
    void *ctx0 = NULL;
    kh_cu.DevicePrimaryCtxRetain((CUcontext *)&ctx0, 0); /* as the host does */
    kh_cu.CtxSetCurrent(ctx0);
    d.cu_context = ctx0;
    fake_state(0, &host_ctx_retains, &cur, &live);
    CHECK(host_ctx_retains == 1 && cur == 0, "the test holds device 0's context like the host");
    expect_opened_or_clean("host context", d, 1, 0);
    kh_cu.DevicePrimaryCtxRelease(0);

    kh_cu.CtxSetCurrent(NULL);
    session_state(device(0));

    char env[400];
    d = device(0);
    kh_cuda_session_env(NULL, &d, env, sizeof env);
    CHECK(!strncmp(env, "driver=13.0 cudnn=", 18) && strstr(env, " cublas=? device=\"Fake GPU\" cc=9.0 math=fp32"),
          "environment words: %s", env);
    return kh_test_finish("test_cuda_session");
}
