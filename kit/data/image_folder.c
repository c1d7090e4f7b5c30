/* image_folder.c — image-folder trees root/<class>/<file>.jpg/.jpeg/.png (Keras flow_from_directory layout;
 * the mirror ships CIFAR-10 this way). Classes are indexed by sorted name, files sorted within a class, so
 * the result does not depend on directory order. Decoding uses libjpeg(-turbo) and libpng with error
 * managers that longjmp back here: a corrupt file becomes an error naming it, never an exit. Files are
 * decoded by a few threads straight into the output array (each thread owns a disjoint set of images). */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* struct dirent d_type and its DT_* constants */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>
#include <png.h>

#include "img_common.h"
#include "khost/kit/regular.h"
#include "khost/kit/status.h"

#define FOLDER_MAX_THREADS 16
#define FOLDER_MAX_FILE (64u << 20) /* an image file larger than this is not a training image */
#define FOLDER_MAX_SIDE 16384

// --- directory listing ---------------------------------------------------------------------------------
typedef struct name_list {
    char **v;
    size_t n, cap;
} name_list;

static void names_free(name_list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int names_push(name_list *l, const char *s) {
    if (img_grow((void **)&l->v, &l->cap, l->n + 1, SIZE_MAX / sizeof(char *), sizeof(char *)) != KH_OK) return -1;
    size_t len = strlen(s) + 1;
    char *c = malloc(len);
    if (!c) return -1;
    memcpy(c, s, len);
    l->v[l->n++] = c;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int is_image_name(const char *s) {
    return img_has_suffix_ci(s, ".jpg") || img_has_suffix_ci(s, ".jpeg") || img_has_suffix_ci(s, ".png");
}

/* List the non-hidden entries of dir that are directories (want_dirs) or image files, sorted bytewise. */
static kh_status list_dir(const char *dir, int want_dirs, name_list *out, char *err, size_t errlen) {
    DIR *d = opendir(dir);
    if (!d) return kh_errf(err, errlen, KH_ERR_IO, "%s: cannot open folder: %s", dir, strerror(errno));
    struct dirent *e;
    char path[4096];
    kh_status st = KH_OK;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (!want_dirs && !is_image_name(e->d_name)) continue;
        int n = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (n < 0 || (size_t)n >= sizeof path) {
            st = kh_errf(err, errlen, KH_ERR_INVALID, "%s/%s: path too long", dir, e->d_name);
            break;
        }
        /* d_type saves a stat per entry (60000 for CIFAR-10); filesystems without it say DT_UNKNOWN */
        int is_dir = e->d_type == DT_DIR, is_reg = e->d_type == DT_REG;
        if (e->d_type == DT_UNKNOWN || e->d_type == DT_LNK) is_dir = img_is_dir(path), is_reg = img_is_file(path);
        if (want_dirs ? !is_dir : !is_reg) continue;
        if (names_push(out, e->d_name) != 0) {
            st = kh_errf(err, errlen, KH_ERR_NOMEM, "%s: out of memory listing the folder", dir);
            break;
        }
    }
    closedir(d);
    if (st == KH_OK && out->n > 1) qsort(out->v, out->n, sizeof *out->v, cmp_str);
    return st;
}

// --- decoding -----------------------------------------------------------------------------------------------
typedef struct decoder {
    int32_t w, h, c;
    unsigned char *buf; /* the current file's bytes, reused */
    size_t cap;
    struct jpeg_decompress_struct jd;
    struct {
        struct jpeg_error_mgr pub;
        jmp_buf jb;
        char msg[JMSG_LENGTH_MAX];
    } je;
    int jd_ready;
} decoder;

static void jpeg_fail(j_common_ptr ci) {
    decoder *dec = (decoder *)ci->client_data;
    (*ci->err->format_message)(ci, dec->je.msg);
    longjmp(dec->je.jb, 1);
}

/* libjpeg recovers from damaged data with a warning and grey pixels; PIL refuses truncated files and so
 * do we: any warning is an error. Trace messages (level > 0) are ignored. */
static void jpeg_message(j_common_ptr ci, int level) {
    if (level < 0) jpeg_fail(ci);
}

static const char *shape_str(char *b, size_t n, long w, long h, long c) {
    snprintf(b, n, "%ldx%ldx%ld", w, h, c);
    return b;
}

static kh_status decode_jpeg(decoder *dec, const char *path, size_t size, uint8_t *dst, char *err, size_t errlen) {
    struct jpeg_decompress_struct *ci = &dec->jd;
    char a[64], b[64];
    if (setjmp(dec->je.jb)) {
        jpeg_abort_decompress(ci);
        return kh_errf(err, errlen, KH_ERR_DATA, "%s: corrupt JPEG: %s", path, dec->je.msg);
    }
    jpeg_mem_src(ci, dec->buf, (unsigned long)size);
    jpeg_read_header(ci, TRUE);
    if ((int64_t)ci->image_width != dec->w || (int64_t)ci->image_height != dec->h || ci->num_components != dec->c) {
        kh_status st = kh_errf(err, errlen, KH_ERR_DATA, "%s: image is %s (WxHxC), expected %s", path,
                               shape_str(a, sizeof a, (long)ci->image_width, (long)ci->image_height,
                                         ci->num_components),
                               shape_str(b, sizeof b, dec->w, dec->h, dec->c));
        jpeg_abort_decompress(ci);
        return st;
    }
    ci->out_color_space = dec->c == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(ci);
    if (ci->output_components != dec->c) {
        kh_status st = kh_errf(err, errlen, KH_ERR_DATA, "%s: decodes to %d channels, expected %d", path,
                               ci->output_components, dec->c);
        jpeg_abort_decompress(ci);
        return st;
    }
    size_t row = (size_t)dec->w * (size_t)dec->c;
    while (ci->output_scanline < ci->output_height) {
        JSAMPROW r = dst + (size_t)ci->output_scanline * row;
        jpeg_read_scanlines(ci, &r, 1);
    }
    jpeg_finish_decompress(ci);
    return KH_OK;
}

typedef struct png_src {
    const unsigned char *p;
    size_t n, at;
} png_src;

static void png_read_mem(png_structp png, png_bytep out, png_size_t len) {
    png_src *s = png_get_io_ptr(png);
    if (len > s->n - s->at) png_error(png, "unexpected end of file");
    memcpy(out, s->p + s->at, len);
    s->at += len;
}

typedef struct png_errctx {
    jmp_buf jb;
    char msg[256];
} png_errctx;

static void png_fail(png_structp png, png_const_charp msg) {
    png_errctx *e = png_get_error_ptr(png);
    snprintf(e->msg, sizeof e->msg, "%s", msg);
    longjmp(e->jb, 1);
}

static void png_warn(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

/* The low-level libpng API rather than png_image: the simplified API applies gamma correction, PIL (and
 * so Keras) does not; here values come out exactly as stored (palette and low bit depths expanded,
 * 16-bit samples reduced to their high byte). */
static kh_status decode_png(decoder *dec, const char *path, size_t size, uint8_t *dst, char *err, size_t errlen) {
    png_errctx ectx;
    png_src src = {dec->buf, size, 0};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &ectx, png_fail, png_warn);
    if (!png) return kh_errf(err, errlen, KH_ERR_NOMEM, "%s: out of memory for the PNG decoder", path);
    png_infop info = png_create_info_struct(png);
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return kh_errf(err, errlen, KH_ERR_NOMEM, "%s: out of memory for the PNG decoder", path);
    }
    kh_status st = KH_OK;
    char a[64], b[64];
    if (setjmp(ectx.jb)) {
        png_destroy_read_struct(&png, &info, NULL);
        return kh_errf(err, errlen, KH_ERR_DATA, "%s: corrupt PNG: %s", path, ectx.msg);
    }
    png_set_read_fn(png, &src, png_read_mem);
    png_set_user_limits(png, FOLDER_MAX_SIDE, FOLDER_MAX_SIDE);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    png_set_expand(png);   /* palette -> RGB, gray < 8 bits -> 8 bits, tRNS -> alpha */
    png_set_strip_16(png);
    int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int ch = png_get_channels(png, info);
    if ((int64_t)w != dec->w || (int64_t)h != dec->h || ch != dec->c) {
        st = kh_errf(err, errlen, KH_ERR_DATA, "%s: image is %s (WxHxC), expected %s", path,
                     shape_str(a, sizeof a, (long)w, (long)h, ch), shape_str(b, sizeof b, dec->w, dec->h, dec->c));
        png_destroy_read_struct(&png, &info, NULL);
        return st;
    }
    /* Interlaced images are read pass by pass over the same rows, which accumulate the full image. */
    size_t row = (size_t)dec->w * (size_t)dec->c;
    for (int p = 0; p < passes; p++)
        for (png_uint_32 y = 0; y < h; y++) {
            png_bytep rp = dst + (size_t)y * row;
            png_read_rows(png, &rp, NULL, 1);
        }
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    return st;
}

