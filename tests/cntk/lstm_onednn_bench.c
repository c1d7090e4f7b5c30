/* tests/cntk/lstm_onednn_bench.c — cntk's LSTM cell loops (cpu/lstm.c, through the plugin) against oneDNN's
 * fused LSTM primitive, one training pass each (forward_training, then the backward with data and weight
 * gradients) of the two benchmark recurrent layers at their task shapes:
 *   imdb_bidirectional_lstm  Bidirectional(LSTM(64)) over 100 steps of 128-wide embeddings, batch 32
 *   lstm_text_generation     LSTM(128) over 40 steps of one-hot characters (57), batch 128
 * Same weights, same input and output gradient on both; the outputs and gradients are compared first (a
 * primitive that computed something else would time something else). oneDNN is timed as a backend would
 * run it in training: the weights reordered from Keras's layout into the primitive's before the forward,
 * the weight gradients reordered back after the backward, every step (the optimizer changes them), and a
 * one-hot input given to it as the dense matrix it needs.
 * Rounds alternate the two (which goes first alternates too), each a window of --steps passes after one
 * warm-up pass; the report is the median time per pass of each and their ratio with a 95 % bootstrap CI
 * paired by round (core/results/stats.c). Not a test: run by hand on an idle machine,
 *   build/tests/cntk/lstm_onednn_bench [--threads N] [--rounds R] [--steps S] [model ...]
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "backend_testlib.h"
#include "results/stats.h"

#define DN(call)                                                                                              \
    do {                                                                                                      \
        dnnl_status_t st_ = (call);                                                                           \
        if (st_ != dnnl_success) {                                                                            \
            fprintf(stderr, "lstm_onednn_bench: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,                  \
                    dnnl_status2str(st_));                                                                    \
            exit(1);                                                                                          \
        }                                                                                                     \
    } while (0)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *xmalloc(size_t n) {
    void *p = calloc(1, n ? n : 1);
    if (!p) {
        fprintf(stderr, "lstm_onednn_bench: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

typedef struct shape {
    const char *name;
    int64_t N, T, in, u;
    int dirs;
    int onehot; /* input is indices into in one-hot columns */
} shape;

static const shape SHAPES[] = {
    {"imdb_bidirectional_lstm", 32, 100, 128, 64, 2, 0},
    {"lstm_text_generation", 128, 40, 57, 128, 1, 1},
};

// --- the cntk side: a one-layer model through the plugin's API -------------------------------------------
typedef struct cells {
    kb_backend *B;
    kh_model_spec sp;
    kh_layer_spec l;
    kh_bmodel *m;
    float **w; /* w[slot] (layer 0): Keras kernel, recurrent, bias per direction */
    kh_tensor tx, ty, tdy, tdx;
    void *x;
    float *y, *dy, *dx;
} cells;

