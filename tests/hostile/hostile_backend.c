/* tests/hostile/hostile_backend.c — a backend that breaks the ABI one way, chosen by HOSTILE_WAY: it wraps the
 * working backend named by HOSTILE_INNER (a path, fixed at compile time) and hands the host a copy of its table
 * with one call replaced, under the name "hostile_<way>". Compiled by test_hostile.sh, one .so per way:
 *   nopredict   the optional predict is NULL (a correct backend without it)
 *   nullmodel   compile returns KH_OK without a model
 *   envpast     environment() writes 64 bytes past the buffer it was given
 *   metrics     read_metrics counts more correct answers than samples (an accuracy of 2.0)
 *   segv        train_batch writes through a NULL pointer
 *   weightpast  set_weight reads 16 KiB past the end of the weights it was given
 *   profrows    profile claims more rows than the host gave it room for
 *   profnan     profile writes a NaN forward time
 *   profname    profile writes a row name without its terminating NUL
 *   profsplit   profile splits a backward of 0.5 s into 1 s of input and 1 s of weight gradient */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "khost/khost.h"

#define IS(w) (!strcmp(HOSTILE_WAY, w))

static kh_backend_api api, inner_api;
static kh_module_desc desc;

static kh_status null_compile(kh_bsession *s, const kh_model_spec *spec, const kh_compile_opts *o, kh_bmodel **out) {
    kh_status st = inner_api.compile(s, spec, o, out);
    if (st == KH_OK) inner_api.model_free(*out);
    *out = NULL;
    return st;
}

static kh_status env_past(kh_bsession *s, char *buf, size_t n) {
    memset(buf, 'x', n + 64);
    buf[n + 63] = 0;
    (void)s;
    return KH_OK;
}

static kh_status double_correct(kh_bmodel *m, uint32_t ph, kh_metrics *out, int32_t reset) {
    kh_status st = inner_api.read_metrics(m, ph, out, reset);
    if (st == KH_OK) out->correct = 2.0 * (double)out->samples;
    return st;
}

static kh_status null_write(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y) {
    (void)m, (void)x, (void)y;
    *(volatile int *)(uintptr_t)0 = 1;
    return KH_OK;
}

static kh_status weight_past(kh_bmodel *m, int32_t layer, int32_t param, const kh_tensor *w) {
    int64_t n = 1;
    for (int d = 0; d < w->rank; d++) n *= w->dims[d];
    float sum = 0;
    for (int64_t i = n; i < n + 4096; i++) sum += ((const volatile float *)w->data)[i];
    return sum == sum ? inner_api.set_weight(m, layer, param, w) : KH_ERR_INVALID;
}

/* One plausible row, then the one thing this way breaks (the model is never run). */
static kh_status bad_profile(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y, int32_t warmup, int32_t steps,
                             kh_profile *out) {
    (void)m, (void)x, (void)y, (void)warmup;
    if (out->cap_rows < 1) return KH_ERR_INVALID;
    kh_profile_row *r = &out->rows[0];
    memset(r, 0, sizeof *r);
    strcpy(r->what, "dense");
    r->forward_s = r->optimizer_s = 0.25;
    r->backward_s = 0.5;
    r->calls = 2;
    out->n_rows = 1, out->steps = steps, out->total_s = 1, out->other_s = 0;
    if (IS("profrows")) out->n_rows = out->cap_rows + 5;
    if (IS("profnan")) r->forward_s = NAN;
    if (IS("profname")) memset(r->what, 'x', sizeof r->what);
    if (IS("profsplit") && KH_HAS_MEMBER(kh_profile, out->struct_size, grads) && out->grads)
        ((kh_profile_grad *)out->grads)[0] = (kh_profile_grad){.input_s = 1, .weight_s = 1};
    return KH_OK;
}

__attribute__((visibility("default"))) const kh_module_desc *khost_module_entry(const kh_host_api *host) {
    void *h = dlopen(HOSTILE_INNER, RTLD_NOW | RTLD_LOCAL);
    if (!h) return NULL;
    const kh_module_desc *(*entry)(const kh_host_api *);
    void *sym = dlsym(h, "khost_module_entry");
    if (!sym) return NULL;
    memcpy(&entry, &sym, sizeof entry);
    const kh_module_desc *inner = entry(host);
    if (!inner || !inner->api) return NULL;
    memcpy(&inner_api, inner->api, sizeof inner_api);
    api = inner_api;
    if (IS("nopredict")) api.predict = NULL;
    if (IS("nullmodel")) api.compile = null_compile;
    if (IS("envpast")) api.environment = env_past;
    if (IS("metrics")) api.read_metrics = double_correct;
    if (IS("segv")) api.train_batch = null_write;
    if (IS("weightpast")) api.set_weight = weight_past;
    if (!strncmp(HOSTILE_WAY, "prof", 4)) api.profile = bad_profile;
    desc = *inner;
    desc.name = "hostile_" HOSTILE_WAY;
    desc.api = &api;
    return &desc;
}
