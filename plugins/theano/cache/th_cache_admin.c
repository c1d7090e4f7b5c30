/* plugins/theano/cache/th_cache_admin.c — listing and pruning the cache's entries (th_cache.h). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "th_cache.h"
#include "th_cache_util.h"

typedef struct {
    char **v;
    size_t n, cap;
} strlist;

static int sl_add(strlist *l, const char *s) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 64;
        char **nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) return -1;
        l->v = nv;
        l->cap = nc;
    }
    if (!(l->v[l->n] = strdup(s))) return -1;
    l->n++;
    return 0;
}

static void sl_free(strlist *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
}

static void say(void (*report)(void *, const char *), void *arg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(void (*report)(void *, const char *), void *arg, const char *fmt, ...) {
    if (!report) return;
    char line[TH_CACHE_PATH_MAX + 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    report(arg, line);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every entry key under dir, sorted. */
static int collect(const char *dir, strlist *keys, char *err, size_t errlen) {
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, errno == ENOENT ? "theano: no cache at %s" : "theano: cannot read %s: %s", dir,
                 strerror(errno));
        return -1;
    }
    struct dirent *de;
    int rc = 0;
    while (rc == 0 && (errno = 0, de = readdir(d)) != NULL) {
        if (!th_is_hex(de->d_name, 2)) continue;
        char sub[TH_CACHE_PATH_MAX];
        if (th_path(sub, sizeof sub, "%s/%s", dir, de->d_name) != 0) continue;
        DIR *s = opendir(sub);
        if (!s) continue; /* not a folder, or removed meanwhile */
        struct dirent *e;
        while ((e = readdir(s)) != NULL)
            if (th_is_hex(e->d_name, 64) && !strncmp(e->d_name, de->d_name, 2) && sl_add(keys, e->d_name) != 0) {
                snprintf(err, errlen, "theano: listing %s: out of memory", dir);
                rc = -1;
                break;
            }
        closedir(s);
    }
    if (rc == 0 && errno != 0) {
        snprintf(err, errlen, "theano: cannot read %s: %s", dir, strerror(errno));
        rc = -1;
    }
    closedir(d);
    if (rc == 0 && keys->n) qsort(keys->v, keys->n, sizeof *keys->v, cmp_str);
    return rc;
}

/* Fills e (artifact malloc'ed into *artifact) for the entry folder path. */
static void describe(const char *path, const char *key, th_cache_entry_info *e, char **artifact) {
    memset(e, 0, sizeof *e);
    *artifact = NULL;
    e->key = key;
    e->path = path;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct stat st;
    time_t when = now.tv_sec;
    if (stat(path, &st) == 0) when = st.st_mtime;
    DIR *d = opendir(path);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL)
            if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
                e->bytes += (uint64_t)st.st_size;
        closedir(d);
    }
    char mp[TH_CACHE_PATH_MAX];
    size_t len = 0;
    char *meta = th_path(mp, sizeof mp, "%s/meta", path) == 0 ? th_read_file(mp, (size_t)1 << 30, &len) : NULL;
    if (meta && stat(mp, &st) == 0) {
        when = st.st_mtime;
        const char *a = strstr(meta, "\nartifact-name ");
        size_t ml = strlen(TH_KEY_MAGIC);
        if (len > ml && !memcmp(meta, TH_KEY_MAGIC, ml) && a && len >= 4 && !memcmp(meta + len - 4, "end\n", 4)) {
            a += strlen("\nartifact-name ");
            *artifact = strndup(a, strcspn(a, "\n"));
            e->artifact = *artifact;
            e->complete = 1;
        }
    }
    free(meta);
    e->age_s = difftime(now.tv_sec, when);
    if (e->age_s < 0) e->age_s = 0;
}

int th_cache_list(const char *dir, int (*fn)(void *arg, const th_cache_entry_info *e), void *arg, char *err,
                  size_t errlen) {
    strlist keys = {0};
    if (collect(dir, &keys, err, errlen) != 0) {
        sl_free(&keys);
        return -1;
    }
    int rc = (int)keys.n;
    for (size_t i = 0; i < keys.n; i++) {
        char path[TH_CACHE_PATH_MAX];
        if (th_path(path, sizeof path, "%s/%.2s/%s", dir, keys.v[i], keys.v[i]) != 0) continue;
        th_cache_entry_info e;
        char *artifact;
        describe(path, keys.v[i], &e, &artifact);
        int r = fn(arg, &e);
        free(artifact);
        if (r != 0) {
            rc = r;
            break;
        }
    }
    sl_free(&keys);
    return rc;
}

