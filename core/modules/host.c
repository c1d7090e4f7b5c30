/* core/modules/host.c — the state every subcommand shares: registry, discovered modules, devices. */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "modules/host.h"

#include "base/exitcodes.h"
#include "base/log.h"
#include "modules/host_api.h"

static char *self_exe(const char *argv0) {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) {
        buf[n] = 0;
        return strdup(buf);
    }
    char *r = realpath(argv0, NULL);
    return r ? r : strdup(argv0);
}

int kh_host_open(kh_host *h, const char *argv0) {
    memset(h, 0, sizeof *h);
    char err[1024];
    h->exe_path = self_exe(argv0);
    if (!h->exe_path) {
        kh_logf(KH_LOG_ERROR, "out of memory");
        return KH_EXIT_MODULE;
    }
    h->conf_path = kh_registry_locate(h->exe_path, err, sizeof err);
    if (!h->conf_path) {
        kh_logf(KH_LOG_ERROR, "%s", err);
        return KH_EXIT_MODULE;
    }
    if (kh_registry_load(h->conf_path, &h->reg, err, sizeof err) != 0) {
        kh_logf(KH_LOG_ERROR, "%s", err);
        return KH_EXIT_MODULE;
    }
    for (int i = 0; i < h->reg.n_warnings; i++) kh_logf(KH_LOG_WARN, "%s", h->reg.warnings[i]);
    kh_host_api_bind(&h->reg);
    kh_modules_index(&h->reg, kh_host_api_get(), &h->mods); /* opened when a command names them */
    return KH_EXIT_OK;
}

kh_devices *kh_host_devices(kh_host *h) {
    if (!h->have_devices) {
        kh_devices_enumerate(&h->devs);
        h->have_devices = 1;
    }
    return &h->devs;
}

kh_device *kh_host_device(kh_host *h, const char *asked) {
    const char *spec = asked ? asked : h->reg.default_device;
    char err[1024];
    kh_device *dev = kh_devices_find(kh_host_devices(h), spec ? spec : "auto", err, sizeof err);
    if (!dev) kh_logf(KH_LOG_ERROR, "%s", err);
    return dev;
}

const char *kh_host_data_dir(const kh_host *h) {
    const char *env = getenv("KHOST_DATA");
    return env && *env ? env : h->reg.data_dir;
}

void kh_host_close(kh_host *h) {
    kh_modules_free(&h->mods);
    if (h->have_devices) kh_devices_free(&h->devs);
    kh_host_api_bind(NULL);
    kh_registry_free(&h->reg);
    free(h->conf_path);
    free(h->exe_path);
    memset(h, 0, sizeof *h);
}
