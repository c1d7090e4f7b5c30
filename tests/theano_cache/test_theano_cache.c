/* tests/theano_cache/test_theano_cache.c — theano's generated-code cache (plugins/theano/cache).
 * One program, one part per ctest test (argv[1]):
 *   concurrent  6 processes released together build the same source into a fresh cache: one compilation,
 *               all load the .so and get the same answer
 *   corrupt     truncated / altered / missing artifact, meta of another key, garbage, empty or damaged meta:
 *               each rebuilt (a new file renamed over the old one), then a hit
 *   unwritable  cache path under a regular file (ENOTDIR): private temporary cache + the warning
 *   eacces      cache folder or its parent not writable (EACCES; as root in a child running as uid 65534)
 *   refuse      group- and world-writable cache folders refused, naming the folder
 *   owner       a cache folder of another user refused (needs root: skipped otherwise)
 *   compiler    missing compiler, rejected flags, a compile error: the messages
 *   key         flags, extra text and source are in the key; the toolchain is probed once; -march=native
 *               resolved for gcc and clang
 *   location    $XDG_CACHE_HOME/khost/theano, else ~/.cache/khost/theano, created 0700
 *   prune       khost-theano-cache list / prune --all / prune --older-than; a locked entry is kept; a
 *               builder waiting for the lock of an entry a prune removes starts over */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "th_cache.h"
#include "th_toolchain.h"

static const char SRC[] = "int th_test_fn(int x) { return x * x + 7; }\n";

static const th_toolchain *toolchain(const char *flags) {
    char err[1024];
    const th_toolchain *tc = th_toolchain_probe("cc", flags, err, sizeof err);
    if (!tc) {
        fprintf(stderr, "test setup: %s\n", err);
        exit(2);
    }
    return tc;
}

/* dlopen path and call th_test_fn(x); INT_MIN when it cannot. */
static int call_fn(const char *path, int x) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        return INT_MIN;
    }
    int (*fn)(int);
    *(void **)&fn = dlsym(h, "th_test_fn");
    int v = fn ? fn(x) : INT_MIN;
    dlclose(h);
    return v;
}

/* A builder that counts its calls in a log file (one line each), optionally dawdles, then compiles. */
typedef struct {
    const th_toolchain *tc;
    const char *log;
    int sleep_ms;
} counting;

