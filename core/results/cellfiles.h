/* core/results/cellfiles.h — a folder's record files grouped into cells from one reading of the folder, so a
 * folder of many repetitions is listed once, not once per cell. */
#ifndef KHOST_CORE_CELLFILES_H
#define KHOST_CORE_CELLFILES_H

#include <stddef.h>

/* "X.rep3.json" -> base "X", k 3; "X.json" -> base "X", k 0; 1 when name is a record's file name, 0 when not
 * (other files, such as the summaries' "X.stats.json", and a base that is not kh_record_name_ok). */
int kh_cell_parse_name(const char *name, char *base, size_t n, int *k);

typedef struct kh_cell_file {
    char *name;   /* the file's name in the folder */
    int base_len; /* name[0..base_len) is the cell's base */
    int k;        /* .rep<k>; 0 for a classic record */
} kh_cell_file;

/* The record files of a folder sorted by base, then k: a cell's files are one run of equal bases. */
typedef struct kh_cell_files {
    kh_cell_file *v;
    int n;
    int n_odd;     /* .json files that are neither a record nor a summary (a name with other characters) */
    char odd[256]; /* the first of them, as read: untrusted (base/escape.h before printing) */
} kh_cell_files;

/* Read dir once; 0 ok, -1 unreadable, -2 out of memory, with err naming dir. */
int kh_cell_files_read(const char *dir, kh_cell_files *l, char *err, size_t errlen);
void kh_cell_files_free(kh_cell_files *l);
/* The end of the run of files that starts at i (the first index whose base differs). */
int kh_cell_files_run_end(const kh_cell_files *l, int i);
/* The run of base's files: its first index, or -1 when the folder has none. */
int kh_cell_files_find(const kh_cell_files *l, const char *base);
#endif
