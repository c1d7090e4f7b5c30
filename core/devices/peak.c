/* core/devices/peak.c — peak FLOP rate and bandwidth per device (see peak.h).
 *
 * cpu: OpenBLAS's sgemm (opened at run time: the core links no BLAS) on 1024x1024 matrices with one thread
 * per online CPU, best of a few runs, and a 64 MiB memcpy (read + write bytes counted), best of 40; measured in
 * a forked child so BLAS threads and their settings never reach the backends. The result is cached per CPU
 * model and thread count in $XDG_CACHE_HOME/khost/peak-cpu.txt (~/.cache when unset), so it is measured once
 * per machine. CUDA: published FP32 peak and memory bandwidth of the devices in the table below. */
#define _GNU_SOURCE
#include "devices/peak.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/sysinfo.h"
#include "base/files.h"
#include "khost/kit/clock.h"
#include "khost/kit/pathtrust.h"
#include "base/log.h"

// --- CUDA: published figures ---------------------------------------------------------------------------
typedef struct known { const char *name_part; double tflops, tbps; } known;
static const known cuda_known[] = { /* FP32 non-tensor peak, memory bandwidth (vendor data sheets) */
    {"H200", 67.0, 4.8},    {"H100 PCIe", 51.2, 2.0}, {"H100", 67.0, 3.35}, {"A100", 19.5, 2.0},
    {"V100", 15.7, 0.9},    {"1080 Ti", 11.3, 0.484}, {"TITAN X", 11.0, 0.48}, {"Tesla M60", 4.8, 0.32},
    {"Tesla K80", 4.4, 0.48}, {"L40S", 91.6, 0.864}, {"A10", 31.2, 0.6}, {"T4", 8.1, 0.32},
};

// --- cpu: measurement ------------------------------------------------------------------------------------
typedef void (*sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                         const float *b, int ldb, float beta, float *c, int ldc);

static double measure_sgemm(void) {
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libopenblas.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) return 0;
    sgemm_fn f;
    void *sym = dlsym(h, "cblas_sgemm");
    memcpy(&f, &sym, sizeof f);
    if (!sym) return 0;
    /* every core: the calibration runs in a cell after its backend loaded, and a backend that keeps OpenBLAS
     * to one thread (cntk, tensorflow) has set that in the library this child shares with it; one core's peak
     * gave a tensorflow x imdb_fasttext cell half the machine's figure and every later record a roofline
     * fraction above 100 % */
    void *set = dlsym(h, "openblas_set_num_threads");
    if (set) {
        void (*set_threads)(int);
        memcpy(&set_threads, &set, sizeof set_threads);
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        set_threads(cpus < 1 ? 1 : (int)cpus);
    }
    const int n = 1024;
    float *a = malloc((size_t)n * n * sizeof *a), *b = malloc((size_t)n * n * sizeof *b),
          *c = malloc((size_t)n * n * sizeof *c);
    double best = 0;
    if (a && b && c) {
        for (size_t i = 0; i < (size_t)n * n; i++) a[i] = b[i] = (float)(i % 7) * 0.1f, c[i] = 0;
        for (int rep = 0; rep < 6; rep++) {
            double t0 = kh_now();
            f(101 /* row major */, 111, 111, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
            double dt = kh_now() - t0, g = 2.0 * n * n * (double)n / dt / 1e9;
            if (rep > 0 && g > best) best = g; /* the first run pays thread start-up */
        }
    }
    free(a), free(b), free(c);
    return best;
}

typedef struct copy_part {
    char *dst;
    const char *src;
    size_t n;
} copy_part;

static void *copy_thread(void *v) {
    copy_part *c = v;
    memcpy(c->dst, c->src, c->n);
    return NULL;
}

/* memcpy bandwidth with every online CPU copying its share at once: a backend's streaming passes (an
 * optimizer over a large table) run on all its threads, and one thread alone reaches only part of the
 * machine's bandwidth. */
static double measure_copy(void) {
    const size_t n = (size_t)64 << 20;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int t = cpus < 1 ? 1 : cpus > 64 ? 64 : (int)cpus;
    char *a = malloc(n), *b = malloc(n);
    double best = 0;
    if (a && b) {
        memset(a, 1, n), memset(b, 2, n);
        /* best of many: each copy takes milliseconds, and on a shared machine all of a handful can land in
         * another tenant's burst, giving a peak the backends then beat (bench/cpu/README.md, steady set) */
        for (int rep = 0; rep < 40; rep++) {
            copy_part part[64];
            pthread_t th[64];
            size_t chunk = n / (size_t)t;
            double t0 = kh_now();
            int started[64] = {0};
            for (int k = 0; k < t; k++) {
                size_t off = (size_t)k * chunk, len = k == t - 1 ? n - off : chunk;
                part[k] = (copy_part){(rep % 2 ? a : b) + off, (rep % 2 ? b : a) + off, len};
                if (k > 0) started[k] = pthread_create(&th[k], NULL, copy_thread, &part[k]) == 0;
            }
            copy_thread(&part[0]);
            for (int k = 1; k < t; k++) {
                if (started[k]) pthread_join(th[k], NULL);
                else copy_thread(&part[k]); /* a thread that could not start: copied here */
            }
            double dt = kh_now() - t0, g = 2.0 * (double)n / dt / 1e9;
            if (g > best) best = g;
        }
    }
    free(a), free(b);
    return best;
}