static int counting_build(void *ctx, const char *src, const char *out, const char *logp, char *err, size_t errlen) {
    counting *c = ctx;
    int fd = open(c->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
        char line[64];
        int n = snprintf(line, sizeof line, "build by pid %ld\n", (long)getpid());
        if (write(fd, line, (size_t)n) != n) perror("counting_build: write");
        close(fd);
    }
    if (c->sleep_ms) {
        struct timespec ts = {c->sleep_ms / 1000, (long)(c->sleep_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    return th_toolchain_build_so((void *)c->tc, src, out, logp, err, errlen);
}

static int count_lines(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int n = 0, ch;
    while ((ch = fgetc(f)) != EOF) n += ch == '\n';
    fclose(f);
    return n;
}

static void req_for(th_cache_req *req, counting *cb, const char *src, const char *extra) {
    th_cache_req_c(req, cb->tc, src, strlen(src), extra);
    req->build = counting_build;
    req->build_ctx = cb;
}

static th_cache *open_cache(const char *dir) {
    char warn[1024], err[1024];
    th_cache *c = NULL;
    if (th_cache_open(dir, &c, warn, sizeof warn, err, sizeof err) != 0) {
        fprintf(stderr, "test setup: %s\n", err);
        exit(2);
    }
    if (warn[0]) fprintf(stderr, "warning: %s\n", warn);
    return c;
}

/* --- 1. concurrent ------------------------------------------------------------------------------------------ */
static void part_concurrent(void) {
    enum { N = 6 };
    const char *tmp = kh_test_tmpdir_kept("thc-conc");
    char dir[512], log[512];
    snprintf(dir, sizeof dir, "%s/cache", tmp);
    snprintf(log, sizeof log, "%s/builds.log", tmp);
    const th_toolchain *tc = toolchain("-O1");
    int barrier[2];
    if (pipe(barrier) != 0) exit(2);
    pid_t pids[N];
    for (int i = 0; i < N; i++) {
        fflush(NULL);
        pids[i] = fork();
        if (pids[i] < 0) exit(2);
        if (pids[i] == 0) {
            close(barrier[1]);
            char b;
            while (read(barrier[0], &b, 1) < 0 && errno == EINTR) {
            }
            /* everyone starts here at once, opening the (not yet existing) cache too */
            char warn[512], err[1024];
            th_cache *c = NULL;
            if (th_cache_open(dir, &c, warn, sizeof warn, err, sizeof err) != 0 || warn[0]) {
                fprintf(stderr, "child %d: open: %s%s\n", i, err, warn);
                _exit(10);
            }
            counting cb = {tc, log, 300};
            th_cache_req req;
            req_for(&req, &cb, SRC, "generator 1");
            th_cache_result res;
            if (th_cache_get(c, &req, &res, err, sizeof err) != 0) {
                fprintf(stderr, "child %d: get: %s\n", i, err);
                _exit(11);
            }
            int v = call_fn(res.artifact_path, 6);
            char out[600], line[128];
            snprintf(out, sizeof out, "%s/child-%d", tmp, i);
            int n = snprintf(line, sizeof line, "%d %d\n", res.hit, v);
            int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            if (fd < 0 || write(fd, line, (size_t)n) != n) _exit(12);
            close(fd);
            th_cache_close(c);
            _exit(0);
        }
    }
    close(barrier[0]);
    close(barrier[1]); /* EOF: the barrier opens for all of them */
    int hits = 0, ok = 0;
    for (int i = 0; i < N; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d status 0x%x", i, st);
        char out[600];
        snprintf(out, sizeof out, "%s/child-%d", tmp, i);
        char *s = kh_test_slurp(out, NULL);
        int hit = -1, v = 0;
        if (s && sscanf(s, "%d %d", &hit, &v) == 2) {
            hits += hit;
            ok += v == 6 * 6 + 7;
        }
        free(s);
    }
    int builds = count_lines(log);
    printf("concurrent: %d processes, %d compilation(s), %d hits, %d correct results\n", N, builds, hits, ok);
    CHECK(builds == 1, "exactly one compilation, got %d", builds);
    CHECK(hits == N - 1, "every other process a hit: %d of %d", hits, N - 1);
    CHECK(ok == N, "every process called the function and got 43: %d of %d", ok, N);
}

/* --- 2. corrupt entries -------------------------------------------------------------------------------------- */
typedef void (*damage_fn)(const char *entry, const char *artifact);

static void write_meta(const char *entry, const char *text, size_t n) {
    char p[TH_CACHE_PATH_MAX + 8];
    snprintf(p, sizeof p, "%s/meta", entry);
    kh_test_write_file(p, text, n);
}
static void d_truncate(const char *entry, const char *artifact) {
    struct stat st;
    if (stat(artifact, &st) != 0 || truncate(artifact, st.st_size / 2) != 0) exit(2);
}
static void d_flip(const char *entry, const char *artifact) {
    int fd = open(artifact, O_RDWR);
    unsigned char b;
    if (fd < 0 || pread(fd, &b, 1, 100) != 1) exit(2);
    b ^= 0x55;
    if (pwrite(fd, &b, 1, 100) != 1) exit(2);
    close(fd);
}
static void d_remove(const char *entry, const char *artifact) {
    if (unlink(artifact) != 0) exit(2);
}
static void d_other_key(const char *entry, const char *artifact) {
    char p[TH_CACHE_PATH_MAX + 8];
    snprintf(p, sizeof p, "%s/meta", entry);
    size_t n;
    char *m = kh_test_slurp(p, &n);
    char *at = m ? strstr(m, "x * x") : NULL;
    if (!at) exit(2);
    at[4] = 'y'; /* the key text of another source, same length, same artifact size and checksum */
    write_meta(entry, m, n);
    free(m);
}
static void d_garbage(const char *entry, const char *artifact) { write_meta(entry, "garbage\n", 8); }
static void d_empty(const char *entry, const char *artifact) { write_meta(entry, "", 0); }
static void d_trailer(const char *entry, const char *artifact) {
    char p[TH_CACHE_PATH_MAX + 8];
    snprintf(p, sizeof p, "%s/meta", entry);
    size_t n;
    char *m = kh_test_slurp(p, &n);
    if (!m || n < 20) exit(2);
    write_meta(entry, m, n - 20); /* key intact, checksum line cut */
    free(m);
}

/* A FIFO in a file's place: opened without blocking and refused as not a regular file. */
static void d_fifo_artifact(const char *entry, const char *artifact) {
    (void)entry;
    if (unlink(artifact) != 0 || mkfifo(artifact, 0600) != 0) exit(2);
}
static void d_fifo_meta(const char *entry, const char *artifact) {
    (void)artifact;
    char p[TH_CACHE_PATH_MAX + 8];
    snprintf(p, sizeof p, "%s/meta", entry);
    if (unlink(p) != 0 || mkfifo(p, 0600) != 0) exit(2);
}

static void part_corrupt(void) {
    const char *tmp = kh_test_tmpdir_kept("thc-corrupt");
    char dir[512], log[512];
    snprintf(dir, sizeof dir, "%s/cache", tmp);
    snprintf(log, sizeof log, "%s/builds.log", tmp);
    th_cache *c = open_cache(dir);
    counting cb = {toolchain("-O1"), log, 0};
    th_cache_req req;
    req_for(&req, &cb, SRC, "generator 1");
    th_cache_result res;
    char err[1024];
    CHECK(th_cache_get(c, &req, &res, err, sizeof err) == 0 && !res.hit, "first get builds: %s", err);
    CHECK(call_fn(res.artifact_path, 2) == 11, "the built function works");
    struct {
        const char *what;
        damage_fn fn;
        const char *note;
    } cases[] = {
        {"truncated artifact", d_truncate, "rebuilt: artifact is "},
        {"same-size altered artifact", d_flip, "rebuilt: artifact checksum differs"},
        {"missing artifact", d_remove, "rebuilt: artifact missing"},
        {"meta of another key", d_other_key, "rebuilt: metadata does not match the key"},
        {"garbage meta", d_garbage, "rebuilt: metadata does not match the key"},
        {"empty meta", d_empty, "rebuilt: metadata empty"},
        {"meta without its checksum", d_trailer, "rebuilt: metadata damaged"},
        {"a FIFO as the artifact", d_fifo_artifact, "rebuilt: artifact is not a regular file"},
        {"a FIFO as the meta", d_fifo_meta, "rebuilt: metadata"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct stat before, after;
        int had = stat(res.artifact_path, &before) == 0;
        cases[i].fn(res.entry_dir, res.artifact_path);
        if (had && cases[i].fn != d_remove) stat(res.artifact_path, &before); /* the damaged file */
        int builds = count_lines(log);
        th_cache_result r2;
        int rc = th_cache_get(c, &req, &r2, err, sizeof err);
        CHECK(rc == 0 && !r2.hit, "%s: rebuilt (rc %d, hit %d): %s", cases[i].what, rc, r2.hit, err);
        CHECK(count_lines(log) == builds + 1, "%s: one compilation", cases[i].what);
        CHECK(!strncmp(r2.note, cases[i].note, strlen(cases[i].note)), "%s: note '%s'", cases[i].what, r2.note);
        CHECK(!strcmp(r2.artifact_path, res.artifact_path), "%s: same entry", cases[i].what);
        CHECK(stat(r2.artifact_path, &after) == 0 &&
                  (cases[i].fn == d_remove || after.st_ino != before.st_ino || after.st_dev != before.st_dev),
              "%s: a new file renamed over the damaged one, not written in place", cases[i].what);
        CHECK(call_fn(r2.artifact_path, 3) == 16, "%s: the rebuilt function works", cases[i].what);
        th_cache_result r3;
        CHECK(th_cache_get(c, &req, &r3, err, sizeof err) == 0 && r3.hit && !r3.note[0], "%s: then a hit",
              cases[i].what);
    }
    char stale[TH_CACHE_PATH_MAX + 32];
    snprintf(stale, sizeof stale, "%s/.fn.so.dead01", res.entry_dir);
    kh_test_write_file(stale, "x", 1);
    d_truncate(res.entry_dir, res.artifact_path);
    th_cache_result r4;
    CHECK(th_cache_get(c, &req, &r4, err, sizeof err) == 0 && !r4.hit, "rebuild with a stale temporary beside it");
    CHECK(access(stale, F_OK) != 0, "a dead builder's temporary file is removed under the lock");
    th_cache_close(c);
}

/* --- 3. unwritable -> private temporary cache ------------------------------------------------------------- */
/* Opens dir expecting the fallback; checks the warning and that the temporary cache works. Returns failures. */
static int expect_fallback(const char *dir, const char *why_part, const char *tmpbase) {
    int failed_before = kh_test_failed;
    char warn[2048], err[1024], want[2048];
    th_cache *c = NULL;
    int rc = th_cache_open(dir, &c, warn, sizeof warn, err, sizeof err);
    CHECK(rc == 0, "%s: open falls back: %s", dir, err);
    if (rc != 0) return 1;
    const char *t = th_cache_dir(c);
    CHECK(th_cache_is_temporary(c), "%s: temporary", dir);
    snprintf(want, sizeof want, "theano: cache %s is not writable (", dir);
    CHECK(!strncmp(warn, want, strlen(want)), "warning starts '%s': '%s'", want, warn);
    CHECK(strstr(warn, why_part) != NULL, "warning says why (%s): '%s'", why_part, warn);
    snprintf(want, sizeof want, "); using private temporary cache %s for this process", t);
    CHECK(strlen(warn) > strlen(want) && !strcmp(warn + strlen(warn) - strlen(want), want), "warning ends '%s': '%s'",
          want, warn);
    CHECK(!strncmp(t, tmpbase, strlen(tmpbase)) && strstr(t, "/khost-theano-"), "temporary cache %s under %s", t,
          tmpbase);
    struct stat st;
    CHECK(stat(t, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700 && st.st_uid == geteuid(),
          "temporary cache private (mode %o)", (unsigned)(st.st_mode & 0777));
    printf("fallback: %s\n", warn);
    counting cb = {toolchain("-O1"), "/dev/null", 0};
    th_cache_req req;
    req_for(&req, &cb, SRC, "generator 1");
    th_cache_result res;
    CHECK(th_cache_get(c, &req, &res, err, sizeof err) == 0, "build in the temporary cache: %s", err);
    CHECK(!strncmp(res.artifact_path, t, strlen(t)), "artifact %s in it", res.artifact_path);
    CHECK(call_fn(res.artifact_path, 1) == 8, "works from the temporary cache");
    char tcopy[TH_CACHE_PATH_MAX];
    snprintf(tcopy, sizeof tcopy, "%s", t);
    th_cache_close(c);
    CHECK(access(tcopy, F_OK) != 0, "the temporary cache is removed at close");
    return kh_test_failed - failed_before;
}

static void part_unwritable(void) {
    const char *tmp = kh_test_tmpdir_kept("thc-unwr");
    char file[512], dir[600], base[512];
    snprintf(file, sizeof file, "%s/not-a-dir", tmp);
    kh_test_write_file(file, "x", 1);
    snprintf(dir, sizeof dir, "%s/khost/theano", file);
    snprintf(base, sizeof base, "%s/tmpbase", tmp);
    if (mkdir(base, 0700) != 0) exit(2);
    setenv("TMPDIR", base, 1);
    expect_fallback(dir, "Not a directory", base);
    /* the cache path itself a regular file */
    expect_fallback(file, "Not a directory", base);
}

/* --- 3b. a folder above the cache that another user may write to -> private temporary cache ---------------- */
static void part_ancestors(void) {
    const char *tmp = kh_test_tmpdir_kept("thc-anc");
    char open_dir[512], sticky[512], dir[600], sdir[600], base[512], warn[2048], err[1024];
    snprintf(open_dir, sizeof open_dir, "%s/open", tmp);
    snprintf(sticky, sizeof sticky, "%s/sticky", tmp);
    snprintf(base, sizeof base, "%s/tmpbase", tmp);
    if (mkdir(open_dir, 0700) != 0 || chmod(open_dir, 0777) != 0 || mkdir(sticky, 0700) != 0 ||
        chmod(sticky, 01777) != 0 || mkdir(base, 0700) != 0)
        exit(2);
    setenv("TMPDIR", base, 1);
    snprintf(dir, sizeof dir, "%s/khost/theano", open_dir);
    th_cache *c = NULL;
    int rc = th_cache_open(dir, &c, warn, sizeof warn, err, sizeof err);
    CHECK(rc == 0 && c && th_cache_is_temporary(c), "a world-writable folder above the cache: temporary (%s)", err);
    CHECK(strstr(warn, "is not in a safe place (") && strstr(warn, "world-writable without the sticky bit") &&
              strstr(warn, open_dir),
          "the warning names the folder and why: '%s'", warn);
    CHECK(access(dir, F_OK) != 0, "nothing created under the unsafe folder");
    if (c) th_cache_close(c);
    snprintf(sdir, sizeof sdir, "%s/khost/theano", sticky);
    c = NULL;
    rc = th_cache_open(sdir, &c, warn, sizeof warn, err, sizeof err);
    CHECK(rc == 0 && c && !th_cache_is_temporary(c) && !warn[0], "under a sticky folder (as /tmp) the cache is used: %s",
          warn[0] ? warn : err);
    if (c) th_cache_close(c);
}

static int eacces_checks(const char *tmp) {
    int failed = 0;
    char base[512], ro[512], sub[600], rodir[512];
    snprintf(base, sizeof base, "%s/tmpbase", tmp);
    snprintf(ro, sizeof ro, "%s/ro-parent", tmp);
    snprintf(sub, sizeof sub, "%s/cache", ro);
    snprintf(rodir, sizeof rodir, "%s/ro-cache", tmp);
    if (mkdir(base, 0700) != 0 || mkdir(ro, 0500) != 0 || mkdir(rodir, 0500) != 0) {
        perror("test setup: mkdir");
        return 1;
    }
    setenv("TMPDIR", base, 1);
    failed += expect_fallback(sub, "Permission denied", base);   /* mkdir fails */
    failed += expect_fallback(rodir, "Permission denied", base); /* exists, ours, private, read-only */
    return failed;
}

static void part_eacces(void) {
    if (geteuid() != 0) {
        const char *tmp = kh_test_tmpdir_kept("thc-eacces");
        eacces_checks(tmp);
        return;
    }
    /* root ignores permission bits: the checks run in a child as uid/gid 65534 in a folder it owns */
    char tmp[] = "/tmp/khost-thc-eacces-XXXXXX";
    if (!mkdtemp(tmp) || chmod(tmp, 0755) != 0 || chown(tmp, 65534, 65534) != 0) {
        perror("test setup");
        exit(2);
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0) {
            perror("setuid 65534");
            _exit(77);
        }
        int f = eacces_checks(tmp);
        printf("eacces (as uid 65534): %d passed, %d failed\n", kh_test_passed, f);
        fflush(NULL);
        _exit(f ? 1 : 0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "chmod -R u+w %s && rm -rf %s", tmp, tmp);
    if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", tmp);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77) kh_test_skip("cannot become uid 65534: EACCES not exercised");
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the checks as uid 65534 passed (status 0x%x)", st);
}

/* --- 4. refusal ---------------------------------------------------------------------------------------------- */
static void expect_refusal(const char *dir, const char *what) {
    char warn[1024], err[2048];
    th_cache *c = NULL;
    int rc = th_cache_open(dir, &c, warn, sizeof warn, err, sizeof err);
    CHECK(rc == -1 && c == NULL, "%s: refused", dir);
    CHECK(strstr(err, dir) != NULL && strstr(err, what) != NULL, "error names %s and says '%s': '%s'", dir, what, err);
    printf("refused: %s\n", err);
    if (c) th_cache_close(c);
}

static void part_refuse(void) {
    const char *tmp = kh_test_tmpdir_kept("thc-refuse");
    char g[512], w[512];
    snprintf(g, sizeof g, "%s/group", tmp);
    snprintf(w, sizeof w, "%s/world", tmp);
    if (mkdir(g, 0700) != 0 || chmod(g, 0770) != 0 || mkdir(w, 0700) != 0 || chmod(w, 0703) != 0) exit(2);
    expect_refusal(g, "group-writable");
    expect_refusal(w, "world-writable");
    /* and nothing was planted in them */
    char p[600];
    snprintf(p, sizeof p, "%s/.probe", g);
    CHECK(access(p, F_OK) != 0, "nothing written into a refused folder");
}

static void part_owner(void) {
    if (geteuid() != 0)
        kh_test_skip("not root: cannot make a folder owned by another user; the owner check is NOT exercised");
    const char *tmp = kh_test_tmpdir_kept("thc-owner");
    char d[512];
    snprintf(d, sizeof d, "%s/foreign", tmp);
    if (mkdir(d, 0700) != 0 || chown(d, 65534, 65534) != 0) exit(2);
    expect_refusal(d, "belongs to uid 65534");
}

/* --- 5. compiler errors -------------------------------------------------------------------------------------- */
static void part_compiler(void) {
    char err[1024];
    CHECK(th_toolchain_probe("khost-no-such-cc", "-O1", err, sizeof err) == NULL, "missing compiler fails");
    CHECK(!strcmp(err, "theano: C compiler 'khost-no-such-cc' not found (set [plugin theano] cc = "
                       "/path/to/compiler in khost.ini)"),
          "message: '%s'", err);
    CHECK(th_toolchain_probe("/nonexistent/bin/gcc", NULL, err, sizeof err) == NULL, "missing path fails");
    CHECK(!strcmp(err, "theano: C compiler '/nonexistent/bin/gcc' not found (set [plugin theano] cc = "
                       "/path/to/compiler in khost.ini)"),
          "message: '%s'", err);
    printf("missing compiler: %s\n", err);
    CHECK(th_toolchain_probe("cc", "-O1 -fkhost-no-such-flag", err, sizeof err) == NULL, "bad flag fails");
    CHECK(strstr(err, "theano: C compiler 'cc' rejects the flags '-O1 -fkhost-no-such-flag'") == err &&
              strstr(err, "khost-no-such-flag"),
          "message: '%s'", err);
    /* the reason after the wait status is the compiler's own diagnostic, not the banner of cc -v */
    const char *why = strstr(err, "): ");
    CHECK(why && strstr(why, "khost-no-such-flag") && !strstr(why, "Configured with"), "reason: '%s'", why ? why : err);
    /* a value cc1 refuses is reported after the banner of cc -v (which mentions --disable-werror) */
    CHECK(th_toolchain_probe("cc", "-march=khostbogus", err, sizeof err) == NULL, "bad -march fails");
    why = strstr(err, "): ");
    CHECK(why && strstr(why, "khostbogus") && !strstr(why, "Configured with"), "reason: '%s'", why ? why : err);

    const char *tmp = kh_test_tmpdir_kept("thc-cc");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/cache", tmp);
    th_cache *c = open_cache(dir);
    const th_toolchain *tc = toolchain("-O1");
    static const char bad[] = "int th_test_fn(int x) { return x * ; }\n";
    th_cache_req req;
    th_cache_req_c(&req, tc, bad, strlen(bad), "generator 1");
    th_cache_result res;
    int rc = th_cache_get(c, &req, &res, err, sizeof err);
    char want[TH_CACHE_PATH_MAX + 64];
    snprintf(want, sizeof want, "theano: cc failed on %s/fn.c: %s/fn.c:1:", res.entry_dir, res.entry_dir);
    CHECK(rc == -1, "a compile error fails the get");
    CHECK(!strncmp(err, want, strlen(want)) && strstr(err, "error"), "message starts '%s': '%s'", want, err);
    printf("compile error: %s\n", err);
    char meta[TH_CACHE_PATH_MAX + 8];
    snprintf(meta, sizeof meta, "%s/meta", res.entry_dir);
    CHECK(access(meta, F_OK) != 0 && access(res.artifact_path, F_OK) != 0, "nothing published");
    th_cache_req_c(&req, tc, SRC, strlen(SRC), "generator 1");
    CHECK(th_cache_get(c, &req, &res, err, sizeof err) == 0 && call_fn(res.artifact_path, 0) == 7,
          "the cache still works: %s", err);
    th_cache_close(c);
}

/* --- 6. the key -------------------------------------------------------------------------------------------- */
static void part_key(void) {
    char err[1024];
    const th_toolchain *o1 = toolchain("-O1"), *o0 = toolchain("-O0");
    CHECK(toolchain("-O1") == o1, "probed once per process: the same object");
    CHECK(!strncmp(o1->identity, "path /", 6) && strstr(o1->identity, " version "), "identity: %.80s",
          o1->identity);
    CHECK(strcmp(o1->resolved_flags, o0->resolved_flags) != 0, "flags differ");

    const char *tmp = kh_test_tmpdir_kept("thc-key");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/cache", tmp);
    th_cache *c = open_cache(dir);
    th_cache_req req;
    th_cache_result a, b, x, s2, again;
    th_cache_req_c(&req, o1, SRC, strlen(SRC), "generator 1");
    CHECK(th_cache_get(c, &req, &a, err, sizeof err) == 0 && !a.hit, "-O1 built: %s", err);
    th_cache_req_c(&req, o0, SRC, strlen(SRC), "generator 1");
    CHECK(th_cache_get(c, &req, &b, err, sizeof err) == 0 && !b.hit, "-O0: same source, another entry: %s", err);
    CHECK(strcmp(a.key, b.key) != 0 && strcmp(a.entry_dir, b.entry_dir) != 0, "different keys %s / %s", a.key, b.key);
    CHECK(call_fn(a.artifact_path, 4) == 23 && call_fn(b.artifact_path, 4) == 23, "both work");
    th_cache_req_c(&req, o1, SRC, strlen(SRC), "generator 2");
    CHECK(th_cache_get(c, &req, &x, err, sizeof err) == 0 && !x.hit && strcmp(x.key, a.key) != 0,
          "the extra text is in the key");
    static const char src2[] = "int th_test_fn(int x) { return x * x + 8; }\n";
    th_cache_req_c(&req, o1, src2, strlen(src2), "generator 1");
    CHECK(th_cache_get(c, &req, &s2, err, sizeof err) == 0 && !s2.hit && strcmp(s2.key, a.key) != 0 &&
              call_fn(s2.artifact_path, 4) == 24,
          "the source is in the key");
    th_cache_req_c(&req, o1, SRC, strlen(SRC), "generator 1");
    CHECK(th_cache_get(c, &req, &again, err, sizeof err) == 0 && again.hit && !strcmp(again.key, a.key),
          "the same request: a hit on the same entry");

    /* the meta file holds the whole key text */
    size_t klen;
    char key[65];
    char *text = th_cache_key_text(&req, &klen, key);
    char mp[TH_CACHE_PATH_MAX + 8];
    snprintf(mp, sizeof mp, "%s/meta", a.entry_dir);
    size_t mlen;
    char *meta = kh_test_slurp(mp, &mlen);
    CHECK(text && meta && mlen > klen && !memcmp(meta, text, klen) && !strcmp(key, a.key),
          "meta starts with the full key text, whose SHA-256 is the key");
    CHECK(text && strstr(text, o1->identity) && strstr(text, o1->resolved_flags) && strstr(text, "generator 1") &&
              strstr(text, SRC),
          "the key text holds identity, flags, extra text and source");
    free(text);
    free(meta);
    th_cache_close(c);

    /* -march=native resolved to what the compiler uses, for each compiler that is installed */
    const char *ccs[] = {"gcc", "clang"};
    const char *mark[] = {"-march=", "-target-cpu "};
    for (int i = 0; i < 2; i++) {
        const th_toolchain *n = th_toolchain_probe(ccs[i], "-O1 -march=native", err, sizeof err);
        if (!n && strstr(err, "not found")) {
            printf("NOT EXERCISED: -march=native with %s (not installed)\n", ccs[i]);
            continue;
        }
        CHECK(n != NULL, "%s -march=native probed: %s", ccs[i], err);
        if (!n) continue;
        CHECK(!strstr(n->resolved_flags, "native") && strstr(n->resolved_flags, mark[i]) &&
                  !strncmp(n->resolved_flags, "-O1\n", 4),
              "%s: native resolved: %.200s", ccs[i], n->resolved_flags);
        const th_toolchain *plain = th_toolchain_probe(ccs[i], "-O1", err, sizeof err);
        CHECK(plain && strcmp(plain->resolved_flags, n->resolved_flags) != 0, "%s: -march=native changes the key",
              ccs[i]);
        printf("%s -march=native -> %.*s...\n", ccs[i], 120, n->resolved_flags + 4);
    }
}

/* --- location -------------------------------------------------------------------------------------------------- */
static void part_location(void) {
    const char *tmp = kh_test_tmpdir_kept("thc-loc");
    char xdg[512], home[512], want[600], p[600];
    snprintf(xdg, sizeof xdg, "%s/xdg", tmp);
    snprintf(home, sizeof home, "%s/home", tmp);
    if (mkdir(home, 0700) != 0) exit(2);
    setenv("XDG_CACHE_HOME", xdg, 1);
    th_cache *c = open_cache(NULL);
    snprintf(want, sizeof want, "%s/khost/theano", xdg);
    CHECK(!strcmp(th_cache_dir(c), want) && !th_cache_is_temporary(c), "XDG: %s", th_cache_dir(c));
    struct stat st;
    CHECK(stat(want, &st) == 0 && (st.st_mode & 0777) == 0700, "created 0700 (%o)", (unsigned)(st.st_mode & 0777));
    snprintf(p, sizeof p, "%s/khost", xdg);
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0700, "its parent created 0700 (%o)",
          (unsigned)(st.st_mode & 0777));
    th_cache_close(c);
    setenv("XDG_CACHE_HOME", "relative/ignored", 1);
    setenv("HOME", home, 1);
    c = open_cache(NULL);
    snprintf(want, sizeof want, "%s/.cache/khost/theano", home);
    CHECK(!strcmp(th_cache_dir(c), want), "HOME (relative XDG_CACHE_HOME ignored): %s", th_cache_dir(c));
    th_cache_close(c);
    unsetenv("XDG_CACHE_HOME");
    c = open_cache(NULL);
    CHECK(!strcmp(th_cache_dir(c), want), "HOME: %s", th_cache_dir(c));
    th_cache_close(c);
}

/* --- 7. prune ------------------------------------------------------------------------------------------------ */
static int tool(const char *bin, const char *args, char *out, size_t outlen) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' %s", bin, args);
    int rc = kh_test_run(cmd, out, outlen);
    printf("$ khost-theano-cache %s  -> %d\n%s", args, rc, out);
    return rc;
}

/* Is pid waiting for an flock (a "->" line of /proc/locks)? */
static int waiting_for_flock(pid_t pid) {
    FILE *f = fopen("/proc/locks", "r");
    if (!f) return 0;
    char line[512];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        const char *arrow = strstr(line, "-> FLOCK");
        long p = 0;
        if (arrow && sscanf(arrow + 8, " ADVISORY WRITE %ld", &p) == 1 && p == (long)pid) found = 1;
    }
    fclose(f);
    return found;
}

/* A builder waits for an entry's lock while the holder (a prune) removes the entry: once it gets the lock it
 * must notice that its lock file is gone, start over on a fresh entry and succeed. */
static void prune_race(const char *dir) {
    static const char src3[] = "int th_test_fn(int x) { return x - 1; }\n";
    const th_toolchain *tc = toolchain("-O1");
    th_cache_req req;
    th_cache_req_c(&req, tc, src3, strlen(src3), "generator 1");
    size_t klen;
    char key[65], hh[600], entry[700], lockp[800], err[1024];
    free(th_cache_key_text(&req, &klen, key));
    snprintf(hh, sizeof hh, "%s/%.2s", dir, key);
    snprintf(entry, sizeof entry, "%s/%s", hh, key);
    snprintf(lockp, sizeof lockp, "%s/lock", entry);
    mkdir(hh, 0700);
    if (mkdir(entry, 0700) != 0) exit(2);
    int fd = open(lockp, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || flock(fd, LOCK_EX) != 0) exit(2);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd);
        th_cache *c = open_cache(dir);
        th_cache_result res;
        int rc = th_cache_get(c, &req, &res, err, sizeof err);
        if (rc != 0) fprintf(stderr, "waiting builder: %s\n", err);
        int v = rc == 0 ? call_fn(res.artifact_path, 5) : 0;
        th_cache_close(c);
        _exit(rc == 0 && v == 4 ? 0 : 1);
    }
    int waited = 0;
    for (int i = 0; i < 1000 && !(waited = waiting_for_flock(pid)); i++) usleep(10000);
    CHECK(waited, "the builder (pid %ld) waits for the entry's lock (/proc/locks)", (long)pid);
    /* what th_cache_prune does while it holds the lock */
    CHECK(unlink(lockp) == 0 && rmdir(entry) == 0, "entry removed under its lock");
    close(fd);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the waiting builder started over and succeeded (status 0x%x)", st);
    char art[800];
    snprintf(art, sizeof art, "%s/fn.so", entry);
    CHECK(access(art, F_OK) == 0 && access(lockp, F_OK) == 0, "a fresh entry was published");
}

