/* tf_pool.c — the one thread pool of a CPU session: inter-op tasks (graph nodes) and intra-op parts (pieces
 * of a big kernel) share its `workers` threads plus the calling thread, so the threads that run never
 * exceed the device's. A thread with nothing to do polls the queue (or the counter it waits on) for
 * TF_POOL_SPIN pauses, well under a millisecond, then sleeps on a condition variable: a step's tasks follow
 * each other closely, and sleeping and waking between them cost tensorflow a third of its convolutional steps
 * (docs/PERFORMANCE.md). Eigen's thread pool, which TensorFlow's executor runs on, spins before it sleeps too.
 * A polling thread holds only its own core, and for at most that budget after its last task.
 *
 * Intra-op parts are claimed through an atomic counter: the kernel's own thread claims parts too and can
 * finish all of them alone, so a parallel_for never waits for a busy worker; helper tasks that nobody
 * picked up by then are withdrawn from the queue before the call returns.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/spin.h"
#include "tf.h"

#define TF_POOL_SPIN 4000 /* polls before a thread with nothing to do blocks */

typedef struct tf_task {
    void (*fn)(void *arg, int32_t i);
    void *arg;
    int32_t i;
} tf_task;

struct tf_pool {
    pthread_mutex_t mu;
    pthread_cond_t work;  /* a task was queued, or stop */
    pthread_cond_t done;  /* a counter some thread waits on may have reached zero */
    tf_task *q;           /* ring buffer */
    int32_t cap, head;
    _Atomic int32_t count; /* queued tasks; changed under mu, polled without it */
    int stop;
    int n_workers;
    int n_started; /* workers that have begun (their thread-local state set up) */
    pthread_t *th;
};

static _Thread_local int t_slot; /* 0 = a thread outside the pool (the executor's caller) */

int tf_pool_slot(void) { return t_slot; }
int tf_pool_workers(const tf_pool *p) { return p ? p->n_workers : 0; }

static int push_locked(tf_pool *p, tf_task t) {
    if (p->count == p->cap) {
        int32_t nc = p->cap ? p->cap * 2 : 256;
        tf_task *q = malloc((size_t)nc * sizeof *q);
        if (!q) return 0;
        for (int32_t k = 0; k < p->count; k++) q[k] = p->q[(p->head + k) % p->cap];
        free(p->q);
        p->q = q;
        p->cap = nc;
        p->head = 0;
    }
    p->q[(p->head + p->count) % p->cap] = t;
    p->count++;
    return 1;
}

static int pop_locked(tf_pool *p, tf_task *t) {
    if (p->count == 0) return 0;
    *t = p->q[p->head];
    p->head = (p->head + 1) % p->cap;
    p->count--;
    return 1;
}

typedef struct worker_arg {
    tf_pool *p;
    int slot;
} worker_arg;

static void *worker(void *v) {
    worker_arg wa = *(worker_arg *)v;
    free(v);
    tf_pool *p = wa.p;
    t_slot = wa.slot; /* first touch of the thread-local: the loader allocates it now, not during a step */
    pthread_mutex_lock(&p->mu);
    p->n_started++;
    pthread_cond_broadcast(&p->done);
    for (;;) {
        tf_task t;
        if (!pop_locked(p, &t)) {
            if (p->stop) break;
            pthread_mutex_unlock(&p->mu);
            for (int k = 0; k < TF_POOL_SPIN && atomic_load_explicit(&p->count, memory_order_relaxed) == 0; k++)
                kh_cpu_relax();
            pthread_mutex_lock(&p->mu);
            while (!p->stop && !pop_locked(p, &t)) pthread_cond_wait(&p->work, &p->mu);
        }
        if (p->stop) break;
        pthread_mutex_unlock(&p->mu);
        t.fn(t.arg, t.i);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

kh_status tf_pool_create(int workers, tf_pool **out) {
    *out = NULL;
    tf_pool *p = calloc(1, sizeof *p);
    if (!p) return KH_ERR_NOMEM;
    if (pthread_mutex_init(&p->mu, NULL) || pthread_cond_init(&p->work, NULL) || pthread_cond_init(&p->done, NULL)) {
        free(p);
        return KH_ERR_INTERNAL;
    }
    p->th = calloc((size_t)(workers > 0 ? workers : 1), sizeof *p->th);
    p->cap = 4096; /* queued tasks never outgrow this in practice, so runs do not allocate */
    p->q = malloc((size_t)p->cap * sizeof *p->q);
    if (!p->th || !p->q) {
        tf_pool_destroy(p);
        return KH_ERR_NOMEM;
    }
    for (int k = 0; k < workers; k++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) break;
        wa->p = p;
        wa->slot = k + 1;
        if (pthread_create(&p->th[k], NULL, worker, wa) != 0) {
            free(wa);
            break;
        }
        p->n_workers++;
    }
    if (p->n_workers < workers) {
        tf_pool_destroy(p);
        return KH_ERR_INTERNAL;
    }
    /* return only once every worker runs: a thread's start-up (its argument freed, its thread-local storage
     * allocated by the loader) must not happen later, inside a step */
    pthread_mutex_lock(&p->mu);
    while (p->n_started < p->n_workers) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    (void)tf_pool_slot(); /* the calling thread's thread-local, too */
    *out = p;
    return KH_OK;
}

void tf_pool_destroy(tf_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int k = 0; k < p->n_workers; k++) pthread_join(p->th[k], NULL);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    free(p->th);
    free(p->q);
    free(p);
}

