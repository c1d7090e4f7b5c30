/* tests/tensorflow/test_tf_alloc.c — the tensorflow backend allocates nothing during a step: every buffer
 * comes from the memory plan and is allocated at compile time. After a warm-up, training, evaluation,
 * prediction and the probes of four models (dense, convolution, embedding + bidirectional LSTM, one-hot LSTM)
 * run while every call of malloc/calloc/realloc/free (interposed in this executable, so calls from the
 * plugin and from libraries it uses are seen) and of the host's alloc are counted: both counts must be zero.
 * Run with 1 and 2 threads (the parallel executor's queue must not allocate either). Not built under the
 * sanitizers, whose runtime owns malloc. tests/cntk runs the same executable for cntk (KHOST_TEST_PLUGIN,
 * KHOST_TEST_PLUGIN_DIR); KHOST_TEST_MALLOC_FROM=a,b admits malloc-family calls made directly from the
 * shared objects whose file names contain a or b (oneDNN's primitive execute builds its argument map with
 * operator new on every call): every other call still fails, and host allocations must stay zero. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "testutil.h"
#include "khost/kit/rng.h"
#include "khost/kit/spec.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

static atomic_int counting;
static atomic_long n_calls;
/* who made the counted calls (return addresses): to name them when the check fails, and to admit those from
 * the objects KHOST_TEST_MALLOC_FROM names */
#define MAX_CALLERS 65536
static void *callers[MAX_CALLERS];
static atomic_int n_callers;
static void note_caller(void *ra) {
    int k = atomic_fetch_add(&n_callers, 1);
    if (k < MAX_CALLERS) callers[k] = ra;
}

/* Counted calls not made from an admitted object (all of them without KHOST_TEST_MALLOC_FROM); the first
 * such caller's index goes to *first. */
static long unadmitted_calls(long calls, int *first) {
    const char *from = getenv("KHOST_TEST_MALLOC_FROM");
    int n = atomic_load(&n_callers);
    *first = 0;
    if (!from || !*from) return calls;
    if (n > MAX_CALLERS) return calls; /* not every caller was seen: admit nothing */
    long bad = 0;
    for (int k = 0; k < n; k++) {
        Dl_info info;
        int ok = 0;
        if (dladdr(callers[k], &info) && info.dli_fname) {
            char list[256];
            snprintf(list, sizeof list, "%s", from);
            for (char *save = NULL, *t = strtok_r(list, ",", &save); t && !ok; t = strtok_r(NULL, ",", &save))
                ok = strstr(info.dli_fname, t) != NULL;
        }
        if (!ok && bad++ == 0) *first = k;
    }
    return bad;
}
#define COUNT()                                                \
    do {                                                       \
        if (atomic_load(&counting)) {                          \
            atomic_fetch_add(&n_calls, 1);                     \
            note_caller(__builtin_return_address(0));          \
        }                                                      \
    } while (0)

void *malloc(size_t n) {
    COUNT();
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b) {
    COUNT();
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n) {
    COUNT();
    return __libc_realloc(p, n);
}
void free(void *p) {
    if (p) COUNT();
    __libc_free(p);
}
void *aligned_alloc(size_t a, size_t n) {
    COUNT();
    return __libc_memalign(a, n);
}
int posix_memalign(void **out, size_t a, size_t n) {
    COUNT();
    *out = __libc_memalign(a, n);
    return *out ? 0 : 12;
}

static atomic_long n_host_allocs;
static void *count_alloc(size_t n) {
    if (atomic_load(&counting)) atomic_fetch_add(&n_host_allocs, 1);
    return aligned_alloc(64, (n + 63) / 64 * 64);
}

static kb_backend B;

