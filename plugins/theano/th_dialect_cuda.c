/* th_dialect_cuda.c — the CUDA dialect of theano's code generator (th_emit.h): CUDA C for NVRTC and the launch
 * plan the host runs it by (th_cuda_plan.h). A kernel is an `extern "C" __global__` function k<node>_<op>[_<part>]
 * (unique within a function's module) with a plan entry listing its grid, block and arguments; its element loop
 * a grid-stride loop (TH_CU_LOOP). The walk writes element-wise programs, updates and GEMM operands through the
 * hooks; this dialect's own ops are rows (softmax), losses and their gradients, bias gradients, pooling, copies
 * along an axis, means, gathers (GatherGrad with atomicAdd), the metric reductions (into the device metric
 * doubles) and the per-step gate loops of LSTM scans as kernels; MatMul a cuBLAS SGEMM the plan describes,
 * Conv2D and its gradients cuDNN NHWC calls (with generated filter transposes and, for TensorFlow's asymmetric
 * 'same', generated pad/crop kernels around them), Zeros a memset. A scan is a loop entry: per step a GEMM
 * h_{t-1} U (dZ U^T backward) and one fused gate kernel. Every size in the text is a constant except n, the
 * batch rows, a kernel argument. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "th_emit.h"

#define SCRATCH_ALIGN 256

#define N(c, i) th_em_node(c, i)
#define IN(c, i) kh_graph_inputs((c)->g, i)
#define SZ(x, buf) th_em_size(c, (x), buf, sizeof buf) /* a size as text, into a local buffer */

static th_cu_ref value(th_emitter *c, int32_t i) {
    th_cu_ref r;
    if (th_cu_value(c->env, i, &r) != KH_OK) th_em_fail(c, KH_ERR_INTERNAL, "node %d has no storage", i);
    return r;
}

