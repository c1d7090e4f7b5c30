/* core/results/setfile.c — a results folder's records packed into one file, read back as the folder (setfile.h). */
#define _GNU_SOURCE /* strdup */
#include "results/setfile.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/files.h"
#include "base/grow.h"
#include "khost/kit/regular.h"
#include "results/cellfiles.h"
#include "results/results.h"

#define MAX_PACK_BYTES ((size_t)1 << 31) /* what a pack may hold once unpacked */
#define MAX_MOUNTS 8

typedef struct entry {
    char *path; /* "<task>/<file>" */
    char *text;
    size_t len;
} entry;

typedef struct mount {
    char dir[4096]; /* as the folder was named, with single slashes and none at the end */
    entry *e;
    int n;
} mount;

static mount g_mounts[MAX_MOUNTS];
static int g_n_mounts;

/* path with runs of '/' made one and none at the end (but "/" itself); 0 ok, -1 too long. */
static int normal(const char *path, char *buf, size_t n) {
    size_t j = 0;
    for (size_t i = 0; path[i]; i++) {
        if (path[i] == '/' && j > 0 && buf[j - 1] == '/') continue;
        if (j + 1 >= n) return -1;
        buf[j++] = path[i];
    }
    while (j > 1 && buf[j - 1] == '/') j--;
    buf[j] = 0;
    return 0;
}

static void entries_free(entry *e, int n) {
    for (int i = 0; i < n; i++) free(e[i].path), free(e[i].text);
    free(e);
}

static int cmp_entry(const void *a, const void *b) { return strcmp(((const entry *)a)->path, ((const entry *)b)->path); }

/* Entries sorted by path; a path twice is an error naming where (the entries are then freed). 0 ok. */
static int sort_unique(entry *e, int n, const char *where, char *err, size_t errlen) {
    if (n > 1) qsort(e, (size_t)n, sizeof *e, cmp_entry);
    for (int i = 1; i < n; i++)
        if (!strcmp(e[i].path, e[i - 1].path)) {
            snprintf(err, errlen, "%s: the file %s is in it twice", where, e[i].path);
            entries_free(e, n);
            return -1;
        }
    return 0;
}

/* "<task>/<file>": a task name and a record file's name (what the folder itself could hold). */
static int path_ok(const char *p) {
    const char *slash = strchr(p, '/');
    if (!slash || strchr(slash + 1, '/') || slash - p > 127) return 0;
    char task[128], base[256];
    int k;
    memcpy(task, p, (size_t)(slash - p));
    task[slash - p] = 0;
    return kh_record_name_ok(task, 127) && kh_cell_parse_name(slash + 1, base, sizeof base, &k);
}

