/* th_build.c — a generated source to a loaded function: through the generated-code cache (cache/th_cache.h:
 * key = source + compiler identity + resolved flags + generator and BLAS versions), built by the configured C
 * compiler on a miss, then dlopen'ed. The cache is opened with the session; the compiler is probed once. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cache/th_cache.h"
#include "th.h"
#include "khost/kit/clock.h"


kh_status th_build_open(th_session *s, char *err, size_t errlen) {
    char warn[600];
    warn[0] = 0;
    if (th_cache_open(s->set.cache_dir[0] ? s->set.cache_dir : NULL, &s->cache, warn, sizeof warn, err, errlen) != 0)
        return KH_ERR_IO;
    if (warn[0]) th_log(s, KH_LOG_WARN, "%s", warn);
    return KH_OK;
}

void th_build_close(th_session *s) {
    th_cache_close(s->cache);
    s->cache = NULL;
}

const char *th_build_cache_dir(const th_session *s) { return s->cache ? th_cache_dir(s->cache) : ""; }

kh_status th_build(th_session *s, const char *source, size_t len, const char *what, void **dl, th_fn *fn, int *hit,
                   double *cc_s, double *load_s) {
    void *sym = NULL;
    kh_status st = th_build_sym(s, source, len, what, "th_main", dl, &sym, hit, cc_s, load_s);
    if (st == KH_OK) memcpy(fn, &sym, sizeof *fn);
    return st;
}

kh_status th_build_sym(th_session *s, const char *source, size_t len, const char *what, const char *entry, void **dl,
                       void **fn, int *hit, double *cc_s, double *load_s) {
    char err[600];
    const th_toolchain *tc = th_toolchain_probe(s->set.cc, s->set.cflags, err, sizeof err);
    if (!tc) return th_fail(s, KH_ERR_UNSUPPORTED, "compile", "%s", err);
    char blas[64], extra[256];
    snprintf(extra, sizeof extra, "generator=%s\nblas=%s\n", TH_GENERATOR_VERSION, th_blas_version(blas, sizeof blas));
    th_cache_req req;
    th_cache_req_c(&req, tc, source, len, extra);
    th_cache_result res;
    if (th_cache_get(s->cache, &req, &res, err, sizeof err) != 0)
        return th_fail(s, KH_ERR_INTERNAL, "compile", "%s function: %s", what, err);
    if (res.note[0]) th_log(s, KH_LOG_WARN, "%s function: %s", what, res.note);
    *hit = res.hit;
    *cc_s = res.compile_s;
    double t0 = kh_now();
    *dl = dlopen(res.artifact_path, RTLD_NOW | RTLD_LOCAL);
    if (!*dl) return th_fail(s, KH_ERR_INTERNAL, "compile", "dlopen %s: %s", res.artifact_path, dlerror());
    /* The first generated object stays loaded for the life of the process, and with it the OpenMP runtime it
     * pulled in: unloading that runtime under its idle worker threads would crash them. */
    static int pinned;
    if (!pinned && dlopen(res.artifact_path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)) pinned = 1;
    void *sym = dlsym(*dl, entry);
    *load_s = res.check_s + (kh_now() - t0);
    if (!sym) return th_fail(s, KH_ERR_INTERNAL, "compile", "%s has no %s", res.artifact_path, entry);
    *fn = sym;
    return KH_OK;
}
