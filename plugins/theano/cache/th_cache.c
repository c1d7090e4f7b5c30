/* plugins/theano/cache/th_cache.c — opening the cache folder and get-or-build (th_cache.h). */
#define _GNU_SOURCE /* mkostemp, strerror of errno in messages */
#include "th_cache.h"
#include "khost/kit/pathtrust.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include "khost/kit/clock.h"
#include <unistd.h>

#include "th_cache_util.h"
#include "th_sha256.h"

struct th_cache {
    char dir[TH_CACHE_PATH_MAX];
    int temporary;
};


/* --- the folder -------------------------------------------------------------------------------------------- */
int th_cache_default_dir(char *buf, size_t buflen, char *err, size_t errlen) {
    const char *xdg = getenv("XDG_CACHE_HOME");
    if (xdg && xdg[0] == '/') { /* the XDG spec: a relative value is ignored */
        if (th_path(buf, buflen, "%s/khost/theano", xdg) == 0) return 0;
        snprintf(err, errlen, "theano: XDG_CACHE_HOME is too long");
        return -1;
    }
    const char *home = getenv("HOME");
    if (!home || !*home) {
        struct passwd *pw = getpwuid(geteuid());
        home = pw ? pw->pw_dir : NULL;
    }
    if (!home || !*home) {
        snprintf(err, errlen, "theano: no cache folder: neither XDG_CACHE_HOME nor HOME is set, and uid %ld has no "
                 "home directory; set [plugin theano] cache_dir", (long)geteuid());
        return -1;
    }
    if (th_path(buf, buflen, "%s/.cache/khost/theano", home) == 0) return 0;
    snprintf(err, errlen, "theano: HOME is too long");
    return -1;
}

int th_cache_check_dir(const char *dir, char *err, size_t errlen) {
    struct stat st;
    if (stat(dir, &st) != 0) {
        snprintf(err, errlen, "theano: cache directory %s: %s", dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "theano: cache directory %s is not a directory", dir);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        snprintf(err, errlen,
                 "theano: refusing cache directory %s: it belongs to uid %ld, not to you (uid %ld), so another "
                 "user could plant code that khost would load; use a folder of your own ([plugin theano] "
                 "cache_dir)",
                 dir, (long)st.st_uid, (long)geteuid());
        return -1;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(err, errlen,
                 "theano: refusing cache directory %s: it is %s (mode %04o), so another user could plant code "
                 "that khost would load; chmod 700 %s",
                 dir, (st.st_mode & S_IWOTH) ? "world-writable" : "group-writable", (unsigned)(st.st_mode & 07777),
                 dir);
        return -1;
    }
    return 0;
}

/* mkdir -p with 0700 for what it creates. On failure why says which path and what went wrong. */
static int mkdir_p(const char *dir, char *why, size_t whylen) {
    char p[TH_CACHE_PATH_MAX];
    if (th_path(p, sizeof p, "%s", dir) != 0) {
        snprintf(why, whylen, "path too long");
        return -1;
    }
    size_t n = strlen(p);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != 0) continue;
        if (p[i - 1] == '/') continue; /* "//" */
        char c = p[i];
        p[i] = 0;
        if (mkdir(p, 0700) != 0) {
            int e = errno;
            struct stat st;
            if (e != EEXIST || stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
                if (e == EEXIST) e = ENOTDIR;
                snprintf(why, whylen, "mkdir %s: %s", p, strerror(e));
                return -1;
            }
        }
        p[i] = c;
    }
    return 0;
}

/* Can we create a file in dir? */
static int probe_write(const char *dir, char *why, size_t whylen) {
    char p[TH_CACHE_PATH_MAX];
    if (th_path(p, sizeof p, "%s/.probe-XXXXXX", dir) != 0) {
        snprintf(why, whylen, "path too long");
        return -1;
    }
    int fd = mkostemp(p, O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, whylen, "cannot create a file in it: %s", strerror(errno));
        return -1;
    }
    close(fd);
    if (unlink(p) != 0) {
        snprintf(why, whylen, "cannot remove %s: %s", p, strerror(errno));
        return -1;
    }
    return 0;
}

