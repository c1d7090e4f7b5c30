/* tests/cntk/test_onednn_pool_ties.c — the tie rule cntk's oneDNN max pooling relies on: oneDNN's backward
 * sends a window's gradient to the element its forward recorded in the workspace, and for a window whose
 * values tie that must be the first in row-major order, the reference kit's rule (khost/kit/ref.h), or a
 * seeded cntk run would train differently from the kit wherever a pooled window ties (after a ReLU, a window
 * of zeros ties whenever the gradient is not masked). Checked in the plain layout (nchw) and in the blocked one
 * the AVX-512 convolutions hand over (nChw16c), for 2x2 / stride 2 windows and overlapping 3x3 / stride 2 ones,
 * on inputs made of runs of equal values, against the scalar first-maximum loop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "khost/kit/ref.h"
#include "testutil.h"

#define TRY(call)                                                                                                  \
    do {                                                                                                           \
        dnnl_status_t st_ = (call);                                                                                \
        CHECK(st_ == dnnl_success, "%s: oneDNN status %d", #call, (int)st_);                                        \
        if (st_ != dnnl_success) return;                                                                           \
    } while (0)

enum { N = 2, C = 16, H = 7, W = 7 };

/* the kit's rule (kh_ref_maxpool2d_backward): NCHW data is NHWC with N*C samples of one channel */
static void ref_grad(const float *x, int K, int S, int OH, int OW, const float *dy, float *dx) {
    static double xd[N * C * H * W], dyd[N * C * H * W], dxd[N * C * H * W];
    kh_conv2d_dims d = {.B = N * C, .H = H, .W = W, .C = 1, .KH = K, .KW = K, .OC = 1, .SH = S, .SW = S,
                        .OH = OH, .OW = OW};
    for (int i = 0; i < N * C * H * W; i++) xd[i] = x[i];
    for (int i = 0; i < N * C * OH * OW; i++) dyd[i] = dy[i];
    kh_ref_maxpool2d_backward(dxd, dyd, xd, &d);
    for (int i = 0; i < N * C * H * W; i++) dx[i] = (float)dxd[i];
}

static void reorder(dnnl_engine_t eng, dnnl_stream_t strm, dnnl_memory_t from, dnnl_memory_t to) {
    const dnnl_memory_desc_t *a, *b;
    TRY(dnnl_memory_get_memory_desc(from, &a));
    TRY(dnnl_memory_get_memory_desc(to, &b));
    dnnl_primitive_desc_t pd;
    TRY(dnnl_reorder_primitive_desc_create(&pd, a, eng, b, eng, NULL));
    dnnl_primitive_t p;
    TRY(dnnl_primitive_create(&p, pd));
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    TRY(dnnl_primitive_execute(p, strm, 2, args));
    TRY(dnnl_stream_wait(strm));
    dnnl_primitive_destroy(p);
    dnnl_primitive_desc_destroy(pd);
}

