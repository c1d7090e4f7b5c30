/* tools/reference/datacheck.c — dumps what khost's own readers (libkhost_kit.a) make of the data files, so
 * tools/reference/check-data can compare the references' Python readers with them value for value.
 *
 *   datacheck imdb DATA_DIR MAXLEN BIGRAMS(0|1) LIMIT_TRAIN LIMIT_VAL OUT_DIR
 *   datacheck images ROOT LIMIT OUT_DIR          (an image-folder tree: ROOT/<class>/*.jpg)
 *   datacheck idx IMAGES LABELS LIMIT OUT_DIR
 *   datacheck chars TEXT_FILE OUT_DIR
 * Writes raw little-endian arrays: x.bin / y.bin (and xv.bin / yv.bin for imdb), plus meta.txt. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/data_image.h"
#include "khost/kit/data_text.h"

static int dump(const char *dir, const char *name, const void *p, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        fprintf(stderr, "datacheck: cannot write %s\n", path);
        if (f) fclose(f);
        return 1;
    }
    return fclose(f) != 0;
}

static int dump_images(const kh_images *im, const char *out) {
    FILE *m;
    char path[4096];
    snprintf(path, sizeof path, "%s/meta.txt", out);
    if (!(m = fopen(path, "w"))) return 1;
    fprintf(m, "n %lld\nrows %d\ncols %d\nchannels %d\nclasses %d\n", (long long)im->n, im->rows, im->cols,
            im->channels, im->n_classes);
    fclose(m);
    return dump(out, "x.bin", im->pixels, (size_t)im->n * kh_images_stride(im)) ||
           dump(out, "y.bin", im->labels, (size_t)im->n * sizeof(int32_t));
}

int main(int argc, char **argv) {
    char err[1024] = "";
    if (argc >= 2 && !strcmp(argv[1], "imdb") && argc == 8) {
        char root[4096];
        snprintf(root, sizeof root, "%s/imdb/aclImdb", argv[2]);
        int32_t maxlen = atoi(argv[3]);
        kh_imdb_opts o;
        kh_imdb_opts_default(&o);
        o.limit_train = atoll(argv[5]);
        o.limit_test = atoll(argv[6]);
        kh_imdb d;
        if (kh_imdb_load(root, &o, &d, err, sizeof err) != KH_OK) goto fail;
        kh_bigram_info bi = {0, o.num_words};
        if (atoi(argv[4]) && kh_fasttext_bigrams(&d.train, &d.test, o.num_words + 1, &bi, err, sizeof err) != KH_OK)
            goto fail;
        kh_seqset *s[2] = {&d.train, &d.test};
        static const char *const xn[2] = {"x.bin", "xv.bin"}, *const yn[2] = {"y.bin", "yv.bin"};
        for (int k = 0; k < 2; k++) {
            int32_t *x = malloc((size_t)(s[k]->n ? s[k]->n : 1) * (size_t)maxlen * sizeof *x);
            if (!x || kh_pad_sequences(s[k], maxlen, x, err, sizeof err) != KH_OK) goto fail;
            if (dump(argv[7], xn[k], x, (size_t)s[k]->n * (size_t)maxlen * sizeof *x) ||
                dump(argv[7], yn[k], s[k]->labels, (size_t)s[k]->n * sizeof(int32_t)))
                return 1;
            free(x);
        }
        printf("vocab_size %lld\ntrain_words %lld\ntest_oov_unseen %lld\nn_bigrams %lld\nmax_features %lld\n",
               (long long)d.vocab_size, (long long)d.train_words, (long long)d.test_oov_unseen,
               (long long)bi.n_bigrams, (long long)bi.max_features);
        kh_imdb_free(&d);
        return 0;
    }
    if (argc == 5 && !strcmp(argv[1], "images")) {
        kh_images im = {0};
        kh_image_folder_opts fo = {.width = 32, .height = 32, .channels = 3, .limit = atoll(argv[3]), .threads = 1};
        if (kh_image_folder_read(argv[2], &fo, &im, err, sizeof err) != KH_OK) goto fail;
        int rc = dump_images(&im, argv[4]);
        kh_images_free(&im);
        return rc;
    }
    if (argc == 6 && !strcmp(argv[1], "idx")) {
        kh_images im = {0};
        if (kh_idx_read(argv[2], argv[3], atoll(argv[4]), &im, err, sizeof err) != KH_OK) goto fail;
        int rc = dump_images(&im, argv[5]);
        kh_images_free(&im);
        return rc;
    }
    if (argc == 4 && !strcmp(argv[1], "chars")) {
        kh_charwin c;
        if (kh_charwin_load(argv[2], 40, 3, &c, err, sizeof err) != KH_OK) goto fail;
        printf("n_chars %lld\nn_distinct %d\nn_windows %lld\n", (long long)c.n_chars, c.n_distinct,
               (long long)c.n_windows);
        int rc = dump(argv[3], "x.bin", c.text, (size_t)c.n_chars * sizeof(int32_t)) ||
                 dump(argv[3], "y.bin", c.alphabet, (size_t)c.n_distinct * sizeof(uint32_t));
        kh_charwin_free(&c);
        return rc;
    }
    fprintf(stderr, "usage: datacheck imdb|images|idx|chars ... (see the source)\n");
    return 2;
fail:
    fprintf(stderr, "datacheck: %s\n", err);
    return 1;
}