/* Read the whole file with plain open/read (no stdio buffer), relative to its class folder's descriptor
 * when there is one: the kernel's path walk was half the time of loading CIFAR-10 with full paths. */
static kh_status decode_file(decoder *dec, int dir_fd, const char *name, const char *path, uint8_t *dst, char *err,
                             size_t errlen) {
    char why[4500];
    int fd = kh_open_regular_at(dir_fd >= 0 ? dir_fd : AT_FDCWD, dir_fd >= 0 ? name : path, path, NULL, why,
                                sizeof why);
    if (fd < 0) return kh_errf(err, errlen, KH_ERR_IO, "%s", why);
    kh_status st = KH_OK;
    size_t size = 0;
    for (;;) {
        if (size == dec->cap &&
            img_grow((void **)&dec->buf, &dec->cap, size + 1, FOLDER_MAX_FILE + 1, 1) != KH_OK) {
            st = dec->cap > FOLDER_MAX_FILE
                     ? kh_errf(err, errlen, KH_ERR_DATA, "%s: larger than %u bytes, not an image", path,
                               FOLDER_MAX_FILE)
                     : kh_errf(err, errlen, KH_ERR_NOMEM, "%s: out of memory reading the file", path);
            break;
        }
        ssize_t got = read(fd, dec->buf + size, dec->cap - size);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            st = kh_errf(err, errlen, KH_ERR_IO, "%s: read error: %s", path, strerror(errno));
            break;
        }
        if (got == 0) break;
        size += (size_t)got;
    }
    close(fd);
    if (st != KH_OK) return st;
    if (size == 0) return kh_errf(err, errlen, KH_ERR_DATA, "%s: empty file", path);
    if (img_has_suffix_ci(path, ".png")) return decode_png(dec, path, size, dst, err, errlen);
    return decode_jpeg(dec, path, size, dst, err, errlen);
}