int th_cache_open(const char *dir, th_cache **out, char *warn, size_t warnlen, char *err, size_t errlen) {
    *out = NULL;
    if (warnlen) warn[0] = 0;
    th_cache *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "theano: opening the cache: out of memory");
        return -1;
    }
    if (dir && *dir) {
        if (th_path(c->dir, sizeof c->dir, "%s", dir) != 0) {
            snprintf(err, errlen, "theano: cache directory name too long: %.200s...", dir);
            goto fail;
        }
    } else if (th_cache_default_dir(c->dir, sizeof c->dir, err, errlen) != 0) {
        goto fail;
    }
    for (size_t n = strlen(c->dir); n > 1 && c->dir[n - 1] == '/'; n--) c->dir[n - 1] = 0;

    char why[TH_CACHE_PATH_MAX + 128];
    /* the folders above it too (khost/kit/pathtrust.h): under a folder another user may write to, an entry can
     * be renamed and replaced whatever the cache's own mode */
    char above[TH_CACHE_PATH_MAX];
    snprintf(above, sizeof above, "%s", c->dir);
    char *slash = strrchr(above, '/');
    if (slash && slash > above) *slash = 0;
    else if (slash) slash[1] = 0;
    int ancestors_ok = kh_path_trusted(above, why, sizeof why) == 0;
    if (ancestors_ok && mkdir_p(c->dir, why, sizeof why) == 0) {
        if (th_cache_check_dir(c->dir, err, errlen) != 0) goto fail;
        if (probe_write(c->dir, why, sizeof why) == 0) {
            *out = c;
            return 0;
        }
    }
    /* not creatable or not writable: a private temporary cache for this process */
    const char *tmp = getenv("TMPDIR");
    if (!tmp || tmp[0] != '/') tmp = "/tmp";
    char t[TH_CACHE_PATH_MAX];
    if (th_path(t, sizeof t, "%s/khost-theano-XXXXXX", tmp) != 0 || !mkdtemp(t)) {
        snprintf(err, errlen,
                 "theano: cache %s is not writable (%s), and no private temporary cache could be made in %s: %s",
                 c->dir, why, tmp, strerror(errno));
        goto fail;
    }
    if (th_cache_check_dir(t, err, errlen) != 0) {
        rmdir(t);
        goto fail;
    }
    snprintf(warn, warnlen, "theano: cache %s is not %s (%s); using private temporary cache %s for this process",
             c->dir, ancestors_ok ? "writable" : "in a safe place", why, t);
    memcpy(c->dir, t, sizeof t);
    c->temporary = 1;
    *out = c;
    return 0;
fail:
    free(c);
    return -1;
}

void th_cache_close(th_cache *c) {
    if (!c) return;
    if (c->temporary) {
        char err[512];
        th_cache_prune_stats st;
        th_cache_prune(c->dir, -1.0, &st, NULL, NULL, err, sizeof err);
        rmdir(c->dir);
    }
    free(c);
}

const char *th_cache_dir(const th_cache *c) { return c->dir; }
int th_cache_is_temporary(const th_cache *c) { return c->temporary; }

/* --- the key ------------------------------------------------------------------------------------------------ */
static int valid_name(const char *n) {
    if (!n || !*n || n[0] == '.' || strlen(n) > 64) return 0;
    if (!strcmp(n, "meta") || !strcmp(n, "lock") || !strcmp(n, "build.log")) return 0;
    for (const char *p = n; *p; p++)
        if (*p == '/' || (unsigned char)*p < 0x20 || *p == 0x7f) return 0;
    return 1;
}

static int add(char **buf, size_t *len, size_t *cap, const void *s, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t nc = *cap ? *cap : 1024;
        while (nc < *len + n + 1) nc *= 2;
        char *nb = realloc(*buf, nc);
        if (!nb) return -1;
        *buf = nb;
        *cap = nc;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = 0;
    return 0;
}

static int add_section(char **buf, size_t *len, size_t *cap, const char *label, const char *s, size_t n) {
    char head[96];
    snprintf(head, sizeof head, "%s %zu\n", label, n);
    return add(buf, len, cap, head, strlen(head)) || add(buf, len, cap, s, n) || add(buf, len, cap, "\n", 1)
               ? -1
               : 0;
}

