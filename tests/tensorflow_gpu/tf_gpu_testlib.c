/* tests/tensorflow_gpu/tf_gpu_testlib.c — see tf_gpu_testlib.h. */
#define _POSIX_C_SOURCE 200809L
#include "tf_gpu_testlib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

void tfg_load_module(kb_backend *b) {
    memset(b, 0, sizeof *b);
    const char *build = getenv("KHOST_BUILD");
    char path[4096];
    snprintf(path, sizeof path, "%s/plugins/" TFG_PLUGIN ".so", build && *build ? build : ".");
    b->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!b->dl) {
        char why[4400];
        snprintf(why, sizeof why, "cannot load %s: %s", path, dlerror());
        kh_test_skip(why);
    }
    kh_entry_fn entry;
    *(void **)(&entry) = dlsym(b->dl, KH_ENTRY_NAME);
    if (!entry) kh_test_skip("no entry point in " TFG_PLUGIN ".so");
    b->desc = entry(kb_host());
    b->api = b->desc ? b->desc->api : NULL;
    if (!b->api) kh_test_skip(TFG_PLUGIN " entry returned no API");
}

kh_bsession *tfg_open_cpu(kb_backend *b, int threads) {
    kh_device dev;
    memset(&dev, 0, sizeof dev);
    dev.struct_size = sizeof dev;
    dev.kind = KH_DEVICE_CPU;
    dev.ordinal = -1;
    snprintf(dev.id, sizeof dev.id, "cpu");
    snprintf(dev.name, sizeof dev.name, "test cpu");
    dev.threads = threads;
    char err[512];
    kh_bsession *s = NULL;
    if (b->api->open(kb_host(), &dev, &s, err, sizeof err) != KH_OK) {
        fprintf(stderr, "open cpu: %s\n", err);
        return NULL;
    }
    return s;
}

kh_bsession *tfg_open_cuda(kb_backend *b) {
    kh_caps c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    if (b->api->get_caps(KH_DEVICE_CUDA, &c) != KH_OK || !c.available) {
        char why[300];
        snprintf(why, sizeof why, "no CUDA device usable by " TFG_PLUGIN ": %s", c.note);
        kh_test_skip(why);
    }
    const char *ord = getenv("TF_TEST_DEVICE");
    kh_device dev;
    memset(&dev, 0, sizeof dev);
    dev.struct_size = sizeof dev;
    dev.kind = KH_DEVICE_CUDA;
    dev.ordinal = ord && *ord ? atoi(ord) : 0;
    snprintf(dev.id, sizeof dev.id, "cuda:%d", dev.ordinal);
    snprintf(dev.name, sizeof dev.name, "test gpu");
    dev.threads = 1;
    char err[512];
    kh_bsession *s = NULL;
    if (b->api->open(kb_host(), &dev, &s, err, sizeof err) != KH_OK) {
        fprintf(stderr, "FAIL: caps say CUDA is available (%s) but open failed: %s\n", c.note, err);
        exit(1);
    }
    char env[512];
    if (b->api->environment(s, env, sizeof env) == KH_OK) printf(TFG_PLUGIN " on %s: %s\n", dev.id, env);
    return s;
}

void tfg_unload(kb_backend *b) {
    if (b->dl) dlclose(b->dl);
    memset(b, 0, sizeof *b);
}
