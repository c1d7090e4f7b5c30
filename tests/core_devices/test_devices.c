/* tests/core_devices/test_devices.c — device enumeration, lookup and primary-context handling.
 * Usage: test_devices nolib | fake LIB | nodevice LIB | oldrelease LIB | broken LIB
 * Each mode is its own process because core/devices/devices.c loads the driver once per process (as CUDA does). */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "devices/devices.h"
#include "testutil.h"

static void check_cpu(const kh_devices *d) {
    CHECK(d->n >= 1, "n=%d", d->n);
    if (d->n < 1) return;
    const kh_device *c = &d->v[0];
    CHECK(strcmp(c->id, "cpu") == 0, "v[0].id=%s", c->id);
    CHECK(c->kind == KH_DEVICE_CPU, "kind=%u", c->kind);
    CHECK(c->ordinal == -1, "ordinal=%d", c->ordinal);
    CHECK(c->threads >= 1, "threads=%d", c->threads);
    CHECK(c->name[0] != 0, "cpu model is empty");
    CHECK(c->struct_size == sizeof(kh_device), "struct_size=%u", c->struct_size);
    CHECK(c->pci_bus_id[0] == 0, "cpu pci id '%s'", c->pci_bus_id);
}

/* No driver at all: only the cpu, and the note says which library was missing. */
static void mode_nolib(void) {
    setenv("KHOST_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
    kh_devices d;
    kh_devices_enumerate(&d);
    CHECK(d.n == 1, "n=%d (expected only the cpu)", d.n);
    check_cpu(&d);
    CHECK(strstr(d.note, "/nonexistent/libcuda.so.1") && strstr(d.note, "not loadable"), "note: %s", d.note);
    CHECK(d.driver_version == 0, "driver_version=%d", d.driver_version);
    char buf[32] = "x";
    kh_devices_driver_string(&d, buf, sizeof buf);
    CHECK(buf[0] == 0, "driver string '%s'", buf);

    char err[512];
    CHECK(kh_devices_find(&d, "cpu", err, sizeof err) == &d.v[0], "cpu: %s", err);
    CHECK(kh_devices_find(&d, "CPU", err, sizeof err) == &d.v[0], "CPU: %s", err);
    CHECK(kh_devices_find(&d, "auto", err, sizeof err) == &d.v[0], "auto: %s", err);
    CHECK(kh_devices_find(&d, "default", err, sizeof err) == &d.v[0], "default: %s", err);
    CHECK(kh_devices_find(&d, NULL, err, sizeof err) == &d.v[0], "NULL: %s", err);
    CHECK(kh_devices_find(&d, "cuda:0", err, sizeof err) == NULL, "cuda:0 found without a driver");
    CHECK(strstr(err, "'cuda:0'") && strstr(err, "0 CUDA device(s)") && strstr(err, "libcuda"), "err: %s", err);
    CHECK(kh_devices_find(&d, "cuda", err, sizeof err) == NULL, "cuda found without a driver");
    CHECK(strstr(err, "0 CUDA device(s)"), "err: %s", err);
    CHECK(kh_devices_find(&d, "garbage", err, sizeof err) == NULL, "garbage found");
    CHECK(strstr(err, "'garbage'") && strstr(err, "expected"), "err: %s", err);
    CHECK(kh_devices_find(&d, "cuda:x", err, sizeof err) == NULL, "cuda:x found");
    CHECK(kh_devices_find(&d, "cuda:-1", err, sizeof err) == NULL, "cuda:-1 found");
    CHECK(kh_devices_find(&d, "0000:3b:00.0", err, sizeof err) == NULL, "pci id found without a driver");
    CHECK(strstr(err, "PCI"), "err: %s", err);
    CHECK(kh_devices_find(&d, "cpu", NULL, 0) == &d.v[0], "NULL err buffer");
    CHECK(kh_devices_find(&d, "nope", NULL, 0) == NULL, "NULL err buffer, unknown");

    CHECK(kh_device_activate(&d, &d.v[0], err, sizeof err) == 0, "activate cpu: %s", err);
    CHECK(d.v[0].cu_context == NULL, "cpu got a context");
    CHECK(kh_device_make_current(&d, &d.v[0]) == 0, "make_current cpu");
    kh_device_release(&d, &d.v[0]);
    kh_devices_free(&d);
    CHECK(d.v == NULL && d.n == 0, "free did not reset");
    kh_devices_free(&d); /* twice is harmless */
}

typedef void (*state_fn)(int, int *, int *);
static state_fn fake_state(const char *lib) {
    void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL, "fake library %s not loaded by enumerate", lib);
    if (!h) return NULL;
    union { void *p; state_fn f; } u;
    u.p = dlsym(h, "fake_cuda_state");
    dlclose(h); /* drops only the NOLOAD reference */
    return u.f;
}

