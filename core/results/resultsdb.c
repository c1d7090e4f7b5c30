/* core/results/resultsdb.c — result sets in one SQLite database (resultsdb.h). */
#define _GNU_SOURCE /* strndup */
#include "results/resultsdb.h"

#include <errno.h>
#include <fcntl.h>
#include <sha2.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/escape.h"
#include "base/grow.h"
#include "results/results.h"
#include "results/setfile.h"
#include "results/stats.h"
#include <cjson/cJSON.h>
#include <math.h>

struct kh_db {
    sqlite3 *h;
    char path[4096];
};

/* The machine a record ran on, from its text: the CPU model and ISA, the device and its driver. */
#define MACHINE_OF(t)                                                                                             \
    "coalesce(json_extract(" t ", '$.environment.cpu_model'), '') || ' | ' || "                                    \
    "coalesce(json_extract(" t ", '$.environment.cpu_isa'), '') || ' | ' || "                                      \
    "coalesce(json_extract(" t ", '$.environment.device_name'), '') || ' | ' || "                                  \
    "coalesce(json_extract(" t ", '$.environment.driver_version'), '')"

/* Schema step k (1-based) takes a database of version k - 1 to version k. */
static const char *const migrations[KH_DB_SCHEMA] = {
    "CREATE TABLE records(id INTEGER PRIMARY KEY, digest TEXT NOT NULL UNIQUE, task TEXT NOT NULL,"
    " plugin TEXT NOT NULL, device TEXT NOT NULL, status TEXT NOT NULL, git_rev TEXT NOT NULL,"
    " finished_at TEXT NOT NULL, text TEXT NOT NULL);"
    "CREATE TABLE sets(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, imported_at TEXT NOT NULL);"
    "CREATE TABLE set_files(set_id INTEGER NOT NULL REFERENCES sets(id), path TEXT NOT NULL,"
    " record_id INTEGER NOT NULL REFERENCES records(id), PRIMARY KEY(set_id, path));",
    "ALTER TABLE records ADD COLUMN machine TEXT NOT NULL DEFAULT '';"
    "UPDATE records SET machine = " MACHINE_OF("text") ";"
    "CREATE INDEX records_cell ON records(task, plugin, device, machine);",
};

static int fail(kh_db *db, char *err, size_t errlen, const char *what) {
    snprintf(err, errlen, "%s: %s: %s", db->path, what, sqlite3_errmsg(db->h));
    return -1;
}

static int exec(kh_db *db, const char *sql, char *err, size_t errlen) {
    char *msg = NULL;
    if (sqlite3_exec(db->h, sql, NULL, NULL, &msg) == SQLITE_OK) return 0;
    snprintf(err, errlen, "%s: %s", db->path, msg ? msg : sqlite3_errmsg(db->h));
    sqlite3_free(msg);
    return -1;
}

/* One integer a statement returns (its first column of its first row); -1 with err. */
static long long one_int(kh_db *db, const char *sql, char *err, size_t errlen) {
    sqlite3_stmt *st = NULL;
    long long v = -1;
    if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) != SQLITE_OK) fail(db, err, errlen, "cannot read");
    else if (sqlite3_step(st) != SQLITE_ROW) fail(db, err, errlen, "cannot read");
    else v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* 1 when path starts as an SQLite database does, 0 when it does not (or is empty), -1 unreadable (errno). */
static int sqlite_magic(const char *path) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    char head[16];
    int rc = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && read(fd, head, 16) == 16 &&
             !memcmp(head, "SQLite format 3", 16);
    close(fd);
    return rc;
}

/* The database's schema version when it is khost's and not newer than this khost; -1 with err otherwise. Reads
 * only: a database refused here is left exactly as it was. */
static long long khost_version(kh_db *db, char *err, size_t errlen) {
    long long v = one_int(db, "PRAGMA user_version", err, errlen);
    long long tables = v < 0 ? -1 : one_int(db, "SELECT count(*) FROM sqlite_master", err, errlen);
    if (v < 0 || tables < 0) return -1;
    if (v > KH_DB_SCHEMA) {
        snprintf(err, errlen, "%s: schema version %lld is from a newer khost (this one knows 1 to %d): left as it is",
                 db->path, v, KH_DB_SCHEMA);
        return -1;
    }
    long long ours = v < 1 ? 0 : one_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                                            "('records', 'sets', 'set_files')", err, errlen);
    if ((v == 0 && tables > 0) || (v >= 1 && ours != 3)) {
        snprintf(err, errlen, "%s: an SQLite database, but not khost's (%s): left as it is", db->path,
                 v == 0 ? "it has tables and no khost schema version" : "it lacks khost's tables");
        return -1;
    }
    return v;
}

