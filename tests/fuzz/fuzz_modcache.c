/* tests/fuzz/fuzz_modcache.c — libFuzzer target for the module cache file (kh_modcache_parse) and the
 * scanner's report (kh_scan_parse_report): both are read from places a module or another process could
 * have written. The first byte picks the parser. Promises checked beyond memory safety: every cache entry
 * kept has an absolute path and a known status, an ok entry a kind and a name; formatting what was parsed
 * and parsing that again drops nothing and formats to the same bytes; each entry is found again by its own
 * key; a report either fills a valid entry or says why not, naming the module. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "khost/abi.h"
#include "modules/modcache.h"
#include "modules/scan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PROMISE(cond) \
    do {              \
        if (!(cond)) __builtin_trap(); \
    } while (0)

static void fuzz_cache(const uint8_t *data, size_t size) {
    kh_modcache c;
    memset(&c, 0, sizeof c);
    int dropped = kh_modcache_parse(&c, (const char *)data, size);
    if (dropped < 0) {
        kh_modcache_free(&c);
        return;
    }
    for (int i = 0; i < c.n; i++) {
        const kh_modcache_entry *e = &c.v[i];
        PROMISE(e->path && e->path[0] == '/');
        PROMISE(e->status == KH_SCAN_OK || e->status == KH_SCAN_NOENTRY || e->status == KH_SCAN_ERROR);
        if (e->status == KH_SCAN_OK)
            PROMISE((e->kind == KH_MODULE_BACKEND || e->kind == KH_MODULE_TASK) && e->name && e->name[0]);
        if (e->status == KH_SCAN_ERROR) PROMISE(e->message && e->message[0]);
        if (e->mtime_ns < -(INT64_C(1) << 62) || e->mtime_ns > (INT64_C(1) << 62)) continue; /* no real file */
        struct stat st;
        memset(&st, 0, sizeof st);
        st.st_size = (off_t)e->size;
        st.st_mtim.tv_sec = (time_t)(e->mtime_ns / 1000000000);
        st.st_mtim.tv_nsec = (long)(e->mtime_ns % 1000000000);
        if (st.st_mtim.tv_nsec < 0) st.st_mtim.tv_sec -= 1, st.st_mtim.tv_nsec += 1000000000;
        st.st_dev = (dev_t)e->dev;
        st.st_ino = (ino_t)e->ino;
        PROMISE(kh_modcache_lookup(&c, e->path, &st) == e);
    }
    size_t len;
    char *text = kh_modcache_format(&c, &len);
    if (text) {
        kh_modcache d;
        memset(&d, 0, sizeof d);
        int again = kh_modcache_parse(&d, text, len);
        PROMISE(again == 0 && d.n == c.n);
        size_t len2;
        char *text2 = kh_modcache_format(&d, &len2);
        PROMISE(!text2 || (len2 == len && !memcmp(text, text2, len)));
        free(text2);
        kh_modcache_free(&d);
        free(text);
    }
    kh_modcache_free(&c);
}

static void fuzz_report(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    if (!buf) return;
    memcpy(buf, data, size);
    buf[size] = 0;
    kh_modcache_entry e;
    memset(&e, 0, sizeof e);
    static const char path[] = "/fuzz/module.so";
    if (kh_scan_parse_report(buf, size, path, &e) == 0) {
        PROMISE(e.status == KH_SCAN_OK || e.status == KH_SCAN_NOENTRY || e.status == KH_SCAN_ERROR);
        if (e.status == KH_SCAN_OK) PROMISE(e.name && e.name[0] && e.version && e.description && e.caps);
        if (e.status == KH_SCAN_ERROR) PROMISE(e.message);
    } else {
        PROMISE(e.status == KH_SCAN_ERROR && e.message && strstr(e.message, path));
    }
    kh_modcache_entry_free(&e);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (data[0] & 1) fuzz_report(data + 1, size - 1);
    else fuzz_cache(data + 1, size - 1);
    return 0;
}