/* Both measurements in a child: 0 with the figures, -1 when the child failed. */
static int measure_in_child(double *gflops, double *gbps) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]), close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        close(fd[0]);
        double v[2] = {measure_sgemm(), measure_copy()};
        ssize_t w = write(fd[1], v, sizeof v);
        _exit(w == (ssize_t)sizeof v ? 0 : 1);
    }
    close(fd[1]);
    double v[2];
    ssize_t got = 0;
    while (got < (ssize_t)sizeof v) {
        ssize_t r = read(fd[0], (char *)v + got, sizeof v - (size_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += r;
    }
    close(fd[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (got != (ssize_t)sizeof v) return -1;
    *gflops = v[0], *gbps = v[1];
    return 0;
}

static void cache_path(char *buf, size_t n) {
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (x && *x == '/') snprintf(buf, n, "%s/khost", x);
    else snprintf(buf, n, "%s/.cache/khost", home && *home ? home : "/tmp");
}

/* Cache lines: "<key>\t<gflops>\t<gbps>\t<when>"; key = cpu model + threads. */
static int cache_read(const char *file, const char *key, kh_peak *out, char *when, size_t wn) {
    FILE *f = fopen(file, "r");
    if (!f) return -1;
    char line[1024];
    int found = -1;
    while (fgets(line, sizeof line, f)) {
        char *t1 = strchr(line, '\t');
        if (!t1) continue;
        *t1 = 0;
        if (strcmp(line, key) != 0) continue;
        double g, b;
        char w[64];
        if (sscanf(t1 + 1, "%lf\t%lf\t%63s", &g, &b, w) == 3 && g >= 0 && b >= 0) {
            out->gflops = g, out->gbps = b;
            snprintf(when, wn, "%s", w);
            found = 0;
        }
    }
    fclose(f);
    return found;
}

static int cpu_peak(const kh_device *dev, kh_peak *out) {
    char dir[3000], file[3100], model[256], key[400], when[64];
    cache_path(dir, sizeof dir);
    snprintf(file, sizeof file, "%s/peak-cpu.txt", dir);
    kh_env_cpu_model(model, sizeof model);
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    /* the kernels OpenBLAS runs are part of the machine's peak (core/devices/blas_tune.c chooses them): a change of
     * kernels is a new calibration, not a stale number */
    const char *core = getenv("OPENBLAS_CORETYPE");
    snprintf(key, sizeof key, "%s x%ld openblas=%s", model, threads, core && *core ? core : "default");
    for (char *p = key; *p; p++)
        if (*p == '\t' || *p == '\n') *p = ' ';
    (void)dev;
    char terr[3300];
    int trusted = kh_path_trusted(dir, terr, sizeof terr) == 0;
    static int warned;
    if (!trusted && !warned) {
        warned = 1;
        kh_logf(KH_LOG_WARN, "CPU peak: not cached: %s (khost/kit/pathtrust.h)", terr);
    }
    if (trusted && cache_read(file, key, out, when, sizeof when) == 0) {
        snprintf(out->source, sizeof out->source, "calibrated %s (sgemm 1024^3, memcpy 64 MiB), cached in %s", when,
                 file);
        return out->gflops > 0 ? 0 : -1;
    }
    double g = 0, b = 0;
    if (measure_in_child(&g, &b) != 0) {
        snprintf(out->source, sizeof out->source, "unknown: the calibration process failed");
        return -1;
    }
    out->gflops = g, out->gbps = b;
    kh_env_now_iso(when, sizeof when);
    if (g <= 0) {
        snprintf(out->source, sizeof out->source, "unknown: no OpenBLAS (libopenblas.so.0) to time sgemm with");
        return -1;
    }
    snprintf(out->source, sizeof out->source, "calibrated %s (sgemm 1024^3, memcpy 64 MiB), cached in %s", when,
             file);
    /* a private cache: other users' files are not trusted, and a failed write only costs a re-measurement */
    if (!trusted) {
        snprintf(out->source + strlen(out->source), sizeof out->source - strlen(out->source), " (not saved)");
    } else if (kh_mkdirs(dir) == 0) {
        chmod(dir, 0700);
        char why[128];
        int fd = kh_create_regular(file, O_WRONLY | O_APPEND | O_CLOEXEC, 0600, why, sizeof why);
        FILE *f = fd >= 0 ? fdopen(fd, "a") : NULL;
        if (!f && fd >= 0) close(fd);
        if (f) {
            fprintf(f, "%s\t%.3f\t%.3f\t%s\n", key, g, b, when);
            fclose(f);
        }
    }
    return 0;
}

int kh_peak_get(const kh_device *dev, kh_peak *out) {
    memset(out, 0, sizeof *out);
    if (dev->kind == KH_DEVICE_CPU) return cpu_peak(dev, out);
    for (size_t i = 0; i < sizeof cuda_known / sizeof *cuda_known; i++) {
        if (!strcasestr(dev->name, cuda_known[i].name_part)) continue;
        out->gflops = cuda_known[i].tflops * 1e3;
        out->gbps = cuda_known[i].tbps * 1e3;
        snprintf(out->source, sizeof out->source, "published: %s FP32 %.1f TFLOP/s, %.2f TB/s", cuda_known[i].name_part,
                 cuda_known[i].tflops, cuda_known[i].tbps);
        return 0;
    }
    snprintf(out->source, sizeof out->source, "unknown: no published peak for '%s'", dev->name);
    return -1;
}

double kh_peak_bound(const kh_peak *p, double flop_per_byte) {
    if (p->gflops <= 0) return 0;
    if (p->gbps <= 0 || !isfinite(flop_per_byte)) return p->gflops;
    double mem = flop_per_byte * p->gbps;
    return mem < p->gflops ? mem : p->gflops;
}
