/* tests/fuzz/fuzz_text.c — libFuzzer target for the text pipeline: UTF-8 validation, the Keras tokeniser
 * (in place) and character windows over arbitrary bytes. None may crash or read out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/data_text.h"

static int count_word(void *ctx, const char *word, size_t len) {
    (void)word;
    *(size_t *)ctx += len;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    int64_t bad = kh_utf8_check(buf, size);
    if (bad < 0) {
        size_t total = 0;
        char *copy = malloc(size + 1);
        if (copy) {
            memcpy(copy, buf, size + 1);
            kh_text_words(copy, size, count_word, &total);
            if (total > size) __builtin_trap(); /* words are substrings of the input */
            free(copy);
        }
    }
    kh_charwin cw;
    char err[256];
    if (kh_charwin_from_text("fuzz", buf, size, 4, 2, &cw, err, sizeof err) == KH_OK) {
        int32_t x[4], y;
        if (cw.n_windows > 0 && kh_charwin_window(&cw, cw.n_windows - 1, x, &y) != KH_OK) __builtin_trap();
        kh_charwin_free(&cw);
    }
    free(buf);
    return 0;
}
