/* tests/backend/cuda_host/test_tf_cuda_geom.c — the cuDNN geometry of convolution and pooling nodes
 * (tf_cu_geom_of), on hand-built graphs: TensorFlow's 'same' padding as explicit pads (total = max((o-1)s + k
 * - i, 0), top/left = total / 2, the rest bottom/right), the asymmetric cases detected (an even kernel, a
 * strided window over an odd size), 'valid' without padding, the gradients' geometry equal to their forward
 * op's, strided convolutions (the stride reaches cuDNN's descriptor and the gradients), the batch taken from the
 * call, and other ops refused. */
#include <string.h>

#include "testutil.h"
#include "tf_cuda_plan.h"

typedef struct built {
    kh_graph g;
    int32_t x, w, y, dx, dw, pool, pgrad;
} built;

/* x (2, H, W, C); w (KH, KW, C, F); conv, its two gradients, a pool of (ph, pw) / (sh, sw) on x, its gradient */
static int build_strided(built *b, int H, int W, int C, int KH, int KW, int F, int conv_pad, int csh, int csw, int ph,
                         int pw, int sh, int sw, int pool_pad) {
    memset(b, 0, sizeof *b);
    if (kh_graph_init(&b->g, 2) != KH_OK) return -1;
    kh_gattr a = kh_gattr_none();
    int64_t xd[4] = {2, H, W, C}, wd[4] = {KH, KW, C, F};
    a.input_id = KH_GIN_X;
    b->x = kh_graph_add(&b->g, KH_GOP_INPUT, NULL, 0, &a, KH_F32, 4, xd, KH_GVAL_BATCHED);
    a = kh_gattr_none();
    a.layer = 0, a.slot = 0;
    b->w = kh_graph_add(&b->g, KH_GOP_VARIABLE, NULL, 0, &a, KH_F32, 4, wd, 0);
    a = kh_gattr_none();
    a.padding = conv_pad;
    a.strides[0] = csh, a.strides[1] = csw;
    int32_t in[2] = {b->x, b->w};
    b->y = kh_graph_add(&b->g, KH_GOP_CONV2D, in, 2, &a, KH_F32, 0, NULL, 0);
    if (b->y < 0) return -1;
    a.shape_of = b->x;
    in[0] = b->w, in[1] = b->y;
    b->dx = kh_graph_add(&b->g, KH_GOP_CONV2D_BACKPROP_INPUT, in, 2, &a, KH_F32, 0, NULL, 0);
    a.shape_of = b->w;
    in[0] = b->x, in[1] = b->y;
    b->dw = kh_graph_add(&b->g, KH_GOP_CONV2D_BACKPROP_FILTER, in, 2, &a, KH_F32, 0, NULL, 0);
    a = kh_gattr_none();
    a.window[0] = ph, a.window[1] = pw, a.strides[0] = sh, a.strides[1] = sw, a.padding = pool_pad;
    b->pool = kh_graph_add(&b->g, KH_GOP_MAXPOOL, &b->x, 1, &a, KH_F32, 0, NULL, 0);
    if (b->pool < 0) return -1;
    a.shape_of = b->x;
    in[0] = b->x, in[1] = b->pool;
    b->pgrad = kh_graph_add(&b->g, KH_GOP_MAXPOOL_GRAD, in, 2, &a, KH_F32, 0, NULL, 0);
    return b->dx >= 0 && b->dw >= 0 && b->pgrad >= 0 ? 0 : -1;
}

/* a convolution of stride 1 (its strides unset, as a spec without strides lowers) */
static int build(built *b, int H, int W, int C, int KH, int KW, int F, int conv_pad, int ph, int pw, int sh, int sw,
                 int pool_pad) {
    return build_strided(b, H, W, C, KH, KW, F, conv_pad, 0, 0, ph, pw, sh, sw, pool_pad);
}

static void expect(const char *what, const tf_cu_geom *q, int OH, int OW, int pt, int pb, int pl, int pr, int asym) {
    CHECK(q->OH == OH && q->OW == OW, "%s: output %dx%d, want %dx%d", what, q->OH, q->OW, OH, OW);
    CHECK(q->pad_top == pt && q->pad_bottom == pb && q->pad_left == pl && q->pad_right == pr,
          "%s: pads t%d b%d l%d r%d, want t%d b%d l%d r%d", what, q->pad_top, q->pad_bottom, q->pad_left, q->pad_right,
          pt, pb, pl, pr);
    CHECK(q->asym == asym, "%s: asym %d, want %d", what, q->asym, asym);
}

/* the three convolution nodes agree */
static void conv_case_s(const char *what, built *b, int OH, int OW, int pt, int pb, int pl, int pr, int asym, int sh,
                        int sw) {
    tf_cu_geom f, d, w;
    CHECK(tf_cu_geom_of(&b->g, b->y, 2, &f) == KH_OK, "%s: conv2d geometry", what);
    CHECK(tf_cu_geom_of(&b->g, b->dx, 2, &d) == KH_OK, "%s: backprop-input geometry", what);
    CHECK(tf_cu_geom_of(&b->g, b->dw, 2, &w) == KH_OK, "%s: backprop-filter geometry", what);
    expect(what, &f, OH, OW, pt, pb, pl, pr, asym);
    CHECK(!memcmp(&f, &d, sizeof f) && !memcmp(&f, &w, sizeof f), "%s: the gradients share the forward geometry", what);
    CHECK(f.N == 2 && f.SH == sh && f.SW == sw, "%s: batch and stride (%d, %d), want (%d, %d)", what, f.SH, f.SW, sh,
          sw);
}

