/* tests/cntk/test_cntk_onednn_chain.c — cntk's oneDNN path keeps the tensor two convolutions pass in the
 * blocked layout both chose, a max pooling after one runs on oneDNN in that layout and passes its output on in
 * it through Dropout into a convolution, or reordered straight to NHWC through Dropout and Flatten into a Dense
 * ([plugin cntk] onednn_chain, default 1; plugins/cntk/cpu/conv_onednn.c, maxpool_onednn.c, dense_onednn.c). oneDNN's own execution log
 * (ONEDNN_VERBOSE=1, on stdout) is the witness: with the chain, no reorder of the three chained tensors runs
 * and the pooling is oneDNN's; with onednn_chain = 0 they are reordered at the layers' edges and the pooling
 * is the plain one. Two training steps give the same weights both ways, the environment string says when the
 * chain is off, and a malformed value is refused naming the key. The same log shows the Dense layers on oneDNN's
 * inner product (and the relus on its eltwise) in that model and on neither in a model without convolutions.
 * The chained model's agreement with the float64 kit is test_backend_ref's cnn_chain_rmsprop (the same model). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend_testlib.h"
#include "khost/kit/ref.h"
#include "parity.h"
#include "testutil.h"

#define MAX_BATCH 6
#define CHAINED_DIMS ",6x16x6x6," /* max_batch x 16 channels x the 6 x 6 image, as oneDNN logs a shape */
#define POOLED_DIMS ",6x16x3x3,"  /* the pooling's output, which reaches the Dense through Dropout and Flatten */
#define POOL_CONV_DIMS ",6x16x4x4," /* cnn_pool_conv_rmsprop's pooled tensor, through Dropout into a convolution */

static kb_backend B;

static const kh_model_spec *small_spec(const char *name) {
    const kh_model_spec *m;
    int n = kb_small_models(&m);
    for (int i = 0; i < n; i++)
        if (!strcmp(m[i].name, name)) return &m[i];
    return NULL;
}

typedef struct outcome {
    long reorders;  /* reorders of a chained tensor oneDNN executed */
    long pooled;    /* reorders of the pooling's output or its gradient to or from NCHW (abcd) */
    long pooled_nhwc; /* the same to or from NHWC (acdb) */
    long pool_conv; /* reorders of cnn_pool_conv_rmsprop's pooled tensor */
    long executed;  /* primitives oneDNN executed (the log was written at all) */
    long pooling;   /* of them, poolings (the max pooling after the chain runs on oneDNN only with it) */
    long inner;     /* inner products (Dense, in a model with convolutions) */
    long eltwise;   /* eltwise primitives (the Activation relu, the Dense relu's gradient) */
    int env_says_off;
    float *w;       /* every weight after the steps, layer by layer, slot by slot */
    int64_t nw;
} outcome;

/* KHOST_TEST_VERBOSE=1 copies the log to stderr. */
static void count_log(FILE *f, outcome *o) {
    const char *v = getenv("KHOST_TEST_VERBOSE");
    char line[2048];
    while (fgets(line, sizeof line, f)) {
        if (v && *v == '1') fputs(line, stderr);
        if (strncmp(line, "onednn_verbose,exec,", 20) != 0) continue;
        o->executed++;
        if (strstr(line, ",pooling")) o->pooling++; /* "pooling" or "pooling_v2" */
        if (strstr(line, ",inner_product,")) o->inner++;
        if (strstr(line, ",eltwise,")) o->eltwise++;
        if (strstr(line, ",reorder,") && strstr(line, CHAINED_DIMS)) o->reorders++;
        if (strstr(line, ",reorder,") && strstr(line, POOLED_DIMS) && strstr(line, ":abcd:")) o->pooled++;
        if (strstr(line, ",reorder,") && strstr(line, POOLED_DIMS) && strstr(line, ":acdb:")) o->pooled_nhwc++;
        if (strstr(line, ",reorder,") && strstr(line, POOL_CONV_DIMS)) o->pool_conv++;
    }
}

