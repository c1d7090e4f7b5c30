/* core/modules/modcache.h — the module cache: what inspecting each module file in a child process found, keyed by
 * the file's path, size, mtime, device and inode, so a module is inspected again only when it changes.
 *
 * File: $XDG_CACHE_HOME/khost/modules.cache (else ~/.cache/khost/modules.cache; the registry's
 * module_cache key overrides), UTF-8 text, rewritten atomically (temp file, fsync, rename):
 *   khost-module-cache 1 abi MAJOR.MINOR          first line; another version or ABI discards the file
 *   module TAB path TAB size TAB mtime_ns TAB dev TAB ino TAB status [TAB fields...]
 *     status ok:      TAB kind TAB abi TAB name TAB version TAB description TAB caps
 *     status noentry  (a shared library without the entry symbol: not a module)
 *     status error:   TAB message (the load error, or what happened: a signal, a timeout, an exit)
 * Fields escape '\\' as "\\\\", TAB as "\\t", newline as "\\n" and other control bytes as "\\xHH".
 * Lines that do not parse are dropped (the module is simply inspected again), never fatal.
 */
#ifndef KHOST_CORE_MODCACHE_H
#define KHOST_CORE_MODCACHE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

enum { KH_SCAN_OK = 0, KH_SCAN_NOENTRY = 1, KH_SCAN_ERROR = 2 };

typedef struct kh_modcache_entry {
    char *path;
    int64_t size, mtime_ns;
    uint64_t dev, ino;
    int status;                  /* KH_SCAN_ */
    int kind;                    /* ok: kh_module_kind */
    unsigned abi_major, abi_minor;
    char *name, *version, *description, *caps; /* ok ("" when absent) */
    char *message;               /* error */
} kh_modcache_entry;

typedef struct kh_modcache {
    char *file;                  /* NULL: no cache file (entries live for this process only) */
    kh_modcache_entry *v;
    int n, cap;
    int dirty;                   /* changed since load: kh_modcache_save rewrites the file */
} kh_modcache;

/* Parse cache text into c (appending); returns the number of lines dropped, -1 out of memory. */
int kh_modcache_parse(kh_modcache *c, const char *text, size_t len);
/* The file's text (malloc'ed, NUL-terminated); NULL out of memory. */
char *kh_modcache_format(const kh_modcache *c, size_t *len);
/* Read file (a missing one is an empty cache); 0 ok, -1 with err naming the file. c->file = file. */
int kh_modcache_load(kh_modcache *c, const char *file, char *err, size_t errlen);
/* Rewrite c->file atomically when dirty (creating its folder); 0 ok, -1 with err naming the file. */
int kh_modcache_save(kh_modcache *c, char *err, size_t errlen);
/* The entry for path whose size, mtime, device and inode match st; NULL when none or stale. */
const kh_modcache_entry *kh_modcache_lookup(const kh_modcache *c, const char *path, const struct stat *st);
/* Insert or replace (by path) a deep copy of e; 0 ok, -1 out of memory. */
int kh_modcache_put(kh_modcache *c, const kh_modcache_entry *e);
void kh_modcache_entry_free(kh_modcache_entry *e);
void kh_modcache_free(kh_modcache *c);
/* $XDG_CACHE_HOME/khost/modules.cache or $HOME/.cache/khost/modules.cache (malloc'ed); NULL when neither
 * variable is set to an absolute path. */
char *kh_modcache_default_path(void);

/* The field escaping above, shared with the scanner's report. escape: malloc'ed; unescape: in place,
 * -1 on a malformed escape. */
char *kh_modcache_escape(const char *s);
int kh_modcache_unescape(char *s);
#endif
