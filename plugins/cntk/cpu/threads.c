/* cpu/threads.c — a tiny fork-join pool for element-wise work, split GEMMs and the two directions of a BiLSTM.
 *
 * Why not OpenMP: libgomp's workers spin long after every parallel region by default, and on two cores a
 * spinning thread steals the core another pool needs right after. These workers spin only briefly
 * (CNTK_POOL_SPIN polls, well under a millisecond) for the next job, then block on a condition variable: a step's
 * jobs follow each other within microseconds, and a futex wake-up per job cost ~15 % of a mnist_mlp step in
 * the kernel's scheduler. Before a oneDNN primitive (whose OpenMP team needs every core) the caller parks the
 * workers (cntk_pool_park), so nothing spins beside it.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu/cpu.h"
#include "khost/kit/spin.h"

#define CNTK_MAX_THREADS 64
#define CNTK_POOL_SPIN 4000 /* polls of the job counter before a worker (or the caller, for the end) blocks */

struct cntk_pool {
    int threads; /* including the caller */
    int n_workers_started;
    pthread_t tid[CNTK_MAX_THREADS];
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    atomic_uint_fast64_t generation; /* bumped per job, under mu, after the job's fields; workers run on a change */
    atomic_int pending;              /* workers still running the current job */
    atomic_int parked;               /* set: workers stop spinning and block until the next job */
    int quit;
    /* the current job */
    cntk_range_fn fn;
    void *ctx;
    int64_t n, parts;
};

typedef struct worker_arg {
    cntk_pool *p;
    int index; /* 1..threads-1; the caller is part 0 */
} worker_arg;

static void run_part(cntk_pool *p, int64_t part) {
    int64_t b = p->n * part / p->parts, e = p->n * (part + 1) / p->parts;
    if (b < e) p->fn(p->ctx, b, e);
}

/* the next job's generation once it differs from seen, after at most CNTK_POOL_SPIN polls; seen if none came */
static uint64_t spin_for_job(cntk_pool *p, uint64_t seen) {
    for (int i = 0; i < CNTK_POOL_SPIN; i++) {
        uint64_t g = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (g != seen || atomic_load_explicit(&p->parked, memory_order_relaxed)) return g;
        kh_cpu_relax();
    }
    return seen;
}

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    cntk_pool *p = wa->p;
    uint64_t seen = 0;
    for (;;) {
        uint64_t g = spin_for_job(p, seen);
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            while (!p->quit && (g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen)
                pthread_cond_wait(&p->go, &p->mu);
            int quit = p->quit;
            pthread_mutex_unlock(&p->mu);
            if (quit) break;
        }
        seen = g;
        if (wa->index < p->parts) run_part(p, wa->index);
        if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu); /* the caller checks pending under mu before it waits */
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

typedef struct pool_with_args {
    cntk_pool pool;
    worker_arg args[CNTK_MAX_THREADS];
} pool_with_args;

kh_status cntk_pool_create(int threads, cntk_pool **out) {
    *out = NULL;
    if (threads < 1) threads = 1;
    if (threads > CNTK_MAX_THREADS) threads = CNTK_MAX_THREADS;
    pool_with_args *pa = calloc(1, sizeof *pa);
    if (!pa) return KH_ERR_NOMEM;
    cntk_pool *p = &pa->pool;
    p->threads = threads;
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        free(pa);
        return KH_ERR_INTERNAL;
    }
    if (pthread_cond_init(&p->go, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        free(pa);
        return KH_ERR_INTERNAL;
    }
    if (pthread_cond_init(&p->done, NULL) != 0) {
        pthread_cond_destroy(&p->go);
        pthread_mutex_destroy(&p->mu);
        free(pa);
        return KH_ERR_INTERNAL;
    }
    for (int i = 1; i < threads; i++) {
        pa->args[i].p = p;
        pa->args[i].index = i;
        if (pthread_create(&p->tid[i], NULL, worker_main, &pa->args[i]) != 0) break;
        p->n_workers_started++;
    }
    /* Fewer workers than asked (thread limit) is not an error: run with what started. */
    p->threads = 1 + p->n_workers_started;
    *out = p;
    return KH_OK;
}

void cntk_pool_destroy(cntk_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i <= p->n_workers_started; i++) pthread_join(p->tid[i], NULL);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->go);
    pthread_mutex_destroy(&p->mu);
    free(p); /* p is the first member of its pool_with_args */
}

int cntk_pool_threads(const cntk_pool *p) { return p ? p->threads : 1; }

void cntk_parallel_for(cntk_pool *p, int64_t n, int64_t grain, cntk_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t parts = p ? p->threads : 1;
    if (parts > (n + grain - 1) / grain) parts = (n + grain - 1) / grain;
    if (parts <= 1) {
        fn(ctx, 0, n);
        return;
    }
    /* the previous job has ended (pending reached 0), so no worker reads these fields now */
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->parts = parts;
    atomic_store_explicit(&p->pending, p->n_workers_started, memory_order_relaxed);
    atomic_store_explicit(&p->parked, 0, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    run_part(p, 0);
    for (int i = 0; i < CNTK_POOL_SPIN && atomic_load_explicit(&p->pending, memory_order_acquire) > 0; i++)
        kh_cpu_relax();
    if (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}

void cntk_pool_park(cntk_pool *p) {
    if (p) atomic_store_explicit(&p->parked, 1, memory_order_relaxed);
}