static void conv_case(const char *what, built *b, int OH, int OW, int pt, int pb, int pl, int pr, int asym) {
    conv_case_s(what, b, OH, OW, pt, pb, pl, pr, asym, 1, 1);
}

static void pool_case(const char *what, built *b, int OH, int OW, int pt, int pb, int pl, int pr, int asym) {
    tf_cu_geom p, q;
    CHECK(tf_cu_geom_of(&b->g, b->pool, 1, &p) == KH_OK, "%s: maxpool geometry", what);
    CHECK(tf_cu_geom_of(&b->g, b->pgrad, 1, &q) == KH_OK, "%s: maxpool-grad geometry", what);
    expect(what, &p, OH, OW, pt, pb, pl, pr, asym);
    CHECK(!memcmp(&p, &q, sizeof p) && p.N == 1 && p.F == p.C, "%s: the gradient shares it; batch from the call", what);
}

int main(void) {
    built b;
    /* 3x3 'same' on 32x32: total 2, one on each side (cifar10_cnn) */
    CHECK(build(&b, 32, 32, 3, 3, 3, 8, KH_PAD_SAME, 2, 2, 2, 2, KH_PAD_VALID) == 0, "graph 1");
    conv_case("3x3 same", &b, 32, 32, 1, 1, 1, 1, 0);
    pool_case("2x2/2 valid on 32", &b, 16, 16, 0, 0, 0, 0, 0);
    kh_graph_release(&b.g);
    /* 3x3 'valid' on 28x28 (mnist_cnn) */
    CHECK(build(&b, 28, 28, 1, 3, 3, 4, KH_PAD_VALID, 2, 2, 2, 2, KH_PAD_SAME) == 0, "graph 2");
    conv_case("3x3 valid", &b, 26, 26, 0, 0, 0, 0, 0);
    pool_case("2x2/2 same on 28", &b, 14, 14, 0, 0, 0, 0, 0);
    kh_graph_release(&b.g);
    /* even kernels under 'same': TensorFlow pads the extra row/column at the bottom/right */
    CHECK(build(&b, 5, 6, 2, 2, 4, 3, KH_PAD_SAME, 2, 2, 2, 2, KH_PAD_SAME) == 0, "graph 3");
    conv_case("2x4 same", &b, 5, 6, 0, 1, 1, 2, 1);
    /* 2x2/2 'same' pooling on 5x6: out 3x3, rows total 1 (bottom), columns total 0 */
    pool_case("2x2/2 same on 5x6", &b, 3, 3, 0, 1, 0, 0, 1);
    /* other ops have no such geometry */
    tf_cu_geom q;
    CHECK(tf_cu_geom_of(&b.g, b.x, 2, &q) == KH_ERR_INVALID, "an input node is refused");
    CHECK(tf_cu_geom_of(&b.g, 99, 2, &q) == KH_ERR_INVALID, "a node out of range is refused");
    kh_graph_release(&b.g);
    /* 3x2 'same' with a 3x3 pool of stride 1 'same' (the small cnn of the parity tests) */
    CHECK(build(&b, 7, 6, 2, 3, 2, 4, KH_PAD_SAME, 3, 3, 1, 1, KH_PAD_SAME) == 0, "graph 4");
    conv_case("3x2 same", &b, 7, 6, 1, 1, 0, 1, 1);
    pool_case("3x3/1 same", &b, 7, 6, 1, 1, 1, 1, 0);
    kh_graph_release(&b.g);
    /* strided convolutions: 3x3/2 'same' on 32x32 -> 16x16, total = 15*2 + 3 - 32 = 1 (bottom/right only) */
    CHECK(build_strided(&b, 32, 32, 3, 3, 3, 8, KH_PAD_SAME, 2, 2, 2, 2, 2, 2, KH_PAD_VALID) == 0, "graph 5");
    conv_case_s("3x3/2 same on 32", &b, 16, 16, 0, 1, 0, 1, 1, 2, 2);
    kh_graph_release(&b.g);
    /* 3x3/(2,3) 'valid' on 9x10 -> 4x3; 5x5/2 'same' on 7x7 -> 4x4, total 6 + 5 - 7 = 4, symmetric */
    CHECK(build_strided(&b, 9, 10, 2, 3, 3, 4, KH_PAD_VALID, 2, 3, 2, 2, 2, 2, KH_PAD_VALID) == 0, "graph 6");
    conv_case_s("3x3/(2,3) valid on 9x10", &b, 4, 3, 0, 0, 0, 0, 0, 2, 3);
    kh_graph_release(&b.g);
    CHECK(build_strided(&b, 7, 7, 1, 5, 5, 2, KH_PAD_SAME, 2, 2, 2, 2, 2, 2, KH_PAD_VALID) == 0, "graph 7");
    conv_case_s("5x5/2 same on 7", &b, 4, 4, 2, 2, 2, 2, 0, 2, 2);
    kh_graph_release(&b.g);
    return kh_test_finish("test_tf_cuda_geom");
}