static void cells_open(cells *c, kb_backend *B, const shape *s, const float *xf, const int32_t *xi, const float *dyv) {
    memset(c, 0, sizeof *c);
    c->B = B;
    c->l = (kh_layer_spec){.kind = s->dirs == 2 ? KH_LAYER_BILSTM : KH_LAYER_LSTM, .units = (int32_t)s->u};
    c->sp = (kh_model_spec){.struct_size = sizeof c->sp, .name = s->name, .n_layers = 1, .layers = &c->l,
                            .loss = KH_LOSS_NONE, .optimizer = {.kind = KH_OPT_SGD, .lr = 0.01f}};
    int64_t xd[3] = {s->N, s->T, s->in}, yd[2] = {s->N, s->dirs * s->u};
    if (s->onehot) {
        c->sp.input_dtype = KH_I32;
        c->sp.input_rank = 1;
        c->sp.input_shape[0] = (int32_t)s->T;
        c->sp.input_onehot = (int32_t)s->in;
        c->x = (void *)xi;
        c->tx = kb_tensor(KH_I32, KH_LAYOUT_NT, 2, xd, c->x);
    } else {
        c->sp.input_dtype = KH_F32;
        c->sp.input_rank = 2;
        c->sp.input_shape[0] = (int32_t)s->T;
        c->sp.input_shape[1] = (int32_t)s->in;
        c->x = (void *)xf;
        c->tx = kb_tensor(KH_F32, KH_LAYOUT_NTC, 3, xd, c->x);
    }
    c->m = kb_compile(B, &c->sp, (int)s->N, 1);
    if (!c->m || kb_init_weights(B, c->m, &c->sp, 1, &c->w) != 0) {
        fprintf(stderr, "lstm_onednn_bench: %s: cntk model: %s\n", s->name, B->api->last_error(B->s));
        exit(1);
    }
    c->y = xmalloc((size_t)(s->N * s->dirs * s->u) * sizeof(float));
    c->dy = (float *)dyv;
    c->dx = s->onehot ? NULL : xmalloc((size_t)(s->N * s->T * s->in) * sizeof(float));
    c->ty = kb_tensor(KH_F32, KH_LAYOUT_NC, 2, yd, c->y);
    c->tdy = kb_tensor(KH_F32, KH_LAYOUT_NC, 2, yd, c->dy);
    c->tdx = kb_tensor(KH_F32, KH_LAYOUT_NTC, 3, xd, c->dx);
}

static void cells_pass(cells *c) {
    if (c->B->api->forward(c->m, &c->tx, &c->ty) != KH_OK ||
        c->B->api->backward(c->m, &c->tdy, c->dx ? &c->tdx : NULL) != KH_OK) {
        fprintf(stderr, "lstm_onednn_bench: cntk: %s\n", c->B->api->last_error(c->B->s));
        exit(1);
    }
}

static void cells_close(cells *c) {
    kb_free_weights(&c->sp, c->w);
    c->B->api->model_free(c->m);
    free(c->y);
    free(c->dx);
}

// --- the oneDNN side -------------------------------------------------------------------------------------
/* A user buffer in a plain layout and, when the primitive wants another, its own buffer and the reorder. */
typedef struct arg {
    dnnl_memory_t user, prim; /* prim == user when the layouts agree */
    dnnl_primitive_t reorder; /* user -> prim (inputs) or prim -> user (outputs); NULL when equal */
    int alias;                /* prim is another arg's, already filled by that one's reorder */
} arg;

typedef struct fused {
    const shape *s;
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    dnnl_primitive_t fwd, bwd;
    float *x, *y_layer, *hT, *cT, *wl, *wi, *b, *dwl, *dwi, *db, *dx, *dhT, *dcT, *dyl;
    arg a_wl, a_wi, a_dwl, a_dwi, bw_wl, bw_wi;
    dnnl_memory_t m_x, m_yl, m_hT, m_cT, m_b, m_ws, m_dx, m_dyl, m_dhT, m_dcT, m_db;
    void *ws;
    int threads;
} fused;

static dnnl_memory_desc_t md_tag(int nd, const dnnl_dims_t d, dnnl_format_tag_t tag) {
    dnnl_memory_desc_t md;
    DN(dnnl_memory_desc_init_by_tag(&md, nd, d, dnnl_f32, tag));
    return md;
}

static dnnl_memory_t mem(fused *f, const dnnl_memory_desc_t *md, void *h) {
    dnnl_memory_t m;
    DN(dnnl_memory_create(&m, md, f->eng, h ? h : DNNL_MEMORY_ALLOCATE));
    return m;
}

/* like: an input arg over the same user buffer; when it already holds the tensor in `want`, a shares it
 * (the backward's weights are then not reordered a second time each pass). */
