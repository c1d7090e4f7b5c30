/* tests/core_energy/fake_libnvml.c — the four NVML entry points core/devices/energy.c uses, with a scripted
 * energy counter: one device at PCI bus id 0000:3b:00.0 whose total energy starts at 5000 mJ and grows by
 * 250 mJ per read. FAKE_NVML_INIT_FAILS=1 makes nvmlInit_v2 fail (NVML_ERROR_DRIVER_NOT_LOADED, 9). */
#include <stdlib.h>
#include <string.h>

int nvmlInit_v2(void);
int nvmlShutdown(void);
int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **dev);
int nvmlDeviceGetTotalEnergyConsumption(void *dev, unsigned long long *mj);

static int fake_dev, inited;
static unsigned long long reads;

int nvmlInit_v2(void) {
    const char *f = getenv("FAKE_NVML_INIT_FAILS");
    if (f && *f == '1') return 9;
    inited = 1;
    return 0;
}

int nvmlShutdown(void) {
    inited = 0;
    return 0;
}

int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **dev) {
    if (!inited) return 1;                                /* NVML_ERROR_UNINITIALIZED */
    if (!bus || strcmp(bus, "0000:3b:00.0")) return 6;   /* NVML_ERROR_NOT_FOUND */
    *dev = &fake_dev;
    return 0;
}

int nvmlDeviceGetTotalEnergyConsumption(void *dev, unsigned long long *mj) {
    if (!inited || dev != &fake_dev) return 1;
    *mj = 5000 + 250 * reads++;
    return 0;
}
