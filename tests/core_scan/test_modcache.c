/* tests/core_scan/test_modcache.c — the module cache file: field escaping, format/parse round trip,
 * staleness by size, mtime, device and inode, malformed lines and foreign headers dropped (never fatal),
 * load of a missing file, atomic save and reload, and a save that cannot be written naming the file. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "khost/abi.h"
#include "modules/modcache.h"
#include "testutil.h"

static kh_modcache_entry entry(const char *path, int status) {
    kh_modcache_entry e;
    memset(&e, 0, sizeof e);
    e.path = (char *)path;
    e.size = 1234;
    e.mtime_ns = 1700000000123456789LL;
    e.dev = 64769;
    e.ino = 42;
    e.status = status;
    if (status == KH_SCAN_OK) {
        e.kind = KH_MODULE_BACKEND;
        e.abi_major = 1;
        e.abi_minor = 0;
        e.name = "fx";
        e.version = "0.1\t\"tab\"";
        e.description = "line one\nline two \\ back\x01slash";
        e.caps = "dense conv2d";
    } else if (status == KH_SCAN_ERROR) {
        e.message = "/m/x.so: crashed while being inspected: SIGSEGV (Segmentation fault); not loaded";
    }
    return e;
}

static void test_escape(void) {
    const char *raw = "a\tb\nc\\d\x7f" "e\x1f";
    char *esc = kh_modcache_escape(raw);
    CHECK(esc && !strchr(esc, '\t') && !strchr(esc, '\n'), "escaped text has no separators: %s", esc ? esc : "(null)");
    CHECK(esc && kh_modcache_unescape(esc) == 0 && !strcmp(esc, raw), "round trip");
    free(esc);
    const char *badv[] = {"\\q", "\\x00", "\\x41", "\\x4", "\\", "\\xZZ"};
    for (size_t i = 0; i < sizeof badv / sizeof *badv; i++) {
        char buf[16];
        snprintf(buf, sizeof buf, "%s", badv[i]);
        CHECK(kh_modcache_unescape(buf) == -1, "malformed escape '%s' refused", badv[i]);
    }
}

static void test_roundtrip_and_lookup(void) {
    kh_modcache c;
    memset(&c, 0, sizeof c);
    kh_modcache_entry a = entry("/m/a.so", KH_SCAN_OK), b = entry("/m/b\tweird\nname.so", KH_SCAN_ERROR),
                      n = entry("/m/n.so", KH_SCAN_NOENTRY);
    CHECK(kh_modcache_put(&c, &a) == 0 && kh_modcache_put(&c, &b) == 0 && kh_modcache_put(&c, &n) == 0, "put");
    size_t len;
    char *text = kh_modcache_format(&c, &len);
    CHECK(text != NULL, "format");
    kh_modcache d;
    memset(&d, 0, sizeof d);
    CHECK(kh_modcache_parse(&d, text, len) == 0, "parse of our own text drops nothing");
    CHECK(d.n == 3, "3 entries back, got %d", d.n);
    size_t len2;
    char *text2 = kh_modcache_format(&d, &len2);
    CHECK(text2 && len2 == len && !memcmp(text, text2, len), "format(parse(format)) is identical");
    struct stat st;
    memset(&st, 0, sizeof st);
    st.st_size = 1234;
    st.st_mtim.tv_sec = 1700000000;
    st.st_mtim.tv_nsec = 123456789;
    st.st_dev = 64769;
    st.st_ino = 42;
    const kh_modcache_entry *e = kh_modcache_lookup(&d, "/m/a.so", &st);
    CHECK(e && e->status == KH_SCAN_OK && e->kind == KH_MODULE_BACKEND && !strcmp(e->name, "fx") &&
              !strcmp(e->description, a.description) && !strcmp(e->version, a.version),
          "ok entry comes back whole");
    e = kh_modcache_lookup(&d, "/m/b\tweird\nname.so", &st);
    CHECK(e && e->status == KH_SCAN_ERROR && !strcmp(e->message, b.message), "error entry and odd path come back");
    struct stat s2 = st;
    s2.st_size++;
    CHECK(!kh_modcache_lookup(&d, "/m/a.so", &s2), "size change is stale");
    s2 = st;
    s2.st_mtim.tv_nsec++;
    CHECK(!kh_modcache_lookup(&d, "/m/a.so", &s2), "mtime change (ns) is stale");
    s2 = st;
    s2.st_ino++;
    CHECK(!kh_modcache_lookup(&d, "/m/a.so", &s2), "inode change is stale");
    s2 = st;
    s2.st_dev++;
    CHECK(!kh_modcache_lookup(&d, "/m/a.so", &s2), "device change is stale");
    CHECK(!kh_modcache_lookup(&d, "/m/zzz.so", &st), "unknown path");
    /* replacing by path keeps one entry */
    kh_modcache_entry a2 = entry("/m/a.so", KH_SCAN_NOENTRY);
    CHECK(kh_modcache_put(&d, &a2) == 0 && d.n == 3 && kh_modcache_lookup(&d, "/m/a.so", &st)->status == KH_SCAN_NOENTRY,
          "put replaces by path");
    free(text);
    free(text2);
    kh_modcache_free(&c);
    kh_modcache_free(&d);
}

