/* core/devices/energy.c — NVML and powercap RAPL energy counters (energy.h). NVML is loaded at run time like
 * the CUDA driver, so khost needs no NVIDIA library to build or run. RAPL's energy_uj counts the whole
 * package (every process), in µJ, and wraps at max_energy_range_uj: each read adds the difference to the
 * previous read, modulo that range. */
#define _POSIX_C_SOURCE 200809L
#include "devices/energy.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DOMAINS 16

typedef int (*nvml_init_fn)(void);
typedef int (*nvml_shutdown_fn)(void);
typedef int (*nvml_by_pci_fn)(const char *, void **);
typedef int (*nvml_energy_fn)(void *, unsigned long long *);

typedef struct rapl_domain {
    char path[4096];   /* .../energy_uj */
    double range_uj;   /* max_energy_range_uj + 1 */
    double last_uj;
} rapl_domain;

struct kh_energy {
    char source[KH_ENERGY_SOURCE_LEN];
    char reason[KH_ENERGY_REASON_LEN];
    /* nvml */
    void *lib;
    void *nvml_dev;
    nvml_energy_fn nvml_energy;
    nvml_shutdown_fn nvml_shutdown;
    /* rapl */
    rapl_domain dom[MAX_DOMAINS];
    int n_dom;
    double total_uj; /* accumulated since open */
};

__attribute__((format(printf, 2, 3))) static void unavailable(kh_energy *h, const char *fmt, ...) {
    snprintf(h->source, sizeof h->source, "unavailable");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->reason, sizeof h->reason, fmt, ap);
    va_end(ap);
}

/* one unsigned integer from a sysfs file; -1 with errno's text in why */
static int read_u64(const char *path, double *v, char *why, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(why, n, "%s", strerror(errno));
        return -1;
    }
    unsigned long long x;
    int ok = fscanf(f, "%llu", &x) == 1;
    int rerr = ferror(f) ? errno : 0;
    fclose(f);
    if (!ok) {
        snprintf(why, n, "%s", rerr ? strerror(rerr) : "not a number");
        return -1;
    }
    *v = (double)x;
    return 0;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void open_rapl(kh_energy *h) {
    const char *root = getenv("KHOST_POWERCAP_ROOT");
    if (!root || !*root) root = "/sys/class/powercap";
    DIR *d = opendir(root);
    if (!d) {
        unavailable(h, "no powercap folder %s (%s)", root, strerror(errno));
        return;
    }
    char *names[MAX_DOMAINS];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < MAX_DOMAINS) {
        /* package domains only: intel-rapl:N (sub-domains intel-rapl:N:M are inside the package's count) */
        const char *p = e->d_name;
        if (strncmp(p, "intel-rapl:", 11) || !p[11] || strchr(p + 11, ':')) continue;
        if (!(names[n] = strdup(p))) {
            unavailable(h, "out of memory listing %s", root);
            break;
        }
        n++;
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    if (n == 0 && !h->source[0]) unavailable(h, "no intel-rapl:N package domain in %s%s", root, "");
    char why[256] = "";
    for (int i = 0; i < n && h->source[0] == 0; i++) {
        rapl_domain *r = &h->dom[h->n_dom];
        char p[4096];
        snprintf(p, sizeof p, "%s/%s/max_energy_range_uj", root, names[i]);
        if (read_u64(p, &r->range_uj, why, sizeof why) != 0 || r->range_uj <= 0) {
            unavailable(h, "%s: %s", p, r->range_uj <= 0 && !why[0] ? "zero range" : why);
            break;
        }
        r->range_uj += 1;
        snprintf(r->path, sizeof r->path, "%s/%s/energy_uj", root, names[i]);
        if (read_u64(r->path, &r->last_uj, why, sizeof why) != 0) {
            unavailable(h, "%s: %s (reading RAPL needs read permission, often root)", r->path, why);
            break;
        }
        h->n_dom++;
        size_t len = strlen(h->reason);
        snprintf(h->reason + len, sizeof h->reason - len, "%s%s", len ? "+" : "", names[i]);
    }
    for (int i = 0; i < n; i++) free(names[i]);
    if (!h->source[0]) snprintf(h->source, sizeof h->source, "rapl");
}

