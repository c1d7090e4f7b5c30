/* core/devices/peak.c — peak FLOP rate and bandwidth ceilings per device (see peak.h).
 *
 * cpu: OpenBLAS's sgemm (opened at run time: the core links no BLAS) on 1024x1024 matrices with one thread
 * per online CPU, best of a few runs, and every memory level's bandwidth (devices/membw.c: four streaming
 * kernels on every CPU, DRAM over arrays four times the last-level cache); measured in a forked child so BLAS
 * threads and their settings never reach the backends. The result is cached per CPU model, ISA, thread count
 * and OpenBLAS kernels in $XDG_CACHE_HOME/khost/peak-cpu-levels.txt (~/.cache when unset), so it is measured
 * once per machine. CUDA: published FP32 peak and memory bandwidth of the devices in the table below. */
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

#include "base/cpuload.h"
#include "base/sysinfo.h"
#include "devices/blas_tune.h"
#include "devices/fma_kernel.h"
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
        for (int rep = 0; rep < 12; rep++) {
            double t0 = kh_now();
            f(101 /* row major */, 111, 111, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
            double dt = kh_now() - t0, g = 2.0 * n * n * (double)n / dt / 1e9;
            if (rep > 0 && g > best) best = g; /* the first run pays thread start-up */
        }
    }
    free(a), free(b), free(c);
    return best;
}

typedef struct fma_job {
    long iters;
    float sink;
} fma_job;

static void *fma_thread(void *v) {
    fma_job *j = v;
    j->sink = kh_fma_chains(j->iters, 0.999f, 0.001f);
    return NULL;
}

/* The FMA units' throughput with every online CPU running the chains at once, best of 5 (about 0.2 s). */
static double measure_fma(int threads) {
    fma_job job[64];
    pthread_t th[64];
    int t = threads < 1 ? 1 : threads > 64 ? 64 : threads;
    double best = 0;
    for (int rep = 0; rep < 6; rep++) {
        int started[64] = {0};
        double t0 = kh_now();
        for (int k = 0; k < t; k++) {
            job[k].iters = 8000000;
            if (k > 0) started[k] = pthread_create(&th[k], NULL, fma_thread, &job[k]) == 0;
        }
        fma_thread(&job[0]);
        int all = 1;
        for (int k = 1; k < t; k++) {
            if (started[k]) pthread_join(th[k], NULL);
            else all = 0;
        }
        double dt = kh_now() - t0, g = kh_fma_flops_per_iter() * 8000000.0 * t / dt / 1e9;
        if (all && rep > 0 && g > best) best = g; /* the first pays thread start-up and frequency ramp */
    }
    return best;
}

/* The calibration in a child: 0 with the figures, -1 when the child failed. */
typedef struct calibration {
    double gflops, fma_gflops;
    int n_levels;
    kh_mem_level levels[KH_MEM_LEVELS_MAX];
    double other_cores, steal_pct; /* the machine's load beside the measurement; -1 unknown */
} calibration;