/* Two fake GPUs: ids, attributes, PCI lookups, contexts retained once and released. */
static void mode_fake(const char *lib, int old_release) {
    setenv("KHOST_LIBCUDA", lib, 1);
    kh_devices d;
    kh_devices_enumerate(&d);
    check_cpu(&d);
    CHECK(d.n == 3, "n=%d note=%s", d.n, d.note);
    CHECK(d.note[0] == 0, "note: %s", d.note);
    CHECK(d.driver_version == 12040, "driver_version=%d", d.driver_version);
    char buf[32];
    kh_devices_driver_string(&d, buf, sizeof buf);
    CHECK(strcmp(buf, "12.4") == 0, "driver string '%s'", buf);
    if (d.n != 3) {
        kh_devices_free(&d);
        return;
    }
    kh_device *a = &d.v[1], *b = &d.v[2];
    CHECK(strcmp(a->id, "cuda:0") == 0 && strcmp(b->id, "cuda:1") == 0, "ids %s %s", a->id, b->id);
    CHECK(a->kind == KH_DEVICE_CUDA && a->ordinal == 0 && b->ordinal == 1, "kind/ordinal");
    CHECK(strcmp(a->name, "Fake GPU A") == 0 && strcmp(b->name, "Fake GPU B") == 0, "names %s %s", a->name, b->name);
    CHECK(strcmp(a->pci_bus_id, "0000:3b:00.0") == 0, "pci %s", a->pci_bus_id);
    CHECK(strcmp(b->pci_bus_id, "0001:af:00.0") == 0, "pci %s", b->pci_bus_id);
    CHECK(a->cc_major == 9 && a->cc_minor == 0 && b->cc_major == 8, "cc %d.%d %d", a->cc_major, a->cc_minor, b->cc_major);
    CHECK(a->multiprocessors == 132 && b->multiprocessors == 108, "sm %d %d", a->multiprocessors, b->multiprocessors);
    CHECK(a->total_mem == 150754820096ll, "mem %lld", (long long)a->total_mem);
    CHECK(a->driver_version == 12040 && d.v[0].driver_version == 0, "per-device driver version");
    CHECK(a->struct_size == sizeof(kh_device) && a->cu_context == NULL, "struct_size/context");

    char err[512];
    CHECK(kh_devices_find(&d, "auto", err, sizeof err) == a, "auto: %s", err);
    CHECK(kh_devices_find(&d, "cuda", err, sizeof err) == a, "cuda: %s", err);
    CHECK(kh_devices_find(&d, "cuda:1", err, sizeof err) == b, "cuda:1: %s", err);
    CHECK(kh_devices_find(&d, "cpu", err, sizeof err) == &d.v[0], "cpu: %s", err);
    CHECK(kh_devices_find(&d, "0001:AF:00.0", err, sizeof err) == b, "upper-case pci: %s", err);
    CHECK(kh_devices_find(&d, "00000001:af:00.0", err, sizeof err) == b, "nvidia-smi pci: %s", err);
    CHECK(kh_devices_find(&d, "3b:00.0", err, sizeof err) == a, "short pci: %s", err);
    CHECK(kh_devices_find(&d, "af:00.0", err, sizeof err) == NULL, "af:00.0 is domain 0, not 1");
    CHECK(kh_devices_find(&d, "0000:3b:00.1", err, sizeof err) == NULL, "function 1 matched");
    CHECK(kh_devices_find(&d, "cuda:2", err, sizeof err) == NULL, "cuda:2 found");
    CHECK(strstr(err, "'cuda:2'") && strstr(err, "2 CUDA device(s) present"), "err: %s", err);

    state_fn st = fake_state(lib);
    int rc = -1, cur = -1;
    CHECK(kh_device_activate(&d, b, err, sizeof err) == 0, "activate cuda:1: %s", err);
    CHECK(b->cu_context != NULL, "no context stored");
    if (st) {
        st(1, &rc, &cur);
        CHECK(rc == 1 && cur == 1, "after activate: retained %d, current %d", rc, cur);
    }
    CHECK(kh_device_activate(&d, b, err, sizeof err) == 0, "activate twice: %s", err);
    if (st) {
        st(1, &rc, &cur);
        CHECK(rc == 1, "activating twice retained %d times", rc);
    }
    CHECK(kh_device_make_current(&d, b) == 0, "make_current");
    int64_t fr = 0, tot = 0;
    CHECK(kh_device_mem_info(b, &fr, &tot) == 0 && fr == 150000000000ll && tot == 150754820096ll,
          "cuMemGetInfo through the driver: free %lld of %lld", (long long)fr, (long long)tot);
    CHECK(kh_device_mem_info(&d.v[0], &fr, &tot) != 0, "no device memory for the cpu");
    kh_device_release(&d, b);
    CHECK(b->cu_context == NULL, "context kept after release");
    CHECK(kh_device_make_current(&d, b) != 0, "make_current after release succeeded");
    if (st) {
        st(1, &rc, &cur);
        CHECK(rc == 0 && cur == -1, "after release (%s): retained %d, current %d",
              old_release ? "cuDevicePrimaryCtxRelease" : "_v2", rc, cur);
    }
    /* kh_devices_free releases what is still retained. */
    CHECK(kh_device_activate(&d, a, err, sizeof err) == 0, "activate cuda:0: %s", err);
    kh_devices_free(&d);
    if (st) {
        st(0, &rc, &cur);
        CHECK(rc == 0, "free left cuda:0 retained %d times", rc);
    }
}