static void arg_setup(fused *f, arg *a, const dnnl_memory_desc_t *user, void *handle, const dnnl_memory_desc_t *want,
                      int output, const arg *like) {
    a->reorder = NULL;
    a->alias = 0;
    if (like) {
        const dnnl_memory_desc_t *have;
        DN(dnnl_memory_get_memory_desc(like->prim, &have));
        if (dnnl_memory_desc_equal(have, want)) {
            a->user = NULL, a->prim = like->prim, a->alias = 1;
            return;
        }
    }
    a->user = mem(f, user, handle);
    if (dnnl_memory_desc_equal(user, want)) {
        a->prim = a->user;
        return;
    }
    a->prim = mem(f, want, NULL);
    dnnl_primitive_desc_t rpd;
    if (output)
        DN(dnnl_reorder_primitive_desc_create(&rpd, want, f->eng, user, f->eng, NULL));
    else
        DN(dnnl_reorder_primitive_desc_create(&rpd, user, f->eng, want, f->eng, NULL));
    DN(dnnl_primitive_create(&a->reorder, rpd));
    DN(dnnl_primitive_desc_destroy(rpd));
}

static void arg_run(fused *f, const arg *a, int output) {
    if (!a->reorder) return;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, output ? a->prim : a->user}, {DNNL_ARG_TO, output ? a->user : a->prim}};
    DN(dnnl_primitive_execute(a->reorder, f->strm, 2, args));
}

