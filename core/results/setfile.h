/* core/results/setfile.h — a results folder's records packed into one file, <folder>/records.jsonl.gz, so that a
 * committed set is one file instead of one per repetition (results/setfile.c). `report` and `compare` read a
 * packed folder as if its records were there: the folder's listings and record reads are answered from the
 * pack, byte for byte the files that were packed.
 *
 * Format (gzip; a plain file of the same lines is read too): a first line {"khost_set": 1, "files": N}, then
 * one line per record file, {"path": "<task>/<file>", "text": "<the file's text>"}, sorted by path. A pack is
 * untrusted input: every path must be a task name and a record file name (results.h, cellfiles.h), each at
 * most once, the count must match, and anything else is an error naming the pack and the line. */
#ifndef KHOST_CORE_SETFILE_H
#define KHOST_CORE_SETFILE_H

#include <stddef.h>

#define KH_SETFILE_NAME "records.jsonl.gz"
#define KH_SETFILE_VERSION 1

/* Pack every record file of dir's task folders into dir/records.jsonl.gz, with what a pack already there holds
 * (a file in both must be the same), then read the pack back and compare, and put it on the disk (fsync) before
 * remove deletes the packed files with their .csv, .log and .stats.json companions and the task folders left
 * empty. *n_files: how many the pack holds. 0 ok; -1 with err (nothing removed). */
int kh_set_pack(const char *dir, int remove, int *n_files, char *err, size_t errlen);

/* The reverse: dir's pack written back as its record files (none may exist already), then the pack removed, so
 * that a finished set can be resumed (matrix --resume) and packed again. *n_files: how many. 0 ok; -1 with err
 * (the pack kept). */
int kh_set_unpack(const char *dir, int *n_files, char *err, size_t errlen);

/* 1 when dir holds a pack (its name exists there): a finished set, to which run and matrix add nothing. */
int kh_set_is_packed(const char *dir);
/* If dir holds a pack, read it and answer for dir from now on (at most 8 folders at once). 1 when a pack
 * was read, 0 when dir has none, -1 when it cannot be read or is not a valid pack (err names it and the line). */
int kh_set_mount(const char *dir, char *err, size_t errlen);
void kh_set_unmount_all(void);
/* Answer for dir (any name: it need not exist) with n files given as paths ("<task>/<file>", checked as a pack's
 * are) and texts, copied; a path given twice is an error. 0 ok, -1 with err. */
int kh_set_mount_files(const char *dir, const char *const *paths, const char *const *texts, int n, char *err,
                       size_t errlen);
/* Every record file of dir, packed or not, in path order: fn(ctx, "<task>/<file>", full path) for each; stops
 * at the first non-zero return, which it returns. -1 with err when dir cannot be read. */
int kh_set_each(const char *dir, int (*fn)(void *ctx, const char *rel, const char *path), void *ctx, char *err,
                size_t errlen);
/* A packed file's text by its path (<mounted folder>/<task>/<file>); NULL when path is not in a pack. */
const char *kh_set_text(const char *path, size_t *len);
/* The names in dir when dir is a mounted folder (its task folders, dirs = 1) or one of its task folders (its
 * files, dirs = 0), sorted, in a NULL-ended array (free with kh_set_names_free); NULL when dir is not packed,
 * and *oom set when it is but the array could not be made. */
char **kh_set_names(const char *dir, int dirs, int *n, int *oom);
void kh_set_names_free(char **names);
/* How many task folders (named like one, not slurm/) a packed folder also holds on disk: records there are not
 * read, and the readers say so. */
int kh_set_loose_folders(const char *dir);
#endif
