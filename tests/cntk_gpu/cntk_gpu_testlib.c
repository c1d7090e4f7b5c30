/* tests/cntk_gpu/cntk_gpu_testlib.c — see cntk_gpu_testlib.h. */
#define _POSIX_C_SOURCE 200809L
#include "cntk_gpu_testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

void ctg_open_cuda(kb_backend *b) {
    kh_caps c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    if (b->api->get_caps(KH_DEVICE_CUDA, &c) != KH_OK || !c.available) {
        char why[300];
        snprintf(why, sizeof why, "no CUDA device usable by cntk: %s", c.note);
        kh_test_skip(why);
    }
    const char *ord = getenv("CNTK_TEST_DEVICE");
    kh_device dev;
    memset(&dev, 0, sizeof dev);
    dev.struct_size = sizeof dev;
    dev.kind = KH_DEVICE_CUDA;
    dev.ordinal = ord && *ord ? atoi(ord) : 0;
    snprintf(dev.id, sizeof dev.id, "cuda:%d", dev.ordinal);
    snprintf(dev.name, sizeof dev.name, "test gpu");
    dev.threads = 1;
    char err[512];
    if (b->api->open(kb_host(), &dev, &b->s, err, sizeof err) != KH_OK) {
        fprintf(stderr, "FAIL: caps say CUDA is available (%s) but open failed: %s\n", c.note, err);
        exit(1);
    }
    char env[512];
    if (b->api->environment(b->s, env, sizeof env) == KH_OK) printf("cntk on %s: %s\n", dev.id, env);
}
