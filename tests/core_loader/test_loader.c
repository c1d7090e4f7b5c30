/* tests/core_loader/test_loader.c — module loading, ABI negotiation, discovery and lookup.
 *
 * Every refusal case is a fixture module that differs from a good one in one way (tests/fixtures); each must
 * be refused with a message naming the file and what is wrong (both versions for version mismatches), and
 * must leave nothing mapped. Discovery runs on registries written into a temporary folder with copies of
 * the fixtures, so search folders hold exactly what the test put there.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "modules/loader.h"
#include "modules/registry.h"
#include "testutil.h"

#define FX KH_FIXTURE_DIR

// --- a host-services table of our own, recording what modules and the loader log ---------------------------
static char log_text[16384];
static void t_log(kh_log_level level, const char *module, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void t_log(kh_log_level level, const char *module, const char *fmt, ...) {
    size_t len = strlen(log_text);
    if (len + 2 >= sizeof log_text) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(log_text + len, sizeof log_text - len - 1, fmt, ap);
    va_end(ap);
    strcat(log_text, "\n");
}
static void *t_alloc(size_t n) { return malloc(n); }
static void t_free(void *p) { free(p); }
static const char *t_config_get(const char *section, const char *key) { return NULL; }
static void t_progress(const char *what, int64_t done, int64_t total) {}
static const kh_host_api host = {sizeof(kh_host_api), KH_ABI_MAJOR, KH_ABI_MINOR, "test", t_log, t_alloc,
                                 t_free, t_config_get, t_progress};

// --- helpers ----------------------------------------------------------------------------------------------------
/* 1 when a line of /proc/self/maps names needle, 0 when none does, -1 when it cannot be read */
static int mapped(const char *needle) {
    int n = kh_test_mapped(needle);
    return n < 0 ? -1 : n > 0;
}

static void copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb");
    if (!in) {
        fprintf(stderr, "test setup: cannot read %s\n", from);
        exit(2);
    }
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, in);
    fclose(in);
    kh_test_write_file(to, buf, n);
}

static void write_text(const char *path, const char *text) { kh_test_write_file(path, text, strlen(text)); }

/* All substrings must occur in s. */
static int has_all(const char *s, ...) {
    va_list ap;
    va_start(ap, s);
    const char *sub;
    int ok = 1;
    while ((sub = va_arg(ap, const char *)))
        if (!strstr(s, sub)) ok = 0;
    va_end(ap);
    return ok;
}

/* The load error whose message contains `needle`, or NULL. */
static const char *error_with(const kh_modules *ms, const char *needle) {
    for (int i = 0; i < ms->n_errors; i++)
        if (strstr(ms->errors[i].message, needle)) return ms->errors[i].message;
    return NULL;
}