/* Load cntk with onednn_chain = chain (NULL: unset), train two steps on fixed batches, and read oneDNN's log. */
static void run(const kh_model_spec *sp, const char *chain, outcome *o) {
    memset(o, 0, sizeof *o);
    if (chain) setenv("KHOST_TEST_CFG_onednn_chain", chain, 1);
    else unsetenv("KHOST_TEST_CFG_onednn_chain");
    FILE *log = tmpfile();
    CHECK(log != NULL, "tmpfile");
    if (!log) return;
    fflush(stdout);
    int saved = dup(1);
    dup2(fileno(log), 1);

    kb_load(&B, 2);
    char env[512] = "";
    B.api->environment(B.s, env, sizeof env);
    o->env_says_off = strstr(env, "onednn_chain=0") != NULL;
    kh_bmodel *m = kb_compile(&B, sp, MAX_BATCH, 1);
    kh_ref_model *rm = NULL;
    char err[256];
    if (m && kb_init_weights(&B, m, sp, 11, NULL) == 0 && kh_ref_model_create(sp, &rm, err, sizeof err) == KH_OK) {
        kh_rng r;
        kh_rng_seed(&r, 5);
        for (int step = 0; step < 2; step++) {
            kb_batch bt;
            kb_make_batch(&bt, sp, step == 1 ? 4 : MAX_BATCH, &r); /* a partial batch: the zeroed rows */
            int64_t yd[1] = {bt.n};
            kh_tensor ty = kb_tensor(KH_I32, KH_LAYOUT_NC, 1, yd, bt.labels);
            CHECK(B.api->train_batch(m, &bt.x_backend, &ty) == KH_OK, "train_batch: %s", B.api->last_error(B.s));
            kb_free_batch(&bt);
        }
        const kh_model_shapes *sh = kh_ref_model_shapes(rm);
        for (int l = 0; l < sh->n_layers; l++)
            for (int s = 0; s < sh->layers[l].n_params; s++) o->nw += sh->layers[l].params[s].numel;
        o->w = malloc((size_t)o->nw * sizeof(float));
        int64_t at = 0;
        for (int l = 0; o->w && l < sh->n_layers; l++)
            for (int s = 0; s < sh->layers[l].n_params; s++) {
                const kh_param_shape *ps = &sh->layers[l].params[s];
                kh_tensor tw = kb_tensor(KH_F32, KH_LAYOUT_ANY, ps->rank, ps->dims, o->w + at);
                CHECK(B.api->get_weight(m, l, s, &tw) == KH_OK, "get_weight %d.%d", l, s);
                at += ps->numel;
            }
    } else {
        CHECK(0, "compile and initialise %s", sp->name);
    }
    kh_ref_model_free(rm);
    if (m) B.api->model_free(m);
    kb_unload(&B);

    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    rewind(log);
    count_log(log, o);
    fclose(log);
}

static void test_bad_setting(void) {
    setenv("KHOST_TEST_CFG_onednn_chain", "yes", 1);
    kb_load_module(&B);
    kh_device dev = {.struct_size = sizeof dev, .kind = KH_DEVICE_CPU, .ordinal = -1, .threads = 1};
    snprintf(dev.id, sizeof dev.id, "cpu");
    char err[512] = "";
    kh_bsession *s = NULL;
    kh_status st = B.api->open(kb_host(), &dev, &s, err, sizeof err);
    CHECK(st == KH_ERR_INVALID && s == NULL, "onednn_chain = yes refused (status %d)", st);
    CHECK(strstr(err, "[plugin cntk] onednn_chain = 'yes': expected 0 or 1") != NULL, "message: %s", err);
    if (s) B.api->close(s);
    kb_unload(&B);
    unsetenv("KHOST_TEST_CFG_onednn_chain");
}

