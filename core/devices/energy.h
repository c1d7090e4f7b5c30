/* core/devices/energy.h — an energy counter for one device: NVML's total energy on CUDA devices, the kernel's
 * powercap RAPL package counters on the cpu, or "unavailable" with the reason. The cell reads it around each
 * timed epoch (after compile and warm-up) and records joules and average watts per epoch. */
#ifndef KHOST_CORE_DEVICES_ENERGY_H
#define KHOST_CORE_DEVICES_ENERGY_H

#include "khost/backend.h"

#define KH_ENERGY_SOURCE_LEN 16
#define KH_ENERGY_REASON_LEN 256

typedef struct kh_energy kh_energy;

/* Never NULL except when out of memory: a counter that cannot be read is an "unavailable" handle that says why.
 * CUDA: dlopen $KHOST_LIBNVML or libnvidia-ml.so.1, the device by its PCI bus id. cpu: every intel-rapl:N
 * package domain under $KHOST_POWERCAP_ROOT (default /sys/class/powercap), summed. */
kh_energy *kh_energy_open(const kh_device *dev);
/* Joules since an arbitrary origin, monotonic (RAPL wrap-around is undone between reads; call at least once
 * per wrap period, minutes at full load). -1 when unavailable or the read failed; the handle then says why
 * and stays unavailable. */
int kh_energy_read(kh_energy *h, double *joules);
/* source: "nvml", "rapl" or "unavailable" (KH_ENERGY_SOURCE_LEN); reason: why unavailable, or the domains
 * read ("intel-rapl:0+intel-rapl:1", the NVML device) (KH_ENERGY_REASON_LEN). Either may be NULL. */
void kh_energy_describe(const kh_energy *h, char *source, char *reason);
void kh_energy_close(kh_energy *h);

/* One epoch from two reads: joules = end - start, watts = joules / seconds. -1 (outputs NaN) when either read
 * is missing (negative), the counter went backwards, or seconds <= 0. */
int kh_energy_epoch(double start_j, double end_j, double seconds, double *joules, double *watts);

/* The record's `energy` member: {"source", "reason", "domain", "epoch_j": [...], "epoch_w": [...]} —
 * "reason" empty and "domain" the counter's domains when available, "domain" empty and "reason" why not
 * otherwise; a missing epoch figure (NaN) is null. n epochs of epoch_j and epoch_w (either may be NULL when
 * n is 0). A cJSON object the caller adds to the record (cJSON_AddItemToObject), NULL when out of memory. */
struct cJSON;
struct cJSON *kh_energy_json(const kh_energy *h, const double *epoch_j, const double *epoch_w, int n);

#endif
