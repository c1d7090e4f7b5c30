/* core/modules/host.h — the state every subcommand shares: the registry, the discovered modules, the devices
 * (modules/host.c). */
#ifndef KHOST_CORE_HOST_H
#define KHOST_CORE_HOST_H

#include "devices/devices.h"
#include "modules/loader.h"
#include "modules/registry.h"

typedef struct kh_host {
    char *exe_path;     /* absolute path of this binary (matrix re-executes it) */
    char *conf_path;    /* the registry in use (children get it through KHOST_CONF) */
    kh_registry reg;
    kh_modules mods;
    kh_devices devs;
    int have_devices;
} kh_host;

/* Load the registry and discover modules; devices on demand (kh_host_devices). Returns a KH_EXIT_ code. */
int kh_host_open(kh_host *h, const char *argv0);
kh_devices *kh_host_devices(kh_host *h);
/* The device a one-cell command runs on: asked (--device), else the registry's default_device, else "auto".
 * NULL, with the reason logged, when there is no such device. */
kh_device *kh_host_device(kh_host *h, const char *asked);
void kh_host_close(kh_host *h);
/* The data directory: $KHOST_DATA, else the registry's data_dir. */
const char *kh_host_data_dir(const kh_host *h);
#endif