static void part_prune(const char *bin) {
    const char *tmp = kh_test_tmpdir_kept("thc-prune");
    char dir[512], args[1024], out[16384], err[1024];
    snprintf(dir, sizeof dir, "%s/cache", tmp);
    th_cache *c = open_cache(dir);
    const th_toolchain *tc = toolchain("-O1");
    static const char src2[] = "int th_test_fn(int x) { return x + 1; }\n";
    th_cache_req req;
    th_cache_result a, b;
    th_cache_req_c(&req, tc, SRC, strlen(SRC), "generator 1");
    CHECK(th_cache_get(c, &req, &a, err, sizeof err) == 0, "entry A: %s", err);
    th_cache_req_c(&req, tc, src2, strlen(src2), "generator 1");
    CHECK(th_cache_get(c, &req, &b, err, sizeof err) == 0, "entry B: %s", err);

    snprintf(args, sizeof args, "--dir '%s' list", dir);
    CHECK(tool(bin, args, out, sizeof out) == 0, "list runs");
    CHECK(strstr(out, a.key) && strstr(out, b.key) && strstr(out, "2 entries") && strstr(out, "fn.so"),
          "list shows both entries");

    /* hold A's lock as a builder would */
    char lockp[TH_CACHE_PATH_MAX + 8];
    snprintf(lockp, sizeof lockp, "%s/lock", a.entry_dir);
    int fd = open(lockp, O_RDWR | O_CREAT, 0600);
    CHECK(fd >= 0 && flock(fd, LOCK_EX) == 0, "holding A's lock");
    snprintf(args, sizeof args, "--dir '%s' prune --all", dir);
    CHECK(tool(bin, args, out, sizeof out) == 0, "prune --all runs");
    char want[256];
    snprintf(want, sizeof want, "kept    %s: being built (locked)", a.key);
    CHECK(strstr(out, want) != NULL, "A reported kept");
    snprintf(want, sizeof want, "removed %s", b.key);
    CHECK(strstr(out, want) != NULL, "B reported removed");
    CHECK(access(a.artifact_path, F_OK) == 0 && access(lockp, F_OK) == 0, "the locked entry A is still there");
    CHECK(access(b.entry_dir, F_OK) != 0, "B's entry is gone");
    close(fd);

    /* --older-than: A was just built */
    snprintf(args, sizeof args, "--dir '%s' prune --older-than 1", dir);
    CHECK(tool(bin, args, out, sizeof out) == 0 && strstr(out, "0 removed") && access(a.artifact_path, F_OK) == 0,
          "a fresh entry is kept by --older-than 1");
    char mp[TH_CACHE_PATH_MAX + 8];
    snprintf(mp, sizeof mp, "%s/meta", a.entry_dir);
    struct timespec old[2] = {{time(NULL) - 3 * 86400, 0}, {time(NULL) - 3 * 86400, 0}};
    CHECK(utimensat(AT_FDCWD, mp, old, 0) == 0, "age A by 3 days");
    snprintf(args, sizeof args, "--dir '%s' list", dir);
    CHECK(tool(bin, args, out, sizeof out) == 0 && strstr(out, "3.00 days"), "list shows the age");
    snprintf(args, sizeof args, "--dir '%s' prune --older-than 2", dir);
    CHECK(tool(bin, args, out, sizeof out) == 0 && strstr(out, "1 removed") && access(a.entry_dir, F_OK) != 0,
          "--older-than 2 removes the 3-day-old entry");
    snprintf(args, sizeof args, "--dir '%s' list", dir);
    CHECK(tool(bin, args, out, sizeof out) == 0 && strstr(out, "0 entries"), "empty after pruning");

    /* a hit refreshes the age */
    th_cache_req_c(&req, tc, SRC, strlen(SRC), "generator 1");
    CHECK(th_cache_get(c, &req, &a, err, sizeof err) == 0 && !a.hit, "rebuilt after pruning");
    CHECK(utimensat(AT_FDCWD, mp, old, 0) == 0, "age A by 3 days");
    CHECK(th_cache_get(c, &req, &a, err, sizeof err) == 0 && a.hit, "a hit");
    snprintf(args, sizeof args, "--dir '%s' prune --older-than 2", dir);
    CHECK(tool(bin, args, out, sizeof out) == 0 && strstr(out, "0 removed") && access(a.artifact_path, F_OK) == 0,
          "a used entry is young again");

    prune_race(dir);

    snprintf(args, sizeof args, "--dir '%s' prune", dir);
    CHECK(tool(bin, args, out, sizeof out) == 2, "prune without --all or --older-than is a usage error");
    th_cache_close(c);
}

int main(int argc, char **argv) {
    const char *part = argc > 1 ? argv[1] : "";
    char name[64];
    snprintf(name, sizeof name, "theano_cache_%s", part);
    if (!strcmp(part, "concurrent")) part_concurrent();
    else if (!strcmp(part, "corrupt")) part_corrupt();
    else if (!strcmp(part, "unwritable")) part_unwritable();
    else if (!strcmp(part, "ancestors")) part_ancestors();
    else if (!strcmp(part, "eacces")) part_eacces();
    else if (!strcmp(part, "refuse")) part_refuse();
    else if (!strcmp(part, "owner")) part_owner();
    else if (!strcmp(part, "compiler")) part_compiler();
    else if (!strcmp(part, "key")) part_key();
    else if (!strcmp(part, "location")) part_location();
    else if (!strcmp(part, "prune") && argc > 2) part_prune(argv[2]);
    else {
        fprintf(stderr, "usage: test_theano_cache concurrent|corrupt|unwritable|ancestors|eacces|refuse|owner|compiler|key|"
                        "location|prune TOOL\n");
        return 2;
    }
    if (!kh_test_failed) kh_test_remove_tmpdirs();
    return kh_test_finish(name);
}
