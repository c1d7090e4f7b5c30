/* core/devices/membw.c — cache levels and their bandwidth ceilings (see membw.h).
 *
 * Capacities: /sys/devices/system/cpu/cpuK/cache/indexI (level, type, size, shared_cpu_list) for the CPUs
 * measured; an instance shared by several CPUs counts once; levels from L2 on. Measurement: one thread per CPU, each with its own
 * three arrays (first touched by that thread), all threads released together by a barrier and timed from the
 * release to the last one's end, as STREAM times its threads. Buffers: a cache level's arrays together take
 * half its capacity (the rest holds what the machine itself needs); DRAM's each hold four times the last
 * level's capacity, STREAM's rule, and at least 32 MiB. A level's figure is the best over its trials and
 * kernels: a bound must not be beaten by a backend that streams in another pattern. */
#define _GNU_SOURCE
#include "devices/membw.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "khost/kit/clock.h"

// --- capacities ------------------------------------------------------------------------------------------
static int read_line(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char *ok = fgets(buf, (int)n, f);
    fclose(f);
    if (!ok) return -1;
    buf[strcspn(buf, "\n")] = 0;
    return 0;
}

/* "32K", "1024K", "32M" -> bytes; 0 when unreadable */
static double size_bytes(const char *s) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || v <= 0) return 0;
    return *end == 'K' ? v * 1024 : *end == 'M' ? v * 1048576 : *end == 'G' ? v * 1073741824.0 : v;
}

typedef struct instance {
    int level;
    char cpus[128];
    double bytes;
} instance;

int kh_mem_levels_detect(kh_mem_level *lv, int max, int threads) {
    instance seen[64];
    int n_seen = 0;
    double per_level[8] = {0};
    for (int cpu = 0; cpu < threads; cpu++) {
        for (int idx = 0; idx < 16; idx++) {
            char dir[128], path[192], level[16], type[32], size[32], cpus[128];
            snprintf(dir, sizeof dir, "/sys/devices/system/cpu/cpu%d/cache/index%d", cpu, idx);
            snprintf(path, sizeof path, "%s/level", dir);
            if (read_line(path, level, sizeof level) != 0) break;
            snprintf(path, sizeof path, "%s/type", dir);
            if (read_line(path, type, sizeof type) != 0 || !strcmp(type, "Instruction")) continue;
            snprintf(path, sizeof path, "%s/size", dir);
            if (read_line(path, size, sizeof size) != 0) continue;
            snprintf(path, sizeof path, "%s/shared_cpu_list", dir);
            if (read_line(path, cpus, sizeof cpus) != 0) snprintf(cpus, sizeof cpus, "%d", cpu);
            int lvl = atoi(level);
            double b = size_bytes(size);
            if (lvl < 1 || lvl > 7 || b <= 0) continue;
            int dup = 0;
            for (int k = 0; k < n_seen && !dup; k++) dup = seen[k].level == lvl && !strcmp(seen[k].cpus, cpus);
            if (dup || n_seen == (int)(sizeof seen / sizeof *seen)) continue;
            seen[n_seen].level = lvl, seen[n_seen].bytes = b;
            snprintf(seen[n_seen].cpus, sizeof seen[n_seen].cpus, "%s", cpus);
            n_seen++;
            per_level[lvl] += b;
        }
    }
    int n = 0;
    double last = 0;
    /* from L2: no training step's working set is as small as L1, and a ceiling timed over a few kilobytes per
     * thread measures the loop more than the cache (it came out below L2's here) */
    for (int lvl = 2; lvl < 8 && n < max - 1; lvl++) {
        if (per_level[lvl] <= 0) continue;
        memset(&lv[n], 0, sizeof lv[n]);
        snprintf(lv[n].name, sizeof lv[n].name, "L%d", lvl);
        lv[n].bytes = per_level[lvl];
        lv[n].buffer_bytes = per_level[lvl] / 2;
        last = per_level[lvl];
        n++;
    }
    memset(&lv[n], 0, sizeof lv[n]);
    snprintf(lv[n].name, sizeof lv[n].name, "DRAM");
    double per_array = 4 * last > 32.0 * 1048576 ? 4 * last : 32.0 * 1048576;
    lv[n].buffer_bytes = 3 * per_array;
    return n + 1;
}

// --- measurement -----------------------------------------------------------------------------------------
typedef struct team team;
typedef struct worker {
    team *t;
    char *block; /* the three arrays */
    float *a, *b, *c;
    long n;      /* floats per array */
    float sink;
    pthread_t th;
    int started;
} worker;

struct team {
    pthread_mutex_t lock;
    pthread_cond_t ready_cv;
    int ready; /* the barriers exist: the workers may use them */
    pthread_barrier_t go, done;
    kh_membw_kernel kernel;
    int passes, quit, fill;
    worker w[64];
    int n;
};

static void work(worker *w) {
    if (w->t->fill) { /* each thread touches its own arrays first: its pages, its NUMA node */
        for (long i = 0; i < w->n; i++) w->a[i] = w->b[i] = w->c[i] = 1.0f;
        return;
    }
    w->sink += kh_membw_pass(w->t->kernel, w->a, w->b, w->c, w->n, w->t->passes);
}

static void *worker_main(void *v) {
    worker *w = v;
    pthread_mutex_lock(&w->t->lock);
    while (!w->t->ready) pthread_cond_wait(&w->t->ready_cv, &w->t->lock);
    int quit = w->t->quit; /* set before ready when there are no barriers to wait on */
    pthread_mutex_unlock(&w->t->lock);
    if (quit) return NULL;
    for (;;) {
        pthread_barrier_wait(&w->t->go);
        if (w->t->quit) return NULL;
        work(w);
        pthread_barrier_wait(&w->t->done);
    }
}