char *th_cache_key_text(const th_cache_req *req, size_t *len, char key[65]) {
    char *b = NULL;
    size_t l = 0, cap = 0;
    const char *id = req->tool_identity ? req->tool_identity : "";
    const char *fl = req->tool_flags ? req->tool_flags : "";
    const char *ex = req->key_extra ? req->key_extra : "";
    char names[256];
    snprintf(names, sizeof names, "source-name %s\nartifact-name %s\n", req->source_name, req->artifact_name);
    if (add(&b, &l, &cap, TH_KEY_MAGIC, strlen(TH_KEY_MAGIC)) || add(&b, &l, &cap, names, strlen(names)) ||
        add_section(&b, &l, &cap, "tool-identity", id, strlen(id)) ||
        add_section(&b, &l, &cap, "tool-flags", fl, strlen(fl)) || add_section(&b, &l, &cap, "extra", ex, strlen(ex)) ||
        add_section(&b, &l, &cap, "source", req->source, req->source_len)) {
        free(b);
        return NULL;
    }
    th_sha256_hex(b, l, key);
    *len = l;
    return b;
}

void th_cache_req_c(th_cache_req *req, const th_toolchain *tc, const char *source, size_t source_len,
                    const char *key_extra) {
    memset(req, 0, sizeof *req);
    req->source = source;
    req->source_len = source_len;
    req->source_name = "fn.c";
    req->artifact_name = "fn.so";
    req->tool_identity = tc->identity;
    req->tool_flags = tc->resolved_flags;
    req->key_extra = key_extra;
    req->build = th_toolchain_build_so;
    req->build_ctx = (void *)tc;
}

/* --- verification -------------------------------------------------------------------------------------------- */
/* 1: the entry is complete and matches the key; 0: not (why says what is wrong). */
static int verify(const char *entry, const char *key, size_t klen, const char *artifact, char *why, size_t wl) {
    char p[TH_CACHE_PATH_MAX];
    if (th_path(p, sizeof p, "%s/meta", entry) != 0) {
        snprintf(why, wl, "path too long");
        return 0;
    }
    size_t mlen = 0;
    char *meta = th_read_file(p, klen + TH_META_TRAILER_MAX, &mlen);
    if (!meta) {
        struct stat st;
        if (errno == ENOENT)
            snprintf(why, wl, stat(entry, &st) == 0 ? "metadata missing" : "no entry");
        else if (errno == EFBIG)
            snprintf(why, wl, "metadata does not match the key (too long)");
        else
            snprintf(why, wl, "metadata unreadable: %s", strerror(errno));
        return 0;
    }
    int ok = 0;
    unsigned long long asize = 0;
    char ahash[TH_SHA256_HEX_LEN + 1] = "";
    if (mlen == 0) {
        snprintf(why, wl, "metadata empty");
    } else if (mlen < klen || memcmp(meta, key, klen) != 0) {
        snprintf(why, wl, "metadata does not match the key");
    } else {
        /* the trailer must be exactly what publish() writes */
        const char *t = meta + klen;
        char canon[TH_META_TRAILER_MAX + 1];
        if (sscanf(t, "artifact-size %llu\nartifact-sha256 %64[0-9a-f]\nend\n", &asize, ahash) == 2 &&
            strlen(ahash) == TH_SHA256_HEX_LEN &&
            snprintf(canon, sizeof canon, TH_META_TRAILER_FMT, asize, ahash) == (int)(mlen - klen) &&
            memcmp(canon, t, mlen - klen) == 0)
            ok = 1;
        else
            snprintf(why, wl, "metadata damaged (no valid artifact size and checksum after the key)");
    }
    free(meta);
    if (!ok) return 0;

    if (th_path(p, sizeof p, "%s/%s", entry, artifact) != 0) {
        snprintf(why, wl, "path too long");
        return 0;
    }
    int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        snprintf(why, wl, errno == ENOENT ? "artifact missing" : "artifact unreadable: %s", strerror(errno));
        return 0;
    }
    struct stat st;
    char hash[TH_SHA256_HEX_LEN + 1];
    uint64_t got = 0;
    ok = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        snprintf(why, wl, "artifact is not a regular file");
    else if ((unsigned long long)st.st_size != asize)
        snprintf(why, wl, "artifact is %llu bytes, metadata says %llu", (unsigned long long)st.st_size, asize);
    else if (th_sha256_fd_hex(fd, hash, &got) != 0)
        snprintf(why, wl, "artifact unreadable: %s", strerror(errno));
    else if (got != asize || strcmp(hash, ahash) != 0)
        snprintf(why, wl, "artifact checksum differs from the metadata's");
    else
        ok = 1;
    close(fd);
    return ok;
}

