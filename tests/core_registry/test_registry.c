/* tests/core_registry/test_registry.c — the INI registry: values, path resolution, defaults, and that every
 * kind of bad input is reported with file:line (or, for a missing file, the path and the system's reason).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "khost/abi.h"
#include "modules/registry.h"
#include "testutil.h"

static char dir[1024];  /* realpath of this run's temporary folder */
static char parent[1024];

static const char *write_ini(const char *name, const char *text, size_t len) {
    static char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    kh_test_write_file(path, text, len);
    return path;
}

/* Load text as <dir>/<name>; returns rc, err filled. */
static int load_text(const char *name, const char *text, kh_registry *r, char *err, size_t errlen) {
    return kh_registry_load(write_ini(name, text, strlen(text)), r, err, errlen);
}

static int streq(const char *a, const char *b) { return a && b && !strcmp(a, b); }

static void expect_error(const char *name, const char *text, int line, const char *what) {
    kh_registry r;
    char err[1024] = "", loc[1400];
    int rc = load_text(name, text, &r, err, sizeof err);
    snprintf(loc, sizeof loc, "%s/%s:%d: ", dir, name, line);
    CHECK(rc != 0, "%s: accepted", name);
    CHECK(strncmp(err, loc, strlen(loc)) == 0, "%s: message should start with '%s': %s", name, loc, err);
    CHECK(strstr(err, what) != NULL, "%s: expected '%s' in: %s", name, what, err);
    CHECK(r.file == NULL && r.modules == NULL && r.kv == NULL, "%s: registry not cleared on error", name);
    if (rc == 0) kh_registry_free(&r);
}

static void test_valid(void) {
    const char *text = "; khost registry for the test\n"            /* 1 */
                       "[khost]\n"                                  /* 2 */
                       "plugin_dirs = plugins : /opt/extra::more/\n" /* 3 */
                       "task_dirs = tasks\n"                        /* 4 */
                       "data_dir = ../data\n"                       /* 5 */
                       "results_dir = /var/tmp//res/.\n"            /* 6 */
                       "default_device = cuda:0\n"                  /* 7 */
                       "seed = 18446744073709551615\n"              /* 8 */
                       "\n"                                         /* 9 */
                       "[plugin cntk]\n"                            /* 10 */
                       "path = plugins/cntk.so ; inline comment\n"  /* 11 */
                       "enabled = yes\n"                            /* 12 */
                       "threads = 4\n"                              /* 13 */
                       "[task mnist_mlp]\n"                         /* 14 */
                       "path = /abs/mnist.so\n"                     /* 15 */
                       "enabled = 0\n"                              /* 16 */
                       "[plugin bare]\n"                            /* 17: no keys at all */
                       "[task  cntk ]\n"                            /* 18: same name, other kind */
                       "enabled: off\n";                            /* 19 */
    kh_registry r;
    char err[1024] = "", want[1400];
    int rc = load_text("valid.ini", text, &r, err, sizeof err);
    CHECK(rc == 0, "valid file refused: %s", err);
    if (rc) return;
    snprintf(want, sizeof want, "%s/valid.ini", dir);
    CHECK(streq(r.file, want), "file %s", r.file);
    CHECK(streq(r.dir, dir), "dir %s", r.dir);
    CHECK(r.n_plugin_dirs == 3, "plugin_dirs %d", r.n_plugin_dirs);
    if (r.n_plugin_dirs == 3) {
        snprintf(want, sizeof want, "%s/plugins", dir);
        CHECK(streq(r.plugin_dirs[0], want), "plugin_dirs[0] %s", r.plugin_dirs[0]);
        CHECK(streq(r.plugin_dirs[1], "/opt/extra"), "plugin_dirs[1] %s", r.plugin_dirs[1]);
        snprintf(want, sizeof want, "%s/more", dir);
        CHECK(streq(r.plugin_dirs[2], want), "plugin_dirs[2] %s", r.plugin_dirs[2]);
    }
    snprintf(want, sizeof want, "%s/tasks", dir);
    CHECK(r.n_task_dirs == 1 && streq(r.task_dirs[0], want), "task_dirs");
    snprintf(want, sizeof want, "%s/data", parent);
    CHECK(streq(r.data_dir, want), "data_dir %s, want %s", r.data_dir, want);
    CHECK(streq(r.results_dir, "/var/tmp/res"), "results_dir %s", r.results_dir);
    CHECK(streq(r.default_device, "cuda:0"), "default_device %s", r.default_device);
    CHECK(r.seed == UINT64_MAX, "seed %llu", (unsigned long long)r.seed);
    CHECK(r.n_modules == 4, "modules %d", r.n_modules);
    if (r.n_modules == 4) {
        kh_reg_module *m = r.modules;
        snprintf(want, sizeof want, "%s/plugins/cntk.so", dir);
        CHECK(streq(m[0].name, "cntk") && m[0].kind == KH_MODULE_BACKEND && streq(m[0].path, want) &&
                  m[0].enabled == 1 && m[0].line == 10,
              "[plugin cntk]: %s %d %s %d %d", m[0].name, m[0].kind, m[0].path, m[0].enabled, m[0].line);
        CHECK(streq(m[1].name, "mnist_mlp") && m[1].kind == KH_MODULE_TASK && streq(m[1].path, "/abs/mnist.so") &&
                  m[1].enabled == 0 && m[1].line == 14,
              "[task mnist_mlp]");
        CHECK(streq(m[2].name, "bare") && m[2].path == NULL && m[2].enabled == 1 && m[2].line == 17,
              "an empty section still registers its module");
        CHECK(streq(m[3].name, "cntk") && m[3].kind == KH_MODULE_TASK && m[3].enabled == 0 && m[3].line == 18,
              "[task  cntk ] normalised, 'off' is false");
    }
    CHECK(streq(kh_registry_get(&r, "plugin cntk", "threads"), "4"), "module-specific key in kv");
    CHECK(streq(kh_registry_get(&r, "plugin cntk", "path"), "plugins/cntk.so"), "kv holds the raw value");
    CHECK(streq(kh_registry_get(&r, "khost", "seed"), "18446744073709551615"), "[khost] keys in kv");
    CHECK(streq(kh_registry_get(&r, "task cntk", "enabled"), "off"), "normalised section name in kv");
    CHECK(kh_registry_get(&r, "plugin cntk", "nosuch") == NULL, "absent key");
    CHECK(kh_registry_get(&r, "plugin nosuch", "path") == NULL, "absent section");
    int line13 = 0;
    for (int i = 0; i < r.n_kv; i++)
        if (streq(r.kv[i].key, "threads")) line13 = r.kv[i].line;
    CHECK(line13 == 13, "kv line %d", line13);
    CHECK(r.n_warnings == 0, "no warnings expected, got %d (%s)", r.n_warnings, r.n_warnings ? r.warnings[0] : "");
    kh_registry_free(&r);
    CHECK(r.file == NULL && r.n_modules == 0, "free clears");
}