static void fused_open(fused *f, const shape *s, const float *xdense, const cells *c, int threads) {
    memset(f, 0, sizeof *f);
    f->s = s;
    f->threads = threads;
    int64_t N = s->N, T = s->T, in = s->in, u = s->u, D = s->dirs;
    DN(dnnl_engine_create(&f->eng, dnnl_cpu, 0));
    DN(dnnl_stream_create(&f->strm, f->eng, dnnl_stream_default_flags));
    dnnl_dims_t d_x = {T, N, in}, d_yl = {T, N, D * u}, d_it = {1, D, N, u};
    dnnl_dims_t d_wl = {1, D, in, 4, u}, d_wi = {1, D, u, 4, u}, d_b = {1, D, 4, u};
    /* batch-major (N, T, C) buffers, as khost keeps sequences: ntc */
    dnnl_memory_desc_t u_x = md_tag(3, d_x, dnnl_ntc), u_yl = md_tag(3, d_yl, dnnl_ntc);
    dnnl_memory_desc_t u_it = md_tag(4, d_it, dnnl_ldnc), u_wl = md_tag(5, d_wl, dnnl_ldigo);
    dnnl_memory_desc_t u_wi = md_tag(5, d_wi, dnnl_ldigo), u_b = md_tag(4, d_b, dnnl_ldgo);
    dnnl_memory_desc_t a_wl = md_tag(5, d_wl, dnnl_format_tag_any), a_wi = md_tag(5, d_wi, dnnl_format_tag_any);
    dnnl_rnn_direction_t dir = D == 2 ? dnnl_bidirectional_concat : dnnl_unidirectional_left2right;

    dnnl_rnn_desc_t fd, bd;
    DN(dnnl_lstm_forward_desc_init(&fd, dnnl_forward_training, dir, &u_x, NULL, NULL, &a_wl, &a_wi, &u_b, &u_yl,
                                   &u_it, &u_it, 0));
    dnnl_primitive_desc_t fpd, bpd;
    DN(dnnl_primitive_desc_create(&fpd, &fd, NULL, f->eng, NULL));
    DN(dnnl_lstm_backward_desc_init(&bd, dnnl_backward, dir, &u_x, NULL, NULL, &a_wl, &a_wi, &u_b, &u_yl, &u_it,
                                    &u_it, &u_x, NULL, NULL, &a_wl, &a_wi, &u_b, &u_yl, &u_it, &u_it, 0));
    DN(dnnl_primitive_desc_create(&bpd, &bd, NULL, f->eng, fpd));
    DN(dnnl_primitive_create(&f->fwd, fpd));
    DN(dnnl_primitive_create(&f->bwd, bpd));

    size_t nx = (size_t)(N * T * in), nyl = (size_t)(N * T * D * u), nit = (size_t)(D * N * u);
    size_t nwl = (size_t)(D * in * 4 * u), nwi = (size_t)(D * u * 4 * u), nb = (size_t)(D * 4 * u);
    f->x = xmalloc(nx * sizeof(float));
    memcpy(f->x, xdense, nx * sizeof(float));
    f->y_layer = xmalloc(nyl * 4), f->hT = xmalloc(nit * 4), f->cT = xmalloc(nit * 4);
    f->wl = xmalloc(nwl * 4), f->wi = xmalloc(nwi * 4), f->b = xmalloc(nb * 4);
    f->dwl = xmalloc(nwl * 4), f->dwi = xmalloc(nwi * 4), f->db = xmalloc(nb * 4);
    f->dx = xmalloc(nx * 4), f->dhT = xmalloc(nit * 4), f->dcT = xmalloc(nit * 4), f->dyl = xmalloc(nyl * 4);
    /* Keras's kernel [in, 4u] (gates i, f, c, o) is ldigo's (in, 4, u) for one direction, and so on */
    for (int d = 0; d < D; d++) {
        memcpy(f->wl + d * in * 4 * u, c->w[3 * d], (size_t)(in * 4 * u) * 4);
        memcpy(f->wi + d * u * 4 * u, c->w[3 * d + 1], (size_t)(u * 4 * u) * 4);
        memcpy(f->b + d * 4 * u, c->w[3 * d + 2], (size_t)(4 * u) * 4);
    }
    /* the output gradient: the non-sequence output is each direction's final h (dst_iter) */
    for (int64_t n = 0; n < N; n++)
        for (int d = 0; d < D; d++) memcpy(f->dhT + (d * N + n) * u, c->dy + n * D * u + d * u, (size_t)u * 4);

    arg_setup(f, &f->a_wl, &u_wl, f->wl, dnnl_primitive_desc_query_md(fpd, dnnl_query_weights_md, 0), 0, NULL);
    arg_setup(f, &f->a_wi, &u_wi, f->wi, dnnl_primitive_desc_query_md(fpd, dnnl_query_weights_md, 1), 0, NULL);
    arg_setup(f, &f->bw_wl, &u_wl, f->wl, dnnl_primitive_desc_query_md(bpd, dnnl_query_weights_md, 0), 0, &f->a_wl);
    arg_setup(f, &f->bw_wi, &u_wi, f->wi, dnnl_primitive_desc_query_md(bpd, dnnl_query_weights_md, 1), 0, &f->a_wi);
    arg_setup(f, &f->a_dwl, &u_wl, f->dwl, dnnl_primitive_desc_query_md(bpd, dnnl_query_diff_weights_md, 0), 1, NULL);
    arg_setup(f, &f->a_dwi, &u_wi, f->dwi, dnnl_primitive_desc_query_md(bpd, dnnl_query_diff_weights_md, 1), 1, NULL);
    f->m_x = mem(f, &u_x, f->x), f->m_yl = mem(f, &u_yl, f->y_layer);
    f->m_hT = mem(f, &u_it, f->hT), f->m_cT = mem(f, &u_it, f->cT), f->m_b = mem(f, &u_b, f->b);
    f->m_dx = mem(f, &u_x, f->dx), f->m_dyl = mem(f, &u_yl, f->dyl), f->m_dhT = mem(f, &u_it, f->dhT);
    f->m_dcT = mem(f, &u_it, f->dcT); /* the final cell state is not an output: zero gradient */
    f->m_db = mem(f, &u_b, f->db);
    f->m_ws = mem(f, dnnl_primitive_desc_query_md(fpd, dnnl_query_workspace_md, 0), NULL);
    DN(dnnl_primitive_desc_destroy(fpd));
    DN(dnnl_primitive_desc_destroy(bpd));
}

