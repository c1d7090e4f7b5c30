/* th_prelude.c — the support code at the top of every generated source: th_rt.h (C) or th_rt_cuda.h (CUDA C)
 * with the khost headers it includes written out in place, so a generated source compiles on its own and its
 * text is the whole of what the cache key must cover. System headers stay includes in C; NVRTC has none, so the
 * CUDA prelude drops them (th_rt_cuda.h defines what they would have). */
#include <string.h>

#include "th.h"
#include "th_embedded.h"
#include "khost/kit/status.h"

static const th_embedded_file *find(const char *name, size_t len) {
    for (const th_embedded_file *f = th_embedded_files; f->name; f++)
        if (strlen(f->name) == len && memcmp(f->name, name, len) == 0) return f;
    return NULL;
}

/* Copy a file, replacing `#include "x"` lines of embedded files by their text (and `#include <x>` lines by a
 * comment when drop_system). */
static int put_file(th_sb *b, const th_embedded_file *f, int depth, int drop_system) {
    if (depth > 8) return 0;
    const char *p = f->text, *end = f->text + f->len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl + 1 : end;
        const char *q = p;
        while (q < le && (*q == ' ' || *q == '\t')) q++;
        if ((size_t)(le - q) > 10 && memcmp(q, "#include \"", 10) == 0) {
            const char *nm = q + 10, *close = memchr(nm, '"', (size_t)(le - nm));
            const th_embedded_file *inc = close ? find(nm, (size_t)(close - nm)) : NULL;
            if (inc) {
                th_sb_printf(b, "/* ---- %s ---- */\n", inc->name);
                if (!put_file(b, inc, depth + 1, drop_system)) return 0;
                p = le;
                continue;
            }
            if (close) return 0; /* a local include the plugin did not embed */
        }
        if (drop_system && (size_t)(le - q) > 10 && memcmp(q, "#include <", 10) == 0) {
            int k = (int)(le - q);
            while (k > 0 && (q[k - 1] == '\n' || q[k - 1] == '\r')) k--;
            th_sb_printf(b, "/* (system header dropped: %.*s) */\n", k, q);
            p = le;
            continue;
        }
        th_sb_put(b, p, (size_t)(le - p));
        p = le;
    }
    return 1;
}

static kh_status prelude(th_sb *b, const char *root, int drop_system, char *err, size_t errlen) {
    const th_embedded_file *rt = find(root, strlen(root));
    if (!rt || !put_file(b, rt, 0, drop_system))
        return kh_errf(err, errlen, KH_ERR_INTERNAL, "theano: support code incomplete (an include is not embedded)");
    return KH_OK;
}

kh_status th_prelude(th_sb *b, char *err, size_t errlen) { return prelude(b, "th_rt.h", 0, err, errlen); }

kh_status th_prelude_cuda(th_sb *b, char *err, size_t errlen) { return prelude(b, "th_rt_cuda.h", 1, err, errlen); }