static void test_malformed(void) {
    char head[64];
    snprintf(head, sizeof head, "khost-module-cache 1 abi %d.%d\n", KH_ABI_MAJOR, KH_ABI_MINOR);
    const char *lines =
        "module\t/a.so\t1\t2\t3\t4\tnoentry\n"          /* good */
        "module\trelative.so\t1\t2\t3\t4\tnoentry\n"    /* path not absolute */
        "module\t/b.so\tx\t2\t3\t4\tnoentry\n"          /* size not a number */
        "module\t/c.so\t1\t2\t3\t4\tok\t9\t1.0\tn\tv\td\tc\n" /* unknown kind */
        "module\t/d.so\t1\t2\t3\t4\terror\n"            /* error without message */
        "module\t/e.so\t1\t2\t3\t4\tok\t1\t1.0\t\tv\td\tc\n" /* empty name */
        "module\t/f.so\t1\t2\t3\t4\tnoentry\textra\n"   /* extra field */
        "garbage line\n"
        "module\t/g.so\t1\t2\t3\t4\tnoentry";          /* no newline: cut short */
    char buf[2048];
    snprintf(buf, sizeof buf, "%s%s", head, lines);
    kh_modcache c;
    memset(&c, 0, sizeof c);
    int dropped = kh_modcache_parse(&c, buf, strlen(buf));
    CHECK(dropped == 8 && c.n == 1 && !strcmp(c.v[0].path, "/a.so"), "8 dropped, 1 kept (dropped %d, n %d)",
          dropped, c.n);
    kh_modcache_free(&c);
    memset(&c, 0, sizeof c);
    snprintf(buf, sizeof buf, "khost-module-cache 1 abi 99.0\nmodule\t/a.so\t1\t2\t3\t4\tnoentry\n");
    CHECK(kh_modcache_parse(&c, buf, strlen(buf)) > 0 && c.n == 0, "another ABI's cache is discarded whole");
    kh_modcache_free(&c);
}

static void test_files(void) {
    const char *dir = kh_test_tmpdir("modcache");
    char file[512], err[1400];
    snprintf(file, sizeof file, "%s/sub/dir/modules.cache", dir);
    kh_modcache c;
    memset(&c, 0, sizeof c);
    CHECK(kh_modcache_load(&c, file, err, sizeof err) == 0 && c.n == 0 && !c.dirty, "missing file: empty cache");
    CHECK(kh_modcache_save(&c, err, sizeof err) == 0 && access(file, F_OK) != 0, "clean cache: nothing written");
    kh_modcache_entry a = entry("/m/a.so", KH_SCAN_OK);
    CHECK(kh_modcache_put(&c, &a) == 0 && c.dirty, "put marks dirty");
    CHECK(kh_modcache_save(&c, err, sizeof err) == 0, "save: %s", err);
    CHECK(access(file, F_OK) == 0 && !c.dirty, "saved (folders created)");
    kh_modcache d;
    memset(&d, 0, sizeof d);
    CHECK(kh_modcache_load(&d, file, err, sizeof err) == 0 && d.n == 1 && !d.dirty, "reload: %s", err);
    kh_modcache_free(&d);
    kh_modcache_free(&c);
    /* a folder where the file's folder should be: the save fails and names it */
    char blocked[600];
    snprintf(blocked, sizeof blocked, "%s/blocker", dir);
    kh_test_write_file(blocked, "x", 1);
    snprintf(file, sizeof file, "%s/blocker/modules.cache", dir);
    memset(&c, 0, sizeof c);
    CHECK(kh_modcache_load(&c, file, err, sizeof err) != 0 || c.n == 0, "load under a file");
    CHECK(kh_modcache_put(&c, &a) == 0, "put");
    CHECK(kh_modcache_save(&c, err, sizeof err) != 0 && strstr(err, "blocker"), "unwritable save names the path: %s",
          err);
    kh_modcache_free(&c);
}

int main(void) {
    test_escape();
    test_roundtrip_and_lookup();
    test_malformed();
    test_files();
    return kh_test_finish("core_modcache");
}