int main(void) {
    setenv("ONEDNN_VERBOSE", "1", 1); /* read by libdnnl at its first primitive, after this */
    kb_load(&B, 1);
    char env[512] = "";
    B.api->environment(B.s, env, sizeof env);
    kb_unload(&B);
    if (!strstr(env, "cpu_path=onednn-")) {
        char why[600];
        snprintf(why, sizeof why, "cntk is built without oneDNN (environment: %s)", env);
        kh_test_skip(why);
    }
    const kh_model_spec *sp = small_spec("cnn_chain_rmsprop"), *mlp = small_spec("mlp_rmsprop");
    const kh_model_spec *pc = small_spec("cnn_pool_conv_rmsprop");
    CHECK(sp != NULL && mlp != NULL && pc != NULL,
          "cnn_chain_rmsprop, cnn_pool_conv_rmsprop and mlp_rmsprop among the small models");
    if (!sp || !mlp || !pc) return kh_test_finish("test_cntk_onednn_chain");

    outcome on, off;
    run(sp, NULL, &on);
    run(sp, "0", &off);
    printf("oneDNN executed %ld primitives with the chain, %ld without; reorders of the chained tensors: %ld / %ld\n",
           on.executed, off.executed, on.reorders, off.reorders);
    CHECK(on.executed > 0 && off.executed > 0, "oneDNN's execution log was captured");
    CHECK(on.reorders == 0, "chained: %ld reorders of a chained tensor", on.reorders);
    /* without the chain, each step reorders both chained tensors in and out, forward and backward */
    CHECK(off.reorders >= 2 * 4, "unchained: only %ld reorders of the chained tensors", off.reorders);
    /* chained, the pooled tensor is reordered straight into NHWC, Keras's flatten order, for Dropout, Flatten
     * and the Dense (and its gradient back from it), never through NCHW and Flatten's permutation */
    CHECK(on.pooled == 0 && on.pooled_nhwc >= 2 * 2,
          "chained: %ld reorders of the pooled tensor to or from NCHW, %ld to or from NHWC", on.pooled,
          on.pooled_nhwc);
    CHECK(on.pooling > 0 && off.pooling == 0, "the pooling ran on oneDNN %ld times chained, %ld unchained",
          on.pooling, off.pooling);
    CHECK(!on.env_says_off && off.env_says_off, "environment names onednn_chain=0 only when it is off");
    /* a model with convolutions runs its Dense layers as inner products (forward, backward data and weights
     * each step) and its relus on eltwise primitives; a model without runs neither on oneDNN */
    CHECK(on.inner >= 2 * 5 && on.eltwise > 0, "in the convolutional model: %ld inner products, %ld eltwise",
          on.inner, on.eltwise);
    outcome dense_only;
    run(mlp, NULL, &dense_only);
    CHECK(dense_only.inner == 0 && dense_only.eltwise == 0,
          "a model without convolutions ran %ld inner products and %ld eltwise primitives on oneDNN",
          dense_only.inner, dense_only.eltwise);
    free(dense_only.w);
    /* a pooling's output through Dropout into a convolution: never reordered chained, reordered without */
    outcome pc_on, pc_off;
    run(pc, NULL, &pc_on);
    run(pc, "0", &pc_off);
    CHECK(pc_on.pool_conv == 0 && pc_off.pool_conv > 0,
          "pool -> dropout -> conv: %ld reorders of the pooled tensor chained, %ld unchained", pc_on.pool_conv,
          pc_off.pool_conv);
    free(pc_on.w);
    free(pc_off.w);
    CHECK(on.w && off.w && on.nw == off.nw && on.nw > 0, "weights read back");
    if (on.w && off.w && on.nw == off.nw) {
        double worst = 0;
        for (int64_t i = 0; i < on.nw; i++) {
            double d = fabs((double)on.w[i] - off.w[i]) / (fabs((double)off.w[i]) > 1e-3 ? fabs((double)off.w[i]) : 1e-3);
            if (d > worst) worst = d;
        }
        CHECK(worst <= 1e-6, "weights after two steps differ by %g (relative) with and without the chain", worst);
    }
    free(on.w);
    free(off.w);
    test_bad_setting();
    return kh_test_finish("test_cntk_onednn_chain");
}