/* The whole of a file khost reads (gzip or plain), NUL-ended; NULL with err. */
static char *slurp_gz(const char *path, size_t *len, char *err, size_t errlen) {
    char why[600];
    int fd = kh_open_regular(path, why, sizeof why);
    if (fd < 0) {
        snprintf(err, errlen, "%s", why);
        return NULL;
    }
    gzFile g = gzdopen(fd, "rb");
    if (!g) {
        close(fd);
        snprintf(err, errlen, "%s: cannot read: out of memory", path);
        return NULL;
    }
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (!buf) break;
        if (n == cap) {
            if (cap >= MAX_PACK_BYTES) {
                snprintf(err, errlen, "%s: more than %zu bytes once unpacked: not read", path, MAX_PACK_BYTES);
                free(buf), gzclose(g);
                return NULL;
            }
            char *nb = realloc(buf, cap * 2 + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb, cap *= 2;
        }
        int got = gzread(g, buf + n, (unsigned)(cap - n > (1u << 30) ? (1u << 30) : cap - n));
        if (got < 0) {
            int code;
            const char *msg = gzerror(g, &code);
            snprintf(err, errlen, "%s: not a readable pack: %s", path, msg && *msg ? msg : "read error");
            free(buf), gzclose(g);
            return NULL;
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory", path);
        gzclose(g);
        return NULL;
    }
    /* a truncated gzip stream reads as a short one: zlib says so only here */
    int code = Z_OK;
    const char *msg = gzerror(g, &code);
    if (code != Z_OK && code != Z_STREAM_END) {
        snprintf(err, errlen, "%s: not a readable pack: %s", path, msg && *msg ? msg : "truncated");
        free(buf), gzclose(g);
        return NULL;
    }
    if (gzclose(g) != Z_OK) {
        snprintf(err, errlen, "%s: not a readable pack: the compressed stream is truncated or corrupt", path);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

/* Parse a pack's text into sorted entries; 0 ok, -1 with err naming pack and line. */
static int parse_pack(const char *pack, char *text, size_t len, entry **out, int *n_out, char *err, size_t errlen) {
    entry *e = NULL;
    int n = 0, cap = 0, line_no = 0;
    long want = -1;
    char *p = text, *end = text + len;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
        line_no++;
        cJSON *o = l ? cJSON_ParseWithLength(p, l) : NULL;
        p += l + (nl ? 1 : 0);
        const char *bad = NULL;
        if (!l) bad = "an empty line";
        else if (!cJSON_IsObject(o)) bad = "not a JSON object";
        else if (line_no == 1) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "khost_set");
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "files");
            if (!cJSON_IsNumber(v) || v->valuedouble != KH_SETFILE_VERSION) bad = "not a khost pack of version 1 (field khost_set)";
            else if (!cJSON_IsNumber(f) || f->valuedouble < 0 || f->valuedouble > 1e8 ||
                     f->valuedouble != (double)(long)f->valuedouble)
                bad = "field files is not a count";
            else want = (long)f->valuedouble;
        } else {
            const cJSON *pa = cJSON_GetObjectItemCaseSensitive(o, "path");
            const cJSON *tx = cJSON_GetObjectItemCaseSensitive(o, "text");
            if (!cJSON_IsString(pa) || !cJSON_IsString(tx) || cJSON_GetArraySize(o) != 2)
                bad = "a line must hold a string path and a string text, nothing else";
            else if (!path_ok(pa->valuestring))
                bad = "field path is not <task>/<record file> (" KH_RECORD_NAME_CHARS ")";
            else {
                entry *ne = n == cap ? kh_grow(e, &cap, sizeof *e, 256) : e;
                if (!ne) bad = "out of memory";
                else {
                    e = ne;
                    e[n].path = strdup(pa->valuestring);
                    e[n].len = strlen(tx->valuestring);
                    e[n].text = strdup(tx->valuestring);
                    if (!e[n].path || !e[n].text) {
                        free(e[n].path), free(e[n].text);
                        bad = "out of memory";
                    } else n++;
                }
            }
        }
        cJSON_Delete(o);
        if (bad) {
            snprintf(err, errlen, "%s: line %d: %s", pack, line_no, bad);
            entries_free(e, n);
            return -1;
        }
    }
    if (want < 0 || want != n) {
        if (want < 0) snprintf(err, errlen, "%s: empty: not a khost pack", pack);
        else snprintf(err, errlen, "%s: holds %d file(s), its first line says %ld: truncated or altered", pack, n, want);
        entries_free(e, n);
        return -1;
    }
    if (sort_unique(e, n, pack, err, errlen) != 0) return -1;
    *out = e;
    *n_out = n;
    return 0;
}

static int read_pack(const char *pack, entry **e, int *n, char *err, size_t errlen) {
    size_t len;
    char *text = slurp_gz(pack, &len, err, errlen);
    if (!text) return -1;
    int rc = parse_pack(pack, text, len, e, n, err, errlen);
    free(text);
    return rc;
}

int kh_set_is_packed(const char *dir) {
    char pack[4200];
    struct stat st;
    snprintf(pack, sizeof pack, "%s/%s", dir, KH_SETFILE_NAME);
    return lstat(pack, &st) == 0;
}