/* --- building ------------------------------------------------------------------------------------------------ */
/* Writes data to <dir>/<name> through a temporary file, fsync and rename. */
static int write_atomic(const char *dir, const char *name, const void *data, size_t len, char *err, size_t errlen) {
    char tmp[TH_CACHE_PATH_MAX], final[TH_CACHE_PATH_MAX];
    if (th_path(tmp, sizeof tmp, "%s/.%s.XXXXXX", dir, name) != 0 ||
        th_path(final, sizeof final, "%s/%s", dir, name) != 0) {
        snprintf(err, errlen, "theano: cache path too long: %s", dir);
        return -1;
    }
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "theano: cannot create a file in %s: %s", dir, strerror(errno));
        return -1;
    }
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            snprintf(err, errlen, "theano: cannot write %s: %s", tmp, w < 0 ? strerror(errno) : "no progress");
            goto fail;
        }
        p += w;
        left -= (size_t)w;
    }
    if (fsync(fd) != 0) {
        snprintf(err, errlen, "theano: cannot fsync %s: %s", tmp, strerror(errno));
        goto fail;
    }
    if (close(fd) != 0) {
        fd = -1;
        snprintf(err, errlen, "theano: cannot write %s: %s", tmp, strerror(errno));
        goto fail;
    }
    fd = -1;
    if (rename(tmp, final) != 0) {
        snprintf(err, errlen, "theano: cannot rename %s to %s: %s", tmp, final, strerror(errno));
        goto fail;
    }
    return 0;
fail:
    if (fd >= 0) close(fd);
    unlink(tmp);
    return -1;
}

/* Under the entry's lock, files starting with '.' are temporaries of a builder that died: removed. */
static void remove_stale_temporaries(const char *entry) {
    DIR *d = opendir(entry);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] == '.' && strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            unlinkat(dirfd(d), de->d_name, 0);
    closedir(d);
}

static int mkdir_one(const char *p, int *created) {
    if (mkdir(p, 0700) == 0) {
        *created = 1;
        return 0;
    }
    return errno == EEXIST ? 0 : -1;
}

/* Creates the entry's folders and takes its lock (flock, exclusive, waiting). Returns the lock's fd or -1. */
static int lock_entry(const char *cdir, const char *entry, const char *key, char *err, size_t errlen) {
    char hh[TH_CACHE_PATH_MAX], lockp[TH_CACHE_PATH_MAX];
    if (th_path(hh, sizeof hh, "%s/%.2s", cdir, key) != 0 || th_path(lockp, sizeof lockp, "%s/lock", entry) != 0) {
        snprintf(err, errlen, "theano: cache path too long: %s", cdir);
        return -1;
    }
    for (int attempt = 0; attempt < 50; attempt++) {
        int created = 0;
        if (mkdir_one(hh, &created) != 0 || mkdir_one(entry, &created) != 0) {
            if (errno == ENOENT) continue; /* a prune removed <hh> between the two mkdirs */
            snprintf(err, errlen, "theano: cannot create cache entry %s: %s", entry, strerror(errno));
            return -1;
        }
        if (created) th_fsync_dir(hh);
        int fd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
            if (errno == ENOENT) continue;
            snprintf(err, errlen, "theano: cannot open the lock %s: %s", lockp, strerror(errno));
            return -1;
        }
        while (flock(fd, LOCK_EX) != 0) {
            if (errno == EINTR) continue;
            snprintf(err, errlen, "theano: cannot lock %s: %s", lockp, strerror(errno));
            close(fd);
            return -1;
        }
        /* a prune may have removed the entry while we waited: then this lock guards nothing */
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(lockp, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) return fd;
        close(fd);
    }
    snprintf(err, errlen, "theano: cannot lock cache entry %s: it keeps being removed", entry);
    return -1;
}

