/* core/results/resultsdb.h — every result set in one SQLite database (results/resultsdb.c): records keyed by their
 * content (SHA-256 of the record's bytes), sets naming which record each of their files holds. Record folders
 * stay the crash-safe source of truth: the database is filled from them (`khost db import`, `matrix --db`),
 * one transaction per set, never written by a compute node, and a folder is never touched by it.
 *
 * Schema (PRAGMA user_version; each step a migration applied in order, in one transaction, on open):
 *   1  records(id, digest UNIQUE, task, plugin, device, status, git_rev, finished_at, text),
 *      sets(id, name UNIQUE, imported_at), set_files(set_id, path, record_id; PRIMARY KEY(set_id, path))
 *   2  records.machine: the CPU model, its ISA, the device name and the driver of the record's environment,
 *      one string ("AMD EPYC" alone names two kinds of machine), indexed with the cell */
#ifndef KHOST_CORE_RESULTSDB_H
#define KHOST_CORE_RESULTSDB_H

#include <stddef.h>

#define KH_DB_SCHEMA 2

typedef struct kh_db kh_db;

/* Open the database at path. KH_DB_READ: read-only, nothing written (an older schema is refused: `khost db
 * list` migrates it); KH_DB_WRITE: in WAL mode, migrated to KH_DB_SCHEMA; KH_DB_CREATE: the same, made when
 * absent. A file that is not SQLite, a database that is not khost's, one from a newer khost or a corrupt one
 * is refused with err naming it, before anything is written to it. NULL on failure. */
enum { KH_DB_READ = 0, KH_DB_WRITE = 1, KH_DB_CREATE = 2 };
kh_db *kh_db_open(const char *path, int mode, char *err, size_t errlen);
void kh_db_close(kh_db *db);
/* Every record file of dir (a folder of files or a packed one) into the set named set (dir when NULL), in one
 * transaction: a killed import leaves the database as it was. A record already known (same bytes) is not
 * stored twice; importing the same folder again changes nothing. *added: records new to the database, *files:
 * files of the set, *skipped: files that are not valid records (each named on stderr). 0 ok, -1 with err. */
int kh_db_import_dir(kh_db *db, const char *dir, const char *set, int *added, int *files, int *skipped, char *err,
                     size_t errlen);
/* One record file (path; rel is "<task>/<file>") into set, in its own transaction. 0 ok, -1 with err. */
int kh_db_import_file(kh_db *db, const char *set, const char *rel, const char *path, char *err, size_t errlen);
/* The sets of the database, one line each ("<name>\t<files>\t<imported_at>") on f. 0 ok, -1 with err. */
int kh_db_list(kh_db *db, void *f, char *err, size_t errlen);

/* Every record matching filters (the text after "FILE:" of a source, NULL or "" for none; see below) once,
 * however many sets hold it, in the order first finished: fn(ctx, machine, record text, where) for each, where
 * its files are ("<set>/<task>/<file>", space-separated), stopping at its first non-zero return. 0 ok, -1 with
 * err. */
typedef int (*kh_db_record_fn)(void *ctx, const char *machine, const char *text, const char *where);
int kh_db_each_record(kh_db *db, const char *filters, kh_db_record_fn fn, void *ctx, char *err, size_t errlen);
/* What the database knows of one cell on one machine (machine: the start of the machine string, e.g. "CPU model
 * | ISA | "): its last ok records' wall times, and their measured values (a repetition's median step time when
 * it has step samples, else its mean epoch time: value_is_step says which, and only values of that kind count). */
typedef struct kh_cell_history {
    int n_wall;
    double wall_median;      /* seconds from a record's start to its end; NAN when none */
    int n_value, value_is_step;
    double value_min, value_max;
} kh_cell_history;
#define KH_CELL_HISTORY_MAX 20 /* the last this many records count */
int kh_db_cell_history(kh_db *db, const char *task, const char *plugin, const char *device, const char *machine,
                       kh_cell_history *h, char *err, size_t errlen);
/* A record's measured value as history and kh_cell_history count it: the median of its step samples when it has
 * them (*is_step 1), else its mean epoch time; NAN when it has neither. */
double kh_record_value(const double *steps, long n_steps, double mean_epoch_s, int *is_step);
/* The same from a parsed record (its samples.step_s, finite and positive, and mean_epoch_s). */
struct cJSON;
double kh_record_json_value(const struct cJSON *record, int *is_step);

/* Split a source "FILE[:filters]" whose FILE is an existing SQLite database: file into buf, filters returned
 * (pointing into src, "" for none); NULL when src names no database. */
const char *kh_db_source(const char *src, char *file, size_t n);

/* What report and compare read: src is a results folder (of files or packed) or a database, optionally with
 * filters, "FILE:key=value[,key=value...]" (set=NAME or set=PREFIX*, rev=PREFIX, machine=TEXT contained, since=/until=DATE
 * as ISO text). A database source answers as a folder named src whose files are the matching records
 * (several matches of one file: the latest finished kept, with a warning). 1 when src was mounted (a pack or
 * a database), 0 for a folder of files, -1 with err. */
int kh_results_mount(const char *src, char *err, size_t errlen);
#endif