int kh_set_mount(const char *dir, char *err, size_t errlen) {
    char nd[4096], pack[4200];
    if (normal(dir, nd, sizeof nd) != 0) {
        snprintf(err, errlen, "%s: path too long", dir);
        return -1;
    }
    for (int i = 0; i < g_n_mounts; i++)
        if (!strcmp(g_mounts[i].dir, nd)) return 1;
    snprintf(pack, sizeof pack, "%s/%s", nd, KH_SETFILE_NAME);
    struct stat st;
    if (lstat(pack, &st) != 0 && errno == ENOENT) return 0;
    if (g_n_mounts == MAX_MOUNTS) {
        snprintf(err, errlen, "%s: more than %d packed folders at once", pack, MAX_MOUNTS);
        return -1;
    }
    mount *m = &g_mounts[g_n_mounts];
    if (read_pack(pack, &m->e, &m->n, err, errlen) != 0) return -1;
    snprintf(m->dir, sizeof m->dir, "%s", nd);
    g_n_mounts++;
    return 1;
}

int kh_set_mount_files(const char *dir, const char *const *paths, const char *const *texts, int n, char *err,
                       size_t errlen) {
    char nd[4096];
    if (normal(dir, nd, sizeof nd) != 0 || g_n_mounts == MAX_MOUNTS) {
        snprintf(err, errlen, "%s: %s", dir, g_n_mounts == MAX_MOUNTS ? "too many sets at once" : "name too long");
        return -1;
    }
    entry *e = calloc((size_t)n + 1, sizeof *e);
    if (!e) {
        snprintf(err, errlen, "%s: out of memory", dir);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (!path_ok(paths[i])) {
            snprintf(err, errlen, "%s: %s is not <task>/<record file>", dir, paths[i]);
            entries_free(e, i);
            return -1;
        }
        e[i].path = strdup(paths[i]);
        e[i].text = strdup(texts[i]);
        e[i].len = e[i].text ? strlen(e[i].text) : 0;
        if (!e[i].path || !e[i].text) {
            snprintf(err, errlen, "%s: out of memory", dir);
            entries_free(e, i + 1);
            return -1;
        }
    }
    if (sort_unique(e, n, dir, err, errlen) != 0) return -1;
    mount *m = &g_mounts[g_n_mounts++];
    snprintf(m->dir, sizeof m->dir, "%s", nd);
    m->e = e;
    m->n = n;
    return 0;
}

void kh_set_unmount_all(void) {
    for (int i = 0; i < g_n_mounts; i++) entries_free(g_mounts[i].e, g_mounts[i].n);
    g_n_mounts = 0;
}

/* The mount path lies in and the rest of path below it; NULL when none. */
static const mount *mount_of(const char *path, char *rest, size_t n) {
    char np[4200];
    if (!g_n_mounts || normal(path, np, sizeof np) != 0) return NULL;
    for (int i = 0; i < g_n_mounts; i++) {
        size_t dl = strlen(g_mounts[i].dir);
        if (!strncmp(np, g_mounts[i].dir, dl) && (np[dl] == '/' || np[dl] == 0)) {
            snprintf(rest, n, "%s", np[dl] ? np + dl + 1 : "");
            return &g_mounts[i];
        }
    }
    return NULL;
}

const char *kh_set_text(const char *path, size_t *len) {
    char rest[4200];
    const mount *m = mount_of(path, rest, sizeof rest);
    if (!m) return NULL;
    entry key = {.path = rest};
    const entry *e = m->n ? bsearch(&key, m->e, (size_t)m->n, sizeof *m->e, cmp_entry) : NULL;
    if (!e) return NULL;
    *len = e->len;
    return e->text;
}

void kh_set_names_free(char **names) {
    for (char **p = names; p && *p; p++) free(*p);
    free(names);
}