static void zero_mem(dnnl_memory_t m) {
    const dnnl_memory_desc_t *md;
    void *h;
    DN(dnnl_memory_get_memory_desc(m, &md));
    DN(dnnl_memory_get_data_handle(m, &h));
    memset(h, 0, dnnl_memory_desc_get_size(md));
}

static void fused_pass(fused *f) {
    omp_set_num_threads(f->threads);
    arg_run(f, &f->a_wl, 0);
    arg_run(f, &f->a_wi, 0);
    dnnl_exec_arg_t fa[] = {{DNNL_ARG_SRC_LAYER, f->m_x},           {DNNL_ARG_WEIGHTS_LAYER, f->a_wl.prim},
                            {DNNL_ARG_WEIGHTS_ITER, f->a_wi.prim},  {DNNL_ARG_BIAS, f->m_b},
                            {DNNL_ARG_DST_LAYER, f->m_yl},          {DNNL_ARG_DST_ITER, f->m_hT},
                            {DNNL_ARG_DST_ITER_C, f->m_cT},         {DNNL_ARG_WORKSPACE, f->m_ws}};
    DN(dnnl_primitive_execute(f->fwd, f->strm, (int)(sizeof fa / sizeof fa[0]), fa));
    arg_run(f, &f->bw_wl, 0);
    arg_run(f, &f->bw_wi, 0);
    dnnl_exec_arg_t ba[] = {{DNNL_ARG_SRC_LAYER, f->m_x},
                            {DNNL_ARG_WEIGHTS_LAYER, f->bw_wl.prim},
                            {DNNL_ARG_WEIGHTS_ITER, f->bw_wi.prim},
                            {DNNL_ARG_BIAS, f->m_b},
                            {DNNL_ARG_DST_LAYER, f->m_yl},
                            {DNNL_ARG_DST_ITER, f->m_hT},
                            {DNNL_ARG_DST_ITER_C, f->m_cT},
                            {DNNL_ARG_WORKSPACE, f->m_ws},
                            {DNNL_ARG_DIFF_DST_LAYER, f->m_dyl},
                            {DNNL_ARG_DIFF_DST_ITER, f->m_dhT},
                            {DNNL_ARG_DIFF_DST_ITER_C, f->m_dcT},
                            {DNNL_ARG_DIFF_SRC_LAYER, f->m_dx},
                            {DNNL_ARG_DIFF_WEIGHTS_LAYER, f->a_dwl.prim},
                            {DNNL_ARG_DIFF_WEIGHTS_ITER, f->a_dwi.prim},
                            {DNNL_ARG_DIFF_BIAS, f->m_db}};
    /* the backward accumulates into the weight gradients: they start at zero each pass, as a backend's do */
    zero_mem(f->m_db);
    zero_mem(f->a_dwl.prim);
    zero_mem(f->a_dwi.prim);
    DN(dnnl_primitive_execute(f->bwd, f->strm, (int)(sizeof ba / sizeof ba[0]), ba));
    arg_run(f, &f->a_dwl, 1);
    arg_run(f, &f->a_dwi, 1);
    DN(dnnl_stream_wait(f->strm));
}

static void arg_free(arg *a) {
    if (a->alias) return;
    if (a->reorder) dnnl_primitive_destroy(a->reorder);
    if (a->prim != a->user) dnnl_memory_destroy(a->prim);
    dnnl_memory_destroy(a->user);
}

static void fused_close(fused *f) {
    arg *as[] = {&f->a_wl, &f->a_wi, &f->a_dwl, &f->a_dwi, &f->bw_wl, &f->bw_wi};
    for (size_t i = 0; i < sizeof as / sizeof as[0]; i++) arg_free(as[i]);
    dnnl_memory_t ms[] = {f->m_x, f->m_yl, f->m_hT, f->m_cT, f->m_b, f->m_ws, f->m_dx, f->m_dyl, f->m_dhT, f->m_dcT, f->m_db};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) dnnl_memory_destroy(ms[i]);
    dnnl_primitive_destroy(f->fwd);
    dnnl_primitive_destroy(f->bwd);
    dnnl_stream_destroy(f->strm);
    dnnl_engine_destroy(f->eng);
    float *bufs[] = {f->x, f->y_layer, f->hT, f->cT, f->wl, f->wi, f->b, f->dwl, f->dwi, f->db, f->dx, f->dhT, f->dcT, f->dyl};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
}