/* A driver without GPUs: cuInit fails; the version is still known. */
static void mode_nodevice(const char *lib) {
    setenv("KHOST_LIBCUDA", lib, 1);
    setenv("FAKE_CUDA_MODE", "nodevice", 1);
    kh_devices d;
    kh_devices_enumerate(&d);
    check_cpu(&d);
    CHECK(d.n == 1, "n=%d", d.n);
    CHECK(strcmp(d.note, "cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected") == 0, "note: %s", d.note);
    CHECK(d.driver_version == 12040, "driver_version=%d", d.driver_version);
    char err[512];
    CHECK(kh_devices_find(&d, "auto", err, sizeof err) == &d.v[0], "auto: %s", err);
    CHECK(kh_devices_find(&d, "cuda:0", err, sizeof err) == NULL, "cuda:0 found");
    CHECK(strstr(err, "0 CUDA device(s)") && strstr(err, "CUDA_ERROR_NO_DEVICE"), "err: %s", err);
    kh_device fake = d.v[0];
    fake.kind = KH_DEVICE_CUDA;
    fake.ordinal = 0;
    CHECK(kh_device_activate(&d, &fake, err, sizeof err) != 0, "activate without a driver succeeded");
    CHECK(strstr(err, "not usable"), "err: %s", err);
    kh_devices_free(&d);
}

/* A library missing a required symbol is reported by name, not used. */
static void mode_broken(const char *lib) {
    setenv("KHOST_LIBCUDA", lib, 1);
    kh_devices d;
    kh_devices_enumerate(&d);
    check_cpu(&d);
    CHECK(d.n == 1, "n=%d", d.n);
    CHECK(strstr(d.note, "missing symbol cuDeviceTotalMem_v2") != NULL, "note: %s", d.note);
    kh_devices_free(&d);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "nolib";
    const char *lib = argc > 2 ? argv[2] : "";
    if (strcmp(mode, "nolib") == 0)
        mode_nolib();
    else if (strcmp(mode, "fake") == 0)
        mode_fake(lib, 0);
    else if (strcmp(mode, "oldrelease") == 0)
        mode_fake(lib, 1);
    else if (strcmp(mode, "nodevice") == 0)
        mode_nodevice(lib);
    else if (strcmp(mode, "broken") == 0)
        mode_broken(lib);
    else
        CHECK(0, "unknown mode %s", mode);
    return kh_test_finish(mode);
}