static void test_defaults(void) {
    setenv("XDG_DATA_HOME", "/var/tmp/xdg-data", 1);
    const char *texts[] = {"", "[plugin x]\n", "[khost]\n; nothing set\n"};
    for (int i = 0; i < 3; i++) {
        kh_registry r;
        char err[1024] = "", want[1400];
        int rc = load_text("defaults.ini", texts[i], &r, err, sizeof err);
        CHECK(rc == 0, "defaults %d: %s", i, err);
        if (rc) continue;
        snprintf(want, sizeof want, "%s/plugins", dir);
        CHECK(r.n_plugin_dirs == 1 && streq(r.plugin_dirs[0], want), "default plugin_dirs");
        snprintf(want, sizeof want, "%s/tasks", dir);
        CHECK(r.n_task_dirs == 1 && streq(r.task_dirs[0], want), "default task_dirs");
        /* installed conventions, never beside the registry: $XDG_DATA_HOME/khost and ./results */
        snprintf(want, sizeof want, "%s/khost", getenv("XDG_DATA_HOME"));
        CHECK(streq(r.data_dir, want), "default data_dir %s, want %s", r.data_dir, want);
        char cwd[1024];
        CHECK(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
        snprintf(want, sizeof want, "%s/results", cwd);
        CHECK(streq(r.results_dir, want), "default results_dir %s, want %s", r.results_dir, want);
        CHECK(streq(r.default_device, "auto") && r.seed == 1, "default device/seed");
        kh_registry_free(&r);
    }
    /* An explicitly empty list means no folder, not the default. */
    kh_registry r;
    char err[1024];
    int rc = load_text("nodirs.ini", "[khost]\nplugin_dirs =\n", &r, err, sizeof err);
    CHECK(rc == 0 && r.n_plugin_dirs == 0 && r.n_task_dirs == 1, "empty plugin_dirs");
    if (!rc) kh_registry_free(&r);
}

static void test_warnings(void) {
    const char *text = "\xEF\xBB\xBF[khost]\r\n" /* 1: BOM and CRLF must not shift lines */
                       "seed = 7\r\n"           /* 2 */
                       "bogus = 2\r\n"          /* 3 */
                       "[foo bar]\r\n"          /* 4 */
                       "x = 1\r\n";             /* 5 */
    kh_registry r;
    char err[1024] = "", want[1400];
    int rc = load_text("warn.ini", text, &r, err, sizeof err);
    CHECK(rc == 0, "warnings are not errors: %s", err);
    if (rc) return;
    CHECK(r.seed == 7, "seed %llu", (unsigned long long)r.seed);
    CHECK(r.n_warnings == 2, "2 warnings expected, got %d", r.n_warnings);
    if (r.n_warnings == 2) {
        snprintf(want, sizeof want, "%s/warn.ini:3: unknown key 'bogus' in [khost]", dir);
        CHECK(streq(r.warnings[0], want), "warning 0: %s", r.warnings[0]);
        snprintf(want, sizeof want, "%s/warn.ini:4: unknown section [foo bar]", dir);
        CHECK(strncmp(r.warnings[1], want, strlen(want)) == 0, "warning 1: %s", r.warnings[1]);
    }
    CHECK(streq(kh_registry_get(&r, "foo bar", "x"), "1"), "keys of unknown sections still recorded");
    kh_registry_free(&r);

    rc = load_text("nosec.ini", "stray = 1\n[khost]\n", &r, err, sizeof err);
    CHECK(rc == 0 && r.n_warnings == 1 && strstr(r.warnings[0], "nosec.ini:1: key 'stray' outside any section"),
          "key before any section warns: %s", rc ? err : (r.n_warnings ? r.warnings[0] : "none"));
    if (!rc) kh_registry_free(&r);
}

static void test_errors(void) {
    expect_error("malformed.ini", "[khost]\nseed = 1\nthis line is not ini\n", 3,
                 "malformed line 'this line is not ini'");
    expect_error("header.ini", "[khost]\n[plugin x\npath = a.so\n", 2, "no closing ']'");
    expect_error("enabled.ini", "[plugin x]\npath = x.so\nenabled = maybe\n", 3,
                 "enabled = 'maybe' in [plugin x]: expected true/false");
    expect_error("dupsec.ini", "[plugin x]\npath = a.so\n\n[plugin x]\n", 4,
                 "duplicate section [plugin x] (first at line 1)");
    expect_error("dupkhost.ini", "[khost]\nseed = 1\n[khost]\n", 3, "duplicate section [khost] (first at line 1)");
    expect_error("dupkey.ini", "[task t]\npath = a.so\n;\npath = b.so\n", 4,
                 "duplicate key 'path' in [task t] (first at line 2)");
    expect_error("cont.ini", "[plugin x]\npath = a.so\n  b.so\n", 3, "multi-line values are not supported");
    expect_error("seed.ini", "[khost]\nseed = -3\n", 2, "seed '-3' is not an unsigned 64-bit integer");
    expect_error("seed2.ini", "[khost]\nseed = 99999999999999999999\n", 2, "is not an unsigned 64-bit integer");
    expect_error("name.ini", "[khost]\n[plugin Cntk]\n", 2, "invalid module name 'Cntk'");
    expect_error("noname.ini", "[task]\n", 1, "[task] needs a module name");
    expect_error("twowords.ini", "[plugin a b]\n", 1, "invalid module name 'a b'");
    expect_error("emptypath.ini", "[plugin x]\npath =\n", 2, "path is empty");
    expect_error("emptykey.ini", "[plugin x]\n= 3\n", 2, "missing key");
    expect_error("datadir.ini", "[khost]\ndata_dir =\n", 2, "data_dir is empty");
    /* The earliest problem is reported whichever of inih or the registry found it. */
    expect_error("first1.ini", "[plugin x]\nenabled = 2\n\nnot ini\n", 2, "enabled = '2'");
    expect_error("first2.ini", "[plugin x]\nnot ini\n\nenabled = 2\n", 2, "malformed line");

    /* lines beyond inih's 200-byte buffer are read (cluster paths), up to 65536 characters */
    static char longline[70100];
    memset(longline, 'a', sizeof longline);
    memcpy(longline, "[khost]\nx = ", 12);
    memcpy(longline + 70050, "\n", 2);
    expect_error("long.ini", longline, 2, "line longer than 65536");
    static char okline[5100];
    memset(okline, 'b', sizeof okline);
    memcpy(okline, "[plugin x]\nopt = ", 17);
    memcpy(okline + 17 + 5000, " ; note\n", 9);
    kh_registry lr;
    char lerr[1024];
    int lrc = load_text("ok_long.ini", okline, &lr, lerr, sizeof lerr);
    CHECK(lrc == 0, "a 5017-character key line: %s", lerr);
    if (lrc == 0) {
        int found = 0;
        for (int i = 0; i < lr.n_kv; i++)
            if (streq(lr.kv[i].key, "opt")) found = strlen(lr.kv[i].value) == 5000 && lr.kv[i].line == 2;
        CHECK(found, "the long value is kept whole (5000 'b', comment dropped) at line 2");
        CHECK(lr.n_modules == 1 && streq(lr.modules[0].name, "x"), "its section still registers x");
        kh_registry_free(&lr);
    }

    /* A line may end in any run of CRs before its LF (files edited on several systems): the run is not
     * content, and a run longer than inih's buffer must neither overflow it nor split the line. */
    static char crline[700];
    size_t crlen = (size_t)snprintf(crline, sizeof crline, "[plugin x]\nopt = v");
    memset(crline + crlen, '\r', 400);
    crlen += 400;
    crlen += (size_t)snprintf(crline + crlen, sizeof crline - crlen, "\nenabled = false\r\r\n");
    kh_registry cr;
    char crerr[1024];
    int crrc = kh_registry_load(write_ini("crs.ini", crline, crlen), &cr, crerr, sizeof crerr);
    CHECK(crrc == 0, "a line ending in 400 CRs: %s", crerr);
    if (crrc == 0) {
        const char *v = kh_registry_get(&cr, "plugin x", "opt");
        CHECK(streq(v, "v"), "its value is 'v' without the CRs (got '%s')", v ? v : "(none)");
        CHECK(cr.n_modules == 1 && cr.modules[0].enabled == 0, "the next line is read as its own (enabled = false)");
        kh_registry_free(&cr);
    }

    kh_registry r;
    char err[1024];
    const char *p = write_ini("nul.ini", "[khost]\nseed = 1\0 2\n", 19);
    int rc = kh_registry_load(p, &r, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "nul.ini:2: line contains a NUL byte"), "NUL byte: %s", err);
    if (!rc) kh_registry_free(&r);

    char path[1200], want[1400];
    snprintf(path, sizeof path, "%s/does-not-exist.ini", dir);
    rc = kh_registry_load(path, &r, err, sizeof err);
    snprintf(want, sizeof want, "%s: cannot open: %s", path, strerror(ENOENT));
    CHECK(rc != 0 && streq(err, want), "missing file: %s", err);
    rc = kh_registry_load(dir, &r, err, sizeof err); /* a folder is not a file */
    CHECK(rc != 0 && strstr(err, dir), "folder as registry: %s", err);
}