static int migrate(kh_db *db, char *err, size_t errlen) {
    if (exec(db, "BEGIN IMMEDIATE", err, errlen) != 0) return -1; /* one migrator; others wait, then see it done */
    long long v = khost_version(db, err, errlen); /* again: another process may have migrated meanwhile */
    int rc = v < 0 ? -1 : 0;
    for (long long k = v; rc == 0 && k < KH_DB_SCHEMA; k++) {
        char pragma[64];
        snprintf(pragma, sizeof pragma, "PRAGMA user_version = %lld", k + 1);
        rc = exec(db, migrations[k], err, errlen);
        if (rc == 0) rc = exec(db, pragma, err, errlen);
    }
    if (rc == 0) return exec(db, "COMMIT", err, errlen);
    sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

kh_db *kh_db_open(const char *path, int mode, char *err, size_t errlen) {
    struct stat st;
    int exists = stat(path, &st) == 0, create = mode == KH_DB_CREATE;
    if (!exists && !create) {
        snprintf(err, errlen, "%s: no such database", path);
        return NULL;
    }
    if (exists && (!S_ISREG(st.st_mode) || (st.st_size > 0 && sqlite_magic(path) != 1))) {
        snprintf(err, errlen, "%s: %s: left as it is", path,
                 S_ISREG(st.st_mode) ? "not an SQLite database (its first bytes are not SQLite's)" : "not a regular file");
        return NULL;
    }
    kh_db *db = calloc(1, sizeof *db);
    if (!db) {
        snprintf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    snprintf(db->path, sizeof db->path, "%s", path);
    int flags = (mode == KH_DB_READ ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_NOFOLLOW |
                (create ? SQLITE_OPEN_CREATE : 0);
    if (sqlite3_open_v2(path, &db->h, flags, NULL) != SQLITE_OK) {
        fail(db, err, errlen, "cannot open");
        kh_db_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db->h, 120000); /* several importers at once: each waits for the one writing */
    sqlite3_extended_result_codes(db->h, 1);
    long long version = khost_version(db, err, errlen);
    if (version < 0) {
        kh_db_close(db);
        return NULL;
    }
    if (mode == KH_DB_READ) { /* a reader writes nothing: not the journal mode, not a migration */
        if (version < KH_DB_SCHEMA) {
            snprintf(err, errlen, "%s: schema version %lld is older than this khost's %d: `khost db list %s` migrates it",
                     path, version, KH_DB_SCHEMA, path);
            kh_db_close(db);
            return NULL;
        }
        return db;
    }
    char jmode[16] = "";
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db->h, "PRAGMA journal_mode = WAL", -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
        snprintf(jmode, sizeof jmode, "%s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    if (strcmp(jmode, "wal") != 0) {
        fail(db, err, errlen, "not usable (cannot switch it to WAL; corrupt?)");
        kh_db_close(db);
        return NULL;
    }
    if ((version < KH_DB_SCHEMA && migrate(db, err, errlen) != 0) || exec(db, "PRAGMA foreign_keys = ON", err, errlen) != 0) {
        kh_db_close(db);
        return NULL;
    }
    return db;
}

void kh_db_close(kh_db *db) {
    if (!db) return;
    sqlite3_close(db->h);
    free(db);
}

// --- import -------------------------------------------------------------------------------------------------
typedef struct importer {
    kh_db *db;
    sqlite3_stmt *ins_rec, *get_rec, *ins_file;
    long long set_id;
    int added, files, skipped;
    char *err;
    size_t errlen;
} importer;

static int bind_text(sqlite3_stmt *st, int i, const char *v) {
    return sqlite3_bind_text(st, i, v ? v : "", -1, SQLITE_TRANSIENT);
}

static int step_done(sqlite3_stmt *st) {
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

/* One record file into the set: its text stored once, by content. */
static int import_one(void *ctx, const char *rel, const char *path) {
    importer *im = ctx;
    char err[4400];
    size_t len;
    kh_cell_record r;
    if (kh_record_read(path, &r, err, sizeof err) != 0) { /* what report would skip is not stored */
        kh_esc_msg("khost: db import: skipped ", err);
        im->skipped++;
        return 0;
    }
    char *text = kh_record_text(path, &len, err, sizeof err);
    if (!text) {
        kh_record_free(&r);
        kh_esc_msg("khost: db import: skipped ", err);
        im->skipped++;
        return 0;
    }
    char digest[SHA256_DIGEST_STRING_LENGTH];
    SHA256Data((const uint8_t *)text, len, digest);
    sqlite3_stmt *a = im->ins_rec, *g = im->get_rec, *f = im->ins_file;
    int rc = bind_text(a, 1, digest) | bind_text(a, 2, r.task) | bind_text(a, 3, r.plugin) | bind_text(a, 4, r.device) |
             bind_text(a, 5, r.status) | bind_text(a, 6, kh_record_get_env(&r, "git_rev")) |
             bind_text(a, 7, kh_record_get_env(&r, "finished_at")) |
             sqlite3_bind_text(a, 8, text, (int)len, SQLITE_TRANSIENT);
    free(text);
    kh_record_free(&r);
    if (rc != SQLITE_OK || step_done(a) != 0) return fail(im->db, im->err, im->errlen, "cannot store a record");
    im->added += sqlite3_changes(im->db->h) > 0;
    long long id = -1;
    if (bind_text(g, 1, digest) == SQLITE_OK && sqlite3_step(g) == SQLITE_ROW) id = sqlite3_column_int64(g, 0);
    sqlite3_reset(g);
    if (id < 0) return fail(im->db, im->err, im->errlen, "cannot find a record it stored");
    if (sqlite3_bind_int64(f, 1, im->set_id) != SQLITE_OK || bind_text(f, 2, rel) != SQLITE_OK ||
        sqlite3_bind_int64(f, 3, id) != SQLITE_OK || step_done(f) != 0)
        return fail(im->db, im->err, im->errlen, "cannot add a file to the set");
    im->files++;
    return 0;
}

static void now_iso(char *buf, size_t n) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Begin the set's transaction and prepare the statements; with fresh: the set's file list starts empty. */
static int import_begin(importer *im, const char *set, int fresh) {
    kh_db *db = im->db;
    if (exec(db, "BEGIN IMMEDIATE", im->err, im->errlen) != 0) return -1;
    char now[32];
    now_iso(now, sizeof now);
    sqlite3_stmt *s = NULL;
    int ok = sqlite3_prepare_v2(db->h, "INSERT INTO sets(name, imported_at) VALUES(?1, ?2) ON CONFLICT(name) DO "
                                "UPDATE SET imported_at = ?2 RETURNING id", -1, &s, NULL) == SQLITE_OK &&
             bind_text(s, 1, set) == SQLITE_OK && bind_text(s, 2, now) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW;
    if (ok) im->set_id = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    if (!ok) return fail(db, im->err, im->errlen, "cannot add the set");
    if (fresh) {
        char sql[96];
        snprintf(sql, sizeof sql, "DELETE FROM set_files WHERE set_id = %lld", im->set_id);
        if (exec(db, sql, im->err, im->errlen) != 0) return -1;
    }
    if (sqlite3_prepare_v2(db->h, "INSERT INTO records(digest, task, plugin, device, status, git_rev, finished_at, text,"
                           " machine) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, " MACHINE_OF("?8")
                           ") ON CONFLICT(digest) DO NOTHING", -1, &im->ins_rec, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db->h, "SELECT id FROM records WHERE digest = ?1", -1, &im->get_rec, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db->h, "INSERT OR REPLACE INTO set_files(set_id, path, record_id) VALUES(?1, ?2, ?3)", -1,
                           &im->ins_file, NULL) != SQLITE_OK)
        return fail(db, im->err, im->errlen, "cannot prepare the import");
    return 0;
}

static int import_end(importer *im, int rc) {
    sqlite3_finalize(im->ins_rec);
    sqlite3_finalize(im->get_rec);
    sqlite3_finalize(im->ins_file);
    if (rc == 0) rc = exec(im->db, "COMMIT", im->err, im->errlen);
    if (rc != 0) sqlite3_exec(im->db->h, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

int kh_db_import_dir(kh_db *db, const char *dir, const char *set, int *added, int *files, int *skipped, char *err,
                     size_t errlen) {
    importer im = {.db = db, .err = err, .errlen = errlen};
    char name[4096];
    snprintf(name, sizeof name, "%s", set ? set : dir);
    size_t l = strlen(name);
    while (l > 1 && name[l - 1] == '/') name[--l] = 0;
    int rc = import_begin(&im, name, 1);
    if (rc == 0) {
        rc = kh_set_each(dir, import_one, &im, err, errlen);
        if (rc != 0 && !*err) snprintf(err, errlen, "%s: import failed", dir);
    }
    rc = import_end(&im, rc);
    *added = im.added, *files = im.files, *skipped = im.skipped;
    return rc;
}

int kh_db_import_file(kh_db *db, const char *set, const char *rel, const char *path, char *err, size_t errlen) {
    importer im = {.db = db, .err = err, .errlen = errlen};
    int rc = import_begin(&im, set, 0);
    if (rc == 0) rc = import_one(&im, rel, path);
    if (rc == 0 && im.skipped) {
        snprintf(err, errlen, "%s: not a valid record: not added", path);
        rc = -1;
    }
    return import_end(&im, rc);
}

int kh_db_list(kh_db *db, void *out, char *err, size_t errlen) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db->h, "SELECT s.name, count(f.path), s.imported_at FROM sets s LEFT JOIN set_files f ON "
                           "f.set_id = s.id GROUP BY s.id ORDER BY s.name", -1, &s, NULL) != SQLITE_OK)
        return fail(db, err, errlen, "cannot read");
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        kh_esc_line(out, (const char *)sqlite3_column_text(s, 0));
        fprintf(out, "\t%lld\t%s\n", (long long)sqlite3_column_int64(s, 1), (const char *)sqlite3_column_text(s, 2));
    }
    sqlite3_finalize(s);
    return rc == SQLITE_DONE ? 0 : fail(db, err, errlen, "cannot read");
}

// --- a database as a results folder ------------------------------------------------------------------------
typedef struct filters {
    const char *set, *rev, *machine, *since, *until;
} filters;

/* "key=value[,key=value...]" into f (pointing into buf); -1 with err on an unknown key. */
static int parse_filters(char *buf, filters *f, const char *src, char *err, size_t errlen) {
    for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        const char **slot = NULL;
        if (eq) {
            *eq = 0;
            slot = !strcmp(kv, "set") ? &f->set : !strcmp(kv, "rev") ? &f->rev : !strcmp(kv, "machine") ? &f->machine
                 : !strcmp(kv, "since") ? &f->since : !strcmp(kv, "until") ? &f->until : NULL;
        }
        if (!slot || !eq[1]) {
            snprintf(err, errlen, "%s: '%s' is not a filter (set=, rev=, machine=, since=, until= with a value)", src,
                     kv);
            return -1;
        }
        *slot = eq + 1;
    }
    return 0;
}

static int mount_db(const char *src, const char *file, filters *f, char *err, size_t errlen) {
    kh_db *db = kh_db_open(file, KH_DB_READ, err, errlen);
    if (!db) return -1;
    sqlite3_stmt *s = NULL;
    const char *sql = "SELECT f.path, r.text FROM set_files f JOIN records r ON r.id = f.record_id JOIN sets s ON "
                      "s.id = f.set_id WHERE (?1 IS NULL OR s.name = ?1 OR (?1 LIKE '%*' AND substr(s.name, 1, length(?1) - 1) = substr(?1, 1, length(?1) - 1))) AND (?2 IS NULL OR substr(r.git_rev, 1, "
                      "length(?2)) = ?2) AND (?3 IS NULL OR instr(r.machine, ?3) > 0) AND (?4 IS NULL OR "
                      "r.finished_at >= ?4) AND (?5 IS NULL OR substr(r.finished_at, 1, length(?5)) <= ?5) ORDER BY f.path, r.finished_at "
                      "DESC, r.id DESC";
    const char *vals[5] = {f->set, f->rev, f->machine, f->since, f->until};
    int rc = sqlite3_prepare_v2(db->h, sql, -1, &s, NULL) == SQLITE_OK ? 0 : fail(db, err, errlen, "cannot read");
    for (int i = 0; rc == 0 && i < 5; i++)
        if ((vals[i] ? bind_text(s, i + 1, vals[i]) : sqlite3_bind_null(s, i + 1)) != SQLITE_OK)
            rc = fail(db, err, errlen, "cannot read");
    char **paths = NULL, **texts = NULL;
    int n = 0, cap = 0, cap2 = 0, dup = 0, st = SQLITE_DONE;
    while (rc == 0 && (st = sqlite3_step(s)) == SQLITE_ROW) {
        const char *p = (const char *)sqlite3_column_text(s, 0), *t = (const char *)sqlite3_column_text(s, 1);
        if (n && !strcmp(paths[n - 1], p)) { /* the same file in another set: the latest finished is first */
            dup++;
            continue;
        }
        char **np = n == cap ? kh_grow(paths, &cap, sizeof *np, 256) : paths;
        if (np) paths = np;
        char **nt = n == cap2 ? kh_grow(texts, &cap2, sizeof *nt, 256) : texts;
        if (nt) texts = nt;
        if (!np || !nt || !(paths[n] = strdup(p))) {
            snprintf(err, errlen, "%s: out of memory", src);
            rc = -1;
        } else if (!(texts[n] = strdup(t))) {
            free(paths[n]);
            snprintf(err, errlen, "%s: out of memory", src);
            rc = -1;
        } else n++;
    }
    if (rc == 0 && st != SQLITE_DONE) rc = fail(db, err, errlen, "cannot read");
    sqlite3_finalize(s);
    kh_db_close(db);
    if (rc == 0) rc = kh_set_mount_files(src, (const char *const *)paths, (const char *const *)texts, n, err, errlen);
    if (rc == 0 && dup) {
        fprintf(stderr, "khost: %d file(s) of ", dup);
        kh_esc_line(stderr, src);
        fputs(" are in more than one set: the latest finished of each is read (name one: set=NAME)\n", stderr);
    }
    for (int i = 0; i < n; i++) free(paths[i]), free(texts[i]);
    free(paths), free(texts);
    return rc;
}

const char *kh_db_source(const char *src, char *file, size_t n) {
    struct stat st;
    for (const char *c = src + strlen(src);; c--) { /* the file is the longest prefix that is one */
        if (c == src + strlen(src) || *c == ':') {
            snprintf(file, n, "%.*s", (int)(c - src), src);
            if (stat(file, &st) == 0 && S_ISREG(st.st_mode) && sqlite_magic(file) == 1) return *c ? c + 1 : c;
        }
        if (c == src) return NULL;
    }
}

int kh_results_mount(const char *src, char *err, size_t errlen) {
    struct stat st;
    if (stat(src, &st) == 0 && S_ISDIR(st.st_mode)) return kh_set_mount(src, err, errlen);
    char file[4096];
    const char *fl = kh_db_source(src, file, sizeof file);
    if (!fl) {
        if (stat(src, &st) == 0 && S_ISREG(st.st_mode)) {
            snprintf(err, errlen, "%s: not a results folder or an SQLite database", src);
            return -1;
        }
        return kh_set_mount(src, err, errlen); /* a folder: its listing says whether it exists */
    }
    filters f = {0};
    char *buf = strdup(fl);
    int rc = !buf ? -1 : parse_filters(buf, &f, src, err, errlen);
    if (!buf) snprintf(err, errlen, "%s: out of memory", src);
    if (rc == 0) rc = mount_db(src, file, &f, err, errlen);
    free(buf);
    return rc == 0 ? 1 : -1;
}

int kh_db_each_record(kh_db *db, const char *fl, kh_db_record_fn fn, void *ctx, char *err, size_t errlen) {
    filters f = {0};
    char *buf = strdup(fl ? fl : "");
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory", db->path);
        return -1;
    }
    if (parse_filters(buf, &f, db->path, err, errlen) != 0) {
        free(buf);
        return -1;
    }
    sqlite3_stmt *s = NULL;
    const char *sql = "SELECT r.machine, r.text, (SELECT group_concat(s.name || '/' || f.path, ' ') FROM set_files f "
                      "JOIN sets s ON s.id = f.set_id WHERE f.record_id = r.id) FROM records r WHERE (?1 IS NULL OR EXISTS (SELECT 1 FROM set_files f "
                      "JOIN sets s ON s.id = f.set_id WHERE f.record_id = r.id AND (s.name = ?1 OR (?1 LIKE '%*' AND "
                      "substr(s.name, 1, length(?1) - 1) = substr(?1, 1, length(?1) - 1))))) AND (?2 IS NULL OR "
                      "substr(r.git_rev, 1, length(?2)) = ?2) AND (?3 IS NULL OR instr(r.machine, ?3) > 0) AND (?4 IS "
                      "NULL OR r.finished_at >= ?4) AND (?5 IS NULL OR substr(r.finished_at, 1, length(?5)) <= ?5) ORDER BY r.finished_at, "
                      "r.id";
    const char *vals[5] = {f.set, f.rev, f.machine, f.since, f.until};
    int rc = sqlite3_prepare_v2(db->h, sql, -1, &s, NULL) == SQLITE_OK ? 0 : fail(db, err, errlen, "cannot read");
    for (int i = 0; rc == 0 && i < 5; i++)
        if ((vals[i] ? bind_text(s, i + 1, vals[i]) : sqlite3_bind_null(s, i + 1)) != SQLITE_OK)
            rc = fail(db, err, errlen, "cannot read");
    int st = SQLITE_DONE;
    while (rc == 0 && (st = sqlite3_step(s)) == SQLITE_ROW) {
        const char *where = (const char *)sqlite3_column_text(s, 2);
        rc = fn(ctx, (const char *)sqlite3_column_text(s, 0), (const char *)sqlite3_column_text(s, 1),
                where ? where : "");
        if (rc) snprintf(err, errlen, "%s: stopped", db->path);
    }
    if (rc == 0 && st != SQLITE_DONE) rc = fail(db, err, errlen, "cannot read");
    sqlite3_finalize(s);
    free(buf);
    return rc ? -1 : 0;
}