/* one trial: every thread runs `passes` passes; seconds from the release to the last end */
static double trial(team *t, kh_membw_kernel k, int passes) {
    t->kernel = k, t->passes = passes;
    double t0 = kh_now();
    pthread_barrier_wait(&t->go);
    work(&t->w[0]);
    pthread_barrier_wait(&t->done);
    return kh_now() - t0;
}

/* each thread's arrays, filled by that thread */
static int arrays(team *t, long floats) {
    int ok = 1;
    for (int i = 0; i < t->n; i++) {
        worker *w = &t->w[i];
        free(w->block);
        /* one block, the arrays staggered by 1088 bytes: arrays a multiple of 4 KiB apart make a load and a
         * store look alike to the core's memory disambiguation (4K aliasing), a stall that varied the L2
         * figure by 2x between runs with where the allocator put them */
        size_t bytes = ((size_t)floats * sizeof(float) + 63) & ~(size_t)63, stagger = 1088;
        w->block = aligned_alloc(4096, ((3 * (bytes + stagger) + 4095) & ~(size_t)4095));
        w->a = w->block ? (float *)w->block : NULL;
        w->b = w->block ? (float *)(w->block + bytes + stagger) : NULL;
        w->c = w->block ? (float *)(w->block + 2 * (bytes + stagger)) : NULL;
        w->n = floats;
        if (!w->block) ok = 0;
    }
    if (!ok) { /* nobody streams: every thread's arrays are empty */
        for (int i = 0; i < t->n; i++) t->w[i].n = 0;
        return -1;
    }
    t->fill = 1;
    trial(t, KH_MEMBW_COPY, 1);
    t->fill = 0;
    return 0;
}

int kh_mem_levels_measure(kh_mem_level *lv, int n, int threads) {
    team *t = calloc(1, sizeof *t);
    if (!t) return -1;
    int want = threads < 1 ? 1 : threads > 64 ? 64 : threads, rc = 0;
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->ready_cv, NULL);
    /* the threads first, then barriers for as many as started: a thread that could not start is one fewer */
    t->n = 1;
    for (int i = 1; i < want; i++) {
        t->w[t->n].t = t;
        if (pthread_create(&t->w[t->n].th, NULL, worker_main, &t->w[t->n]) == 0) t->w[t->n++].started = 1;
    }
    t->w[0].t = t;
    int barriers = pthread_barrier_init(&t->go, NULL, (unsigned)t->n) == 0;
    if (barriers && pthread_barrier_init(&t->done, NULL, (unsigned)t->n) != 0) {
        pthread_barrier_destroy(&t->go);
        barriers = 0;
    }
    if (!barriers) t->quit = 1, rc = -1;
    if (t->n < want) rc = -1;
    pthread_mutex_lock(&t->lock);
    t->ready = 1;
    pthread_cond_broadcast(&t->ready_cv);
    pthread_mutex_unlock(&t->lock);
    for (int l = 0; l < n && rc == 0; l++) {
        long floats = (long)(lv[l].buffer_bytes / 3 / t->n / sizeof(float));
        floats &= ~15L;
        if (floats < 256) floats = 256;
        if (arrays(t, floats) != 0) {
            rc = -1;
            break;
        }
        lv[l].buffer_bytes = 3.0 * (double)floats * sizeof(float) * t->n;
        int dram = lv[l].bytes <= 0;
        /* a cache trial streams at least 16 MiB per thread so that it lasts long enough to time; DRAM's
         * arrays are large enough in one pass */
        double per_pass = 3.0 * (double)floats * sizeof(float);
        int passes = dram ? 1 : (int)(16.0 * 1048576 / per_pass) + 1;
        int trials = dram ? 8 : 10;
        lv[l].gbps = 0;
        memset(lv[l].kernel_gbps, 0, sizeof lv[l].kernel_gbps);
        for (kh_membw_kernel k = 0; k < KH_MEMBW_KERNELS; k++) {
            for (int r = 0; r < trials; r++) {
                double s = trial(t, k, passes);
                double g = kh_membw_bytes_per_float(k) * (double)floats * t->n * passes / s / 1e9;
                if (s > 0 && g > lv[l].kernel_gbps[k]) lv[l].kernel_gbps[k] = g;
                if (s > 0 && g > lv[l].gbps) {
                    lv[l].gbps = g;
                    snprintf(lv[l].kernel, sizeof lv[l].kernel, "%s", kh_membw_kernel_name(k));
                }
            }
        }
    }
    /* A buffer that fits a faster level fits the slower ones too, so it streams at least as fast as the slower
     * level measured: a faster level measured below a slower one (L2 and L3 are close on some machines, and
     * each figure is a best of noisy trials) takes the slower one's figure. */
    for (int l = n - 2; rc == 0 && l >= 0; l--)
        if (lv[l].gbps < lv[l + 1].gbps) {
            lv[l].gbps = lv[l + 1].gbps;
            memcpy(lv[l].kernel, lv[l + 1].kernel, sizeof lv[l].kernel); /* both NUL-ended within it */
        }
    if (barriers) {
        t->quit = 1;
        pthread_barrier_wait(&t->go);
    }
    for (int i = 1; i < t->n; i++) pthread_join(t->w[i].th, NULL);
    for (int i = 0; i < t->n; i++) free(t->w[i].block);
    if (barriers) pthread_barrier_destroy(&t->go), pthread_barrier_destroy(&t->done);
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->ready_cv);
    free(t);
    return rc;
}