static void run_model(const kh_model_spec *sp) {
    kh_bmodel *m = kb_compile(&B, sp, 8, 0);
    CHECK(m != NULL, "%s: compile", sp->name);
    if (!m) return;
    CHECK(kb_init_weights(&B, m, sp, 5, NULL) == 0, "%s: weights", sp->name);
    kh_rng r;
    kh_rng_seed(&r, 3);
    kb_batch bt[2];
    kb_make_batch(&bt[0], sp, 8, &r);
    kb_make_batch(&bt[1], sp, 5, &r); /* a short last batch */
    kh_model_shapes sh;
    char err[256];
    kh_spec_infer(sp, &sh, err, sizeof err);
    const kh_layer_shapes *last = &sh.layers[sh.n_layers - 1];
    float *out = __libc_malloc((size_t)(8 * last->out_numel) * sizeof(float));
    float *dy = __libc_calloc((size_t)(8 * last->out_numel), sizeof(float));
    long before_calls = 0, before_host = 0;
    /* rounds 0-2 warm up (OpenBLAS sets up a buffer the first time each thread, or each level of concurrency,
     * needs one), round 3 is counted */
    for (int round = 0; round < 4; round++) {
        if (round == 3) {
            before_calls = atomic_load(&n_calls);
            atomic_store(&n_callers, 0);
            before_host = atomic_load(&n_host_allocs);
            atomic_store(&counting, 1);
        }
        for (int k = 0; k < 4; k++) {
            kb_batch *b = &bt[k % 2];
            int64_t yd[1] = {b->n}, od[4] = {b->n, last->out_shape[0], last->out_shape[1], last->out_shape[2]};
            kh_tensor ty = kb_tensor(KH_I32, KH_LAYOUT_NC, 1, yd, b->labels);
            kh_tensor to = kb_tensor(KH_F32, KH_LAYOUT_ANY, last->out_rank + 1, od, out);
            kh_tensor td = kb_tensor(KH_F32, KH_LAYOUT_ANY, last->out_rank + 1, od, dy);
            CHECK(B.api->train_batch(m, &b->x_backend, &ty) == KH_OK, "%s train", sp->name);
            CHECK(B.api->eval_batch(m, &b->x_backend, &ty) == KH_OK, "%s eval", sp->name);
            CHECK(B.api->predict(m, &b->x_backend, &to) == KH_OK, "%s predict", sp->name);
            CHECK(B.api->forward(m, &b->x_backend, &to) == KH_OK, "%s forward", sp->name);
            CHECK(B.api->backward(m, &td, NULL) == KH_OK, "%s backward", sp->name);
            kh_metrics met;
            CHECK(B.api->read_metrics(m, KH_PHASE_TRAIN, &met, 1) == KH_OK, "%s metrics", sp->name);
        }
    }
    atomic_store(&counting, 0);
    long calls = atomic_load(&n_calls) - before_calls, host = atomic_load(&n_host_allocs) - before_host;
    int first = 0;
    long bad = unadmitted_calls(calls, &first);
    printf("  %-28s allocations during 4 steps of every function: malloc family %ld (%ld admitted), host alloc "
           "%ld\n", sp->name, calls, calls - bad, host);
    CHECK(bad == 0, "%s: %ld malloc-family calls during steps", sp->name, bad);
    for (int k = first; bad != 0 && k < atomic_load(&n_callers) && k < first + 8; k++) {
        Dl_info info;
        if (dladdr(callers[k], &info))
            fprintf(stderr, "  call %d from %s (%s)\n", k, info.dli_fname ? info.dli_fname : "?",
                    info.dli_sname ? info.dli_sname : "?");
    }
    CHECK(host == 0, "%s: %ld host allocations during steps", sp->name, host);
    __libc_free(out);
    __libc_free(dy);
    kh_model_shapes_free(&sh);
    kb_free_batch(&bt[0]);
    kb_free_batch(&bt[1]);
    B.api->model_free(m);
}

int main(void) {
    static kh_host_api host;
    host = *kb_host();
    host.alloc = count_alloc;
    kb_set_host(&host);
    setenv("KHOST_TEST_PLUGIN", "tensorflow", 0); /* unless the test names another (tests/cntk) */
    const char *th = getenv("TF_TEST_THREADS");
    kb_load(&B, th && atoi(th) > 0 ? atoi(th) : 2);
    const kh_model_spec *specs;
    int n = kb_small_models(&specs);
    for (int i = 0; i < n; i++) run_model(&specs[i]);
    kb_unload(&B);
    return kh_test_finish("test_tf_alloc");
}