// --- parallel decode ---------------------------------------------------------------------------------------
typedef struct work {
    const char *root;
    const name_list *classes;
    const name_list *files;  /* per class */
    const int64_t *take;     /* files taken per class */
    const int64_t *first;    /* output index of each class's first file */
    const int *class_fd;     /* an open descriptor per class folder, or -1 (then full paths are used) */
    int64_t total;
    int32_t n_classes;
    uint8_t *pixels;
    size_t stride;
    int32_t w, h, c;
    int32_t n_threads;
    atomic_llong done;
    void (*progress)(void *ctx, const char *what, int64_t done, int64_t total);
    void *progress_ctx;
    /* per thread: its first failure (lowest index), so the reported error does not depend on timing */
    int64_t fail_at[FOLDER_MAX_THREADS];
    kh_status fail_st[FOLDER_MAX_THREADS];
    char fail_msg[FOLDER_MAX_THREADS][512];
} work;

typedef struct worker_arg {
    work *w;
    int32_t id;
} worker_arg;

static void *worker(void *p) {
    worker_arg *a = p;
    work *w = a->w;
    decoder dec;
    memset(&dec, 0, sizeof dec);
    dec.w = w->w, dec.h = w->h, dec.c = w->c;
    dec.jd.err = jpeg_std_error(&dec.je.pub);
    dec.je.pub.error_exit = jpeg_fail;
    dec.je.pub.emit_message = jpeg_message;
    dec.jd.client_data = &dec;
    w->fail_at[a->id] = -1;
    if (setjmp(dec.je.jb)) { /* jpeg_create_decompress itself failed (out of memory) */
        w->fail_at[a->id] = 0;
        w->fail_st[a->id] = KH_ERR_NOMEM;
        snprintf(w->fail_msg[a->id], sizeof w->fail_msg[a->id], "%s: cannot create a JPEG decoder: %s", w->root,
                 dec.je.msg);
        return NULL;
    }
    jpeg_create_decompress(&dec.jd);
    dec.jd_ready = 1;
    char path[4096];
    int32_t cls = 0;
    /* Images are striped over threads: image i goes to thread i % n_threads. */
    for (int64_t i = a->id; i < w->total; i += w->n_threads) {
        while (cls + 1 < w->n_classes && w->first[cls + 1] <= i) cls++;
        int64_t j = i - w->first[cls];
        snprintf(path, sizeof path, "%s/%s/%s", w->root, w->classes->v[cls], w->files[cls].v[j]);
        kh_status st = decode_file(&dec, w->class_fd[cls], w->files[cls].v[j], path, w->pixels + (size_t)i * w->stride,
                                   w->fail_msg[a->id], sizeof w->fail_msg[a->id]);
        if (st != KH_OK) {
            w->fail_at[a->id] = i;
            w->fail_st[a->id] = st;
            break;
        }
        long long d = atomic_fetch_add(&w->done, 1) + 1;
        /* only the calling thread reports, so the callback needs no locking */
        if (a->id == 0 && w->progress && (i / w->n_threads) % 1000 == 999)
            w->progress(w->progress_ctx, "decoding images", d, w->total);
    }
    if (dec.jd_ready) jpeg_destroy_decompress(&dec.jd);
    free(dec.buf);
    return NULL;
}