char **kh_set_names(const char *dir, int dirs, int *n, int *oom) {
    char rest[4200];
    *n = 0, *oom = 0;
    const mount *m = mount_of(dir, rest, sizeof rest);
    struct stat st;
    /* a database's set (no folder of that name): no record files beside its task folders */
    if (m && !dirs && !rest[0] && (stat(m->dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
        char **none = calloc(1, sizeof *none);
        if (!none) *oom = 1;
        return none;
    }
    if (!m || (dirs ? rest[0] != 0 : (rest[0] == 0 || strchr(rest, '/') != NULL))) return NULL;
    char **v = calloc((size_t)m->n + 1, sizeof *v);
    if (!v) {
        *oom = 1;
        return NULL;
    }
    size_t rl = strlen(rest);
    for (int i = 0; i < m->n; i++) { /* sorted by path: a task's files are together, tasks in order */
        const char *p = m->e[i].path, *slash = strchr(p, '/');
        const char *name = NULL;
        size_t nl = 0;
        if (dirs) {
            nl = (size_t)(slash - p);
            if (*n && strlen(v[*n - 1]) == nl && !strncmp(v[*n - 1], p, nl)) continue;
            name = p;
        } else if ((size_t)(slash - p) == rl && !strncmp(p, rest, rl)) {
            name = slash + 1;
            nl = strlen(name);
        }
        if (!name) continue;
        if (!(v[*n] = strndup(name, nl))) {
            kh_set_names_free(v);
            *oom = 1, *n = 0;
            return NULL;
        }
        (*n)++;
    }
    return v;
}

int kh_set_loose_folders(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char path[4400];
        struct stat st;
        if (de->d_name[0] == '.' || !strcmp(de->d_name, "slurm") || !kh_record_name_ok(de->d_name, 127)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        n += lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
    }
    closedir(d);
    return n;
}

// --- packing ------------------------------------------------------------------------------------------------

static char *read_text(const char *path, size_t *len, char *err, size_t errlen) {
    FILE *f = kh_fopen_regular(path, err, errlen);
    if (!f) return NULL;
    char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    char chunk[65536];
    size_t got;
    while (m && (got = fread(chunk, 1, sizeof chunk, f)) > 0) fwrite(chunk, 1, got, m);
    int bad = ferror(f);
    fclose(f);
    if (!m || fclose(m) != 0 || bad) {
        free(buf);
        snprintf(err, errlen, "%s: cannot read%s", path, bad ? "" : ": out of memory");
        return NULL;
    }
    if (memchr(buf, 0, n)) {
        free(buf);
        snprintf(err, errlen, "%s: holds a NUL byte: not a record's text", path);
        return NULL;
    }
    *len = n;
    return buf;
}

/* Every record file of dir's task folders, sorted by path; with_text: their texts read too (NULL otherwise). */
static int collect(const char *dir, int with_text, entry **out, int *n_out, char *err, size_t errlen) {
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "%s: cannot read: %s", dir, strerror(errno));
        return -1;
    }
    entry *e = NULL;
    int n = 0, cap = 0, rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        char tdir[4400];
        struct stat st;
        if (de->d_name[0] == '.' || !strcmp(de->d_name, "slurm") || !kh_record_name_ok(de->d_name, 127)) continue;
        snprintf(tdir, sizeof tdir, "%s/%s", dir, de->d_name);
        if (lstat(tdir, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        DIR *td = opendir(tdir);
        if (!td) {
            snprintf(err, errlen, "%s: cannot read: %s", tdir, strerror(errno));
            rc = -1;
            break;
        }
        for (struct dirent *fe; rc == 0 && (fe = readdir(td));) {
            char path[4700], base[256];
            int k;
            if (!kh_cell_parse_name(fe->d_name, base, sizeof base, &k)) continue; /* a record file's name only */
            snprintf(path, sizeof path, "%s/%s", tdir, fe->d_name);
            entry *ne = n == cap ? kh_grow(e, &cap, sizeof *e, 256) : e;
            if (!ne) {
                snprintf(err, errlen, "out of memory");
                rc = -1;
                break;
            }
            e = ne;
            memset(&e[n], 0, sizeof e[n]);
            if (asprintf(&e[n].path, "%s/%s", de->d_name, fe->d_name) < 0) e[n].path = NULL;
            if (!e[n].path) {
                snprintf(err, errlen, "out of memory");
                rc = -1;
            } else if (with_text && !(e[n].text = read_text(path, &e[n].len, err, errlen))) {
                free(e[n].path);
                rc = -1;
            } else n++;
        }
        closedir(td);
    }
    closedir(d);
    if (rc != 0) {
        entries_free(e, n);
        return -1;
    }
    if (n > 1) qsort(e, (size_t)n, sizeof *e, cmp_entry);
    *out = e;
    *n_out = n;
    return 0;
}

static int write_pack(const char *tmp, const entry *e, int n, char *err, size_t errlen) {
    gzFile g = gzopen(tmp, "wbx"); /* x: made new, never through what is there */
    if (!g) {
        snprintf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
        return -1;
    }
    int ok = gzprintf(g, "{\"khost_set\":%d,\"files\":%d}\n", KH_SETFILE_VERSION, n) > 0;
    for (int i = 0; ok && i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        char *line = NULL;
        if (o && cJSON_AddStringToObject(o, "path", e[i].path) && cJSON_AddStringToObject(o, "text", e[i].text))
            line = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        ok = line && gzputs(g, line) >= 0 && gzputc(g, '\n') == '\n';
        cJSON_free(line);
    }
    if (gzclose(g) != Z_OK || !ok) {
        snprintf(err, errlen, "%s: cannot write (disk full?)", tmp);
        unlink(tmp);
        return -1;
    }
    return 0;
}

static void remove_companions(const char *dir, const char *rel) {
    char path[4700], base[256];
    int k;
    const char *file = strchr(rel, '/') + 1;
    size_t stem = strlen(rel) - 5; /* without ".json" */
    static const char *const ext[] = {"json", "csv", "log"};
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        snprintf(path, sizeof path, "%s/%.*s.%s", dir, (int)stem, rel, ext[i]);
        unlink(path);
    }
    if (kh_cell_parse_name(file, base, sizeof base, &k)) {
        snprintf(path, sizeof path, "%s/%.*s%s.stats.json", dir, (int)(file - rel), rel, base);
        unlink(path);
        snprintf(path, sizeof path, "%s/%.*s", dir, (int)(file - rel - 1), rel);
        rmdir(path); /* only when nothing else is left in the task folder */
    }
}

