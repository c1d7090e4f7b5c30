/* tests/hostile/hostile_task.c — a task module that misbehaves one way, chosen by HOSTILE (compiled by
 * test_hostile.sh against the build's headers, one .so per way; no helper library):
 *   info_null     info() returns NULL              batch0      batch_size 0
 *   dotdot        data set name "../../.."          dsnull      data set name NULL
 *   negval        count(validation) is -5           nanval      validation inputs are NaN
 *   locale        load() calls setlocale(LC_ALL, "") exit0       get_batch calls exit(0) on its 5th call
 *   hugeshape     input 2^30 wide, batch 2^20    predict     after_training asks for a prediction
 *   slow          every batch sleeps 30 ms (a cell to interrupt)
 *   chdir         load() changes the working directory to $HOSTILE_DIR (a relative --out must not follow)
 *   stdout        load() and every epoch's first batch print to stdout (run --json must stay one clean line)
 *   rmout         the 5th get_batch removes the folder $HOSTILE_DIR (the results folder, while a matrix runs)
 *   swapout       the 5th get_batch moves the folder $HOSTILE_DIR away (to <it>.away) and puts a link to a decoy
 *                 folder (<it>.decoy) in its place; with HOSTILE_SUB=name, the folder $HOSTILE_DIR/name instead
 *   overrun       get_batch writes past the end of the batch buffer the host gave it
 *   fork          load() starts a helper that leaves khost's session (setsid) and whose own child is orphaned;
 *                 both sleep, their pids in $HOSTILE_DIR/helpers
 * Otherwise it is 4 separable classes in 8 dimensions, Dense(4, softmax), 256 train / 64 validation. */
#define _POSIX_C_SOURCE 200809L
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "khost/khost.h"

#define IS(w) (!strcmp(HOSTILE, w))
#define DIM 8

struct kh_tdata {
    int64_t n[2];
    kh_layer_spec layer;
    char err[128];
};

static kh_task_info info = {
    .struct_size = sizeof(kh_task_info), .dataset = "blobs", .epochs = 3, .batch_size = 32,
    .has_validation = 1, .metric = "val_acc",
};
static const kh_task_info *get_info(void) {
    if (IS("info_null")) return NULL;
    if (IS("batch0")) info.batch_size = 0;
    if (IS("dotdot")) info.dataset = "../../..";
    if (IS("dsnull")) info.dataset = NULL;
    if (IS("hugeshape")) info.batch_size = 1 << 20;
    return &info;
}

static kh_status load(const kh_host_api *h, const kh_load_opts *o, kh_tdata **out, char *err, size_t n) {
    (void)h;
    if (IS("locale")) setlocale(LC_ALL, ""); /* what a careless module does: the user's LANG from now on */
    if (IS("chdir") && (!getenv("HOSTILE_DIR") || chdir(getenv("HOSTILE_DIR")) != 0)) {
        snprintf(err, n, "chdir: HOSTILE_DIR unset or not a folder");
        return KH_ERR_INVALID;
    }
    if (IS("fork") && getenv("HOSTILE_DIR")) {
        pid_t p = fork();
        if (p == 0) { /* the helper: a session of its own, then a grandchild whose parent exits at once */
            setsid();
            pid_t g = fork();
            if (g == 0) {
                char path[4200];
                snprintf(path, sizeof path, "%s/helpers", getenv("HOSTILE_DIR"));
                FILE *f = fopen(path, "a");
                if (f) fprintf(f, "%ld\n", (long)getpid()), fclose(f);
                pid_t h = fork(); /* and one that stays the grandchild's child */
                if (h == 0) {
                    f = fopen(path, "a");
                    if (f) fprintf(f, "%ld\n", (long)getpid()), fclose(f);
                    sleep(300);
                    _exit(0);
                }
                sleep(300);
                _exit(0);
            }
            _exit(0);
        }
        nanosleep(&(struct timespec){0, 200 * 1000000L}, NULL); /* the helpers have written their pids */
    }
    if (IS("stdout")) {
        printf("{\"not\": \"the record\"} a module's chatter\n");
        fflush(stdout);
    }
    kh_tdata *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, n, "out of memory");
        return KH_ERR_NOMEM;
    }
    d->n[0] = o->limit_train > 0 && o->limit_train < 256 ? o->limit_train : 256;
    d->n[1] = o->limit_val > 0 && o->limit_val < 64 ? o->limit_val : 64;
    *out = d;
    return KH_OK;
}
static void unload(kh_tdata *d) { free(d); }
static const char *last_error(kh_tdata *d) { return d->err; }