double kh_record_value(const double *steps, long n_steps, double mean_epoch_s, int *is_step) {
    *is_step = n_steps > 0;
    if (n_steps > 0) return kh_stats_median(steps, (int)n_steps);
    return mean_epoch_s > 0 ? mean_epoch_s : NAN;
}

double kh_record_json_value(const cJSON *record, int *is_step) {
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(record, "samples"), "step_s");
    const cJSON *me = cJSON_GetObjectItemCaseSensitive(record, "mean_epoch_s");
    int n = cJSON_GetArraySize(st), m = 0;
    double *x = n > 0 ? malloc((size_t)n * sizeof *x) : NULL;
    for (const cJSON *e = x ? st->child : NULL; e; e = e->next)
        if (cJSON_IsNumber(e) && isfinite(e->valuedouble) && e->valuedouble > 0) x[m++] = e->valuedouble;
    double v = n > 0 && !x ? NAN : kh_record_value(x, m, cJSON_IsNumber(me) ? me->valuedouble : NAN, is_step);
    free(x);
    return v;
}

/* "2026-12-04T20:29:47Z" as seconds since the epoch; NAN when it is not that. */
static double iso_seconds(const char *s) {
    struct tm tm = {0};
    const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm) : NULL;
    return end && !*end ? (double)timegm(&tm) : NAN;
}

