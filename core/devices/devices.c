/* core/devices/devices.c — the cpu plus every CUDA device the driver reports, through a dlopen'ed libcuda.
 *
 * Nothing here is fatal: a missing library, a missing symbol or a failing cuInit leaves the cpu as the only
 * device and says why in kh_devices.note. The driver's entry points are the kit's one table
 * (khost/kit/cuda_driver.h), loaded on the first kh_devices_enumerate and never dlclose'd, because libcuda
 * keeps threads and atexit handlers that must not outlive its code. $KHOST_LIBCUDA is therefore read once per
 * process.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "devices/devices.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "khost/kit/cuda_driver.h"

// --- the driver ----------------------------------------------------------------------------------------
/* The driver table is the kit's (khost/kit/cuda_driver.h), the one the backends' GPU halves use: loaded on the
 * first enumeration, once per process. The host needs only its host entry points (kh_cu_load_host). */
static int cu_ready(void) { return kh_cu_load_host(NULL, 0); }

/* Truncating copy: snprintf("%s") of a larger buffer trips -Wformat-truncation on purpose-sized fields. */
static void copy_str(char *dst, size_t n, const char *src) {
    if (!n) return;
    size_t len = strlen(src);
    if (len >= n) len = n - 1;
    memcpy(dst, src, len);
    dst[len] = 0;
}

// --- the cpu --------------------------------------------------------------------------------------------
static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    return s;
}

/* The CPU model from /proc/cpuinfo: "model name" on x86, other keys on ARM/POWER; else the machine name. */
static void cpu_model(char *out, size_t n) {
    static const char *const keys[] = {"model name", "cpu model", "Hardware", "Processor", "cpu"};
    char found[5][128] = {{0}};
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char *line = NULL;
        size_t cap = 0;
        while (getline(&line, &cap, f) > 0) {
            char *colon = strchr(line, ':');
            if (!colon) continue;
            *colon = 0;
            char *key = trim(line), *val = trim(colon + 1);
            for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
                if (!found[k][0] && *val && strcmp(key, keys[k]) == 0) snprintf(found[k], sizeof found[k], "%s", val);
        }
        free(line);
        fclose(f);
    }
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        if (found[k][0]) {
            copy_str(out, n, found[k]);
            return;
        }
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(out, n, "%s cpu", u.machine);
    else
        snprintf(out, n, "cpu");
}