void tf_pool_submit(tf_pool *p, void (*fn)(void *arg, int32_t i), void *arg, int32_t i) {
    pthread_mutex_lock(&p->mu);
    int ok = push_locked(p, (tf_task){fn, arg, i});
    if (ok) pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->mu);
    if (!ok) fn(arg, i); /* no room: run it here rather than lose it */
}

void tf_pool_work_until_zero(tf_pool *p, _Atomic int32_t *counter) {
    pthread_mutex_lock(&p->mu);
    int polled = 0; /* since the last task or wake-up: block only after one polling round found nothing */
    while (atomic_load(counter) != 0) {
        tf_task t;
        if (pop_locked(p, &t)) {
            pthread_mutex_unlock(&p->mu);
            t.fn(t.arg, t.i);
            pthread_mutex_lock(&p->mu);
            polled = 0;
        } else if (!polled) {
            pthread_mutex_unlock(&p->mu);
            for (int k = 0; k < TF_POOL_SPIN && atomic_load(counter) != 0 &&
                            atomic_load_explicit(&p->count, memory_order_relaxed) == 0;
                 k++)
                kh_cpu_relax();
            pthread_mutex_lock(&p->mu);
            polled = 1;
        } else {
            pthread_cond_wait(&p->done, &p->mu);
            polled = 0;
        }
    }
    pthread_mutex_unlock(&p->mu);
}

/* A counter reached zero: wake whoever waits in tf_pool_work_until_zero or parallel_for. */
void tf_pool_notify(tf_pool *p);
void tf_pool_notify(tf_pool *p) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->done);
    pthread_mutex_unlock(&p->mu);
}

// --- intra-op parallel_for ---------------------------------------------------------------------------------
typedef struct pfor {
    tf_pool *p;
    tf_range_fn fn;
    void *ctx;
    int64_t n, chunk;
    int parts;
    _Atomic int next;     /* next part to claim */
    _Atomic int finished; /* parts done */
    _Atomic int32_t helpers; /* helper tasks started and not yet returned */
} pfor;

static void run_parts(pfor *f) {
    for (;;) {
        int k = atomic_fetch_add(&f->next, 1);
        if (k >= f->parts) return;
        int64_t b = (int64_t)k * f->chunk, e = b + f->chunk < f->n ? b + f->chunk : f->n;
        if (b < e) f->fn(f->ctx, b, e, tf_pool_slot());
        atomic_fetch_add(&f->finished, 1);
    }
}

static void helper(void *arg, int32_t i) {
    (void)i;
    pfor *f = arg;
    tf_pool *p = f->p; /* f lives on the owner's stack: not readable once helpers reaches 0 */
    run_parts(f);
    if (atomic_fetch_sub(&f->helpers, 1) == 1) tf_pool_notify(p);
}

void tf_parallel_for(tf_pool *p, int64_t n, int64_t grain, int parts, tf_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t max_parts = (n + grain - 1) / grain;
    if (parts > max_parts) parts = (int)max_parts;
    if (!p || p->n_workers == 0 || parts <= 1) {
        fn(ctx, 0, n, tf_pool_slot());
        return;
    }
    pfor f = {.p = p, .fn = fn, .ctx = ctx, .n = n, .chunk = (n + parts - 1) / parts, .parts = parts};
    atomic_init(&f.next, 0);
    atomic_init(&f.finished, 0);
    int helpers = parts - 1 < p->n_workers ? parts - 1 : p->n_workers;
    atomic_init(&f.helpers, helpers);
    pthread_mutex_lock(&p->mu);
    int queued = 0;
    for (int k = 0; k < helpers; k++) queued += push_locked(p, (tf_task){helper, &f, 0});
    if (queued < helpers) atomic_fetch_sub(&f.helpers, helpers - queued);
    if (queued) pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    run_parts(&f);
    /* withdraw helper tasks nobody started; wait for the ones running to return (they usually end within
     * microseconds of the caller's own parts, so poll before blocking) */
    pthread_mutex_lock(&p->mu);
    for (int32_t k = 0; k < p->count;) {
        tf_task *t = &p->q[(p->head + k) % p->cap];
        if (t->fn == helper && t->arg == &f) {
            for (int32_t j = k; j < p->count - 1; j++) p->q[(p->head + j) % p->cap] = p->q[(p->head + j + 1) % p->cap];
            p->count--;
            atomic_fetch_sub(&f.helpers, 1);
        } else {
            k++;
        }
    }
    if (atomic_load(&f.helpers) > 0) {
        pthread_mutex_unlock(&p->mu);
        for (int k = 0; k < TF_POOL_SPIN && atomic_load(&f.helpers) > 0; k++) kh_cpu_relax();
        pthread_mutex_lock(&p->mu);
    }
    while (atomic_load(&f.helpers) > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