/* Builds into a temporary name, then publishes: artifact renamed first, meta last, directory fsynced. */
static int build_and_publish(const th_cache_req *req, const char *key, size_t klen, th_cache_result *res, char *err,
                             size_t errlen) {
    const char *entry = res->entry_dir;
    char src[TH_CACHE_PATH_MAX], tmp[TH_CACHE_PATH_MAX], logp[TH_CACHE_PATH_MAX];
    if (th_path(src, sizeof src, "%s/%s", entry, req->source_name) != 0 ||
        th_path(tmp, sizeof tmp, "%s/.%s.XXXXXX", entry, req->artifact_name) != 0 ||
        th_path(logp, sizeof logp, "%s/build.log", entry) != 0) {
        snprintf(err, errlen, "theano: cache path too long: %s", entry);
        return -1;
    }
    remove_stale_temporaries(entry);
    if (write_atomic(entry, req->source_name, req->source, req->source_len, err, errlen) != 0) return -1;
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "theano: cannot create a file in %s: %s", entry, strerror(errno));
        return -1;
    }
    close(fd);
    double t0 = kh_now();
    int rc = req->build(req->build_ctx, src, tmp, logp, err, errlen);
    res->compile_s = kh_now() - t0;
    if (rc != 0) {
        if (!err[0]) snprintf(err, errlen, "theano: building %s failed", src);
        unlink(tmp);
        return -1;
    }
    char hash[TH_SHA256_HEX_LEN + 1];
    uint64_t size = 0;
    fd = open(tmp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        snprintf(err, errlen, "theano: the build left no artifact %s: %s", tmp, strerror(errno));
        unlink(tmp);
        return -1;
    }
    if (fsync(fd) != 0 || th_sha256_fd_hex(fd, hash, &size) != 0) {
        snprintf(err, errlen, "theano: cannot read back %s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        return -1;
    }
    close(fd);
    if (size == 0) {
        snprintf(err, errlen, "theano: building %s produced an empty %s", src, req->artifact_name);
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, res->artifact_path) != 0) {
        snprintf(err, errlen, "theano: cannot rename %s to %s: %s", tmp, res->artifact_path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    char trailer[TH_META_TRAILER_MAX + 1];
    int tl = snprintf(trailer, sizeof trailer, TH_META_TRAILER_FMT, (unsigned long long)size, hash);
    char *meta = malloc(klen + (size_t)tl);
    if (!meta) {
        snprintf(err, errlen, "theano: publishing %s: out of memory", entry);
        return -1;
    }
    memcpy(meta, key, klen);
    memcpy(meta + klen, trailer, (size_t)tl);
    rc = write_atomic(entry, "meta", meta, klen + (size_t)tl, err, errlen);
    free(meta);
    if (rc != 0) return -1;
    if (th_fsync_dir(entry) != 0) {
        snprintf(err, errlen, "theano: cannot fsync %s: %s", entry, strerror(errno));
        return -1;
    }
    return 0;
}

int th_cache_get(th_cache *c, const th_cache_req *req, th_cache_result *res, char *err, size_t errlen) {
    memset(res, 0, sizeof *res);
    if (errlen) err[0] = 0;
    if (!req || !req->build || (!req->source && req->source_len) || !valid_name(req->source_name) ||
        !valid_name(req->artifact_name) || !strcmp(req->source_name, req->artifact_name)) {
        snprintf(err, errlen, "theano: th_cache_get: invalid request (source, file names or builder)");
        return -1;
    }
    size_t klen = 0;
    char *key = th_cache_key_text(req, &klen, res->key);
    if (!key) {
        snprintf(err, errlen, "theano: cache key: out of memory");
        return -1;
    }
    int rc = -1, lockfd = -1;
    if (th_path(res->entry_dir, sizeof res->entry_dir, "%s/%.2s/%s", c->dir, res->key, res->key) != 0 ||
        th_path(res->artifact_path, sizeof res->artifact_path, "%s/%s", res->entry_dir, req->artifact_name) != 0) {
        snprintf(err, errlen, "theano: cache path too long: %s", c->dir);
        goto done;
    }
    char why[256], meta[TH_CACHE_PATH_MAX + 8];
    double t0 = kh_now();
    int ok = verify(res->entry_dir, key, klen, req->artifact_name, why, sizeof why);
    res->check_s += kh_now() - t0;
    if (ok) {
        /* a hit refreshes meta's time: what `prune --older-than` measures */
        if (th_path(meta, sizeof meta, "%s/meta", res->entry_dir) == 0) utimensat(AT_FDCWD, meta, NULL, 0);
        res->hit = 1;
        rc = 0;
        goto done;
    }
    if ((lockfd = lock_entry(c->dir, res->entry_dir, res->key, err, errlen)) < 0) goto done;
    /* another process may have built it while we waited for the lock */
    t0 = kh_now();
    ok = verify(res->entry_dir, key, klen, req->artifact_name, why, sizeof why);
    res->check_s += kh_now() - t0;
    if (ok) {
        res->hit = 1;
        rc = 0;
        goto done;
    }
    if (strcmp(why, "no entry") != 0 && strcmp(why, "metadata missing") != 0)
        snprintf(res->note, sizeof res->note, "rebuilt: %s", why);
    rc = build_and_publish(req, key, klen, res, err, errlen);
done:
    if (lockfd >= 0) close(lockfd);
    free(key);
    return rc;
}