/* Threads this process may run on: the affinity mask honours taskset and cpusets, unlike the online count. */
static int cpu_threads(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int c = CPU_COUNT(&set);
        if (c > 0) return c;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

// --- enumeration ----------------------------------------------------------------------------------------
/* Append "; what" to the note (the first part without separator). */
static void note_add(kh_devices *d, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void note_add(kh_devices *d, const char *fmt, ...) {
    size_t len = strlen(d->note);
    if (len + 3 >= sizeof d->note) return;
    if (len) {
        memcpy(d->note + len, "; ", 3);
        len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->note + len, sizeof d->note - len, fmt, ap);
    va_end(ap);
}

static void cuda_device_fill(kh_devices *d, kh_device *dev, int ordinal) {
    char e[160];
    kh_CUdevice cd;
    kh_CUresult r = kh_cu.DeviceGet(&cd, ordinal);
    dev->struct_size = sizeof *dev;
    dev->kind = KH_DEVICE_CUDA;
    dev->ordinal = ordinal;
    char id[32];
    snprintf(id, sizeof id, "cuda:%d", ordinal);
    copy_str(dev->id, sizeof dev->id, id);
    dev->driver_version = kh_cu.version;
    dev->threads = cpu_threads(); /* host threads the backend may use for its CPU-side work */
    if (r != KH_CUDA_SUCCESS) {
        kh_cu_result_text(r, e, sizeof e);
        note_add(d, "cuda:%d: cuDeviceGet: %s", ordinal, e);
        snprintf(dev->name, sizeof dev->name, "CUDA device %d", ordinal);
        return;
    }
    if ((r = kh_cu.DeviceGetName(dev->name, (int)sizeof dev->name, cd)) != KH_CUDA_SUCCESS) {
        kh_cu_result_text(r, e, sizeof e);
        note_add(d, "cuda:%d: cuDeviceGetName: %s", ordinal, e);
        snprintf(dev->name, sizeof dev->name, "CUDA device %d", ordinal);
    }
    dev->name[sizeof dev->name - 1] = 0;

    static const struct { int attr; const char *what; } attrs[] = {
        {KH_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability major"},
        {KH_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability minor"},
        {KH_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count"},
        {KH_CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, "PCI domain"},
        {KH_CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, "PCI bus"},
        {KH_CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, "PCI device"},
    };
    int val[6] = {0};
    int pci_ok = 1;
    for (int i = 0; i < 6; i++) {
        if ((r = kh_cu.DeviceGetAttribute(&val[i], attrs[i].attr, cd)) != KH_CUDA_SUCCESS) {
            kh_cu_result_text(r, e, sizeof e);
            note_add(d, "cuda:%d: cuDeviceGetAttribute(%s): %s", ordinal, attrs[i].what, e);
            val[i] = 0;
            if (i >= 3) pci_ok = 0;
        }
    }
    dev->cc_major = val[0];
    dev->cc_minor = val[1];
    dev->multiprocessors = val[2];
    /* The format of cudaDeviceGetPCIBusId and /sys/bus/pci: domain:bus:device.function, function 0. */
    if (pci_ok)
        snprintf(dev->pci_bus_id, sizeof dev->pci_bus_id, "%04x:%02x:%02x.0", (unsigned)val[3] & 0xffffffffu,
                 (unsigned)val[4] & 0xffu, (unsigned)val[5] & 0x1fu);
    size_t mem = 0;
    if ((r = kh_cu.DeviceTotalMem(&mem, cd)) != KH_CUDA_SUCCESS) {
        kh_cu_result_text(r, e, sizeof e);
        note_add(d, "cuda:%d: cuDeviceTotalMem: %s", ordinal, e);
        mem = 0;
    }
    dev->total_mem = (int64_t)mem;
}

void kh_devices_enumerate(kh_devices *out) {
    memset(out, 0, sizeof *out);
    int count = 0;
    if (cu_ready()) {
        char e[160];
        kh_CUresult r = kh_cu.DeviceGetCount(&count);
        if (r != KH_CUDA_SUCCESS) {
            kh_cu_result_text(r, e, sizeof e);
            note_add(out, "cuDeviceGetCount: %s", e);
            count = 0;
        } else if (count == 0) {
            note_add(out, "the driver reports 0 CUDA devices");
        } else if (count < 0 || count > 4096) {
            note_add(out, "cuDeviceGetCount returned %d", count);
            count = 0;
        }
    } else {
        note_add(out, "%s", kh_cu.why);
    }
    out->driver_version = kh_cu.version;

    out->v = calloc((size_t)count + 1, sizeof *out->v);
    if (!out->v && count) {
        note_add(out, "out of memory for %d CUDA device(s)", count);
        count = 0;
        out->v = calloc(1, sizeof *out->v);
    }
    if (!out->v) { /* not even the cpu: callers see n == 0 and kh_devices_find says why */
        note_add(out, "out of memory");
        return;
    }
    kh_device *c = &out->v[0];
    c->struct_size = sizeof *c;
    c->kind = KH_DEVICE_CPU;
    c->ordinal = -1;
    snprintf(c->id, sizeof c->id, "cpu");
    cpu_model(c->name, sizeof c->name);
    c->threads = cpu_threads();
    out->n = 1;
    for (int i = 0; i < count; i++) cuda_device_fill(out, &out->v[out->n++], i);
}

void kh_devices_free(kh_devices *d) {
    if (!d) return;
    for (int i = 0; i < d->n; i++)
        if (d->v[i].cu_context) kh_device_release(d, &d->v[i]);
    free(d->v);
    memset(d, 0, sizeof *d);
}

// --- lookup ---------------------------------------------------------------------------------------------
/* "[domain:]bus:device[.function]" in hex, the forms of nvidia-smi ("00000000:3B:00.0") and lspci. */
static int parse_pci(const char *s, unsigned *dom, unsigned *bus, unsigned *dev, unsigned *fn) {
    unsigned a, b, c, f = 0;
    int used = 0;
    if (strchr(s, ' ') || strchr(s, '+') || strchr(s, '-')) return -1; /* sscanf %x would skip/accept these */
    if (sscanf(s, "%x:%x:%x%n", &a, &b, &c, &used) == 3) {
        *dom = a; *bus = b; *dev = c;
    } else if (sscanf(s, "%x:%x%n", &b, &c, &used) == 2) {
        *dom = 0; *bus = b; *dev = c;
    } else {
        return -1;
    }
    s += used;
    if (*s == '.') {
        int used2 = 0;
        if (sscanf(s + 1, "%x%n", &f, &used2) != 1) return -1;
        s += 1 + used2;
    }
    if (*s) return -1;
    *fn = f;
    return 0;
}

static int count_cuda(const kh_devices *d) {
    int n = 0;
    for (int i = 0; i < d->n; i++) n += d->v[i].kind == KH_DEVICE_CUDA;
    return n;
}

static kh_device *first_cuda(kh_devices *d) {
    for (int i = 0; i < d->n; i++)
        if (d->v[i].kind == KH_DEVICE_CUDA) return &d->v[i];
    return NULL;
}

/* "unknown device 'cuda:3': 1 CUDA device(s) present" plus the note when there are none. */
static kh_device *not_found(const kh_devices *d, const char *spec, const char *hint, char *err, size_t errlen) {
    int n = count_cuda(d);
    if (n == 0 && d->note[0])
        snprintf(err, errlen, "unknown device '%s'%s: 0 CUDA device(s) present (%s)", spec, hint, d->note);
    else
        snprintf(err, errlen, "unknown device '%s'%s: %d CUDA device(s) present", spec, hint, n);
    return NULL;
}

kh_device *kh_devices_find(kh_devices *d, const char *spec, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    char dummy[8];
    if (!err || !errlen) { err = dummy; errlen = sizeof dummy; }
    if (!spec || !*spec) spec = "auto";
    if (d->n < 1) {
        snprintf(err, errlen, "no devices: %s", d->note[0] ? d->note : "enumeration failed");
        return NULL;
    }
    if (strcasecmp(spec, "cpu") == 0) return &d->v[0];
    if (strcasecmp(spec, "auto") == 0 || strcasecmp(spec, "default") == 0) {
        kh_device *g = first_cuda(d);
        return g ? g : &d->v[0];
    }
    if (strcasecmp(spec, "cuda") == 0 || strcasecmp(spec, "gpu") == 0) {
        kh_device *g = first_cuda(d);
        return g ? g : not_found(d, spec, "", err, errlen);
    }
    if (strncasecmp(spec, "cuda:", 5) == 0) {
        const char *num = spec + 5;
        char *end = NULL;
        errno = 0;
        long ord = strtol(num, &end, 10);
        if (!isdigit((unsigned char)*num) || *end || errno || ord > 1000000)
            return not_found(d, spec, " (expected cuda:N with N a CUDA ordinal)", err, errlen);
        for (int i = 0; i < d->n; i++)
            if (d->v[i].kind == KH_DEVICE_CUDA && d->v[i].ordinal == ord) return &d->v[i];
        return not_found(d, spec, "", err, errlen);
    }
    unsigned dom, bus, dev, fn;
    if (parse_pci(spec, &dom, &bus, &dev, &fn) == 0) {
        for (int i = 0; i < d->n; i++) {
            unsigned dd, db, dv, df;
            if (d->v[i].kind == KH_DEVICE_CUDA && d->v[i].pci_bus_id[0] &&
                parse_pci(d->v[i].pci_bus_id, &dd, &db, &dv, &df) == 0 && dd == dom && db == bus && dv == dev &&
                df == fn)
                return &d->v[i];
        }
        return not_found(d, spec, " (no CUDA device has this PCI bus id)", err, errlen);
    }
    return not_found(d, spec, " (expected cpu, cuda, cuda:N, auto or a PCI bus id like 0000:3b:00.0)", err, errlen);
}

// --- contexts -------------------------------------------------------------------------------------------
int kh_device_activate(kh_devices *d, kh_device *dev, char *err, size_t errlen) {
    char e[160];
    if (err && errlen) err[0] = 0;
    if (!dev) {
        if (err) snprintf(err, errlen, "no device to activate");
        return -1;
    }
    if (dev->kind == KH_DEVICE_CPU) return 0;
    if (!cu_ready()) {
        if (err) snprintf(err, errlen, "%s: the CUDA driver is not usable: %s", dev->id, kh_cu.why);
        return -1;
    }
    if (dev->cu_context) { /* already retained: activating twice must not retain twice */
        kh_CUresult r = kh_cu.CtxSetCurrent((kh_CUcontext)dev->cu_context);
        if (r == KH_CUDA_SUCCESS) return 0;
        kh_cu_result_text(r, e, sizeof e);
        if (err) snprintf(err, errlen, "%s: cuCtxSetCurrent: %s", dev->id, e);
        return -1;
    }
    kh_CUdevice cd;
    kh_CUresult r = kh_cu.DeviceGet(&cd, dev->ordinal);
    if (r != KH_CUDA_SUCCESS) {
        kh_cu_result_text(r, e, sizeof e);
        if (err) snprintf(err, errlen, "%s: cuDeviceGet: %s", dev->id, e);
        return -1;
    }
    kh_CUcontext ctx = NULL;
    r = kh_cu.DevicePrimaryCtxRetain(&ctx, cd);
    if (r != KH_CUDA_SUCCESS) {
        kh_cu_result_text(r, e, sizeof e);
        if (err) snprintf(err, errlen, "%s (%s): cuDevicePrimaryCtxRetain: %s", dev->id, dev->name, e);
        return -1;
    }
    r = kh_cu.CtxSetCurrent(ctx);
    if (r != KH_CUDA_SUCCESS) {
        kh_cu_result_text(r, e, sizeof e);
        if (err) snprintf(err, errlen, "%s (%s): cuCtxSetCurrent: %s", dev->id, dev->name, e);
        kh_cu.DevicePrimaryCtxRelease(cd);
        return -1;
    }
    dev->cu_context = ctx;
    (void)d;
    return 0;
}

int kh_device_make_current(kh_devices *d, const kh_device *dev) {
    (void)d;
    if (!dev) return -1;
    if (dev->kind == KH_DEVICE_CPU) return 0;
    if (!cu_ready() || !dev->cu_context) return -1;
    return kh_cu.CtxSetCurrent((kh_CUcontext)dev->cu_context) == KH_CUDA_SUCCESS ? 0 : -1;
}

int kh_device_mem_info(const kh_device *dev, int64_t *free_bytes, int64_t *total_bytes) {
    size_t f = 0, t = 0;
    if (!dev || dev->kind != KH_DEVICE_CUDA || !cu_ready() || !kh_cu.MemGetInfo || !dev->cu_context) return -1;
    if (kh_cu.MemGetInfo(&f, &t) != KH_CUDA_SUCCESS) return -1;
    *free_bytes = (int64_t)f, *total_bytes = (int64_t)t;
    return 0;
}

void kh_device_release(kh_devices *d, kh_device *dev) {
    (void)d;
    if (!dev || dev->kind == KH_DEVICE_CPU || !dev->cu_context || !cu_ready()) return;
    kh_CUdevice cd;
    /* Unbind from this thread first so no later driver call on it sees a context being torn down. */
    kh_cu.CtxSetCurrent(NULL);
    if (kh_cu.DeviceGet(&cd, dev->ordinal) == KH_CUDA_SUCCESS) kh_cu.DevicePrimaryCtxRelease(cd);
    dev->cu_context = NULL;
}

void kh_devices_driver_string(const kh_devices *d, char *buf, size_t n) {
    if (!n) return;
    if (!d || d->driver_version <= 0)
        buf[0] = 0;
    else
        snprintf(buf, n, "%d.%d", d->driver_version / 1000, (d->driver_version % 1000) / 10);
}