/* claim scratch for the current node; its offset */
static th_cu_ref scratch(th_emitter *c, int64_t bytes) {
    th_cu_ref r = {TH_CU_SCRATCH, 0, c->scratch, 0};
    c->scratch += (bytes + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
    if (c->scratch > c->plan->scratch_bytes) c->plan->scratch_bytes = c->scratch;
    return r;
}

// --- the plan -------------------------------------------------------------------------------------------------
static th_cu_launch *entry(th_emitter *c, uint32_t kind) {
    th_cu_plan *p = c->plan;
    if (p->n == p->cap) {
        int32_t nc = p->cap ? 2 * p->cap : 64;
        th_cu_launch *v = realloc(p->v, (size_t)nc * sizeof *v);
        if (!v) {
            th_em_fail(c, KH_ERR_NOMEM, "out of memory for the launch plan");
            return NULL;
        }
        p->v = v;
        p->cap = nc;
    }
    th_cu_launch *e = &p->v[p->n++];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->node = c->node;
    e->part = c->part;
    return e;
}

static void gemm(th_emitter *c, int ta, int tb, th_cu_affine M, th_cu_affine Nn, th_cu_affine K, th_cu_ref A, int64_t lda,
                 th_cu_ref B, int64_t ldb, th_cu_ref C, int64_t ldc, float beta, int skip_t0) {
    th_cu_launch *e = entry(c, TH_CUL_GEMM);
    if (!e) return;
    e->gemm = (th_cu_gemm){ta, tb, M, Nn, K, lda, ldb, ldc, beta, A, B, C};
    e->skip_t0 = skip_t0;
    c->plan->n_gemm++;
}

static void memset0(th_emitter *c, th_cu_ref dst, th_cu_affine bytes) {
    th_cu_launch *e = entry(c, TH_CUL_MEMSET);
    if (!e) return;
    e->dst = dst;
    e->bytes = bytes;
}

static void loop(th_emitter *c, int32_t steps, int reverse, int32_t body) {
    th_cu_launch *e = entry(c, TH_CUL_LOOP);
    if (!e) return;
    e->steps = steps;
    e->reverse = reverse;
    e->body = body;
}

// --- kernels --------------------------------------------------------------------------------------------------
/* Open kernel k<node>_<op>[_suffix] for `threads` threads (grid-stride), or a fixed grid. */
static void kopen(th_emitter *c, const char *suffix, th_cu_affine threads, int32_t block, int32_t fixed_grid) {
    th_cu_launch *e = entry(c, TH_CUL_KERNEL);
    if (!e) return;
    snprintf(e->name, sizeof e->name, "k%d_%s%s%s", c->node, kh_gop_name(N(c, c->node)->op), suffix ? "_" : "",
             suffix ? suffix : "");
    e->threads = threads;
    e->block = block;
    e->fixed_grid = fixed_grid;
    c->kernel = c->plan->n - 1;
    c->sig.len = 0;
    if (c->sig.s) c->sig.s[0] = 0;
    c->body.len = 0;
    if (c->body.s) c->body.s[0] = 0;
    c->code = &c->body;
    c->plan->n_kernels++;
}

static th_cu_launch *kcur(th_emitter *c) { return c->kernel >= 0 ? &c->plan->v[c->kernel] : NULL; }

static void kdecl(th_emitter *c, const char *decl) { th_sb_printf(&c->sig, "%s%s", c->sig.len ? ", " : "", decl); }

/* a pointer parameter: decl is its C declaration ("const float *x") */
static void kptr(th_emitter *c, th_cu_ref r, const char *decl) {
    th_cu_launch *e = kcur(c);
    if (!e) return;
    if (e->n_args == TH_CU_MAX_ARGS) {
        th_em_fail(c, KH_ERR_UNSUPPORTED, "more than %d kernel arguments", TH_CU_MAX_ARGS);
        return;
    }
    e->args[e->n_args++] = (th_cu_arg){TH_CUARG_PTR, r};
    kdecl(c, decl);
}

static void kscalar(th_emitter *c, uint32_t kind) {
    static const char *const decls[TH_CUARG_KIND_END] = {
        [TH_CUARG_N] = "int64_t n", [TH_CUARG_LR] = "float lr", [TH_CUARG_SEED] = "uint64_t seed",
        [TH_CUARG_COUNTER] = "uint64_t counter", [TH_CUARG_STEP] = "int32_t t"};
    th_cu_launch *e = kcur(c);
    if (!e) return;
    if (e->n_args == TH_CU_MAX_ARGS) {
        th_em_fail(c, KH_ERR_UNSUPPORTED, "more than %d kernel arguments", TH_CU_MAX_ARGS);
        return;
    }
    e->args[e->n_args++] = (th_cu_arg){kind, {TH_CU_NONE, 0, 0, 0}};
    kdecl(c, decls[kind]);
}

/* Write the open kernel into the source. Every kernel takes n last. */
static void kclose(th_emitter *c) {
    th_cu_launch *e = kcur(c);
    c->code = c->out;
    if (!e) return;
    kscalar(c, TH_CUARG_N);
    th_sb_printf(c->out, "extern \"C\" __global__ void __launch_bounds__(%d) %s(%s) {\n%s}\n\n", e->block, e->name,
                 c->sig.s ? c->sig.s : "", c->body.s ? c->body.s : "");
    c->kernel = -1;
}

/* the common shape: a grid-stride loop over `count` elements, the body given */
static void kloop_open(th_emitter *c, const char *suffix, th_cu_affine count) {
    kopen(c, suffix, count, TH_CU_BLOCK_HOST, 0);
}

// --- rows and reductions ------------------------------------------------------------------------------------------
static void emit_bias_grad(th_emitter *c) {
    const int32_t *in = IN(c, c->node);
    int64_t C = N(c, c->node)->dims[0];
    char r[64];
    /* one block per column (grid-stride over columns): its 256 threads stride over the rows and reduce through
     * warp shuffles and shared memory, so a thread adds R / 256 values, not all R (mnist_cnn: 86,528 rows) */
    kopen(c, NULL, th_aff(0, C * TH_CU_BLOCK_HOST), TH_CU_BLOCK_HOST, 0);
    kptr(c, value(c, in[0]), "const float *dy");
    kptr(c, value(c, c->node), "float *db");
    th_em_put(c, "    const int64_t R = %s;\n    __shared__ float part[32];\n"
                 "    for (int64_t j = blockIdx.x; j < %lldLL; j += gridDim.x) {\n        float s = 0.0f;\n"
                 "        for (int64_t r = threadIdx.x; r < R; r += blockDim.x) s += dy[r * %lldLL + j];\n"
                 "        s = th_warp_sum(s);\n        if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;\n"
                 "        __syncthreads();\n        if (threadIdx.x < 32) {\n"
                 "            s = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.0f;\n            s = th_warp_sum(s);\n"
                 "            if (threadIdx.x == 0) db[j] = s;\n        }\n        __syncthreads();\n    }\n",
              SZ(th_em_rows(c, in[0]), r), (long long)C, (long long)C);
    kclose(c);
}

static void emit_softmax(th_emitter *c) {
    const int grad = N(c, c->node)->op == KH_GOP_SOFTMAX_GRAD;
    const int32_t *in = IN(c, c->node);
    const kh_gnode *nd = N(c, c->node);
    int64_t C = th_last_dim(nd);
    th_cu_affine R = th_em_rows(c, c->node);
    char r[64];
    /* one warp per row: max, exp, sum, scale (as the CPU) / the row's dot product */
    kopen(c, NULL, th_aff_scale(R, 32), TH_CU_BLOCK_HOST, 0);
    if (!grad) {
        kptr(c, value(c, in[0]), "const float *x");
        kptr(c, value(c, c->node), "float *y");
    } else {
        kptr(c, value(c, in[0]), "const float *y");
        kptr(c, value(c, in[1]), "const float *dy");
        kptr(c, value(c, c->node), "float *dx");
    }
    th_em_put(c, "    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;\n"
                 "    const int lane = threadIdx.x %% 32;\n    if (row >= %s) return;\n", SZ(R, r));
    if (!grad)
        th_em_put(c, "    const float *a = x + row * %1$lldLL;\n    float *o = y + row * %1$lldLL;\n"
                     "    float mx = -3.402823466e38f;\n"
                     "    for (int64_t j = lane; j < %1$lldLL; j += 32) mx = fmaxf(mx, a[j]);\n    mx = th_warp_max(mx);\n"
                     "    float s = 0.0f;\n"
                     "    for (int64_t j = lane; j < %1$lldLL; j += 32) {\n        const float e = expf(a[j] - mx);\n"
                     "        o[j] = e;\n        s += e;\n    }\n    s = th_warp_sum(s);\n    const float inv = 1.0f / s;\n"
                     "    for (int64_t j = lane; j < %1$lldLL; j += 32) o[j] *= inv;\n",
                  (long long)C);
    else
        th_em_put(c, "    const float *yr = y + row * %1$lldLL, *dr = dy + row * %1$lldLL;\n    float s = 0.0f;\n"
                     "    for (int64_t j = lane; j < %1$lldLL; j += 32) s += yr[j] * dr[j];\n    s = th_warp_sum(s);\n"
                     "    for (int64_t j = lane; j < %1$lldLL; j += 32) dx[row * %1$lldLL + j] = yr[j] * (dr[j] - s);\n",
                  (long long)C);
    kclose(c);
}

static void emit_xent(th_emitter *c) { /* (logits, labels, probs) -> loss (N) */
    const int sigmoid = N(c, c->node)->op == KH_GOP_SIGMOID_XENT;
    const int32_t *in = IN(c, c->node);
    int64_t C = N(c, in[0])->dims[1];
    kloop_open(c, NULL, th_aff(1, 0));
    kptr(c, value(c, in[2]), "const float *p");
    kptr(c, value(c, in[1]), "const int32_t *lab");
    kptr(c, value(c, c->node), "float *loss");
    if (sigmoid) th_em_put(c, "    TH_CU_LOOP(r, n) loss[r] = kh_bce_loss(p[r], (float)lab[r]);\n");
    else th_em_put(c, "    TH_CU_LOOP(r, n) loss[r] = kh_cce_loss(p[r * %lldLL + lab[r]]);\n", (long long)C);
    kclose(c);
}

static void emit_xent_grad(th_emitter *c) { /* (probs, labels, dloss) -> dlogits */
    const int sigmoid = N(c, c->node)->op == KH_GOP_SIGMOID_XENT_GRAD;
    const int32_t *in = IN(c, c->node);
    int64_t C = N(c, c->node)->dims[1];
    kloop_open(c, NULL, th_aff(sigmoid ? 1 : C, 0));
    kptr(c, value(c, in[0]), "const float *p");
    kptr(c, value(c, in[1]), "const int32_t *lab");
    kptr(c, value(c, in[2]), "const float *dl");
    kptr(c, value(c, c->node), "float *dx");
    if (sigmoid) th_em_put(c, "    TH_CU_LOOP(r, n) dx[r] = dl[r] * kh_sigmoid_bce_grad(p[r], (float)lab[r], 1.0f);\n");
    else
        th_em_put(c, "    TH_CU_LOOP(i, n * %1$lldLL) {\n        const int64_t r = i / %1$lldLL, j = i %% %1$lldLL;\n"
                     "        dx[i] = dl[r] * kh_softmax_cce_grad(p[i], j == lab[r], p[r * %1$lldLL + lab[r]], 1.0f);\n"
                     "    }\n",
                  (long long)C);
    kclose(c);
}

/* metric slot of this function: train (loss, correct) at bytes 0 and 8, eval at 16 and 24; else none */
static th_cu_ref metric(th_emitter *c, int k) {
    th_cu_ref r = {TH_CU_NONE, 0, 0, 0};
    if (c->env->fn == KH_GFN_TRAIN) r.base = TH_CU_METRICS, r.offset = 8 * k;
    else if (c->env->fn == KH_GFN_EVAL) r.base = TH_CU_METRICS, r.offset = 16 + 8 * k;
    return r;
}

static void emit_metric(th_emitter *c) {
    const int correct = N(c, c->node)->op == KH_GOP_CORRECT_COUNT;
    const int32_t *in = IN(c, c->node);
    char t[64];
    /* one block, doubles, a fixed tree: the same sum every run */
    kopen(c, NULL, th_aff(0, TH_CU_BLOCK_HOST), TH_CU_BLOCK_HOST, 1);
    if (!correct) {
        kptr(c, value(c, in[0]), "const float *a");
        kptr(c, value(c, c->node), "float *y");
        kptr(c, metric(c, 0), "double *met");
        th_em_put(c, "    double v = 0.0;\n    for (int64_t k = threadIdx.x; k < %s; k += TH_CU_BLOCK) v += a[k];\n",
                  SZ(th_em_numel(c, in[0]), t));
    } else {
        const kh_gnode *P = N(c, in[0]);
        int64_t C = th_last_dim(P);
        kptr(c, value(c, in[0]), "const float *p");
        kptr(c, value(c, in[1]), "const int32_t *lab");
        kptr(c, value(c, c->node), "float *y");
        kptr(c, metric(c, 1), "double *met");
        th_em_put(c, "    double v = 0.0;\n    for (int64_t r = threadIdx.x; r < n; r += TH_CU_BLOCK) {\n");
        if (C == 1) th_em_put(c, "        v += (p[r] > 0.5f ? 1 : 0) == lab[r];\n");
        else
            th_em_put(c, "        int64_t best = 0;\n        for (int64_t j = 1; j < %1$lldLL; j++)\n"
                         "            if (p[r * %1$lldLL + j] > p[r * %1$lldLL + best]) best = j;\n"
                         "        v += best == lab[r];\n",
                      (long long)C);
        th_em_put(c, "    }\n");
    }
    th_em_put(c, "    const double s = th_block_sum(v);\n    if (threadIdx.x == 0) {\n        y[0] = (float)s;\n"
                 "        if (met) *met += s;\n    }\n");
    kclose(c);
}

// --- shapes -------------------------------------------------------------------------------------------------------
static void emit_slice(th_emitter *c) {
    const int32_t *in = IN(c, c->node);
    const kh_gattr *a = &N(c, c->node)->attr;
    int64_t len, inner;
    th_cu_affine outer = th_em_around(c, in[0], a->axis, &len, &inner);
    int64_t blk = (int64_t)a->size * inner;
    char t[64];
    kloop_open(c, NULL, th_aff_scale(outer, blk));
    kptr(c, value(c, in[0]), "const float *x");
    kptr(c, value(c, c->node), "float *y");
    th_em_put(c, "    TH_CU_LOOP(i, %s) y[i] = x[(i / %lldLL) * %lldLL + %lldLL + i %% %lldLL];\n",
              SZ(th_aff_scale(outer, blk), t), (long long)blk, (long long)(len * inner), (long long)(a->begin * inner),
              (long long)blk);
    kclose(c);
}

static void emit_concat(th_emitter *c) {
    const int32_t *in = IN(c, c->node);
    const kh_gnode *nd = N(c, c->node);
    int64_t len, inner, pos = 0;
    th_cu_affine outer = th_em_around(c, c->node, nd->attr.axis, &len, &inner);
    char t[64], sfx[16];
    for (int j = 0; j < nd->n_in && c->st == KH_OK; j++) {
        int64_t lj = N(c, in[j])->dims[nd->attr.axis], blk = lj * inner;
        snprintf(sfx, sizeof sfx, "%d", j);
        kloop_open(c, sfx, th_aff_scale(outer, blk));
        kptr(c, value(c, in[j]), "const float *x");
        kptr(c, value(c, c->node), "float *y");
        th_em_put(c, "    TH_CU_LOOP(i, %s) y[(i / %lldLL) * %lldLL + %lldLL + i %% %lldLL] = x[i];\n",
                  SZ(th_aff_scale(outer, blk), t), (long long)blk, (long long)(len * inner), (long long)(pos * inner),
                  (long long)blk);
        kclose(c);
        pos += lj;
    }
}

static void emit_reverse(th_emitter *c) {
    const int32_t *in = IN(c, c->node);
    int64_t len, inner;
    th_cu_affine outer = th_em_around(c, in[0], N(c, c->node)->attr.axis, &len, &inner);
    char t[64];
    kloop_open(c, NULL, th_aff_scale(outer, len * inner));
    kptr(c, value(c, in[0]), "const float *x");
    kptr(c, value(c, c->node), "float *y");
    th_em_put(c, "    TH_CU_LOOP(i, %s) {\n        const int64_t k = i %% %lldLL, l = (i / %lldLL) %% %lldLL, o = i / %lldLL;\n"
                 "        y[i] = x[(o * %lldLL + %lldLL - l) * %lldLL + k];\n    }\n",
              SZ(th_aff_scale(outer, len * inner), t), (long long)inner, (long long)inner, (long long)len,
              (long long)(len * inner), (long long)len, (long long)(len - 1), (long long)inner);
    kclose(c);
}

static void emit_mean(th_emitter *c) {
    const int grad = N(c, c->node)->op == KH_GOP_MEAN_GRAD;
    const int32_t *in = IN(c, c->node);
    int64_t len, inner;
    th_cu_affine outer = th_em_around(c, grad ? c->node : in[0], N(c, c->node)->attr.axis, &len, &inner);
    char t[64];
    kloop_open(c, NULL, th_aff_scale(outer, grad ? len * inner : inner));
    kptr(c, value(c, in[0]), grad ? "const float *dy" : "const float *x");
    kptr(c, value(c, c->node), grad ? "float *dx" : "float *y");
    if (!grad) /* in l order, as the CPU sums */
        th_em_put(c, "    TH_CU_LOOP(i, %s) {\n        const int64_t o = i / %lldLL, k = i %% %lldLL;\n        float s = 0.0f;\n"
                     "        for (int64_t l = 0; l < %lldLL; l++) s += x[(o * %lldLL + l) * %lldLL + k];\n"
                     "        y[i] = s * (1.0f / %lld.0f);\n    }\n",
                  SZ(th_aff_scale(outer, inner), t), (long long)inner, (long long)inner, (long long)len, (long long)len,
                  (long long)inner, (long long)len);
    else
        th_em_put(c, "    TH_CU_LOOP(i, %s) dx[i] = dy[(i / %lldLL) * %lldLL + i %% %lldLL] * (1.0f / %lld.0f);\n",
                  SZ(th_aff_scale(outer, len * inner), t), (long long)(len * inner), (long long)inner,
                  (long long)inner, (long long)len);
    kclose(c);
}

static void emit_gather(th_emitter *c) {
    const int grad = N(c, c->node)->op == KH_GOP_GATHER_GRAD;
    const int32_t *in = IN(c, c->node);
    int32_t idx = grad ? in[0] : in[1];
    int64_t D = grad ? N(c, c->node)->dims[1] : N(c, in[0])->dims[1];
    th_cu_affine cnt = th_aff_scale(th_em_numel(c, idx), D);
    char t[64];
    kloop_open(c, NULL, cnt);
    if (!grad) { /* indices were validated on the host while staging */
        kptr(c, value(c, in[0]), "const float *table");
        kptr(c, value(c, in[1]), "const int32_t *idx");
        kptr(c, value(c, c->node), "float *y");
        th_em_put(c, "    TH_CU_LOOP(i, %s) y[i] = table[(int64_t)idx[i / %lldLL] * %lldLL + i %% %lldLL];\n",
                  SZ(cnt, t), (long long)D, (long long)D, (long long)D);
    } else { /* into the persistent accumulator; the order of the additions is not fixed */
        kptr(c, value(c, in[0]), "const int32_t *idx");
        kptr(c, value(c, in[1]), "const float *dy");
        kptr(c, value(c, c->node), "float *acc");
        th_em_put(c, "    TH_CU_LOOP(i, %s) atomicAdd(&acc[(int64_t)idx[i / %lldLL] * %lldLL + i %% %lldLL], dy[i]);\n",
                  SZ(cnt, t), (long long)D, (long long)D, (long long)D);
    }
    kclose(c);
}

// --- images -------------------------------------------------------------------------------------------------------
/* the window of the node (th_em_window): asymmetric when TensorFlow's 'same' pads more after than before, which
 * cuDNN cannot express (it pads both sides alike) */
typedef struct geom {
    kh_conv2d_dims d;
    int asym;
} geom;

static int geometry(th_emitter *c, geom *q) {
    if (!th_em_window(c, &q->d)) return 0;
    q->asym = q->d.pad_bottom != q->d.pad_top || q->d.pad_right != q->d.pad_left;
    return 1;
}

static void pool_const(th_emitter *c, const geom *q) {
    th_em_put(c, "    const th_cu_pool g = {%lldLL, %lldLL, %lldLL, %lldLL, %lldLL, %lldLL, %lldLL, %lldLL, %lldLL, %lldLL, %lldLL};\n",
              (long long)q->d.H, (long long)q->d.W, (long long)q->d.C, (long long)q->d.KH, (long long)q->d.KW,
              (long long)q->d.OH, (long long)q->d.OW, (long long)q->d.SH, (long long)q->d.SW, (long long)q->d.pad_top,
              (long long)q->d.pad_left);
}

static void emit_pool(th_emitter *c) {
    const int grad = N(c, c->node)->op == KH_GOP_MAXPOOL_GRAD;
    const int32_t *in = IN(c, c->node);
    geom q;
    if (!geometry(c, &q)) return;
    int64_t C = q.d.C;
    char t[64];
    if (!grad) {
        th_cu_affine cnt = th_aff(q.d.OH * q.d.OW * C, 0);
        kloop_open(c, NULL, cnt);
        kptr(c, value(c, in[0]), "const float *x");
        kptr(c, value(c, c->node), "float *y");
        pool_const(c, &q);
        th_em_put(c, "    TH_CU_LOOP(i, %s) {\n        const int64_t ch = i %% g.C, ow = (i / g.C) %% g.OW, oh = (i / (g.C * g.OW)) %% g.OH;\n"
                     "        const int64_t at = th_pool_argmax(x, g, i / (g.C * g.OW * g.OH), oh, ow, ch);\n"
                     "        y[i] = at >= 0 ? x[at] : 0.0f;\n    }\n",
                  SZ(cnt, t));
    } else { /* dx at each input element: the sum of dy over the windows whose first maximum it is (no atomics) */
        th_cu_affine cnt = th_aff(q.d.H * q.d.W * C, 0);
        kloop_open(c, NULL, cnt);
        kptr(c, value(c, in[0]), "const float *x");
        kptr(c, value(c, in[1]), "const float *dy");
        kptr(c, value(c, c->node), "float *dx");
        pool_const(c, &q);
        th_em_put(c, "    TH_CU_LOOP(i, %s) {\n        const int64_t ch = i %% g.C, iw = (i / g.C) %% g.W, ih = (i / (g.C * g.W)) %% g.H;\n"
                     "        const int64_t s = i / (g.C * g.W * g.H);\n"
                     "        int64_t oh0 = ih + g.PT - (g.KH - 1), ow0 = iw + g.PL - (g.KW - 1);\n"
                     "        oh0 = oh0 > 0 ? (oh0 + g.SH - 1) / g.SH : 0;\n        ow0 = ow0 > 0 ? (ow0 + g.SW - 1) / g.SW : 0;\n"
                     "        float v = 0.0f;\n"
                     "        for (int64_t oh = oh0; oh < g.OH && oh * g.SH - g.PT <= ih; oh++)\n"
                     "            for (int64_t ow = ow0; ow < g.OW && ow * g.SW - g.PL <= iw; ow++)\n"
                     "                if (th_pool_argmax(x, g, s, oh, ow, ch) == i) v += dy[((s * g.OH + oh) * g.OW + ow) * g.C + ch];\n"
                     "        dx[i] = v;\n    }\n",
                  SZ(cnt, t));
    }
    kclose(c);
}

/* dst (cols, rows) = src (rows, cols)^T: HWIO filters <-> cuDNN's NHWC filter layout (F, KH, KW, C) */
static void emit_transpose(th_emitter *c, const char *sfx, th_cu_ref src, th_cu_ref dst, int64_t R, int64_t C) {
    kloop_open(c, sfx, th_aff(0, R * C));
    kptr(c, src, "const float *src");
    kptr(c, dst, "float *dst");
    th_em_put(c, "    TH_CU_LOOP(i, %lldLL) dst[(i %% %lldLL) * %lldLL + i / %lldLL] = src[i];\n", (long long)(R * C),
              (long long)C, (long long)R, (long long)C);
    kclose(c);
}

/* the padded copy (n, Hp, Wp, C) of x (n, H, W, C) (pad: 1), or the inverse selection (pad: 0) */
static void emit_pad(th_emitter *c, int pad, th_cu_ref from, th_cu_ref to, const geom *q, int64_t Hp, int64_t Wp) {
    int64_t H = q->d.H, W = q->d.W, C = q->d.C, PT = q->d.pad_top, PL = q->d.pad_left;
    char t[64];
    th_cu_affine cnt = th_aff(pad ? Hp * Wp * C : H * W * C, 0);
    kloop_open(c, pad ? "pad" : "crop", cnt);
    kptr(c, from, "const float *a");
    kptr(c, to, "float *b");
    if (pad)
        th_em_put(c, "    TH_CU_LOOP(i, %s) {\n        const int64_t ch = i %% %lldLL, w = (i / %lldLL) %% %lldLL, h = (i / %lldLL) %% %lldLL, s = i / %lldLL;\n"
                     "        const int64_t ih = h - %lldLL, iw = w - %lldLL;\n"
                     "        b[i] = ih >= 0 && ih < %lldLL && iw >= 0 && iw < %lldLL ? a[((s * %lldLL + ih) * %lldLL + iw) * %lldLL + ch] : 0.0f;\n    }\n",
                  SZ(cnt, t), (long long)C, (long long)C, (long long)Wp, (long long)(C * Wp), (long long)Hp,
                  (long long)(C * Wp * Hp), (long long)PT, (long long)PL, (long long)H, (long long)W, (long long)Hp,
                  (long long)Wp, (long long)C);
    else
        th_em_put(c, "    TH_CU_LOOP(i, %s) {\n        const int64_t ch = i %% %lldLL, w = (i / %lldLL) %% %lldLL, h = (i / %lldLL) %% %lldLL, s = i / %lldLL;\n"
                     "        b[i] = a[((s * %lldLL + h + %lldLL) * %lldLL + w + %lldLL) * %lldLL + ch];\n    }\n",
                  SZ(cnt, t), (long long)C, (long long)C, (long long)W, (long long)(C * W), (long long)H,
                  (long long)(C * W * H), (long long)Hp, (long long)PT, (long long)Wp, (long long)PL, (long long)C);
    kclose(c);
}

static void emit_conv(th_emitter *c) {
    int32_t i = c->node;
    const kh_gnode *nd = N(c, i);
    const int32_t *in = IN(c, i);
    uint32_t op = nd->op;
    geom q;
    if (!geometry(c, &q)) return;
    int64_t K = q.d.KH * q.d.KW * q.d.C, F = q.d.OC;
    int64_t Hp = q.asym ? q.d.H + q.d.pad_top + q.d.pad_bottom : q.d.H;
    int64_t Wp = q.asym ? q.d.W + q.d.pad_left + q.d.pad_right : q.d.W;
    th_cu_ref wt = scratch(c, K * F * 4);
    th_cu_ref xpad = q.asym ? scratch(c, c->g->max_batch * Hp * Wp * q.d.C * 4) : wt;
    th_cu_conv cv = {.op = op == KH_GOP_CONV2D ? TH_CU_CONV_FWD : op == KH_GOP_CONV2D_BACKPROP_INPUT ? TH_CU_CONV_BWD_DATA
                                                                                                  : TH_CU_CONV_BWD_FILTER,
                     .H = (int32_t)q.d.H, .W = (int32_t)q.d.W, .C = (int32_t)q.d.C, .KH = (int32_t)q.d.KH,
                     .KW = (int32_t)q.d.KW, .F = (int32_t)F, .OH = (int32_t)q.d.OH, .OW = (int32_t)q.d.OW,
                     .SH = (int32_t)q.d.SH, .SW = (int32_t)q.d.SW, .pad_h = q.asym ? 0 : (int32_t)q.d.pad_top,
                     .pad_w = q.asym ? 0 : (int32_t)q.d.pad_left, .asym = q.asym, .Hp = (int32_t)Hp, .Wp = (int32_t)Wp};
    th_cu_launch *e;
    switch (op) {
    case KH_GOP_CONV2D: /* (x, w) -> y */
        emit_transpose(c, "wt", value(c, in[1]), wt, K, F);
        if (q.asym) emit_pad(c, 1, value(c, in[0]), xpad, &q, Hp, Wp);
        cv.x = q.asym ? xpad : value(c, in[0]), cv.w = wt, cv.y = value(c, i);
        break;
    case KH_GOP_CONV2D_BACKPROP_INPUT: /* (w, dy) -> dx */
        emit_transpose(c, "wt", value(c, in[0]), wt, K, F);
        cv.x = q.asym ? xpad : value(c, i), cv.w = wt, cv.y = value(c, in[1]);
        break;
    default: /* (x, dy) -> dw */
        if (q.asym) emit_pad(c, 1, value(c, in[0]), xpad, &q, Hp, Wp);
        cv.x = q.asym ? xpad : value(c, in[0]), cv.w = wt, cv.y = value(c, in[1]);
        break;
    }
    if (c->st != KH_OK || !(e = entry(c, TH_CUL_CONV))) return;
    e->conv = cv;
    c->plan->n_conv++;
    if (op == KH_GOP_CONV2D_BACKPROP_INPUT && q.asym) emit_pad(c, 0, xpad, value(c, i), &q, Hp, Wp);
    if (op == KH_GOP_CONV2D_BACKPROP_FILTER) emit_transpose(c, "dw", wt, value(c, i), F, K);
}

static void emit_fill(th_emitter *c) {
    kloop_open(c, NULL, th_aff(1, 0));
    kptr(c, value(c, c->node), "float *y");
    th_em_put(c, "    TH_CU_LOOP(k, n) y[k] = 1.0f / (float)n;\n");
    kclose(c);
}

// --- LSTM scans -------------------------------------------------------------------------------------------------------
/* S (N, T, 6, U): h, c, i, f, g, o per step; xw, dXW (N, T, 4U). Per step t one GEMM and one fused gate kernel. */
static void emit_scan(th_emitter *c) {
    int32_t i = c->node;
    const kh_gnode *nd = N(c, i);
    const int32_t *in = IN(c, i);
    const kh_gnode *S = N(c, nd->op == KH_GOP_LSTM_SCAN ? i : in[0]);
    if (!(S->flags & KH_GVAL_BATCHED) || S->rank != 4 || S->dims[2] != 6) {
        th_em_fail(c, KH_ERR_UNSUPPORTED, "a scan state that is not batched (N, T, 6, U)");
        return;
    }
    int64_t T = S->dims[1], U = S->dims[3], G = 4 * U;
    th_cu_affine nU = th_aff(U, 0);
    char t[64];
    if (nd->op == KH_GOP_LSTM_SCAN) { /* (xw, U) -> S */
        th_cu_ref z = scratch(c, c->g->max_batch * G * 4);
        th_cu_ref Sref = value(c, i), h_prev = Sref;
        h_prev.offset -= 6 * U * 4; /* S[:, t-1, 0]: never read at t = 0 */
        h_prev.step = 6 * U * 4;
        loop(c, (int32_t)T, 0, 2);
        /* z (n, 4U) = h_{t-1} (n, U; row stride T*6U) U (U, 4U) */
        gemm(c, 0, 0, th_aff(1, 0), th_aff(0, G), th_aff(0, U), h_prev, T * 6 * U, value(c, in[1]), G, z, G, 0.0f, 1);
        kloop_open(c, "step", nU);
        kptr(c, value(c, in[0]), "const float *xw");
        kptr(c, z, "const float *z");
        kptr(c, Sref, "float *S");
        kscalar(c, TH_CUARG_STEP);
        th_em_put(c, "    TH_CU_LOOP(k, %s) {\n        const int64_t r = k / %lldLL, u = k %% %lldLL;\n"
                     "        const float *x = xw + (r * %lldLL + t) * %lldLL, *zr = z + r * %lldLL;\n"
                     "        float *s = S + (r * %lldLL + t) * %lldLL;\n"
                     "        const float cp = t > 0 ? s[u - %lldLL + %lldLL] : 0.0f;\n"
                     "        float zz[4];\n"
                     "        for (int q = 0; q < 4; q++) zz[q] = x[q * %lldLL + u] + (t > 0 ? zr[q * %lldLL + u] : 0.0f);\n"
                     "        kh_lstm_cell(zz[0], zz[1], zz[2], zz[3], cp, &s[2 * %lldLL + u], &s[3 * %lldLL + u], &s[4 * %lldLL + u],\n"
                     "                     &s[5 * %lldLL + u], &s[%lldLL + u], &s[u]);\n    }\n",
                  SZ(nU, t), (long long)U, (long long)U, (long long)T, (long long)G, (long long)G, (long long)T,
                  (long long)(6 * U), (long long)(6 * U), (long long)U, (long long)U, (long long)U, (long long)U,
                  (long long)U, (long long)U, (long long)U, (long long)U);
        kclose(c);
    } else if (nd->op == KH_GOP_LSTM_SCAN_GRAD) { /* (S, U, dS) -> dXW */
        th_cu_ref dh = scratch(c, c->g->max_batch * U * 4), dc = scratch(c, c->g->max_batch * U * 4);
        th_cu_ref dxw = value(c, i);
        loop(c, (int32_t)T, 1, 2);
        kloop_open(c, "step", nU);
        kptr(c, value(c, in[0]), "const float *S");
        kptr(c, value(c, in[2]), "const float *dS");
        kptr(c, dh, "const float *dh");
        kptr(c, dc, "float *dc");
        kptr(c, dxw, "float *dxw");
        kscalar(c, TH_CUARG_STEP);
        th_em_put(c, "    TH_CU_LOOP(k, %s) {\n        const int64_t r = k / %lldLL, u = k %% %lldLL;\n"
                     "        const int64_t at = (r * %lldLL + t) * %lldLL;\n"
                     "        const float *s = S + at, *ds = dS + at;\n"
                     "        const float cp = t > 0 ? s[u - %lldLL + %lldLL] : 0.0f;\n"
                     "        const float dhv = ds[u] + (t < %lldLL ? dh[k] : 0.0f);\n"
                     "        const float dcv = ds[%lldLL + u] + (t < %lldLL ? dc[k] : 0.0f);\n"
                     "        float *dz = dxw + (r * %lldLL + t) * %lldLL;\n        float dcp;\n"
                     "        kh_lstm_cell_backward(s[2 * %lldLL + u], s[3 * %lldLL + u], s[4 * %lldLL + u], s[5 * %lldLL + u],\n"
                     "                              s[%lldLL + u], cp, dhv, dcv, &dz[u], &dz[%lldLL + u], &dz[2 * %lldLL + u],\n"
                     "                              &dz[3 * %lldLL + u], &dcp);\n"
                     "        dc[k] = dcp;\n    }\n",
                  SZ(nU, t), (long long)U, (long long)U, (long long)T, (long long)(6 * U), (long long)(6 * U),
                  (long long)U, (long long)(T - 1), (long long)U, (long long)(T - 1), (long long)T, (long long)G,
                  (long long)U, (long long)U, (long long)U, (long long)U, (long long)U, (long long)U, (long long)U,
                  (long long)U);
        kclose(c);
        /* dh_{t-1} (n, U) = dZ_t (n, 4U; row stride T*4U) U^T: not needed after t = 0 */
        th_cu_ref dz = dxw;
        dz.step = G * 4;
        gemm(c, 0, 1, th_aff(1, 0), th_aff(0, U), th_aff(0, G), dz, T * G, value(c, in[1]), G, dh, U, 0.0f, 1);
    } else { /* (S, dXW) -> dU = sum over (r, t >= 1) of h_{t-1}^T dXW[r, t]: one GEMM over n*T shifted rows */
        th_cu_ref hp = scratch(c, c->g->max_batch * T * U * 4);
        kloop_open(c, "shift", th_aff(T * U, 0));
        kptr(c, value(c, in[0]), "const float *S");
        kptr(c, hp, "float *hp");
        th_em_put(c, "    TH_CU_LOOP(k, %s) {\n        const int64_t u = k %% %lldLL, rt = k / %lldLL, t = rt %% %lldLL;\n"
                     "        hp[k] = t > 0 ? S[(rt - 1) * %lldLL + u] : 0.0f;\n    }\n",
                  SZ(th_aff(T * U, 0), t), (long long)U, (long long)U, (long long)T, (long long)(6 * U));
        kclose(c);
        gemm(c, 1, 0, th_aff(0, U), th_aff(0, G), th_aff(T, 0), hp, U, value(c, in[1]), G, value(c, i), G, 0.0f, 0);
    }
}

// --- the dialect's hooks ------------------------------------------------------------------------------------------
static void fn_open(th_emitter *c) { th_sb_printf(c->out, "\n"); }

static void node_open(th_emitter *c) { (void)c; } /* a plan entry records its node and part */

static void fn_close(th_emitter *c) { (void)c; }

static void arg_ptr(th_emitter *c, int32_t node, th_cu_ref var, const char *decl) {
    kptr(c, node >= 0 ? value(c, node) : var, decl);
}

static void loop_open(th_emitter *c, th_cu_affine count) {
    char t[64];
    th_em_put(c, "    TH_CU_LOOP(k, %s) {\n", SZ(count, t));
}

/* one grid-stride index; the column by division only where a vector input needs it */
static void loop_rows_open(th_emitter *c, th_cu_affine count, th_cu_affine rows, int64_t cols, int need_col) {
    (void)rows;
    loop_open(c, count);
    if (need_col) th_em_put(c, "        const int64_t j = k %% %lldLL;\n", (long long)cols);
}

static void loop_close(th_emitter *c) { th_em_put(c, "    }\n"); }

static void gemm_op(th_emitter *c, const th_em_gemm *g) {
    if (g->N.a != 0) {
        th_em_fail(c, KH_ERR_UNSUPPORTED, "a transposed batched right operand (its rows would be the output's row stride)");
        return;
    }
    gemm(c, g->ta, g->tb, g->M, g->N, g->K, value(c, g->a), g->lda, value(c, g->b), g->ldb, value(c, c->node), g->N.b,
         0.0f, 0);
}

static void zeros(th_emitter *c, th_cu_affine elements) { memset0(c, value(c, c->node), th_aff_scale(elements, 4)); }

static kh_status prelude(th_sb *b, char *err, size_t errlen) { return th_prelude_cuda(b, err, errlen); }

const th_dialect th_dialect_cuda = {
    .name = "CUDA",
    .prelude = prelude,
    .int_suffix = "LL",
    .indent = "    ",
    .body = "        ",
    .scalar = {[TH_CUARG_N] = "n", [TH_CUARG_LR] = "lr", [TH_CUARG_SEED] = "seed", [TH_CUARG_COUNTER] = "counter",
               [TH_CUARG_STEP] = "t"},
    .fn_open = fn_open,
    .node_open = node_open,
    .fn_close = fn_close,
    .kernel_open = kloop_open,
    .arg_ptr = arg_ptr,
    .arg_scalar = kscalar,
    .kernel_close = kclose,
    .loop_open = loop_open,
    .loop_rows_open = loop_rows_open,
    .loop_close = loop_close,
    .gemm = gemm_op,
    .zeros = zeros,
    .ops = {
        [KH_GOP_FILL_BATCH] = emit_fill,
        [KH_GOP_BIAS_ADD_GRAD] = emit_bias_grad,
        [KH_GOP_SOFTMAX] = emit_softmax,
        [KH_GOP_SOFTMAX_GRAD] = emit_softmax,
        [KH_GOP_CONV2D] = emit_conv,
        [KH_GOP_CONV2D_BACKPROP_INPUT] = emit_conv,
        [KH_GOP_CONV2D_BACKPROP_FILTER] = emit_conv,
        [KH_GOP_MAXPOOL] = emit_pool,
        [KH_GOP_MAXPOOL_GRAD] = emit_pool,
        [KH_GOP_SLICE] = emit_slice,
        [KH_GOP_CONCAT] = emit_concat,
        [KH_GOP_REVERSE] = emit_reverse,
        [KH_GOP_MEAN] = emit_mean,
        [KH_GOP_MEAN_GRAD] = emit_mean,
        [KH_GOP_GATHER] = emit_gather,
        [KH_GOP_GATHER_GRAD] = emit_gather,
        [KH_GOP_SOFTMAX_XENT] = emit_xent,
        [KH_GOP_SIGMOID_XENT] = emit_xent,
        [KH_GOP_SOFTMAX_XENT_GRAD] = emit_xent_grad,
        [KH_GOP_SIGMOID_XENT_GRAD] = emit_xent_grad,
        [KH_GOP_LOSS_SUM] = emit_metric,
        [KH_GOP_CORRECT_COUNT] = emit_metric,
        [KH_GOP_LSTM_SCAN] = emit_scan,
        [KH_GOP_LSTM_SCAN_GRAD] = emit_scan,
        [KH_GOP_LSTM_SCAN_GRAD_U] = emit_scan,
    },
};