// --- agreement -------------------------------------------------------------------------------------------
/* max |a - b| / (1 + |b|) over n values */
static double max_rel(const float *a, const float *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]) / (1.0 + fabs((double)b[i]));
        m = d > m ? d : m;
    }
    return m;
}

/* The two agree on the output, the input gradient and every weight gradient (float32 sums in different
 * orders: 1e-4 relative). Returns 0 when they do. */
static int compare(const shape *s, cells *c, fused *f) {
    int64_t N = s->N, u = s->u, D = s->dirs;
    cells_pass(c);
    fused_pass(f);
    float *y = xmalloc((size_t)(N * D * u) * 4);
    for (int64_t n = 0; n < N; n++)
        for (int d = 0; d < D; d++) memcpy(y + n * D * u + d * u, f->hT + (d * N + n) * u, (size_t)u * 4);
    double e_y = max_rel(y, c->y, N * D * u), e_dx = 0, e_g[3] = {0, 0, 0};
    if (c->dx) e_dx = max_rel(f->dx, c->dx, N * s->T * s->in);
    const float *fg[3] = {f->dwl, f->dwi, f->db};
    int64_t per[3] = {s->in * 4 * u, u * 4 * u, 4 * u};
    for (int k = 0; k < 3; k++)
        for (int d = 0; d < D; d++) {
            float *g = xmalloc((size_t)per[k] * 4);
            int64_t dims[2] = {k == 2 ? 4 * u : (k ? u : s->in), 4 * u};
            kh_tensor tg = kb_tensor(KH_F32, KH_LAYOUT_ANY, k == 2 ? 1 : 2, k == 2 ? dims + 0 : dims, g);
            if (c->B->api->get_grad(c->m, 0, 3 * d + k, &tg) != KH_OK) {
                fprintf(stderr, "lstm_onednn_bench: get_grad: %s\n", c->B->api->last_error(c->B->s));
                exit(1);
            }
            double e = max_rel(fg[k] + d * per[k], g, per[k]);
            e_g[k] = e > e_g[k] ? e : e_g[k];
            free(g);
        }
    free(y);
    printf("%s: agreement (max |oneDNN - cells| / (1 + |cells|)): output %.2e, input gradient %s%.2e, kernel "
           "gradient %.2e, recurrent %.2e, bias %.2e\n",
           s->name, e_y, c->dx ? "" : "(one-hot: none) ", e_dx, e_g[0], e_g[1], e_g[2]);
    double worst = e_y > e_dx ? e_y : e_dx;
    for (int k = 0; k < 3; k++) worst = e_g[k] > worst ? e_g[k] : worst;
    return worst <= 1e-4 ? 0 : 1;
}

// --- timing ----------------------------------------------------------------------------------------------
static double window(void (*pass)(void *), void *ctx, int steps) {
    double t0 = now();
    for (int i = 0; i < steps; i++) pass(ctx);
    return (now() - t0) / steps;
}
static void pass_cells(void *c) { cells_pass(c); }
static void pass_fused(void *f) { fused_pass(f); }

