/* plugins/theano/cache/th_toolchain.h — the identity of the C compiler that builds theano's generated code:
 * what goes into the cache key (th_cache.h) besides the source, and the builder of the C path. */
#ifndef TH_TOOLCHAIN_H
#define TH_TOOLCHAIN_H

#include <stddef.h>

typedef struct th_toolchain {
    const char *cc;             /* as configured ("cc", "/usr/bin/clang") */
    const char *path;           /* the executable run: cc itself when it holds a '/', else found on PATH */
    const char *identity;       /* "path <realpath>\n" + the output of `cc -v` (LC_ALL=C) */
    const char *flags;          /* the configured flags, as given */
    const char *resolved_flags; /* the flags one per line, each `-march=native` / `-mtune=native` /
                                   `-mcpu=native` replaced by the target options the compiler's cc1 line
                                   shows (gcc: -march=<cpu> -m<feature>... --param ...; clang: -target-cpu,
                                   -target-feature, sorted) */
    char *const *argv_flags;    /* the configured flags split at blanks (no quoting), NULL-terminated */
    size_t nflags;
} th_toolchain;

/* The toolchain for compiler cc (a name looked up on PATH, or a path) and flags (blank-separated, no
 * quoting; NULL = none), probed once per process for each (cc, flags): later calls return the same object
 * (thread-safe; it lives until the process ends). Probing runs `cc -v` and `cc FLAGS -E -v -x c /dev/null`
 * (posix_spawn, no shell). NULL on failure with err filled; a missing compiler gives
 * "theano: C compiler 'cc' not found (set [plugin theano] cc = /path/to/compiler in khost.ini)". */
const th_toolchain *th_toolchain_probe(const char *cc, const char *flags, char *err, size_t errlen);

/* A th_cache build callback (th_cache_build_fn) for the C path; ctx is a const th_toolchain *.
 * Runs `cc FLAGS -shared -fPIC -o out_path src_path`, its stdout and stderr to log_path. On failure err is
 * "theano: cc failed on <src_path>: <first error line> (<exit status>; full output in <log_path>)". */
int th_toolchain_build_so(void *ctx, const char *src_path, const char *out_path, const char *log_path, char *err,
                          size_t errlen);

#endif
