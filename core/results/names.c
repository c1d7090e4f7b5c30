/* core/results/names.c — what a name in a results folder may be: a record's plugin, task or device, and a record
 * file's name (declared in results.h and cellfiles.h). Below every reader of a folder, packed or not, so each
 * checks names the same way. */
#include <stdlib.h>
#include <string.h>

#include "results/cellfiles.h"
#include "results/results.h"

int kh_record_name_ok(const char *s, size_t max) {
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                 (n > 0 && (c == '.' || c == '-')) || c == ':' || c == '+';
        if (!ok || n >= max) return 0;
    }
    return n > 0;
}

int kh_cell_parse_name(const char *name, char *base, size_t n, int *k) {
    size_t len = strlen(name);
    *k = 0;
    if (name[0] == '.' || len <= 5 || strcmp(name + len - 5, ".json")) return 0;
    size_t stem = len - 5;
    if (stem > 6 && !strncmp(name + stem - 6, ".stats", 6)) return 0;
    /* ".rep<digits>" before ".json" */
    size_t d = stem;
    while (d > 0 && name[d - 1] >= '0' && name[d - 1] <= '9') d--;
    if (d < stem && d >= 4 && !strncmp(name + d - 4, ".rep", 4) && stem - d <= 6 && name[d] != '0') {
        *k = atoi(name + d);
        stem = d - 4;
    }
    if (stem == 0 || stem + 1 > n) return 0;
    memcpy(base, name, stem);
    base[stem] = 0;
    return kh_record_name_ok(base, n - 1);
}