/* Data and name of path on the disk (its folder too, so a rename is): 0 ok. */
static int sync_path(const char *path, int dir) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | (dir ? O_DIRECTORY : 0));
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int kh_set_pack(const char *dir, int remove, int *n_files, char *err, size_t errlen) {
    entry *e = NULL, *old = NULL;
    int n = 0, nold = 0;
    char pack[4200], tmp[4300];
    snprintf(pack, sizeof pack, "%s/%s", dir, KH_SETFILE_NAME);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", pack, (long)getpid());
    if (collect(dir, 1, &e, &n, err, errlen) != 0) return -1;
    struct stat st;
    if (lstat(pack, &st) == 0 && read_pack(pack, &old, &nold, err, errlen) != 0) { /* packed before: kept */
        entries_free(e, n);
        return -1;
    }
    if (n == 0) {
        snprintf(err, errlen, "%s: no record files in its task folders: nothing %sto pack", dir, nold ? "new " : "");
        entries_free(e, n), entries_free(old, nold);
        return -1;
    }
    /* the pack's records and the folders' together; a file in both must be the same file */
    entry *all = malloc(((size_t)n + (size_t)nold + 1) * sizeof *all);
    int na = 0, rc = all ? 0 : -1;
    if (!all) snprintf(err, errlen, "%s: out of memory", dir);
    for (int i = 0; rc == 0 && i < n; i++) all[na++] = e[i];
    for (int j = 0; rc == 0 && j < nold; j++) {
        const entry *same = bsearch(&old[j], e, (size_t)n, sizeof *e, cmp_entry);
        if (!same) all[na++] = old[j];
        else if (same->len != old[j].len || memcmp(same->text, old[j].text, same->len)) {
            snprintf(err, errlen, "%s: %s is in its pack and in its folder with other contents: not packed (move one "
                     "of them away first)", dir, old[j].path);
            rc = -1;
        }
    }
    if (rc == 0 && na > 1) qsort(all, (size_t)na, sizeof *all, cmp_entry);
    unlink(tmp);
    if (rc == 0) rc = write_pack(tmp, all, na, err, errlen);
    entry *back = NULL;
    int nb = 0;
    if (rc == 0 && (rc = read_pack(tmp, &back, &nb, err, errlen)) == 0) { /* what was written reads back as the files */
        for (int i = 0; rc == 0 && i < na; i++)
            if (i >= nb || strcmp(back[i].path, all[i].path) || back[i].len != all[i].len ||
                memcmp(back[i].text, all[i].text, all[i].len)) {
                snprintf(err, errlen, "%s: %s does not read back as it was written: not packed", tmp, all[i].path);
                rc = -1;
            }
        entries_free(back, nb);
    }
    /* on the disk before anything is removed: a crash never leaves a short pack and no files */
    if (rc == 0 && (sync_path(tmp, 0) != 0 || rename(tmp, pack) != 0 || sync_path(dir, 1) != 0)) {
        snprintf(err, errlen, "%s: cannot write: %s", pack, strerror(errno));
        rc = -1;
    }
    if (rc != 0) unlink(tmp);
    for (int i = 0; rc == 0 && remove && i < n; i++) remove_companions(dir, e[i].path);
    free(all);
    entries_free(e, n), entries_free(old, nold);
    if (rc == 0) *n_files = na;
    return rc;
}