static int measure_in_child(calibration *out) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]), close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        close(fd[0]);
        calibration c;
        memset(&c, 0, sizeof c);
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        int threads = cpus < 1 ? 1 : (int)cpus;
        kh_cpuload a, b;
        kh_cpuload_sample(&a);
        c.gflops = measure_sgemm();
        c.fma_gflops = measure_fma(threads);
        c.n_levels = kh_mem_levels_detect(c.levels, KH_MEM_LEVELS_MAX, threads);
        if (kh_mem_levels_measure(c.levels, c.n_levels, threads) != 0) c.n_levels = 0;
        kh_cpuload_sample(&b);
        if (kh_cpuload_between(&a, &b, &c.other_cores, &c.steal_pct) != 0) c.other_cores = c.steal_pct = -1;
        ssize_t w = write(fd[1], &c, sizeof c);
        _exit(w == (ssize_t)sizeof c ? 0 : 1);
    }
    close(fd[1]);
    ssize_t got = 0;
    while (got < (ssize_t)sizeof *out) {
        ssize_t r = read(fd[0], (char *)out + got, sizeof *out - (size_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += r;
    }
    close(fd[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (got != (ssize_t)sizeof *out || out->n_levels < 0 || out->n_levels > KH_MEM_LEVELS_MAX) return -1;
    return 0;
}

/* Beside other work by the rule the report applies to a repetition (base/cpuload.h) */
static int busy(const calibration *c) {
    return c->other_cores > KH_CPULOAD_BUSY_CORES || c->steal_pct > KH_CPULOAD_BUSY_STEAL_PCT;
}

/* Two calibrations when the first was taken while the machine was busy; each figure the best of them (a
 * ceiling is the most the machine gave). */
static int calibrate(calibration *best) {
    int got = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        calibration c;
        if (measure_in_child(&c) != 0) continue;
        if (!got) *best = c;
        else {
            if (c.gflops > best->gflops) best->gflops = c.gflops;
            if (c.fma_gflops > best->fma_gflops) best->fma_gflops = c.fma_gflops;
            for (int i = 0; i < best->n_levels && i < c.n_levels; i++)
                if (!strcmp(c.levels[i].name, best->levels[i].name) && c.levels[i].gbps > best->levels[i].gbps)
                    best->levels[i] = c.levels[i];
            if (c.other_cores < best->other_cores) best->other_cores = c.other_cores, best->steal_pct = c.steal_pct;
        }
        got = 1;
        if (!busy(best)) break;
    }
    return got ? 0 : -1;
}

static void cache_path(char *buf, size_t n) {
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (x && *x == '/') snprintf(buf, n, "%s/khost", x);
    else snprintf(buf, n, "%s/.cache/khost", home && *home ? home : "/tmp");
}

#define BUSY_KEEP_S 600 /* how long a calibration taken beside other work is used before it is measured again */

/* Seconds since an ISO time "2026-12-07T19:25:43Z"; -1 when it does not parse. */
static double age_s(const char *iso) {
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *end = strptime(iso, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (!end || *end) return -1;
    time_t t = timegm(&tm);
    return t == (time_t)-1 ? -1 : difftime(time(NULL), t);
}

/* One level as cached: "<name>:<capacity>:<buffer>:<gbps>:<kernel>" (capacity 0 for DRAM). */
static int level_parse(const char *text, kh_mem_level *lv) {
    memset(lv, 0, sizeof *lv);
    char name[8], kernel[8];
    if (sscanf(text, "%7[A-Z0-9]:%lf:%lf:%lf:%7[a-z]", name, &lv->bytes, &lv->buffer_bytes, &lv->gbps, kernel) != 5)
        return -1;
    if (!(lv->bytes >= 0 && lv->buffer_bytes > 0 && lv->gbps > 0 && isfinite(lv->gbps))) return -1;
    snprintf(lv->name, sizeof lv->name, "%s", name);
    snprintf(lv->kernel, sizeof lv->kernel, "%s", kernel);
    return 0;
}

/* Cache lines: "<key>\t<sgemm gflops>\t<fma gflops>\t<level>,<level>,...\t<when>[\tbusy]", the last level DRAM;
 * "busy": taken beside other work, used for BUSY_KEEP_S. The newest usable line of a key wins; a line that does
 * not parse is skipped (measured again). Returns 0 (a quiet calibration), 1 (a busy one still in its time) or -1. */
static int cache_read(const char *file, const char *key, kh_peak *out, char *when, size_t wn) {
    FILE *f = fopen(file, "r");
    if (!f) return -1;
    char line[2048];
    int found = -1;
    while (fgets(line, sizeof line, f)) {
        char *t1 = strchr(line, '\t');
        if (!t1) continue;
        *t1 = 0;
        if (strcmp(line, key) != 0) continue;
        double g, fma;
        char levels[1024], w[64];
        if (sscanf(t1 + 1, "%lf\t%lf\t%1023[^\t]\t%63s", &g, &fma, levels, w) != 4 || !(g >= 0) || !(fma >= 0))
            continue;
        kh_peak p;
        memset(&p, 0, sizeof p);
        int bad = 0;
        for (char *save = NULL, *tok = strtok_r(levels, ",", &save); tok && !bad; tok = strtok_r(NULL, ",", &save))
            bad = p.n_levels == KH_MEM_LEVELS_MAX || level_parse(tok, &p.levels[p.n_levels++]) != 0;
        if (bad || p.n_levels == 0 || strcmp(p.levels[p.n_levels - 1].name, "DRAM") != 0) continue;
        int was_busy = strstr(t1 + 1, "\tbusy") != NULL;
        if (was_busy && !(age_s(w) >= 0 && age_s(w) < BUSY_KEEP_S)) continue; /* measured again */
        out->gflops = g, out->fma_gflops = fma, out->n_levels = p.n_levels;
        memcpy(out->levels, p.levels, sizeof p.levels);
        out->gbps = p.levels[p.n_levels - 1].gbps;
        snprintf(when, wn, "%s", w);
        found = was_busy; /* the newest line of the key wins */
    }
    fclose(f);
    return found;
}

static void cache_write(const char *dir, const char *file, const char *key, const kh_peak *p, const char *when,
                        int was_busy) {
    if (kh_mkdirs(dir) != 0) return;
    chmod(dir, 0700);
    char why[128];
    int fd = kh_create_regular(file, O_WRONLY | O_APPEND | O_CLOEXEC, 0600, why, sizeof why);
    FILE *f = fd >= 0 ? fdopen(fd, "a") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return;
    }
    fprintf(f, "%s\t%.17g\t%.17g\t", key, p->gflops, p->fma_gflops); /* exact: a cached figure is the measured one */
    for (int i = 0; i < p->n_levels; i++)
        fprintf(f, "%s%s:%.0f:%.0f:%.17g:%s", i ? "," : "", p->levels[i].name, p->levels[i].bytes,
                p->levels[i].buffer_bytes, p->levels[i].gbps, p->levels[i].kernel);
    fprintf(f, "\t%s%s\n", when, was_busy ? "\tbusy" : "");
    fclose(f);
}

static void cpu_source(kh_peak *out, const char *when, const char *file) {
    const kh_mem_level *d = &out->levels[out->n_levels - 1];
    snprintf(out->source, sizeof out->source,
             "calibrated %s (sgemm 1024^3 %.0f GFLOP/s, FMA %.0f GFLOP/s; %d memory level(s), DRAM %.0f GB/s over "
             "%.0f MiB), cached in %s", when, out->gflops, out->fma_gflops, out->n_levels, d->gbps,
             d->buffer_bytes / 1048576, file);
}

int kh_peak_cpu(kh_peak *out, int fresh) {
    char dir[3000], file[3100], model[256], key[600], when[64];
    cache_path(dir, sizeof dir);
    snprintf(file, sizeof file, "%s/peak-cpu-levels.txt", dir);
    kh_env_cpu_model(model, sizeof model);
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    /* the kernels OpenBLAS runs are part of the machine's peak (core/devices/blas_tune.c chooses them): a change of
     * kernels is a new calibration, not a stale number; one model name can hide two ISAs */
    const char *core = getenv("OPENBLAS_CORETYPE");
    snprintf(key, sizeof key, "%s [%s] x%ld openblas=%s", model, kh_cpu_isa(), threads,
             core && *core ? core : "default");
    for (char *p = key; *p; p++)
        if (*p == '\t' || *p == '\n') *p = ' ';
    memset(out, 0, sizeof *out);
    char terr[3300];
    int trusted = kh_path_trusted(dir, terr, sizeof terr) == 0;
    static int warned;
    if (!trusted && !warned) {
        warned = 1;
        kh_logf(KH_LOG_WARN, "CPU peak: not cached: %s (khost/kit/pathtrust.h)", terr);
    }
    int cached = !fresh && trusted ? cache_read(file, key, out, when, sizeof when) : -1;
    if (cached >= 0) {
        cpu_source(out, when, file);
        if (cached == 1)
            snprintf(out->source + strlen(out->source), sizeof out->source - strlen(out->source),
                     " (taken beside other work; measured again %d minutes after)", BUSY_KEEP_S / 60);
        return out->gflops > 0 ? 0 : -1;
    }
    calibration c;
    if (calibrate(&c) != 0) {
        snprintf(out->source, sizeof out->source, "unknown: the calibration process failed");
        return -1;
    }
    kh_env_now_iso(when, sizeof when);
    if (c.gflops <= 0) {
        snprintf(out->source, sizeof out->source, "unknown: no OpenBLAS (libopenblas.so.0) to time sgemm with");
        return -1;
    }
    if (c.n_levels == 0) {
        snprintf(out->source, sizeof out->source, "unknown: the memory bandwidth could not be measured");
        return -1;
    }
    out->gflops = c.gflops, out->fma_gflops = c.fma_gflops, out->n_levels = c.n_levels;
    memcpy(out->levels, c.levels, sizeof c.levels);
    out->gbps = c.levels[c.n_levels - 1].gbps;
    cpu_source(out, when, file);
    size_t at = strlen(out->source);
    /* a private cache: other users' files are not trusted, and a failed write only costs a re-measurement. A
     * calibration taken beside other work is kept for BUSY_KEEP_S only: for good, it would hold every later cell
     * of a quiet machine to ceilings that machine beats; not at all, and every cell of a busy machine would pay
     * the calibration again. */
    if (busy(&c))
        snprintf(out->source + at, sizeof out->source - at, " (taken beside other work: %.2f cores busy, %.1f %% "
                 "stolen; measured again after %d minutes)", c.other_cores, c.steal_pct, BUSY_KEEP_S / 60);
    if (!trusted) snprintf(out->source + strlen(out->source), sizeof out->source - strlen(out->source), " (not saved)");
    else cache_write(dir, file, key, out, when, busy(&c));
    return 0;
}

int kh_peak_get(const kh_device *dev, kh_peak *out) {
    memset(out, 0, sizeof *out);
    if (dev->kind == KH_DEVICE_CPU) return kh_peak_cpu(out, 0);
    for (size_t i = 0; i < sizeof cuda_known / sizeof *cuda_known; i++) {
        if (!strcasestr(dev->name, cuda_known[i].name_part)) continue;
        out->gflops = cuda_known[i].tflops * 1e3;
        out->gbps = cuda_known[i].tbps * 1e3;
        out->n_levels = 1; /* the device memory alone: its caches are not measured */
        snprintf(out->levels[0].name, sizeof out->levels[0].name, "DRAM");
        snprintf(out->levels[0].kernel, sizeof out->levels[0].kernel, "spec");
        out->levels[0].gbps = out->gbps;
        snprintf(out->source, sizeof out->source, "published: %s FP32 %.1f TFLOP/s, %.2f TB/s", cuda_known[i].name_part,
                 cuda_known[i].tflops, cuda_known[i].tbps);
        return 0;
    }
    snprintf(out->source, sizeof out->source, "unknown: no published peak for '%s'", dev->name);
    return -1;
}

double kh_peak_flop_ceiling(const kh_peak *p) { return p->fma_gflops > p->gflops ? p->fma_gflops : p->gflops; }

double kh_peak_bound(const kh_peak *p, double flop_per_byte) {
    double top = kh_peak_flop_ceiling(p);
    if (top <= 0) return 0;
    if (p->gbps <= 0 || !isfinite(flop_per_byte)) return top;
    double mem = flop_per_byte * p->gbps;
    return mem < top ? mem : top;
}