static kh_status model(kh_tdata *d, kh_model_spec *m) {
    memset(&d->layer, 0, sizeof d->layer);
    m->name = "hostile";
    m->input_dtype = KH_F32;
    m->loss = KH_LOSS_CATEGORICAL_CROSSENTROPY;
    m->n_classes = 4;
    m->optimizer = (kh_optimizer_spec){.kind = KH_OPT_RMSPROP, .lr = 0.01f, .rho = 0.9f, .epsilon = 1e-7f};
    m->input_rank = 1;
    m->input_shape[0] = IS("hugeshape") ? 1 << 30 : DIM;
    d->layer = (kh_layer_spec){.kind = KH_LAYER_DENSE, .units = 4, .activation = KH_ACT_SOFTMAX};
    m->layers = &d->layer;
    m->n_layers = 1;
    return KH_OK;
}

static int64_t count(kh_tdata *d, uint32_t split) {
    if (IS("negval") && split == KH_SPLIT_VAL) return -5;
    return split <= KH_SPLIT_VAL ? d->n[split] : 0;
}

static kh_status get_batch(kh_tdata *d, uint32_t split, const int64_t *idx, int32_t n, kh_tensor *x, kh_tensor *y) {
    static int calls, rm_calls;
    if (IS("exit0") && ++calls == 5) exit(0);
    if (IS("slow")) nanosleep(&(struct timespec){0, 30 * 1000000L}, NULL);
    if (IS("stdout") && idx[0] == 0) printf("batch at 0, split %u\n", split); /* unflushed: in khost's buffer */
    if (IS("rmout") && calls == 0 && ++rm_calls == 5 && getenv("HOSTILE_DIR")) {
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", getenv("HOSTILE_DIR"));
        if (system(cmd) != 0) fprintf(stderr, "hostile: %s failed\n", cmd);
    }
    if (IS("swapout") && calls == 0 && ++rm_calls == 5 && getenv("HOSTILE_DIR")) {
        char dir[4096], away[4200], decoy[4200];
        const char *sub = getenv("HOSTILE_SUB");
        snprintf(dir, sizeof dir, "%s%s%s", getenv("HOSTILE_DIR"), sub ? "/" : "", sub ? sub : "");
        snprintf(away, sizeof away, "%s.away", dir);
        snprintf(decoy, sizeof decoy, "%s.decoy", getenv("HOSTILE_DIR"));
        if (rename(dir, away) != 0 || mkdir(decoy, 0777) != 0 || symlink(decoy, dir) != 0)
            fprintf(stderr, "hostile: swapping %s failed\n", dir);
    }
    float *xs = x->data;
    int32_t *ys = y->data;
    if (IS("overrun"))
        for (int i = 0; i < 4096; i++) ((volatile float *)xs)[info.batch_size * DIM + i] = 1.0f;
    for (int i = 0; i < n; i++) {
        if (idx[i] < 0 || idx[i] >= d->n[split]) {
            snprintf(d->err, sizeof d->err, "index %lld out of range", (long long)idx[i]);
            return KH_ERR_INVALID;
        }
        int c = (int)(idx[i] % 4);
        ys[i] = c;
        for (int k = 0; k < DIM; k++)
            xs[i * DIM + k] = IS("nanval") && split == KH_SPLIT_VAL ? NAN : (k == c ? 3.0f : 0.0f) + (float)((idx[i] * 7 + k) % 5) * 0.1f;
    }
    return KH_OK;
}

static kh_status describe(kh_tdata *d, kh_print_fn print, void *ctx) {
    (void)d;
    print(ctx, "hostile test task");
    return KH_OK;
}

static kh_status after_training(kh_tdata *d, const kh_predictor *p) {
    (void)d;
    float in[DIM] = {3, 0, 0, 0, 0, 0, 0, 0}, outv[4];
    kh_tensor x = {.dtype = KH_F32, .layout = KH_LAYOUT_NC, .rank = 2, .dims = {1, DIM}, .data = in};
    kh_tensor o = {.dtype = KH_F32, .layout = KH_LAYOUT_NC, .rank = 2, .dims = {1, 4}, .data = outv};
    kh_status st = p->predict(p->ctx, &x, &o);
    char line[64];
    snprintf(line, sizeof line, "prediction: %s\n", st == KH_OK ? "made" : "refused");
    p->print(p->ctx, line);
    return st;
}

static kh_task_api api = {
    .struct_size = sizeof(kh_task_api), .info = get_info, .load = load, .unload = unload,
    .last_error = last_error, .model = model, .count = count, .get_batch = get_batch, .describe = describe,
};

static const kh_module_desc desc = {
    .struct_size = sizeof(kh_module_desc), .abi_major = KH_ABI_MAJOR, .abi_minor = KH_ABI_MINOR,
    .kind = KH_MODULE_TASK, .name = "hostile_" HOSTILE, .version = "test",
    .description = "a task that misbehaves (tests/hostile)", .api = &api,
};

__attribute__((visibility("default"))) const kh_module_desc *khost_module_entry(const kh_host_api *host) {
    (void)host;
    if (IS("predict")) api.after_training = after_training;
    return &desc;
}