/* Forget the mount of dir (the last one made: kh_set_each's own). */
static void unmount_last(void) {
    if (g_n_mounts == 0) return;
    g_n_mounts--;
    entries_free(g_mounts[g_n_mounts].e, g_mounts[g_n_mounts].n);
}

int kh_set_unpack(const char *dir, int *n_files, char *err, size_t errlen) {
    entry *e = NULL;
    int n = 0, rc = 0;
    char pack[4200];
    snprintf(pack, sizeof pack, "%s/%s", dir, KH_SETFILE_NAME);
    if (read_pack(pack, &e, &n, err, errlen) != 0) return -1;
    /* nothing written over: a record file already in the folder would be a second truth beside the pack's */
    for (int i = 0; rc == 0 && i < n; i++) {
        char path[4400];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e[i].path);
        if (lstat(path, &st) == 0) {
            snprintf(err, errlen, "%s: %s is in its pack and in its folder: not unpacked (move one of them away first)",
                     dir, e[i].path);
            rc = -1;
        }
        *strrchr(path, '/') = 0; /* a task folder that is a link would put the records elsewhere */
        if (rc == 0 && lstat(path, &st) == 0 && !S_ISDIR(st.st_mode)) {
            snprintf(err, errlen, "%s: %s is not a folder (a link?): not unpacked", dir, path);
            rc = -1;
        }
    }
    for (int i = 0; rc == 0 && i < n; i++) {
        char path[4400], folder[4400];
        snprintf(path, sizeof path, "%s/%s", dir, e[i].path);
        snprintf(folder, sizeof folder, "%s", path);
        *strrchr(folder, '/') = 0; /* paths are "<task>/<file>" (path_ok) */
        if (kh_mkdirs(folder) != 0) {
            snprintf(err, errlen, "%s: cannot make %s: %s", dir, folder, strerror(errno));
            rc = -1;
        } else rc = kh_write_atomic(path, e[i].text, e[i].len, err, errlen);
    }
    /* the pack goes only when every file is on the disk: a failure leaves it, and the files written so far are
     * the same as its own (packing again accepts them) */
    if (rc == 0 && unlink(pack) != 0) {
        snprintf(err, errlen, "%s: the files are written but the pack cannot be removed: %s", pack, strerror(errno));
        rc = -1;
    }
    if (rc == 0) *n_files = n;
    entries_free(e, n);
    return rc;
}

int kh_set_each(const char *dir, int (*fn)(void *ctx, const char *rel, const char *path), void *ctx, char *err,
                size_t errlen) {
    char rest[4200], path[8400];
    int was = mount_of(dir, rest, sizeof rest) != NULL && !rest[0];
    int packed = kh_set_mount(dir, err, errlen);
    if (packed < 0) return -1;
    const mount *m = packed ? mount_of(dir, rest, sizeof rest) : NULL;
    if (m) { /* a folder mounted here only for this walk is let go after it: an import reads many */
        int rc = 0;
        for (int i = 0; rc == 0 && i < m->n; i++) {
            snprintf(path, sizeof path, "%s/%s", m->dir, m->e[i].path);
            rc = fn(ctx, m->e[i].path, path);
        }
        if (!was) unmount_last();
        return rc;
    }
    entry *e;
    int n;
    if (collect(dir, 0, &e, &n, err, errlen) != 0) return -1; /* the paths: fn reads what it needs */
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, e[i].path);
        rc = fn(ctx, e[i].path, path);
    }
    entries_free(e, n);
    return rc;
}