// --- single-file loading ---------------------------------------------------------------------------------------
static void test_good_modules(void) {
    kh_module m;
    char err[1024];
    int rc = kh_module_load(FX "/fx_backend.so", &host, &m, err, sizeof err);
    CHECK(rc == 0, "fx_backend refused: %s", err);
    if (rc) return;
    CHECK(m.kind == KH_MODULE_BACKEND && m.backend && !m.task, "kind %d", m.kind);
    CHECK(!strcmp(m.desc->name, "fx_backend"), "name %s", m.desc->name);
    CHECK(m.path[0] == '/' && strstr(m.path, "/fx_backend.so"), "path %s", m.path);
    CHECK(m.enabled == 1 && m.from_registry == 0, "flags %d %d", m.enabled, m.from_registry);
    CHECK(m.backend->compile && m.backend->sync && !m.backend->forward, "api members");
    kh_caps caps = {.struct_size = sizeof caps};
    CHECK(m.backend->get_caps(KH_DEVICE_CPU, &caps) == KH_OK && caps.available == 1 && caps.struct_size == sizeof caps,
          "calling into the module: available %d", caps.available);
    CHECK(mapped("/fx_backend.so") == 1, "fx_backend.so should be mapped while loaded");
    kh_module_unload(&m);
    CHECK(m.handle == NULL && m.path == NULL, "unload clears the struct");
    CHECK(mapped("/fx_backend.so") == 0, "fx_backend.so still mapped after unload");

    rc = kh_module_load(FX "/fx_task.so", &host, &m, err, sizeof err);
    CHECK(rc == 0, "fx_task refused: %s", err);
    if (rc) return;
    CHECK(m.kind == KH_MODULE_TASK && m.task && !m.backend, "kind %d", m.kind);
    CHECK(!strcmp(m.task->info()->dataset, "none"), "task info through the copied table");
    CHECK(m.task->augment == NULL && m.task->after_training == NULL, "optional task members stay NULL");
    kh_module_unload(&m);

    /* An ABI 1.0 table that ends at sync is valid; members past it must read as NULL, not as garbage. */
    rc = kh_module_load(FX "/fx_oldapi.so", &host, &m, err, sizeof err);
    CHECK(rc == 0, "fx_oldapi refused: %s", err);
    if (!rc) {
        CHECK(m.backend->struct_size == offsetof(kh_backend_api, forward), "struct_size %u kept",
              (unsigned)m.backend->struct_size);
        CHECK(m.backend->forward == NULL, "member past the module's struct_size must be NULL");
        kh_module_unload(&m);
    }
    /* A module compiled against ABI 1.0 loads under 1.1; the member 1.1 appended reads as NULL. */
    rc = kh_module_load(FX "/fx_abi10.so", &host, &m, err, sizeof err);
    CHECK(rc == 0, "fx_abi10 (ABI 1.0) refused: %s", err);
    if (!rc) {
        CHECK(m.desc->abi_minor == 0 && m.backend->struct_size == offsetof(kh_backend_api, profile),
              "ABI 1.0 descriptor and table size kept (%u)", (unsigned)m.backend->struct_size);
        CHECK(m.backend->forward != NULL, "1.0 members kept");
        CHECK(!KH_HAS_MEMBER(kh_backend_api, m.backend->struct_size, profile) && m.backend->profile == NULL,
              "profile (ABI 1.1) absent from a 1.0 table");
        CHECK(m.backend->compile_info == NULL, "compile_info (ABI 1.2) absent from a 1.0 table");
        kh_module_unload(&m);
    }
    /* A module compiled against ABI 1.1 loads under 1.2; compile_info, which its source fills but its table
     * does not cover, reads as NULL. */
    rc = kh_module_load(FX "/fx_abi11.so", &host, &m, err, sizeof err);
    CHECK(rc == 0, "fx_abi11 (ABI 1.1) refused: %s", err);
    if (!rc) {
        CHECK(m.desc->abi_minor == 1 && m.backend->struct_size == offsetof(kh_backend_api, compile_info),
              "ABI 1.1 descriptor and table size kept (%u)", (unsigned)m.backend->struct_size);
        CHECK(KH_HAS_MEMBER(kh_backend_api, m.backend->struct_size, profile), "a 1.1 table covers profile");
        CHECK(!KH_HAS_MEMBER(kh_backend_api, m.backend->struct_size, compile_info) && m.backend->compile_info == NULL,
              "compile_info (ABI 1.2) past a 1.1 table must read as NULL");
        kh_module_unload(&m);
    }
    rc = kh_module_load(FX "/fx_compile_info.so", &host, &m, err, sizeof err);
    CHECK(rc == 0, "fx_compile_info refused: %s", err);
    if (!rc) {
        kh_compile_info ci = {.struct_size = sizeof ci};
        CHECK(m.backend->compile_info != NULL && m.backend->compile_info(NULL, &ci) == KH_OK && ci.cache == KH_COMPILE_HIT,
              "an ABI 1.2 table keeps compile_info");
        kh_module_unload(&m);
    }
    rc = kh_module_load(FX "/fx_probes.so", &host, &m, err, sizeof err);
    CHECK(rc == 0 && m.backend->forward != NULL, "fx_probes: forward kept (%s)", err);
    if (!rc) kh_module_unload(&m);
}

typedef struct refusal {
    const char *file;
    const char *expect[4];
} refusal;