int kh_db_cell_history(kh_db *db, const char *task, const char *plugin, const char *device, const char *machine,
                       kh_cell_history *h, char *err, size_t errlen) {
    memset(h, 0, sizeof *h);
    h->wall_median = h->value_min = h->value_max = NAN;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db->h, "SELECT text FROM records WHERE task = ?1 AND plugin = ?2 AND device = ?3 AND "
                           "status = 'ok' AND substr(machine, 1, length(?4)) = ?4 ORDER BY finished_at DESC LIMIT 20",
                           -1, &s, NULL) != SQLITE_OK ||
        bind_text(s, 1, task) != SQLITE_OK || bind_text(s, 2, plugin) != SQLITE_OK ||
        bind_text(s, 3, device) != SQLITE_OK || bind_text(s, 4, machine) != SQLITE_OK) {
        sqlite3_finalize(s);
        return fail(db, err, errlen, "cannot read");
    }
    double walls[KH_CELL_HISTORY_MAX], vals[2][KH_CELL_HISTORY_MAX];
    int nv[2] = {0, 0}, rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        cJSON *o = cJSON_Parse((const char *)sqlite3_column_text(s, 0));
        const cJSON *env = cJSON_GetObjectItemCaseSensitive(o, "environment");
        double w = iso_seconds(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(env, "finished_at"))) -
                   iso_seconds(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(env, "started_at")));
        if (isfinite(w) && w >= 0 && h->n_wall < KH_CELL_HISTORY_MAX) walls[h->n_wall++] = w;
        int is_step;
        double v = kh_record_json_value(o, &is_step);
        if (isfinite(v) && nv[is_step] < KH_CELL_HISTORY_MAX) vals[is_step][nv[is_step]++] = v;
        cJSON_Delete(o);
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) return fail(db, err, errlen, "cannot read");
    h->wall_median = h->n_wall ? kh_stats_median(walls, h->n_wall) : NAN;
    h->value_is_step = nv[1] >= nv[0];
    h->n_value = nv[h->value_is_step];
    for (int i = 0; i < h->n_value; i++) {
        double v = vals[h->value_is_step][i];
        h->value_min = i ? fmin(h->value_min, v) : v;
        h->value_max = i ? fmax(h->value_max, v) : v;
    }
    return 0;
}
