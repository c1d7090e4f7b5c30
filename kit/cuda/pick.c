/* kit/cuda/pick.c — see khost/kit/cuda_pick.h. */
#define _POSIX_C_SOURCE 200809L
#include "khost/kit/cuda_pick.h"

#include <stdio.h>
#include <string.h>

#include "khost/kit/status.h"

int kh_algo_pick(const kh_algo_cand *c, int n, int want_det, int *fallback) {
    if (fallback) *fallback = 0;
    for (int k = 0; want_det && k < n; k++)
        if (c[k].ok && c[k].det) return k;
    for (int k = 0; k < n; k++)
        if (c[k].ok) {
            if (fallback) *fallback = want_det && !c[k].det;
            return k;
        }
    return -1;
}

void kh_algo_list(const kh_algo_cand *c, int n, char *buf, size_t len) {
    if (!len) return;
    snprintf(buf, len, "%s", n ? "" : "none");
    size_t u = strlen(buf);
    for (int k = 0; k < n && u < len; k++) {
        int w = snprintf(buf + u, len - u, "%s%d(%s%s, %zu B)", k ? " " : "", c[k].algo,
                         c[k].det ? "deterministic" : "non-deterministic", c[k].ok ? "" : ", refused", c[k].memory);
        if (w < 0) break;
        u += (size_t)w;
    }
}

void kh_algo_record(char *buf, size_t cap, int layer, const char *dir, int algo, int det) {
    size_t u = strnlen(buf, cap);
    if (cap < 4 || u + 4 >= cap) return; /* full (or already cut) */
    int w = snprintf(buf + u, cap - u, "%sL%d.%s=%d%s", u ? " " : "", layer, dir, algo, det ? "" : "~");
    if (w < 0 || (size_t)w >= cap - u) memcpy(buf + cap - 4, "...", 4);
}

const char *kh_cu_errtext(int r, const char *name, const char *desc, char *buf, size_t n) {
    if (name && desc) snprintf(buf, n, "%s: %s", name, desc);
    else if (name || desc) snprintf(buf, n, "%s", name ? name : desc);
    else snprintf(buf, n, "CUDA error %d", r);
    return buf;
}

const char *kh_call_name(const char *call, char *out, size_t n) {
    const char *p = strchr(call, '(');
    size_t len = p ? (size_t)(p - call) : strlen(call);
    for (size_t k = len; k > 0; k--)
        if (call[k - 1] == '.') {
            len -= k;
            call += k;
            break;
        }
    snprintf(out, n, "%.*s", (int)len, call);
    return out;
}

kh_status kh_cuda_arch_check(int major, int minor, int min_arch, const char *plugin, const char *id, char *err,
                             size_t errlen) {
    if (major * 10 + minor >= min_arch) return KH_OK;
    return kh_errf(err, errlen, KH_ERR_UNSUPPORTED,
                   "%s open on %s: compute capability %d.%d, built for sm_%d and newer (set KHOST_CUDA_ARCHS)", plugin,
                   id, major, minor, min_arch);
}