/* Removes every file of the entry folder (ours: plain files only), the lock last, then the folder. */
static int remove_entry(const char *path, char *why, size_t wl) {
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (dfd < 0) {
        snprintf(why, wl, "%s", strerror(errno));
        return -1;
    }
    DIR *d = fdopendir(dfd);
    if (!d) {
        snprintf(why, wl, "%s", strerror(errno));
        close(dfd);
        return -1;
    }
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || !strcmp(de->d_name, "lock")) continue;
        if (unlinkat(dfd, de->d_name, 0) != 0 && errno != ENOENT) {
            snprintf(why, wl, "cannot remove %s: %s", de->d_name, strerror(errno));
            rc = -1;
        }
    }
    if (rc == 0 && unlinkat(dfd, "lock", 0) != 0 && errno != ENOENT) {
        snprintf(why, wl, "cannot remove lock: %s", strerror(errno));
        rc = -1;
    }
    closedir(d);
    if (rc == 0 && rmdir(path) != 0) {
        snprintf(why, wl, "cannot remove the folder: %s", strerror(errno));
        rc = -1;
    }
    return rc;
}

int th_cache_prune(const char *dir, double older_than_s, th_cache_prune_stats *stats,
                   void (*report)(void *arg, const char *line), void *arg, char *err, size_t errlen) {
    memset(stats, 0, sizeof *stats);
    if (errlen) err[0] = 0;
    strlist keys = {0};
    if (collect(dir, &keys, err, errlen) != 0) {
        sl_free(&keys);
        return -1;
    }
    for (size_t i = 0; i < keys.n; i++) {
        const char *key = keys.v[i];
        char path[TH_CACHE_PATH_MAX], lockp[TH_CACHE_PATH_MAX], hh[TH_CACHE_PATH_MAX];
        if (th_path(path, sizeof path, "%s/%.2s/%s", dir, key, key) != 0 ||
            th_path(lockp, sizeof lockp, "%s/lock", path) != 0 || th_path(hh, sizeof hh, "%s/%.2s", dir, key) != 0)
            continue;
        th_cache_entry_info e;
        char *artifact;
        describe(path, key, &e, &artifact);
        free(artifact);
        if (older_than_s >= 0 && e.age_s < older_than_s) {
            stats->kept_young++;
            continue;
        }
        int fd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
            if (errno == ENOENT) continue; /* removed meanwhile */
            stats->failed++;
            if (!err[0]) snprintf(err, errlen, "theano: cannot open %s: %s", lockp, strerror(errno));
            say(report, arg, "failed  %s: cannot open its lock: %s", key, strerror(errno));
            continue;
        }
        int r;
        while ((r = flock(fd, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
        }
        if (r != 0) {
            if (errno == EWOULDBLOCK) {
                stats->kept_busy++;
                say(report, arg, "kept    %s: being built (locked)", key);
            } else {
                stats->failed++;
                if (!err[0]) snprintf(err, errlen, "theano: cannot lock %s: %s", lockp, strerror(errno));
            }
            close(fd);
            continue;
        }
        struct stat a, b;
        if (fstat(fd, &a) != 0 || stat(lockp, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
            close(fd); /* removed (and perhaps recreated) meanwhile */
            continue;
        }
        char why[512];
        if (remove_entry(path, why, sizeof why) == 0) {
            stats->removed++;
            stats->bytes_removed += e.bytes;
            say(report, arg, "removed %s (%llu bytes, %.1f days)", key, (unsigned long long)e.bytes,
                e.age_s / 86400.0);
        } else {
            stats->failed++;
            if (!err[0]) snprintf(err, errlen, "theano: cannot remove cache entry %s: %s", path, why);
            say(report, arg, "failed  %s: %s", key, why);
        }
        close(fd);
        rmdir(hh); /* only when empty; a builder that raced it re-creates it */
    }
    sl_free(&keys);
    return stats->failed ? -1 : 0;
}