static void test_refusals(void) {
    char v_major[64], v_minor[64], host_v[64], small[96], task_small[96];
    snprintf(host_v, sizeof host_v, "host ABI %d.%d", KH_ABI_MAJOR, KH_ABI_MINOR);
    snprintf(v_major, sizeof v_major, "module ABI 2.0");
    snprintf(v_minor, sizeof v_minor, "module ABI %d.%d", KH_ABI_MAJOR, KH_ABI_MINOR + 1);
    snprintf(small, sizeof small, "ABI 1.0 descriptor (%zu bytes)", (size_t)KH_MODULE_DESC_MIN_SIZE);
    snprintf(task_small, sizeof task_small, "api struct_size %zu is smaller", offsetof(kh_task_api, describe));
    char api_sizeof[96]; /* the message states the real sizeof beside the minimum it enforces */
    snprintf(api_sizeof, sizeof api_sizeof, "sizeof(kh_backend_api) is %zu", sizeof(kh_backend_api));
    const refusal cases[] = {
        {"fx_major2.so", {v_major, host_v, "major version differs", NULL}},
        {"fx_minor_newer.so", {v_minor, host_v, "minor version is newer", NULL}},
        {"fx_noentry.so", {"no entry symbol khost_module_entry", "not a khost module", NULL}},
        {"fx_small.so", {"struct_size 12 is smaller", small, NULL}},
        {"fx_nulldesc.so", {"khost_module_entry returned NULL", NULL}},
        {"fx_badname.so", {"invalid module name 'Bad-Name'", NULL}},
        {"fx_badkind.so", {"unknown module kind 7", NULL}},
        {"fx_noapi.so", {"backend 'fx_backend' has no api table", NULL}},
        {"fx_smallapi.so", {"api struct_size 8 is smaller than the smallest backend table", api_sizeof, NULL}},
        {"fx_task_smallapi.so", {task_small, "task table", NULL}},
        {"fx_nullfn.so", {"required function 'compile' is NULL", NULL}},
        {"fx_task_nullfn.so", {"required function 'get_batch' is NULL", NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[1024], err[1024] = "", tag[128];
        snprintf(path, sizeof path, "%s/%s", FX, cases[i].file);
        snprintf(tag, sizeof tag, "/%s", cases[i].file);
        kh_module m;
        memset(&m, 0x5a, sizeof m);
        int rc = kh_module_load(path, &host, &m, err, sizeof err);
        CHECK(rc != 0, "%s was accepted", cases[i].file);
        CHECK(strstr(err, tag) != NULL, "%s: message does not name the file: %s", cases[i].file, err);
        for (int k = 0; cases[i].expect[k]; k++)
            CHECK(strstr(err, cases[i].expect[k]) != NULL, "%s: expected '%s' in: %s", cases[i].file,
                  cases[i].expect[k], err);
        CHECK(m.handle == NULL && m.path == NULL && m.desc == NULL, "%s: out not cleared", cases[i].file);
        CHECK(mapped(tag) == 0, "%s: still mapped after refusal (no dlclose)", cases[i].file);
        if (rc == 0) kh_module_unload(&m);
    }

    char err[1024];
    kh_module m;
    CHECK(kh_module_load(FX "/does_not_exist.so", &host, &m, err, sizeof err) != 0 &&
              has_all(err, "does_not_exist.so", "cannot open", "No such file", NULL),
          "missing file: %s", err);
    const char *dir = kh_test_tmpdir_kept("loader-junk");
    char junk[1024];
    snprintf(junk, sizeof junk, "%s/junk.so", dir);
    write_text(junk, "this is not an ELF file\n");
    CHECK(kh_module_load(junk, &host, &m, err, sizeof err) != 0 && has_all(err, "junk.so", "cannot load", NULL),
          "non-ELF file: %s", err);
    CHECK(kh_module_load(FX "/fx_backend.so", NULL, &m, err, sizeof err) != 0 && strstr(err, "host"),
          "NULL host table must be refused: %s", err);
}

// --- a refused module asked for by name ---------------------------------------------------------------------------
static void test_refused_by_name(void) {
    const char *root = kh_test_tmpdir_kept("loader-refused");
    char p[1024], q[1024], ini[1024], err[2048];
    snprintf(p, sizeof p, "%s/mods", root);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/fx_major2.so", FX);
    snprintf(q, sizeof q, "%s/mods/my_task.so", root);
    copy_file(p, q);
    snprintf(ini, sizeof ini, "%s/khost.ini", root);
    write_text(ini, "[khost]\nplugin_dirs = mods\ntask_dirs = mods\n");
    kh_registry reg;
    if (kh_registry_load(ini, &reg, err, sizeof err) != 0) {
        CHECK(0, "registry: %s", err);
        return;
    }
    kh_modules ms;
    kh_modules_discover(&reg, &host, &ms);
    CHECK(ms.n == 0 && ms.n_errors == 1, "the ABI 2.0 module is refused (%d loaded, %d errors)", ms.n, ms.n_errors);
    /* by registry-style name (no .so) and by file name: the refusal's reason, not "no task module named" */
    const char *names[] = {"my_task", "my_task.so"};
    for (int i = 0; i < 2; i++) {
        CHECK(kh_modules_find(&ms, KH_MODULE_TASK, names[i], &host, err, sizeof err) == NULL &&
                  has_all(err, "my_task.so", "major version differs", NULL) && !strstr(err, "no task module named"),
              "%s: %s", names[i], err);
    }
    kh_modules_free(&ms);
    kh_registry_free(&reg);
}

// --- discovery and lookup --------------------------------------------------------------------------------------
static void test_discovery(void) {
    const char *root = kh_test_tmpdir_kept("loader-disc");
    char p[1024], q[1024], ini[1024];
    snprintf(p, sizeof p, "%s/mods", root);
    mkdir(p, 0755);
    const char *copies[][2] = {{"fx_backend.so", "fx_backend.so"}, {"fx_task.so", "fx_task.so"},
                               {"fx_drop.so", "fx_drop.so"},       {"fx_oldapi.so", "zz_dropped.so"},
                               {"fx_noentry.so", "libplain.so"},   {"fx_backend.so", "notes.txt"}};
    for (size_t i = 0; i < sizeof copies / sizeof *copies; i++) {
        snprintf(p, sizeof p, "%s/%s", FX, copies[i][0]);
        snprintf(q, sizeof q, "%s/mods/%s", root, copies[i][1]);
        copy_file(p, q);
    }
    snprintf(ini, sizeof ini, "%s/khost.ini", root);
    write_text(ini, "[khost]\n"
                    "plugin_dirs = mods\n"
                    "task_dirs = mods\n"
                    "[plugin fx_backend]\n"
                    "path = mods/fx_backend.so\n"
                    "enabled = false\n"
                    "[task fx_task]\n"
                    "path = ./mods/../mods/fx_task.so\n"
                    "[plugin fx_drop]\n"
                    "enabled = no\n");
    kh_registry reg;
    char err[2048];
    int rc = kh_registry_load(ini, &reg, err, sizeof err);
    CHECK(rc == 0, "registry: %s", err);
    if (rc) return;
    log_text[0] = 0;
    kh_modules ms;
    kh_modules_discover(&reg, &host, &ms);
    CHECK(ms.n_errors == 0, "unexpected load errors: %s", ms.n_errors ? ms.errors[0].message : "");
    CHECK(ms.n == 4, "4 modules expected, got %d", ms.n);
    if (ms.n != 4) goto out;
    /* Registry order first, then the search folder in name order; each file exactly once. */
    CHECK(!strcmp(ms.v[0].desc->name, "fx_backend") && ms.v[0].from_registry == 1 && ms.v[0].enabled == 0,
          "fx_backend: named, disabled (%s %d %d)", ms.v[0].desc->name, ms.v[0].from_registry, ms.v[0].enabled);
    CHECK(!strcmp(ms.v[1].desc->name, "fx_task") && ms.v[1].from_registry == 1 && ms.v[1].enabled == 1,
          "fx_task: named, enabled");
    CHECK(!strcmp(ms.v[2].desc->name, "fx_drop") && ms.v[2].from_registry == 1 && ms.v[2].enabled == 0,
          "fx_drop: found by search for its path-less disabled section (%d %d)", ms.v[2].from_registry,
          ms.v[2].enabled);
    CHECK(!strcmp(ms.v[3].desc->name, "fx_oldapi") && ms.v[3].from_registry == 0 && ms.v[3].enabled == 1,
          "zz_dropped.so: an unnamed .so dropped into the folder is discovered");
    CHECK(strstr(log_text, "libplain.so") && strstr(log_text, "no entry symbol"),
          "a .so without entry is skipped, but logged at debug level: [%s]", log_text);

    /* Lookup by registry name, by file name, by path; kind respected. */
    kh_module *b = kh_modules_find(&ms, KH_MODULE_BACKEND, "fx_drop", &host, err, sizeof err);
    CHECK(b == &ms.v[2], "find by name: %s", err);
    kh_module *t = kh_modules_find(&ms, KH_MODULE_TASK, "fx_task.so", &host, err, sizeof err);
    CHECK(t == &ms.v[1], "find by file name: %s", err);
    CHECK(kh_modules_find(&ms, KH_MODULE_BACKEND, "zz_dropped.so", &host, err, sizeof err) == &ms.v[3],
          "find a discovered module by file name: %s", err);
    CHECK(kh_modules_find(&ms, KH_MODULE_BACKEND, "fx_task", &host, err, sizeof err) == NULL &&
              has_all(err, "'fx_task' is a task module", "not a backend", NULL),
          "kind mismatch by name: %s", err);
    CHECK(kh_modules_find(&ms, KH_MODULE_BACKEND, "nosuch", &host, err, sizeof err) == NULL &&
              has_all(err, "no backend module named 'nosuch'", "fx_backend", "fx_drop", NULL),
          "unknown name lists what exists: %s", err);
    snprintf(p, sizeof p, "%s/mods/fx_task.so", root);
    CHECK(kh_modules_find(&ms, KH_MODULE_TASK, p, &host, err, sizeof err) == t && ms.n == 4,
          "find by path of a loaded file returns it without loading again: %s", err);

    kh_module *before = ms.v;
    kh_module *ondemand = kh_modules_find(&ms, KH_MODULE_BACKEND, FX "/fx_probes.so", &host, err, sizeof err);
    CHECK(ondemand && ms.n == 5 && !strcmp(ondemand->desc->name, "fx_probes"), "load on demand by path: %s", err);
    CHECK(ms.v == before && !strcmp(b->desc->name, "fx_drop"), "earlier pointers stay valid after on-demand load");
    CHECK(kh_modules_find(&ms, KH_MODULE_BACKEND, FX "/fx_probes.so", &host, err, sizeof err) == ondemand && ms.n == 5,
          "second find by path reuses it");
    CHECK(kh_modules_find(&ms, KH_MODULE_BACKEND, FX "/fx_dup.so", &host, err, sizeof err) == NULL &&
              has_all(err, "fx_dup.so", "'fx_backend' is already used by", "mods/fx_backend.so", NULL) && ms.n == 5,
          "on-demand duplicate name refused: %s", err);
    CHECK(kh_modules_find(&ms, KH_MODULE_BACKEND, FX "/fx_task.so", &host, err, sizeof err) == NULL &&
              has_all(err, "fx_task.so", "is a task module, not a backend", NULL),
          "on-demand kind mismatch: %s", err);
    CHECK(mapped(KH_FIXTURE_DIR "/fx_task.so") == 0, "refused on-demand module unmapped");
    CHECK(kh_modules_find(&ms, KH_MODULE_TASK, "/nonexistent/x.so", &host, err, sizeof err) == NULL &&
              has_all(err, "/nonexistent/x.so", "cannot open", NULL),
          "missing path: %s", err);
out:
    kh_modules_free(&ms);
    CHECK(ms.n == 0 && ms.v == NULL, "free clears");
    CHECK(mapped("/mods/fx_backend.so") == 0, "modules unmapped after kh_modules_free");
    kh_registry_free(&reg);
}

static void test_discovery_errors(void) {
    const char *root = kh_test_tmpdir_kept("loader-err");
    char p[1024], ini[1024];
    snprintf(p, sizeof p, "%s/mods", root);
    mkdir(p, 0755);
    const char *into_mods[] = {"fx_backend.so", "fx_dup.so", "fx_major2.so"};
    for (size_t i = 0; i < 3; i++) {
        char from[1024];
        snprintf(from, sizeof from, "%s/%s", FX, into_mods[i]);
        snprintf(p, sizeof p, "%s/mods/%s", root, into_mods[i]);
        copy_file(from, p);
    }
    snprintf(p, sizeof p, "%s/task_copy.so", root);
    copy_file(FX "/fx_task.so", p);
    snprintf(p, sizeof p, "%s/drop_copy.so", root);
    copy_file(FX "/fx_drop.so", p);
    snprintf(ini, sizeof ini, "%s/khost.ini", root);
    write_text(ini, "[khost]\n"                 /* 1 */
                    "plugin_dirs = mods\n"      /* 2 */
                    "task_dirs =\n"             /* 3 */
                    "[plugin fx_task]\n"        /* 4: a task file in a plugin section */
                    "path = task_copy.so\n"     /* 5 */
                    "[plugin wrongname]\n"      /* 6: the module calls itself fx_drop */
                    "path = drop_copy.so\n"     /* 7 */
                    "[plugin missing]\n"        /* 8 */
                    "path = nowhere.so\n"       /* 9 */
                    "[task ghost]\n");          /* 10: no path, nothing found */
    kh_registry reg;
    char err[2048];
    int rc = kh_registry_load(ini, &reg, err, sizeof err);
    CHECK(rc == 0, "registry: %s", err);
    if (rc) return;
    kh_modules ms;
    kh_modules_discover(&reg, &host, &ms);
    CHECK(ms.n == 1 && ms.n_errors == 6, "1 module and 6 errors expected, got %d and %d", ms.n, ms.n_errors);
    for (int i = 0; i < ms.n_errors; i++) fprintf(stderr, "  load error: %s\n", ms.errors[i].message);
    /* Sorted scan: fx_backend.so comes before fx_dup.so, so the latter is the duplicate. */
    CHECK(ms.n >= 1 && !strcmp(ms.v[0].desc->name, "fx_backend") && strstr(ms.v[0].path, "/mods/fx_backend.so"),
          "first by name order wins");
    const char *e = error_with(&ms, "already used");
    CHECK(e && has_all(e, "mods/fx_dup.so", "module name 'fx_backend' is already used by", "mods/fx_backend.so", NULL),
          "duplicate name names both files: %s", e ? e : "(none)");
    e = error_with(&ms, "fx_major2.so");
    CHECK(e && has_all(e, "module ABI 2.0", "major", NULL), "bad module in a search folder is an error: %s",
          e ? e : "(none)");
    e = error_with(&ms, "task_copy.so");
    CHECK(e && has_all(e, "is a task module", "[plugin fx_task]", "khost.ini:4", "expects a backend", NULL),
          "kind mismatch: %s", e ? e : "(none)");
    e = error_with(&ms, "drop_copy.so");
    CHECK(e && has_all(e, "calls itself 'fx_drop'", "[plugin wrongname]", "khost.ini:6", NULL), "name mismatch: %s",
          e ? e : "(none)");
    e = error_with(&ms, "nowhere.so");
    CHECK(e && has_all(e, "cannot open", "[plugin missing]", "khost.ini:8", NULL), "missing file: %s",
          e ? e : "(none)");
    e = error_with(&ms, "ghost");
    CHECK(e && has_all(e, "khost.ini:10", "has no path", "task_dirs", NULL), "path-less section not found: %s",
          e ? e : "(none)");
    /* The reason a module failed is what find answers with. */
    CHECK(kh_modules_find(&ms, KH_MODULE_BACKEND, "fx_major2.so", &host, err, sizeof err) == NULL &&
              strstr(err, "major version differs"),
          "find reports the load error: %s", err);
    kh_modules_free(&ms);
    kh_registry_free(&reg);

    /* No registry at all: nothing, no crash. */
    kh_modules_discover(NULL, &host, &ms);
    CHECK(ms.n == 0 && ms.n_errors == 0, "NULL registry");
    kh_modules_free(&ms);
}

int main(void) {
    test_good_modules();
    test_refusals();
    test_discovery();
    test_refused_by_name();
    test_discovery_errors();
    if (!kh_test_failed) kh_test_remove_tmpdirs();
    return kh_test_finish("core_loader");
}