static int32_t default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    if (n > FOLDER_MAX_THREADS) n = FOLDER_MAX_THREADS;
    return (int32_t)n;
}

// --- public ------------------------------------------------------------------------------------------------
kh_status kh_image_folder_read(const char *root, const kh_image_folder_opts *opts, kh_images *out, char *err,
                               size_t errlen) {
    if (!root || !opts || !out || opts->limit < 0)
        return kh_errf(err, errlen, KH_ERR_INVALID, "kh_image_folder_read: bad arguments");
    memset(out, 0, sizeof *out);
    if (opts->width <= 0 || opts->height <= 0 || opts->width > FOLDER_MAX_SIDE || opts->height > FOLDER_MAX_SIDE ||
        (opts->channels != 1 && opts->channels != 3))
        return kh_errf(err, errlen, KH_ERR_INVALID, "%s: unsupported image shape %dx%dx%d requested", root,
                       opts->width, opts->height, opts->channels);
    if (!img_is_dir(root)) return kh_errf(err, errlen, KH_ERR_IO, "%s: no such folder", root);

    kh_status st;
    name_list classes = {0};
    name_list *files = NULL;
    size_t n_lists = 0;
    int64_t *take = NULL, *first = NULL;
    int *class_fd = NULL;
    uint8_t *pix = NULL;
    int32_t *labels = NULL;
    work *w = NULL;
    char path[4096];

    if ((st = list_dir(root, 1, &classes, err, errlen)) != KH_OK) goto done;
    if (classes.n == 0) {
        st = kh_errf(err, errlen, KH_ERR_DATA, "%s: no class folders (expected %s/<class>/*.jpg|*.png)", root, root);
        goto done;
    }
    if (classes.n > INT32_MAX / 2) {
        st = kh_errf(err, errlen, KH_ERR_DATA, "%s: too many class folders", root);
        goto done;
    }
    int32_t nc = (int32_t)classes.n;
    files = calloc((size_t)nc, sizeof *files);
    take = calloc((size_t)nc, sizeof *take);
    first = calloc((size_t)nc + 1, sizeof *first);
    class_fd = malloc((size_t)nc * sizeof *class_fd);
    if (!files || !take || !first || !class_fd) {
        st = kh_errf(err, errlen, KH_ERR_NOMEM, "%s: out of memory", root);
        goto done;
    }
    n_lists = (size_t)nc;
    for (int32_t k = 0; k < nc; k++) class_fd[k] = -1;
    int64_t all = 0;
    for (int32_t k = 0; k < nc; k++) {
        snprintf(path, sizeof path, "%s/%s", root, classes.v[k]);
        if ((st = list_dir(path, 0, &files[k], err, errlen)) != KH_OK) goto done;
        if (files[k].n == 0) {
            st = kh_errf(err, errlen, KH_ERR_DATA, "%s: class folder has no *.jpg, *.jpeg or *.png files", path);
            goto done;
        }
        take[k] = (int64_t)files[k].n;
        all += take[k];
    }
    // a limit takes files round-robin over the classes, so every class stays represented
    if (opts->limit > 0 && opts->limit < all) {
        memset(take, 0, (size_t)nc * sizeof *take);
        int64_t left = opts->limit;
        for (int64_t j = 0; left > 0; j++)
            for (int32_t k = 0; k < nc && left > 0; k++)
                if (j < (int64_t)files[k].n) take[k]++, left--;
        all = opts->limit;
    }
    for (int32_t k = 0; k < nc; k++) first[k + 1] = first[k] + take[k];

    size_t stride = (size_t)opts->width * (size_t)opts->height * (size_t)opts->channels;
    pix = malloc((size_t)all * stride);
    labels = malloc((size_t)all * sizeof *labels);
    w = calloc(1, sizeof *w);
    if (!pix || !labels || !w) {
        st = kh_errf(err, errlen, KH_ERR_NOMEM, "%s: out of memory for %lld images", root, (long long)all);
        goto done;
    }
    for (int32_t k = 0; k < nc; k++) {
        for (int64_t i = first[k]; i < first[k + 1]; i++) labels[i] = k;
        snprintf(path, sizeof path, "%s/%s", root, classes.v[k]);
        if (take[k] > 0) class_fd[k] = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* -1: full paths */
    }

    *w = (work){.root = root, .classes = &classes, .files = files, .take = take, .first = first,
                .class_fd = class_fd, .total = all,
                .n_classes = nc, .pixels = pix, .stride = stride, .w = opts->width, .h = opts->height,
                .c = opts->channels, .progress = opts->progress,
                .progress_ctx = opts->progress_ctx};
    atomic_init(&w->done, 0);
    int32_t nt = opts->threads > 0 ? opts->threads : default_threads();
    if (nt > FOLDER_MAX_THREADS) nt = FOLDER_MAX_THREADS;
    if (nt > all) nt = (int32_t)all;
    if (nt < 1) nt = 1;
    w->n_threads = nt;
    pthread_t tid[FOLDER_MAX_THREADS];
    worker_arg args[FOLDER_MAX_THREADS];
    int32_t started = 1;
    for (int32_t t = 0; t < nt; t++) args[t] = (worker_arg){w, t};
    for (int32_t t = 1; t < nt; t++) {
        if (pthread_create(&tid[t], NULL, worker, &args[t]) != 0) break; /* fewer threads still finish */
        started++;
    }
    worker(&args[0]);
    for (int32_t t = 1; t < started; t++) pthread_join(tid[t], NULL);
    /* stripes whose thread could not be started run here, so the result never depends on thread count */
    for (int32_t t = started; t < nt; t++) worker(&args[t]);
    if (opts->progress) opts->progress(opts->progress_ctx, "decoding images", (int64_t)atomic_load(&w->done), all);

    int64_t worst = -1;
    int32_t wt = -1;
    for (int32_t t = 0; t < nt; t++)
        if (w->fail_at[t] >= 0 && (worst < 0 || w->fail_at[t] < worst)) worst = w->fail_at[t], wt = t;
    if (wt >= 0) {
        st = kh_errf(err, errlen, w->fail_st[wt], "%s", w->fail_msg[wt]);
        goto done;
    }
    out->n = all;
    out->rows = opts->height;
    out->cols = opts->width;
    out->channels = opts->channels;
    out->pixels = pix;
    out->labels = labels;
    out->n_classes = nc;
    out->class_names = classes.v; /* hand the names over */
    classes.v = NULL;
    classes.n = 0;
    pix = NULL;
    labels = NULL;
    st = KH_OK;

done:
    for (size_t k = 0; files && k < n_lists; k++) {
        names_free(&files[k]);
        if (class_fd[k] >= 0) close(class_fd[k]);
    }
    free(class_fd);
    free(files);
    free(take);
    free(first);
    free(pix);
    free(labels);
    free(w);
    names_free(&classes);
    return st;
}
