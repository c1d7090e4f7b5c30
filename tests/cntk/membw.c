/* tests/cntk/membw.c — this machine's memory bandwidth for the access pattern of a dense Adam pass (read w,
 * m, v; write w, m, v), so the fastText step time can be compared with its floor (docs/PERFORMANCE.md).
 * Not a test: run by hand, build/tests/cntk/membw [--mfloats N] [--threads T] [--reps R].
 * Each rep streams the three arrays once, split over T threads; reports the best rep (GB/s, 1e9 bytes). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct part {
    float *w, *m, *v;
    int64_t n;
} part;

static void *stream_part(void *arg) {
    part *p = arg;
    float *restrict w = p->w, *restrict m = p->m, *restrict v = p->v;
    for (int64_t i = 0; i < p->n; i++) { /* Adam with g = 0: every byte read once and written once */
        m[i] = 0.9f * m[i];
        v[i] = 0.999f * v[i];
        w[i] -= 1e-3f * m[i] / (v[i] + 1e-7f);
    }
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    int64_t n = 60 * 1000 * 1000; /* ~ the fastText table: 1.21 M rows x 50 */
    int threads = 2, reps = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mfloats")) n = (int64_t)(atof(argv[i + 1]) * 1e6);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "membw: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (n < 1 || threads < 1 || threads > 64 || reps < 1) {
        fprintf(stderr, "membw: bad --mfloats/--threads/--reps\n");
        return 2;
    }
    float *w = malloc((size_t)n * sizeof(float)), *m = malloc((size_t)n * sizeof(float)),
          *v = malloc((size_t)n * sizeof(float));
    if (!w || !m || !v) {
        fprintf(stderr, "membw: cannot allocate 3 x %lld floats\n", (long long)n);
        return 1;
    }
    for (int64_t i = 0; i < n; i++) w[i] = 1.0f, m[i] = 0.5f, v[i] = 0.25f; /* touch every page first */
    part parts[64];
    pthread_t tid[64];
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (int t = 0; t < threads; t++) {
            int64_t b = n * t / threads, e = n * (t + 1) / threads;
            parts[t] = (part){w + b, m + b, v + b, e - b};
            if (pthread_create(&tid[t], NULL, stream_part, &parts[t]) != 0) {
                fprintf(stderr, "membw: cannot start thread %d\n", t);
                return 1;
            }
        }
        for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    double bytes = 6.0 * 4.0 * (double)n; /* 3 arrays read + 3 written */
    printf("membw: %lld floats x 3 arrays, %d threads: best of %d passes %.1f ms = %.1f GB/s (read+write)\n",
           (long long)n, threads, reps, best * 1e3, bytes / best / 1e9);
    printf("check: %g\n", (double)(w[n / 2] + m[n / 3] + v[n - 1])); /* keeps the passes from being elided */
    free(w), free(m), free(v);
    return 0;
}