static void test_locate(void) {
    char bin[1200], exe[1300], ini1[1300], ini2[1400], err[2048], libk[1400];
    snprintf(bin, sizeof bin, "%s/inst/bin", dir);
    snprintf(exe, sizeof exe, "%s/khost", bin);
    snprintf(libk, sizeof libk, "%s/inst/lib/khost", dir);
    snprintf(ini1, sizeof ini1, "%s/khost.ini", bin);
    snprintf(ini2, sizeof ini2, "%s/khost.ini", libk);
    char tmp[1400];
    snprintf(tmp, sizeof tmp, "%s/inst", dir);
    mkdir(tmp, 0755);
    mkdir(bin, 0755);
    snprintf(tmp, sizeof tmp, "%s/inst/lib", dir);
    mkdir(tmp, 0755);
    mkdir(libk, 0755);
    kh_test_write_file(exe, "", 0);

    unsetenv("KHOST_CONF");
    char *p = kh_registry_locate(exe, err, sizeof err);
    CHECK(p == NULL && strstr(err, ini1) && strstr(err, "inst/lib/khost/khost.ini") && strstr(err, "KHOST_CONF"),
          "nothing found lists what was tried: %s", err);
    free(p);

    kh_test_write_file(ini2, "", 0);
    p = kh_registry_locate(exe, err, sizeof err);
    CHECK(streq(p, ini2), "installed layout: %s (%s)", p ? p : "NULL", err);
    free(p);

    kh_test_write_file(ini1, "", 0);
    p = kh_registry_locate(exe, err, sizeof err);
    CHECK(streq(p, ini1), "beside the binary wins: %s (%s)", p ? p : "NULL", err);
    free(p);

    setenv("KHOST_CONF", ini2, 1);
    p = kh_registry_locate(exe, err, sizeof err);
    CHECK(streq(p, ini2), "KHOST_CONF wins: %s (%s)", p ? p : "NULL", err);
    free(p);

    setenv("KHOST_CONF", "/nonexistent/k.ini", 1);
    p = kh_registry_locate(exe, err, sizeof err);
    CHECK(p == NULL && strstr(err, "KHOST_CONF=/nonexistent/k.ini: cannot open"), "bad KHOST_CONF: %s", err);
    free(p);
    unsetenv("KHOST_CONF");
}

int main(void) {
    char *real = realpath(kh_test_tmpdir("registry"), NULL);
    if (!real) {
        fprintf(stderr, "test setup: realpath failed\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", real);
    free(real);
    snprintf(parent, sizeof parent, "%s", dir);
    *strrchr(parent, '/') = 0;
    if (!parent[0]) strcpy(parent, "/");
    test_valid();
    test_defaults();
    test_warnings();
    test_errors();
    test_locate();
    if (!kh_test_failed) { /* keep the files for inspection when something failed */
        char cmd[1100], out[256];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        kh_test_run(cmd, out, sizeof out);
    }
    return kh_test_finish("core_registry");
}
