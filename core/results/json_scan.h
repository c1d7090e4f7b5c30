/* core/results/json_scan.h — what a JSON parser that keeps doubles cannot say about a record: whether an object
 * has a key twice (which of two "status" values would count?), and the exact value of a 64-bit integer such as
 * a seed (a double keeps 53 bits). Runs over text cJSON has already accepted. */
#ifndef KHOST_CORE_JSON_SCAN_H
#define KHOST_CORE_JSON_SCAN_H

#include <stddef.h>
#include <stdint.h>

/* An integer member asked for by its path ("seed", "repeat.order_seed"): found 1 with v when its literal is
 * digits alone (0..2^64-1), found -1 when it is there as another number (negative, a fraction, an exponent,
 * too large), 0 when absent. */
typedef struct kh_json_int {
    const char *path;
    int found;
    uint64_t v;
} kh_json_int;

/* 0 when no object of text has a key twice (keys compared as decoded); -1 with err naming the key and its
 * object's path. Fills ints[0..n). */
int kh_json_scan(const char *text, kh_json_int *ints, int n, char *err, size_t errlen);
#endif
