/* plugins/theano/cache/th_cache.h — theano's content-addressed cache of generated code (shared objects from
 * C, CUBINs from NVRTC), safe for many processes sharing one home directory.
 *
 * Layout: <dir>/<hh>/<key>/ where key is the SHA-256 (64 hex digits) of the key text and hh its first two
 * digits. An entry holds the source (req->source_name), the artifact (req->artifact_name), build.log (the
 * builder's output), meta (the full key text, then "artifact-size N\nartifact-sha256 HEX\nend\n") and lock.
 * The key text: "khost-theano-cache-key 1\n", "source-name NAME\n", "artifact-name NAME\n", then
 * "tool-identity", "tool-flags", "extra" and "source", each as "<label> <byte count>\n<bytes>\n".
 *
 * Protocol: a hit needs meta equal byte for byte to the expected key text and the artifact's size and
 * SHA-256 equal to meta's; anything else (missing, truncated, corrupt, another key) is rebuilt, never
 * returned. Building takes an flock on <entry>/lock (only while building), checks again, writes each file
 * to a temporary name in the entry, fsyncs and renames it (artifact first, meta last) and fsyncs the
 * directory: nothing is ever written in place. Nothing here deletes an entry; th_cache_prune (and the
 * khost-theano-cache command) does, taking each entry's lock first. */
#ifndef TH_CACHE_H
#define TH_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "th_toolchain.h"

#define TH_CACHE_PATH_MAX 4096

typedef struct th_cache th_cache;

/* Builds the artifact: reads src_path, writes out_path (a temporary name in the entry: write it, do not
 * rename it), may write its diagnostics to log_path. Returns 0, or nonzero with err filled. */
typedef int (*th_cache_build_fn)(void *ctx, const char *src_path, const char *out_path, const char *log_path,
                                 char *err, size_t errlen);

typedef struct th_cache_req {
    const char *source; /* the generated source: bytes, not necessarily NUL-terminated */
    size_t source_len;
    const char *source_name;   /* file name in the entry: "fn.c", "fn.cu" */
    const char *artifact_name; /* "fn.so", "fn.cubin" (not "meta", "lock", "build.log" or the source's) */
    const char *tool_identity; /* compiler identity (th_toolchain.identity; NVRTC's version); NULL = "" */
    const char *tool_flags;    /* the full resolved flags (th_toolchain.resolved_flags); NULL = "" */
    const char *key_extra;     /* code generator version, BLAS/CUDA library versions; NULL = "" */
    th_cache_build_fn build;
    void *build_ctx;
} th_cache_req;

typedef struct th_cache_result {
    char artifact_path[TH_CACHE_PATH_MAX]; /* <entry>/<artifact_name>: dlopen / cuModuleLoad this */
    char entry_dir[TH_CACHE_PATH_MAX];
    char key[65];     /* the entry's SHA-256, hex */
    int hit;          /* 1: taken from the cache (verified); 0: built by this call */
    double compile_s; /* seconds in the build callback (0 on a hit) */
    double check_s;   /* seconds verifying entries (meta comparison, artifact SHA-256) */
    char note[256];   /* why an existing entry was rebuilt, or "" */
} th_cache_result;

/* Opens the cache in dir, or when dir is NULL or "" in $XDG_CACHE_HOME/khost/theano (an absolute
 * XDG_CACHE_HOME), else ~/.cache/khost/theano; missing folders are created 0700.
 * Refused (returns -1, err names the folder) when the folder is group- or world-writable or belongs to
 * another user. When it cannot be created or written, a private temporary cache is made instead
 * (mkdtemp under $TMPDIR, else /tmp; removed by th_cache_close) and warn holds the line to log:
 * "theano: cache DIR is not writable (WHY); using private temporary cache TMP for this process".
 * Returns 0 (warn "" when nothing to say) or -1. */
int th_cache_open(const char *dir, th_cache **out, char *warn, size_t warnlen, char *err, size_t errlen);
void th_cache_close(th_cache *c);
const char *th_cache_dir(const th_cache *c);
int th_cache_is_temporary(const th_cache *c);

/* The default cache folder (see th_cache_open) into buf. Returns 0, or -1 with err filled. */
int th_cache_default_dir(char *buf, size_t buflen, char *err, size_t errlen);

/* Checks that an existing folder may hold a cache: a directory, owned by this user, not group- or
 * world-writable. Returns 0, or -1 with err naming it (the refusal th_cache_open gives). */
int th_cache_check_dir(const char *dir, char *err, size_t errlen);

/* The key text of req (malloc'ed, *len bytes, NUL-terminated) and its SHA-256 hex. NULL when out of memory. */
char *th_cache_key_text(const th_cache_req *req, size_t *len, char key[65]);

/* Gets req's artifact: a verified entry, else builds it (see the protocol above). Returns 0 with res filled,
 * or -1 with err filled (a build failure gives the builder's message). Thread- and process-safe. */
int th_cache_get(th_cache *c, const th_cache_req *req, th_cache_result *res, char *err, size_t errlen);

/* Fills req for the C path: source "fn.c", artifact "fn.so", tc's identity and resolved flags, and
 * th_toolchain_build_so as the builder. */
void th_cache_req_c(th_cache_req *req, const th_toolchain *tc, const char *source, size_t source_len,
                    const char *key_extra);

/* --- listing and pruning (the khost-theano-cache command) ------------------------------------------------- */
typedef struct th_cache_entry_info {
    const char *key;       /* 64 hex digits */
    const char *path;      /* the entry's folder */
    const char *artifact;  /* the artifact's name from meta's key text, or NULL (no valid meta) */
    uint64_t bytes;        /* all files of the entry */
    double age_s;          /* since meta was last modified or used (a hit refreshes its time), else since the
                              folder's last change */
    int complete;          /* meta present and parsable */
} th_cache_entry_info;

/* Calls fn for every entry folder of the cache in dir (sorted by key). Returns the number of entries, or -1
 * with err filled (fn returning nonzero stops the walk and is returned). */
int th_cache_list(const char *dir, int (*fn)(void *arg, const th_cache_entry_info *e), void *arg, char *err,
                  size_t errlen);

typedef struct th_cache_prune_stats {
    unsigned removed, kept_busy, kept_young, failed;
    uint64_t bytes_removed;
} th_cache_prune_stats;

/* Removes the entries older than older_than_s seconds (< 0: all), each only after taking its lock without
 * waiting: an entry being built is kept (kept_busy). report, if not NULL, gets one line per entry acted on.
 * Returns 0, or -1 with err filled (failed counts entries that could not be removed; err names the first). */
int th_cache_prune(const char *dir, double older_than_s, th_cache_prune_stats *stats,
                   void (*report)(void *arg, const char *line), void *arg, char *err, size_t errlen);

#endif
