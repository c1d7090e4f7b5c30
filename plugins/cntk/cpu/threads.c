/* cpu/threads.c — a tiny fork-join pool for element-wise work and the two directions of a BiLSTM.
 *
 * Why not OpenMP: OpenBLAS (pthread build) runs its own workers; libgomp's workers spin after every parallel
 * region by default, and on two cores a spinning OpenMP thread steals the core a BLAS thread needs right
 * after. These workers block on a condition variable instead, so BLAS and element-wise phases alternate
 * without oversubscription.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>

#include "cntk.h"

#define CNTK_MAX_THREADS 64

struct cntk_pool {
    int threads; /* including the caller */
    int n_workers_started;
    pthread_t tid[CNTK_MAX_THREADS];
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t generation; /* bumped per job; workers run when it changes */
    int pending;         /* workers still running the current job */
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

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    cntk_pool *p = wa->p;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->go, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        int64_t part = wa->index;
        int active = part < p->parts;
        pthread_mutex_unlock(&p->mu);
        if (active) run_part(p, part);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
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
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->parts = parts;
    p->pending = p->n_workers_started;
    p->generation++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    run_part(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