static void open_nvml(kh_energy *h, const kh_device *dev) {
    const char *name = getenv("KHOST_LIBNVML");
    if (!name || !*name) name = "libnvidia-ml.so.1";
    h->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h->lib) {
        const char *e = dlerror();
        unavailable(h, "%s not loaded: %s", name, e ? e : "unknown error");
        return;
    }
    nvml_init_fn init = (nvml_init_fn)(uintptr_t)dlsym(h->lib, "nvmlInit_v2");
    nvml_by_pci_fn by_pci = (nvml_by_pci_fn)(uintptr_t)dlsym(h->lib, "nvmlDeviceGetHandleByPciBusId_v2");
    h->nvml_energy = (nvml_energy_fn)(uintptr_t)dlsym(h->lib, "nvmlDeviceGetTotalEnergyConsumption");
    h->nvml_shutdown = (nvml_shutdown_fn)(uintptr_t)dlsym(h->lib, "nvmlShutdown");
    const char *missing = !init ? "nvmlInit_v2" : !by_pci ? "nvmlDeviceGetHandleByPciBusId_v2"
                          : !h->nvml_energy ? "nvmlDeviceGetTotalEnergyConsumption" : NULL;
    if (missing) {
        h->nvml_shutdown = NULL; /* nvmlInit_v2 was not called */
        unavailable(h, "%s lacks %s", name, missing);
        return;
    }
    char code[32];
    int rc = init();
    if (rc != 0) {
        snprintf(code, sizeof code, "%d", rc);
        unavailable(h, "nvmlInit_v2 failed (NVML error %s)%s", code, "");
        h->nvml_shutdown = NULL;
        return;
    }
    if ((rc = by_pci(dev->pci_bus_id, &h->nvml_dev)) != 0) {
        snprintf(code, sizeof code, "%d", rc);
        unavailable(h, "NVML has no device at PCI bus id %s (NVML error %s)", dev->pci_bus_id, code);
        return;
    }
    unsigned long long mj;
    if ((rc = h->nvml_energy(h->nvml_dev, &mj)) != 0) {
        snprintf(code, sizeof code, "%d", rc);
        unavailable(h, "nvmlDeviceGetTotalEnergyConsumption failed on %s (NVML error %s; needs Volta or newer)",
                    dev->pci_bus_id, code);
        return;
    }
    snprintf(h->source, sizeof h->source, "nvml");
    snprintf(h->reason, sizeof h->reason, "%s", dev->pci_bus_id);
}

kh_energy *kh_energy_open(const kh_device *dev) {
    kh_energy *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    if (!dev) unavailable(h, "no device%s%s", "", "");
    else if (dev->kind == KH_DEVICE_CUDA) open_nvml(h, dev);
    else open_rapl(h);
    return h;
}

int kh_energy_read(kh_energy *h, double *joules) {
    *joules = NAN;
    if (!h || strcmp(h->source, "unavailable") == 0) return -1;
    if (strcmp(h->source, "nvml") == 0) {
        unsigned long long mj;
        int rc = h->nvml_energy(h->nvml_dev, &mj);
        if (rc != 0) {
            char code[32];
            snprintf(code, sizeof code, "%d", rc);
            unavailable(h, "nvmlDeviceGetTotalEnergyConsumption failed (NVML error %s)%s", code, "");
            return -1;
        }
        *joules = (double)mj / 1e3;
        return 0;
    }
    char why[256];
    for (int i = 0; i < h->n_dom; i++) {
        rapl_domain *r = &h->dom[i];
        double now;
        if (read_u64(r->path, &now, why, sizeof why) != 0) {
            unavailable(h, "%s: %s", r->path, why);
            return -1;
        }
        double d = now - r->last_uj;
        if (d < 0) d += r->range_uj; /* the counter wrapped since the last read */
        h->total_uj += d;
        r->last_uj = now;
    }
    *joules = h->total_uj / 1e6;
    return 0;
}

void kh_energy_describe(const kh_energy *h, char *source, char *reason) {
    if (source) snprintf(source, KH_ENERGY_SOURCE_LEN, "%s", h ? h->source : "unavailable");
    if (reason) snprintf(reason, KH_ENERGY_REASON_LEN, "%s", h ? h->reason : "out of memory");
}

void kh_energy_close(kh_energy *h) {
    if (!h) return;
    if (h->lib) {
        if (h->nvml_shutdown) h->nvml_shutdown();
        dlclose(h->lib);
    }
    free(h);
}

int kh_energy_epoch(double start_j, double end_j, double seconds, double *joules, double *watts) {
    *joules = *watts = NAN;
    if (!(start_j >= 0) || !(end_j >= start_j) || !(seconds > 0)) return -1;
    *joules = end_j - start_j;
    *watts = *joules / seconds;
    return 0;
}