static void check(dnnl_engine_t eng, dnnl_stream_t strm, dnnl_format_tag_t tag, const char *tag_name, int K, int S) {
    int OH = (H - K) / S + 1, OW = (W - K) / S + 1;
    static float x[N * C * H * W], dy[N * C * H * W], dx[N * C * H * W], want[N * C * H * W];
    /* runs of three equal values along rows, shifted per row and channel: every window holds ties, some of
     * them at its maximum, and where the maximum sits differs from window to window */
    for (int s = 0; s < N * C; s++)
        for (int h = 0; h < H; h++)
            for (int w = 0; w < W; w++) x[(s * H + h) * W + w] = (float)(((w + h + s) / 3) % 4);
    for (int i = 0; i < N * C * OH * OW; i++) dy[i] = 1.0f + (float)(i % 7);
    ref_grad(x, K, S, OH, OW, dy, want);

    dnnl_dims_t in_d = {N, C, H, W}, out_d = {N, C, OH, OW}, strides = {S, S}, kernel = {K, K}, pad = {0, 0};
    dnnl_memory_desc_t u_in, u_out, in, out;
    TRY(dnnl_memory_desc_init_by_tag(&u_in, 4, in_d, dnnl_f32, dnnl_nchw));
    TRY(dnnl_memory_desc_init_by_tag(&u_out, 4, out_d, dnnl_f32, dnnl_nchw));
    TRY(dnnl_memory_desc_init_by_tag(&in, 4, in_d, dnnl_f32, tag));
    TRY(dnnl_memory_desc_init_by_tag(&out, 4, out_d, dnnl_f32, tag));
    dnnl_pooling_desc_t fd, bd;
    TRY(dnnl_pooling_forward_desc_init(&fd, dnnl_forward_training, dnnl_pooling_max, &in, &out, strides, kernel, pad,
                                       pad));
    TRY(dnnl_pooling_backward_desc_init(&bd, dnnl_pooling_max, &in, &out, strides, kernel, pad, pad));
    dnnl_primitive_desc_t fpd, bpd;
    TRY(dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL));
    TRY(dnnl_primitive_desc_create(&bpd, &bd, NULL, eng, fpd));
    const dnnl_memory_desc_t *ws_md = dnnl_primitive_desc_query_md(fpd, dnnl_query_workspace_md, 0);
    CHECK(ws_md != NULL, "%s: max pooling forward has no workspace", tag_name);
    if (!ws_md) return;
    dnnl_memory_t ux, udy, udx, mx, my, mdy, mdx, ws;
    TRY(dnnl_memory_create(&ux, &u_in, eng, x));
    TRY(dnnl_memory_create(&udy, &u_out, eng, dy));
    TRY(dnnl_memory_create(&udx, &u_in, eng, dx));
    TRY(dnnl_memory_create(&mx, &in, eng, DNNL_MEMORY_ALLOCATE));
    TRY(dnnl_memory_create(&my, &out, eng, DNNL_MEMORY_ALLOCATE));
    TRY(dnnl_memory_create(&mdy, &out, eng, DNNL_MEMORY_ALLOCATE));
    TRY(dnnl_memory_create(&mdx, &in, eng, DNNL_MEMORY_ALLOCATE));
    TRY(dnnl_memory_create(&ws, ws_md, eng, DNNL_MEMORY_ALLOCATE));
    reorder(eng, strm, ux, mx);
    reorder(eng, strm, udy, mdy);
    dnnl_primitive_t fwd, bwd;
    TRY(dnnl_primitive_create(&fwd, fpd));
    TRY(dnnl_primitive_create(&bwd, bpd));
    dnnl_exec_arg_t fa[] = {{DNNL_ARG_SRC, mx}, {DNNL_ARG_DST, my}, {DNNL_ARG_WORKSPACE, ws}};
    TRY(dnnl_primitive_execute(fwd, strm, 3, fa));
    dnnl_exec_arg_t ba[] = {{DNNL_ARG_DIFF_DST, mdy}, {DNNL_ARG_WORKSPACE, ws}, {DNNL_ARG_DIFF_SRC, mdx}};
    TRY(dnnl_primitive_execute(bwd, strm, 3, ba));
    TRY(dnnl_stream_wait(strm));
    reorder(eng, strm, mdx, udx);
    int bad = -1;
    for (int i = 0; i < N * C * H * W && bad < 0; i++)
        if (dx[i] != want[i]) bad = i;
    CHECK(bad < 0, "%s, %dx%d stride %d: input gradient at element %d is %g, the first maximum's rule gives %g",
          tag_name, K, K, S, bad, bad < 0 ? 0.0 : (double)dx[bad], bad < 0 ? 0.0 : (double)want[bad]);
    dnnl_primitive_destroy(fwd), dnnl_primitive_destroy(bwd);
    dnnl_primitive_desc_destroy(fpd), dnnl_primitive_desc_destroy(bpd);
    dnnl_memory_t all[] = {ux, udy, udx, mx, my, mdy, mdx, ws};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dnnl_memory_destroy(all[i]);
}

int main(void) {
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&strm, eng, dnnl_stream_default_flags) != dnnl_success) {
        fprintf(stderr, "test_onednn_pool_ties: no oneDNN CPU engine\n");
        return 1;
    }
    check(eng, strm, dnnl_nchw, "nchw", 2, 2);
    check(eng, strm, dnnl_nChw16c, "nChw16c", 2, 2);
    check(eng, strm, dnnl_nchw, "nchw", 3, 2);
    check(eng, strm, dnnl_nChw16c, "nChw16c", 3, 2);
    dnnl_stream_destroy(strm);
    dnnl_engine_destroy(eng);
    return kh_test_finish("test_onednn_pool_ties");
}
