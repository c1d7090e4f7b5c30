/* core/cli/cmd_pack.c — `khost pack DIR [--remove]`: a results folder's records into DIR/records.jsonl.gz
 * (results/setfile.h), which report and compare then read in place of the task folders. */
#include <stdio.h>
#include <string.h>

#include "base/escape.h"
#include "base/exitcodes.h"
#include "cli/commands.h"
#include "results/setfile.h"

static void pack_usage(FILE *f) {
    fputs("usage: khost pack DIR [--remove] | khost pack DIR --unpack\n"
          "  packs every record file of DIR's task folders (<task>/<plugin>__<device>[.rep<k>].json) into\n"
          "  DIR/" KH_SETFILE_NAME ", checked by reading it back; report and compare read DIR from it\n"
          "  from then on. --remove: then deletes the packed files with their .csv, .log and .stats.json\n"
          "  companions (and task folders left empty); other files in DIR stay.\n"
          "  --unpack: the reverse, DIR's pack written back as its record files (none may be there already) and\n"
          "  the pack removed, so that a set can be resumed (matrix --resume) and packed again.\n",
          f);
}

int kh_cmd_pack(int argc, char **argv) {
    const char *dir = NULL;
    int remove = 0, unpack = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--remove")) remove = 1;
        else if (!strcmp(argv[i], "--unpack")) unpack = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            pack_usage(stdout);
            return KH_EXIT_OK;
        } else if (argv[i][0] == '-' || dir || !argv[i][0]) {
            pack_usage(stderr);
            return KH_EXIT_USAGE;
        } else dir = argv[i];
    }
    if (!dir || (unpack && remove)) {
        pack_usage(stderr);
        return KH_EXIT_USAGE;
    }
    if (unpack) {
        char uerr[4400];
        int k = 0;
        if (kh_set_unpack(dir, &k, uerr, sizeof uerr) != 0) {
            kh_esc_msg("khost: pack: ", uerr);
            return KH_EXIT_IO;
        }
        printf("khost: pack: %d record file(s) of %s written back; its pack is removed\n", k, dir);
        return KH_EXIT_OK;
    }
    char err[4400];
    int n = 0;
    if (kh_set_pack(dir, remove, &n, err, sizeof err) != 0) {
        kh_esc_msg("khost: pack: ", err);
        return KH_EXIT_IO;
    }
    printf("khost: pack: %d record file(s) of %s in %s/%s%s\n", n, dir, dir, KH_SETFILE_NAME,
           remove ? "; the files are removed" : "");
    return KH_EXIT_OK;
}