static int bench(kb_backend *B, const shape *s, int threads, int rounds, int steps) {
    kh_rng r;
    kh_rng_seed(&r, 11);
    int64_t nx = s->N * s->T * s->in, ny = s->N * s->dirs * s->u;
    float *xf = xmalloc((size_t)nx * 4), *dy = xmalloc((size_t)ny * 4);
    int32_t *xi = xmalloc((size_t)(s->N * s->T) * 4);
    if (s->onehot) { /* the same characters, and their one-hot matrix for oneDNN */
        for (int64_t i = 0; i < s->N * s->T; i++) {
            xi[i] = (int32_t)kh_rng_below(&r, (uint64_t)s->in);
            xf[i * s->in + xi[i]] = 1.0f;
        }
    } else {
        kb_fill_uniform(xf, nx, -0.05f, 0.05f, &r); /* Embedding's initial range */
    }
    kb_fill_uniform(dy, ny, -0.1f, 0.1f, &r);
    cells c;
    cells_open(&c, B, s, xf, xi, dy);
    fused f;
    fused_open(&f, s, xf, &c, threads);
    int bad = compare(s, &c, &f);
    double *tc = xmalloc((size_t)rounds * sizeof(double)), *tf = xmalloc((size_t)rounds * sizeof(double));
    for (int k = 0; k < rounds; k++) {
        if (k % 2 == 0) {
            cells_pass(&c), tc[k] = window(pass_cells, &c, steps);
            fused_pass(&f), tf[k] = window(pass_fused, &f, steps);
        } else {
            fused_pass(&f), tf[k] = window(pass_fused, &f, steps);
            cells_pass(&c), tc[k] = window(pass_cells, &c, steps);
        }
        printf("  round %2d: cells %.3f ms, oneDNN %.3f ms\n", k + 1, 1e3 * tc[k], 1e3 * tf[k]);
        fflush(stdout);
    }
    double ratio;
    kh_ci ci;
    kh_stats_ratio_paired(tf, tc, rounds, KH_STATS_RESAMPLES, KH_STATS_SEED, KH_STATS_LEVEL, &ratio, &ci);
    printf("%s: cells %.3f ms, oneDNN %.3f ms a pass (medians of %d rounds x %d passes); oneDNN / cells %.3fx "
           "[%.3f, %.3f] (95 %% bootstrap CI paired by round)%s\n",
           s->name, 1e3 * kh_stats_median(tc, rounds), 1e3 * kh_stats_median(tf, rounds), rounds, steps, ratio,
           ci.lo, ci.hi, bad ? "; NOT COMPARABLE: the two disagree (above)" : "");
    free(tc), free(tf);
    fused_close(&f);
    cells_close(&c);
    free(xf), free(dy), free(xi);
    return bad;
}

int main(int argc, char **argv) {
    int threads = 2, rounds = 10, steps = 20, bad = 0, ran = 0;
    const char *only[8];
    int n_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (argv[i][0] != '-' && n_only < 8) only[n_only++] = argv[i];
        else {
            fprintf(stderr, "usage: lstm_onednn_bench [--threads N] [--rounds R] [--steps S] [model ...]\n");
            return 2;
        }
    }
    if (threads < 1 || rounds < 2 || steps < 1) {
        fprintf(stderr, "lstm_onednn_bench: --threads >= 1, --rounds >= 2, --steps >= 1\n");
        return 2;
    }
    kb_backend B;
    kb_load(&B, threads);
    char env[512] = "";
    B.api->environment(B.s, env, sizeof env);
    const dnnl_version_t *v = dnnl_version();
    printf("cntk %s; oneDNN %d.%d.%d (%s); %d threads\n", env, v->major, v->minor, v->patch, v->cpu_runtime ==
           DNNL_RUNTIME_OMP ? "OpenMP" : "other runtime", threads);
    for (size_t k = 0; k < sizeof SHAPES / sizeof SHAPES[0]; k++) {
        int want = n_only == 0;
        for (int i = 0; i < n_only; i++) want |= !strcmp(only[i], SHAPES[k].name);
        if (!want) continue;
        bad |= bench(&B, &SHAPES[k], threads, rounds, steps);
        ran++;
    }
    kb_unload(&B);
    if (!ran) fprintf(stderr, "lstm_onednn_bench: no such model\n");
    return bad || !ran;
}
