/* core/cli/cmd_db.c — `khost db import FILE DIR... [--set NAME]` and `khost db list FILE`: result folders into the
 * results database (results/resultsdb.h), and what it holds. */
#include <stdio.h>
#include <string.h>

#include "base/escape.h"
#include "base/exitcodes.h"
#include "cli/commands.h"
#include "results/resultsdb.h"

static void db_usage(FILE *f) {
    fputs("usage: khost db import FILE DIR... [--set NAME]\n"
          "       khost db list FILE\n"
          "  import: each results folder DIR (files or packed) into the SQLite database FILE (made when absent),\n"
          "  as the set named DIR (or NAME, with one DIR); one transaction per folder, so an import that is\n"
          "  killed leaves the database as it was; a record is stored once by its content, and importing a\n"
          "  folder again changes nothing. The folders are only read. Run it where the database lives (never\n"
          "  on a Slurm compute node: SQLite's locks are not safe on shared filesystems).\n"
          "  list: the sets in FILE, with their number of files and when each was imported.\n"
          "  report and compare read a database as a folder: FILE[:set=NAME,rev=PREFIX,machine=TEXT,\n"
          "  since=DATE,until=DATE].\n",
          f);
}

int kh_cmd_db(int argc, char **argv) {
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        db_usage(stdout);
        return KH_EXIT_OK;
    }
    if (argc < 3 || (strcmp(argv[1], "import") && strcmp(argv[1], "list"))) {
        db_usage(stderr);
        return KH_EXIT_USAGE;
    }
    int import = !strcmp(argv[1], "import");
    const char *file = argv[2], *set = NULL, *dirs[256];
    int nd = 0;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--set") && i + 1 < argc && argv[i + 1][0]) set = argv[++i];
        else if (argv[i][0] == '-' || !argv[i][0] || nd == 256 || !import) {
            db_usage(stderr);
            return KH_EXIT_USAGE;
        } else dirs[nd++] = argv[i];
    }
    if (!file[0] || (import && (nd == 0 || (set && nd > 1)))) {
        if (set && nd > 1) fputs("khost: db import: --set names one folder's set\n", stderr);
        db_usage(stderr);
        return KH_EXIT_USAGE;
    }
    char err[4400];
    kh_db *db = kh_db_open(file, import ? KH_DB_CREATE : KH_DB_WRITE, err, sizeof err);
    if (!db) {
        kh_esc_msg("khost: db: ", err);
        return KH_EXIT_IO;
    }
    int rc = KH_EXIT_OK;
    if (!import && kh_db_list(db, stdout, err, sizeof err) != 0) {
        kh_esc_msg("khost: db list: ", err);
        rc = KH_EXIT_IO;
    }
    for (int i = 0; import && i < nd; i++) {
        int added = 0, files = 0, skipped = 0;
        err[0] = 0;
        if (kh_db_import_dir(db, dirs[i], set, &added, &files, &skipped, err, sizeof err) != 0) {
            kh_esc_msg("khost: db import: ", err);
            rc = KH_EXIT_IO;
            continue;
        }
        fputs("khost: db import: ", stdout);
        kh_esc_line(stdout, dirs[i]);
        printf(": %d file(s), %d record(s) new to the database, %d skipped (not valid records)\n", files, added,
               skipped);
        if (skipped) rc = KH_EXIT_IO;
    }
    kh_db_close(db);
    return rc;
}
