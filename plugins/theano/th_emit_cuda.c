/* th_emit_cuda.c — one optimised graph function as CUDA C for NVRTC, and the launch plan the host runs it by
 * (th_cuda_plan.h). One `extern "C" __global__` kernel per node that is not a library call: every Elemwise
 * program (and every remaining primitive element-wise op) is one fused grid-stride loop written by
 * th_expr_text with float and the formulas' device versions; rows (softmax), losses and their gradients, bias
 * gradients, pooling, copies along an axis, means, gathers (GatherGrad with atomicAdd), the metric reductions
 * (into the device metric doubles), one fused update loop per parameter, and the per-step gate loops of LSTM
 * scans. MatMul is a cuBLAS SGEMM the plan describes, Conv2D and its gradients cuDNN NHWC calls (with generated
 * filter transposes and, for TensorFlow's asymmetric 'same', generated pad/crop kernels around them), Zeros a
 * memset. A scan is a loop entry: per step a GEMM h_{t-1} U (dZ U^T backward) and one fused gate kernel.
 *
 * Every size in the text is a constant except n, the batch rows, a kernel argument. Kernels are named
 * k<node>_<op>[_<part>]: unique within a function's module. The probe function's forward is part 0, its backward
 * part 1 (as in th_emit_c.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/geometry.h"
#include "khost/kit/status.h"
#include "th_cuda_plan.h"

#define SCRATCH_ALIGN 256

typedef struct cctx {
    const th_emit_env *env;
    const kh_graph *g;
    th_sb *b;          /* the source */
    th_cu_plan *plan;
    kh_status st;
    char *err;
    size_t errlen;
    int32_t node;      /* the node being emitted */
    int part;
    int64_t scratch;   /* bytes of scratch the node has claimed */
    int32_t kernel;    /* the open kernel's plan entry, -1: none */
    th_sb sig, body;   /* the open kernel's parameter list and body */
} cctx;

static const kh_gnode *N(const cctx *c, int32_t i) { return &c->g->nodes[i]; }
static const int32_t *IN(const cctx *c, int32_t i) { return kh_graph_inputs(c->g, i); }

static void fail(cctx *c, kh_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(cctx *c, kh_status st, const char *fmt, ...) {
    if (c->st != KH_OK) return;
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    c->st = kh_errf(c->err, c->errlen, st, "node %d (%s): %s", c->node, kh_gop_name(N(c, c->node)->op), why);
}

// --- sizes ----------------------------------------------------------------------------------------------------
static th_cu_affine aff(int64_t a, int64_t b) { return (th_cu_affine){a, b}; }

static int64_t per_row(const kh_gnode *x) {
    int64_t e = 1;
    for (int d = 1; d < x->rank; d++) e *= x->dims[d];
    return e;
}

/* elements of a value */
static th_cu_affine numel(const cctx *c, int32_t i) {
    const kh_gnode *x = N(c, i);
    return x->flags & KH_GVAL_BATCHED ? aff(per_row(x), 0) : aff(0, per_row(x) * x->dims[0]);
}

/* rows of a value as a matrix with its last axis as columns */
static th_cu_affine rows(const cctx *c, int32_t i) {
    const kh_gnode *x = N(c, i);
    if (x->rank == 1) return aff(0, 1);
    int64_t r = 1;
    for (int d = 1; d < x->rank - 1; d++) r *= x->dims[d];
    return x->flags & KH_GVAL_BATCHED ? aff(r, 0) : aff(0, r * x->dims[0]);
}

static int64_t last_dim(const kh_gnode *x) { return x->dims[x->rank - 1]; }

/* (outer, len, inner) around an axis */
static th_cu_affine around(const cctx *c, int32_t i, int axis, int64_t *len, int64_t *inner) {
    const kh_gnode *x = N(c, i);
    int64_t o = 1;
    for (int d = 1; d < axis; d++) o *= x->dims[d];
    *len = x->dims[axis];
    *inner = 1;
    for (int d = axis + 1; d < x->rank; d++) *inner *= x->dims[d];
    if (axis == 0) return aff(0, 1);
    return x->flags & KH_GVAL_BATCHED ? aff(o, 0) : aff(0, o * x->dims[0]);
}

/* an affine size as CUDA C text: "(n * 784LL)", "10LL", "(n * 3LL + 2LL)" */
static const char *text(th_cu_affine x, char *buf, size_t len) {
    if (x.a == 0) snprintf(buf, len, "%lldLL", (long long)x.b);
    else if (x.b == 0) snprintf(buf, len, "(n * %lldLL)", (long long)x.a);
    else snprintf(buf, len, "(n * %lldLL + %lldLL)", (long long)x.a, (long long)x.b);
    return buf;
}

static th_cu_affine scale(th_cu_affine x, int64_t k) { return aff(x.a * k, x.b * k); }

// --- storage --------------------------------------------------------------------------------------------------
kh_status th_cu_value(const th_emit_env *env, int32_t i, th_cu_ref *r) {
    const kh_graph *g = env->g;
    const kh_gplan *p = env->plan;
    *r = (th_cu_ref){TH_CU_NONE, 0, 0, 0};
    for (int hops = 0; i >= 0 && i < g->n_nodes && hops <= g->n_nodes; hops++) {
        const kh_gnode *nd = &g->nodes[i];
        if (nd->op == KH_GOP_RESHAPE) {
            i = kh_graph_inputs(g, i)[0];
            continue;
        }
        if (p->e[i].inplace_of >= 0) {
            i = p->e[i].inplace_of;
            continue;
        }
        const kh_gplan_entry *e = &p->e[i];
        switch (e->store) {
        case KH_GSTORE_ARENA: r->base = TH_CU_ARENA, r->offset = e->offset; return KH_OK;
        case KH_GSTORE_VARIABLE:
            r->base = TH_CU_VAR;
            r->index = kh_model_graphs_var(env->mg, nd->attr.layer, nd->attr.slot);
            return r->index >= 0 ? KH_OK : KH_ERR_INTERNAL;
        case KH_GSTORE_FEED: r->base = TH_CU_FEED, r->index = nd->attr.input_id; return KH_OK;
        case KH_GSTORE_PERSISTENT: r->base = TH_CU_PERSISTENT, r->index = (int32_t)e->offset; return KH_OK;
        default: return KH_ERR_INTERNAL;
        }
    }
    return KH_ERR_INTERNAL;
}

static th_cu_ref value(cctx *c, int32_t i) {
    th_cu_ref r;
    if (th_cu_value(c->env, i, &r) != KH_OK) fail(c, KH_ERR_INTERNAL, "node %d has no storage", i);
    return r;
}

static th_cu_ref var_ref(int32_t v, uint32_t base) { return (th_cu_ref){base, v, 0, 0}; }

/* claim scratch for the current node; its offset */
static th_cu_ref scratch(cctx *c, int64_t bytes) {
    th_cu_ref r = {TH_CU_SCRATCH, 0, c->scratch, 0};
    c->scratch += (bytes + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
    if (c->scratch > c->plan->scratch_bytes) c->plan->scratch_bytes = c->scratch;
    return r;
}

// --- the plan -------------------------------------------------------------------------------------------------
static th_cu_launch *entry(cctx *c, uint32_t kind) {
    th_cu_plan *p = c->plan;
    if (p->n == p->cap) {
        int32_t nc = p->cap ? 2 * p->cap : 64;
        th_cu_launch *v = realloc(p->v, (size_t)nc * sizeof *v);
        if (!v) {
            fail(c, KH_ERR_NOMEM, "out of memory for the launch plan");
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

static void gemm(cctx *c, int ta, int tb, th_cu_affine M, th_cu_affine Nn, th_cu_affine K, th_cu_ref A, int64_t lda,
                 th_cu_ref B, int64_t ldb, th_cu_ref C, int64_t ldc, float beta, int skip_t0) {
    th_cu_launch *e = entry(c, TH_CUL_GEMM);
    if (!e) return;
    e->gemm = (th_cu_gemm){ta, tb, M, Nn, K, lda, ldb, ldc, beta, A, B, C};
    e->skip_t0 = skip_t0;
    c->plan->n_gemm++;
}

static void memset0(cctx *c, th_cu_ref dst, th_cu_affine bytes) {
    th_cu_launch *e = entry(c, TH_CUL_MEMSET);
    if (!e) return;
    e->dst = dst;
    e->bytes = bytes;
}

static void loop(cctx *c, int32_t steps, int reverse, int32_t body) {
    th_cu_launch *e = entry(c, TH_CUL_LOOP);
    if (!e) return;
    e->steps = steps;
    e->reverse = reverse;
    e->body = body;
}

// --- kernels --------------------------------------------------------------------------------------------------
/* Open kernel k<node>_<op>[_suffix] for `threads` threads (grid-stride), or a fixed grid. */
static void kopen(cctx *c, const char *suffix, th_cu_affine threads, int32_t block, int32_t fixed_grid) {
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
    c->plan->n_kernels++;
}

static th_cu_launch *kcur(cctx *c) { return c->kernel >= 0 ? &c->plan->v[c->kernel] : NULL; }

static void kdecl(cctx *c, const char *decl) { th_sb_printf(&c->sig, "%s%s", c->sig.len ? ", " : "", decl); }

/* a pointer parameter: decl is its C declaration ("const float *x") */
static void kptr(cctx *c, th_cu_ref r, const char *decl) {
    th_cu_launch *e = kcur(c);
    if (!e) return;
    if (e->n_args == TH_CU_MAX_ARGS) {
        fail(c, KH_ERR_UNSUPPORTED, "more than %d kernel arguments", TH_CU_MAX_ARGS);
        return;
    }
    e->args[e->n_args++] = (th_cu_arg){TH_CUARG_PTR, r};
    kdecl(c, decl);
}

static void kscalar(cctx *c, uint32_t kind) {
    static const char *const decls[TH_CUARG_KIND_END] = {
        [TH_CUARG_N] = "int64_t n", [TH_CUARG_LR] = "float lr", [TH_CUARG_SEED] = "uint64_t seed",
        [TH_CUARG_COUNTER] = "uint64_t counter", [TH_CUARG_STEP] = "int32_t t"};
    th_cu_launch *e = kcur(c);
    if (!e) return;
    if (e->n_args == TH_CU_MAX_ARGS) {
        fail(c, KH_ERR_UNSUPPORTED, "more than %d kernel arguments", TH_CU_MAX_ARGS);
        return;
    }
    e->args[e->n_args++] = (th_cu_arg){kind, {TH_CU_NONE, 0, 0, 0}};
    kdecl(c, decls[kind]);
}

static void kbody(cctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void kbody(cctx *c, const char *fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (k >= (int)sizeof buf) {
        fail(c, KH_ERR_INTERNAL, "generated line too long");
        return;
    }
    th_sb_put(&c->body, buf, (size_t)k);
}

/* Write the open kernel into the source. Every kernel takes n last. */
static void kclose(cctx *c) {
    th_cu_launch *e = kcur(c);
    if (!e) return;
    kscalar(c, TH_CUARG_N);
    th_sb_printf(c->b, "extern \"C\" __global__ void __launch_bounds__(%d) %s(%s) {\n%s}\n\n", e->block, e->name,
                 c->sig.s ? c->sig.s : "", c->body.s ? c->body.s : "");
    c->kernel = -1;
}

/* the common shape: a grid-stride loop over `count` elements, the body given */
static void kloop_open(cctx *c, const char *suffix, th_cu_affine count) {
    kopen(c, suffix, count, TH_CU_BLOCK_HOST, 0);
}

// --- element-wise -----------------------------------------------------------------------------------------------
static void emit_elemwise(cctx *c, const kh_gexpr *e, const int32_t *in) {
    int32_t i = c->node;
    const kh_gnode *nd = N(c, i);
    int64_t C = nd->rank == 1 ? nd->dims[0] : last_dim(nd);
    th_cu_affine cnt = numel(c, i);
    char t[64], decl[64];
    kloop_open(c, NULL, cnt);
    kptr(c, value(c, i), "float *o");
    int any_vec = 0, any_key = 0;
    for (int j = 0; j < e->n_in; j++) {
        snprintf(decl, sizeof decl, "const float *i%d", j);
        kptr(c, value(c, in[j]), decl);
        any_vec |= e->vec[j];
    }
    for (int k = 0; k < e->n_ops; k++) any_key |= e->ops[k].op == KH_GOP_DROPOUT || e->ops[k].op == KH_GOP_DROPOUT_GRAD;
    if (any_key) {
        kscalar(c, TH_CUARG_SEED);
        kscalar(c, TH_CUARG_COUNTER);
        for (int k = 0; k < e->n_ops; k++)
            if (e->ops[k].op == KH_GOP_DROPOUT || e->ops[k].op == KH_GOP_DROPOUT_GRAD)
                kbody(c, "    const uint64_t key%d = kh_crng_key(seed, counter, %dull);\n", k, e->ops[k].salt);
    }
    kbody(c, "    TH_CU_LOOP(k, %s) {\n", text(cnt, t, sizeof t));
    if (any_vec) kbody(c, "        const int64_t j = k %% %lldLL;\n", (long long)C);
    th_sb expr = {0};
    th_expr_text(&expr, e, "k", "j", "key", "float");
    if (expr.oom) fail(c, KH_ERR_NOMEM, "out of memory");
    else th_sb_put(&c->body, expr.s, expr.len);
    th_sb_free(&expr);
    kbody(c, "            o[k] = t%d;\n    }\n", e->n_ops - 1);
    kclose(c);
}

/* AddN of more inputs than an Elemwise program takes */
static void emit_addn_wide(cctx *c, const int32_t *in, int32_t k) {
    th_cu_affine cnt = numel(c, c->node);
    char t[64], decl[64];
    kloop_open(c, NULL, cnt);
    kptr(c, value(c, c->node), "float *o");
    for (int j = 0; j < k; j++) {
        snprintf(decl, sizeof decl, "const float *i%d", j);
        kptr(c, value(c, in[j]), decl);
    }
    kbody(c, "    TH_CU_LOOP(k, %s) {\n        float s = i0[k];\n", text(cnt, t, sizeof t));
    for (int j = 1; j < k; j++) kbody(c, "        s += i%d[k];\n", j);
    kbody(c, "        o[k] = s;\n    }\n");
    kclose(c);
}

// --- rows and reductions ------------------------------------------------------------------------------------------
static void emit_bias_grad(cctx *c) {
    const int32_t *in = IN(c, c->node);
    int64_t C = N(c, c->node)->dims[0];
    char r[64];
    /* one block per column (grid-stride over columns): its 256 threads stride over the rows and reduce through
     * warp shuffles and shared memory, so a thread adds R / 256 values, not all R (mnist_cnn: 86,528 rows) */
    kopen(c, NULL, aff(0, C * TH_CU_BLOCK_HOST), TH_CU_BLOCK_HOST, 0);
    kptr(c, value(c, in[0]), "const float *dy");
    kptr(c, value(c, c->node), "float *db");
    kbody(c, "    const int64_t R = %s;\n    __shared__ float part[32];\n"
             "    for (int64_t j = blockIdx.x; j < %lldLL; j += gridDim.x) {\n        float s = 0.0f;\n"
             "        for (int64_t r = threadIdx.x; r < R; r += blockDim.x) s += dy[r * %lldLL + j];\n"
             "        s = th_warp_sum(s);\n        if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;\n"
             "        __syncthreads();\n        if (threadIdx.x < 32) {\n"
             "            s = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.0f;\n            s = th_warp_sum(s);\n"
             "            if (threadIdx.x == 0) db[j] = s;\n        }\n        __syncthreads();\n    }\n",
          text(rows(c, in[0]), r, sizeof r), (long long)C, (long long)C);
    kclose(c);
}

static void emit_softmax(cctx *c, int grad) {
    const int32_t *in = IN(c, c->node);
    const kh_gnode *nd = N(c, c->node);
    int64_t C = last_dim(nd);
    th_cu_affine R = rows(c, c->node);
    char r[64];
    /* one warp per row: max, exp, sum, scale (as the CPU) / the row's dot product */
    kopen(c, NULL, scale(R, 32), TH_CU_BLOCK_HOST, 0);
    if (!grad) {
        kptr(c, value(c, in[0]), "const float *x");
        kptr(c, value(c, c->node), "float *y");
    } else {
        kptr(c, value(c, in[0]), "const float *y");
        kptr(c, value(c, in[1]), "const float *dy");
        kptr(c, value(c, c->node), "float *dx");
    }
    kbody(c, "    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;\n"
             "    const int lane = threadIdx.x %% 32;\n    if (row >= %s) return;\n", text(R, r, sizeof r));
    if (!grad)
        kbody(c, "    const float *a = x + row * %1$lldLL;\n    float *o = y + row * %1$lldLL;\n"
                 "    float mx = -3.402823466e38f;\n"
                 "    for (int64_t j = lane; j < %1$lldLL; j += 32) mx = fmaxf(mx, a[j]);\n    mx = th_warp_max(mx);\n"
                 "    float s = 0.0f;\n"
                 "    for (int64_t j = lane; j < %1$lldLL; j += 32) {\n        const float e = expf(a[j] - mx);\n"
                 "        o[j] = e;\n        s += e;\n    }\n    s = th_warp_sum(s);\n    const float inv = 1.0f / s;\n"
                 "    for (int64_t j = lane; j < %1$lldLL; j += 32) o[j] *= inv;\n",
              (long long)C);
    else
        kbody(c, "    const float *yr = y + row * %1$lldLL, *dr = dy + row * %1$lldLL;\n    float s = 0.0f;\n"
                 "    for (int64_t j = lane; j < %1$lldLL; j += 32) s += yr[j] * dr[j];\n    s = th_warp_sum(s);\n"
                 "    for (int64_t j = lane; j < %1$lldLL; j += 32) dx[row * %1$lldLL + j] = yr[j] * (dr[j] - s);\n",
              (long long)C);
    kclose(c);
}

static void emit_xent(cctx *c, int sigmoid) { /* (logits, labels, probs) -> loss (N) */
    const int32_t *in = IN(c, c->node);
    int64_t C = N(c, in[0])->dims[1];
    kloop_open(c, NULL, aff(1, 0));
    kptr(c, value(c, in[2]), "const float *p");
    kptr(c, value(c, in[1]), "const int32_t *lab");
    kptr(c, value(c, c->node), "float *loss");
    if (sigmoid) kbody(c, "    TH_CU_LOOP(r, n) loss[r] = kh_bce_loss(p[r], (float)lab[r]);\n");
    else kbody(c, "    TH_CU_LOOP(r, n) loss[r] = kh_cce_loss(p[r * %lldLL + lab[r]]);\n", (long long)C);
    kclose(c);
}

static void emit_xent_grad(cctx *c, int sigmoid) { /* (probs, labels, dloss) -> dlogits */
    const int32_t *in = IN(c, c->node);
    int64_t C = N(c, c->node)->dims[1];
    kloop_open(c, NULL, aff(sigmoid ? 1 : C, 0));
    kptr(c, value(c, in[0]), "const float *p");
    kptr(c, value(c, in[1]), "const int32_t *lab");
    kptr(c, value(c, in[2]), "const float *dl");
    kptr(c, value(c, c->node), "float *dx");
    if (sigmoid) kbody(c, "    TH_CU_LOOP(r, n) dx[r] = dl[r] * kh_sigmoid_bce_grad(p[r], (float)lab[r], 1.0f);\n");
    else
        kbody(c, "    TH_CU_LOOP(i, n * %1$lldLL) {\n        const int64_t r = i / %1$lldLL, j = i %% %1$lldLL;\n"
                 "        dx[i] = dl[r] * kh_softmax_cce_grad(p[i], j == lab[r], p[r * %1$lldLL + lab[r]], 1.0f);\n"
                 "    }\n",
              (long long)C);
    kclose(c);
}

/* metric slot of this function: train (loss, correct) at bytes 0 and 8, eval at 16 and 24; else none */
static th_cu_ref metric(cctx *c, int k) {
    th_cu_ref r = {TH_CU_NONE, 0, 0, 0};
    if (c->env->fn == KH_GFN_TRAIN) r.base = TH_CU_METRICS, r.offset = 8 * k;
    else if (c->env->fn == KH_GFN_EVAL) r.base = TH_CU_METRICS, r.offset = 16 + 8 * k;
    return r;
}

static void emit_metric(cctx *c, int correct) {
    const int32_t *in = IN(c, c->node);
    char t[64];
    /* one block, doubles, a fixed tree: the same sum every run */
    kopen(c, NULL, aff(0, TH_CU_BLOCK_HOST), TH_CU_BLOCK_HOST, 1);
    if (!correct) {
        kptr(c, value(c, in[0]), "const float *a");
        kptr(c, value(c, c->node), "float *y");
        kptr(c, metric(c, 0), "double *met");
        kbody(c, "    double v = 0.0;\n    for (int64_t k = threadIdx.x; k < %s; k += TH_CU_BLOCK) v += a[k];\n",
              text(numel(c, in[0]), t, sizeof t));
    } else {
        const kh_gnode *P = N(c, in[0]);
        int64_t C = last_dim(P);
        kptr(c, value(c, in[0]), "const float *p");
        kptr(c, value(c, in[1]), "const int32_t *lab");
        kptr(c, value(c, c->node), "float *y");
        kptr(c, metric(c, 1), "double *met");
        kbody(c, "    double v = 0.0;\n    for (int64_t r = threadIdx.x; r < n; r += TH_CU_BLOCK) {\n");
        if (C == 1) kbody(c, "        v += (p[r] > 0.5f ? 1 : 0) == lab[r];\n");
        else
            kbody(c, "        int64_t best = 0;\n        for (int64_t j = 1; j < %1$lldLL; j++)\n"
                     "            if (p[r * %1$lldLL + j] > p[r * %1$lldLL + best]) best = j;\n"
                     "        v += best == lab[r];\n",
                  (long long)C);
        kbody(c, "    }\n");
    }
    kbody(c, "    const double s = th_block_sum(v);\n    if (threadIdx.x == 0) {\n        y[0] = (float)s;\n"
             "        if (met) *met += s;\n    }\n");
    kclose(c);
}

// --- shapes -------------------------------------------------------------------------------------------------------
static void emit_slice(cctx *c) {
    const int32_t *in = IN(c, c->node);
    const kh_gattr *a = &N(c, c->node)->attr;
    int64_t len, inner;
    th_cu_affine outer = around(c, in[0], a->axis, &len, &inner);
    int64_t blk = (int64_t)a->size * inner;
    char t[64];
    kloop_open(c, NULL, scale(outer, blk));
    kptr(c, value(c, in[0]), "const float *x");
    kptr(c, value(c, c->node), "float *y");
    kbody(c, "    TH_CU_LOOP(i, %s) y[i] = x[(i / %lldLL) * %lldLL + %lldLL + i %% %lldLL];\n",
          text(scale(outer, blk), t, sizeof t), (long long)blk, (long long)(len * inner), (long long)(a->begin * inner),
          (long long)blk);
    kclose(c);
}

static void emit_concat(cctx *c) {
    const int32_t *in = IN(c, c->node);
    const kh_gnode *nd = N(c, c->node);
    int64_t len, inner, pos = 0;
    th_cu_affine outer = around(c, c->node, nd->attr.axis, &len, &inner);
    char t[64], sfx[16];
    for (int j = 0; j < nd->n_in && c->st == KH_OK; j++) {
        int64_t lj = N(c, in[j])->dims[nd->attr.axis], blk = lj * inner;
        snprintf(sfx, sizeof sfx, "%d", j);
        kloop_open(c, sfx, scale(outer, blk));
        kptr(c, value(c, in[j]), "const float *x");
        kptr(c, value(c, c->node), "float *y");
        kbody(c, "    TH_CU_LOOP(i, %s) y[(i / %lldLL) * %lldLL + %lldLL + i %% %lldLL] = x[i];\n",
              text(scale(outer, blk), t, sizeof t), (long long)blk, (long long)(len * inner), (long long)(pos * inner),
              (long long)blk);
        kclose(c);
        pos += lj;
    }
}

static void emit_reverse(cctx *c) {
    const int32_t *in = IN(c, c->node);
    int64_t len, inner;
    th_cu_affine outer = around(c, in[0], N(c, c->node)->attr.axis, &len, &inner);
    char t[64];
    kloop_open(c, NULL, scale(outer, len * inner));
    kptr(c, value(c, in[0]), "const float *x");
    kptr(c, value(c, c->node), "float *y");
    kbody(c, "    TH_CU_LOOP(i, %s) {\n        const int64_t k = i %% %lldLL, l = (i / %lldLL) %% %lldLL, o = i / %lldLL;\n"
             "        y[i] = x[(o * %lldLL + %lldLL - l) * %lldLL + k];\n    }\n",
          text(scale(outer, len * inner), t, sizeof t), (long long)inner, (long long)inner, (long long)len,
          (long long)(len * inner), (long long)len, (long long)(len - 1), (long long)inner);
    kclose(c);
}

static void emit_mean(cctx *c, int grad) {
    const int32_t *in = IN(c, c->node);
    int64_t len, inner;
    th_cu_affine outer = around(c, grad ? c->node : in[0], N(c, c->node)->attr.axis, &len, &inner);
    char t[64];
    kloop_open(c, NULL, scale(outer, grad ? len * inner : inner));
    kptr(c, value(c, in[0]), grad ? "const float *dy" : "const float *x");
    kptr(c, value(c, c->node), grad ? "float *dx" : "float *y");
    if (!grad) /* in l order, as the CPU sums */
        kbody(c, "    TH_CU_LOOP(i, %s) {\n        const int64_t o = i / %lldLL, k = i %% %lldLL;\n        float s = 0.0f;\n"
                 "        for (int64_t l = 0; l < %lldLL; l++) s += x[(o * %lldLL + l) * %lldLL + k];\n"
                 "        y[i] = s * (1.0f / %lld.0f);\n    }\n",
              text(scale(outer, inner), t, sizeof t), (long long)inner, (long long)inner, (long long)len, (long long)len,
              (long long)inner, (long long)len);
    else
        kbody(c, "    TH_CU_LOOP(i, %s) dx[i] = dy[(i / %lldLL) * %lldLL + i %% %lldLL] * (1.0f / %lld.0f);\n",
              text(scale(outer, len * inner), t, sizeof t), (long long)(len * inner), (long long)inner,
              (long long)inner, (long long)len);
    kclose(c);
}

static void emit_gather(cctx *c, int grad) {
    const int32_t *in = IN(c, c->node);
    int32_t idx = grad ? in[0] : in[1];
    int64_t D = grad ? N(c, c->node)->dims[1] : N(c, in[0])->dims[1];
    th_cu_affine cnt = scale(numel(c, idx), D);
    char t[64];
    kloop_open(c, NULL, cnt);
    if (!grad) { /* indices were validated on the host while staging */
        kptr(c, value(c, in[0]), "const float *table");
        kptr(c, value(c, in[1]), "const int32_t *idx");
        kptr(c, value(c, c->node), "float *y");
        kbody(c, "    TH_CU_LOOP(i, %s) y[i] = table[(int64_t)idx[i / %lldLL] * %lldLL + i %% %lldLL];\n",
              text(cnt, t, sizeof t), (long long)D, (long long)D, (long long)D);
    } else { /* into the persistent accumulator; the order of the additions is not fixed */
        kptr(c, value(c, in[0]), "const int32_t *idx");
        kptr(c, value(c, in[1]), "const float *dy");
        kptr(c, value(c, c->node), "float *acc");
        kbody(c, "    TH_CU_LOOP(i, %s) atomicAdd(&acc[(int64_t)idx[i / %lldLL] * %lldLL + i %% %lldLL], dy[i]);\n",
              text(cnt, t, sizeof t), (long long)D, (long long)D, (long long)D);
    }
    kclose(c);
}

// --- images -------------------------------------------------------------------------------------------------------
typedef struct geom {
    kh_conv2d_dims d;
    int64_t KH, KW, F, SH, SW, pad_bottom, pad_right;
    int asym;
} geom;

static int geometry(cctx *c, int32_t x, int64_t KH, int64_t KW, int64_t F, int64_t SH, int64_t SW, int32_t padding,
                    geom *q) {
    const kh_gnode *X = N(c, x);
    memset(q, 0, sizeof *q);
    if (X->rank != 4 ||
        kh_conv2d_geometry(&q->d, 1, X->dims[1], X->dims[2], X->dims[3], KH, KW, F, SH, SW, padding) != KH_OK) {
        fail(c, KH_ERR_INVALID, "inconsistent convolution or pooling geometry");
        return 0;
    }
    int64_t th = padding == KH_PAD_SAME ? (q->d.OH - 1) * SH + KH - q->d.H : 0;
    int64_t tw = padding == KH_PAD_SAME ? (q->d.OW - 1) * SW + KW - q->d.W : 0;
    th = th > 0 ? th : 0;
    tw = tw > 0 ? tw : 0;
    q->KH = KH, q->KW = KW, q->F = F, q->SH = SH, q->SW = SW;
    q->pad_bottom = th - q->d.pad_top;
    q->pad_right = tw - q->d.pad_left;
    q->asym = q->pad_bottom != q->d.pad_top || q->pad_right != q->d.pad_left;
    return 1;
}

static void pool_const(cctx *c, const geom *q) {
    kbody(c, "    const th_cu_pool g = {%lldLL, %lldLL, %lldLL, %lldLL, %lldLL, %lldLL, %lldLL, %lldLL, %lldLL, %lldLL, %lldLL};\n",
          (long long)q->d.H, (long long)q->d.W, (long long)q->d.C, (long long)q->KH, (long long)q->KW,
          (long long)q->d.OH, (long long)q->d.OW, (long long)q->SH, (long long)q->SW, (long long)q->d.pad_top,
          (long long)q->d.pad_left);
}

static void emit_pool(cctx *c, int grad) {
    const int32_t *in = IN(c, c->node);
    const kh_gattr *a = &N(c, c->node)->attr;
    geom q;
    int64_t SH = a->strides[0] > 0 ? a->strides[0] : 1, SW = a->strides[1] > 0 ? a->strides[1] : 1;
    if (!geometry(c, in[0], a->window[0], a->window[1], N(c, in[0])->dims[3], SH, SW, a->padding, &q)) return;
    int64_t C = q.d.C;
    char t[64];
    if (!grad) {
        th_cu_affine cnt = aff(q.d.OH * q.d.OW * C, 0);
        kloop_open(c, NULL, cnt);
        kptr(c, value(c, in[0]), "const float *x");
        kptr(c, value(c, c->node), "float *y");
        pool_const(c, &q);
        kbody(c, "    TH_CU_LOOP(i, %s) {\n        const int64_t ch = i %% g.C, ow = (i / g.C) %% g.OW, oh = (i / (g.C * g.OW)) %% g.OH;\n"
                 "        const int64_t at = th_pool_argmax(x, g, i / (g.C * g.OW * g.OH), oh, ow, ch);\n"
                 "        y[i] = at >= 0 ? x[at] : 0.0f;\n    }\n",
              text(cnt, t, sizeof t));
    } else { /* dx at each input element: the sum of dy over the windows whose first maximum it is (no atomics) */
        th_cu_affine cnt = aff(q.d.H * q.d.W * C, 0);
        kloop_open(c, NULL, cnt);
        kptr(c, value(c, in[0]), "const float *x");
        kptr(c, value(c, in[1]), "const float *dy");
        kptr(c, value(c, c->node), "float *dx");
        pool_const(c, &q);
        kbody(c, "    TH_CU_LOOP(i, %s) {\n        const int64_t ch = i %% g.C, iw = (i / g.C) %% g.W, ih = (i / (g.C * g.W)) %% g.H;\n"
                 "        const int64_t s = i / (g.C * g.W * g.H);\n"
                 "        int64_t oh0 = ih + g.PT - (g.KH - 1), ow0 = iw + g.PL - (g.KW - 1);\n"
                 "        oh0 = oh0 > 0 ? (oh0 + g.SH - 1) / g.SH : 0;\n        ow0 = ow0 > 0 ? (ow0 + g.SW - 1) / g.SW : 0;\n"
                 "        float v = 0.0f;\n"
                 "        for (int64_t oh = oh0; oh < g.OH && oh * g.SH - g.PT <= ih; oh++)\n"
                 "            for (int64_t ow = ow0; ow < g.OW && ow * g.SW - g.PL <= iw; ow++)\n"
                 "                if (th_pool_argmax(x, g, s, oh, ow, ch) == i) v += dy[((s * g.OH + oh) * g.OW + ow) * g.C + ch];\n"
                 "        dx[i] = v;\n    }\n",
              text(cnt, t, sizeof t));
    }
    kclose(c);
}

/* dst (cols, rows) = src (rows, cols)^T: HWIO filters <-> cuDNN's NHWC filter layout (F, KH, KW, C) */
static void emit_transpose(cctx *c, const char *sfx, th_cu_ref src, th_cu_ref dst, int64_t R, int64_t C) {
    kloop_open(c, sfx, aff(0, R * C));
    kptr(c, src, "const float *src");
    kptr(c, dst, "float *dst");
    kbody(c, "    TH_CU_LOOP(i, %lldLL) dst[(i %% %lldLL) * %lldLL + i / %lldLL] = src[i];\n", (long long)(R * C),
          (long long)C, (long long)R, (long long)C);
    kclose(c);
}

/* the padded copy (n, Hp, Wp, C) of x (n, H, W, C) (pad: 1), or the inverse selection (pad: 0) */
static void emit_pad(cctx *c, int pad, th_cu_ref from, th_cu_ref to, const geom *q, int64_t Hp, int64_t Wp) {
    int64_t H = q->d.H, W = q->d.W, C = q->d.C, PT = q->d.pad_top, PL = q->d.pad_left;
    char t[64];
    th_cu_affine cnt = aff(pad ? Hp * Wp * C : H * W * C, 0);
    kloop_open(c, pad ? "pad" : "crop", cnt);
    kptr(c, from, "const float *a");
    kptr(c, to, "float *b");
    if (pad)
        kbody(c, "    TH_CU_LOOP(i, %s) {\n        const int64_t ch = i %% %lldLL, w = (i / %lldLL) %% %lldLL, h = (i / %lldLL) %% %lldLL, s = i / %lldLL;\n"
                 "        const int64_t ih = h - %lldLL, iw = w - %lldLL;\n"
                 "        b[i] = ih >= 0 && ih < %lldLL && iw >= 0 && iw < %lldLL ? a[((s * %lldLL + ih) * %lldLL + iw) * %lldLL + ch] : 0.0f;\n    }\n",
              text(cnt, t, sizeof t), (long long)C, (long long)C, (long long)Wp, (long long)(C * Wp), (long long)Hp,
              (long long)(C * Wp * Hp), (long long)PT, (long long)PL, (long long)H, (long long)W, (long long)Hp,
              (long long)Wp, (long long)C);
    else
        kbody(c, "    TH_CU_LOOP(i, %s) {\n        const int64_t ch = i %% %lldLL, w = (i / %lldLL) %% %lldLL, h = (i / %lldLL) %% %lldLL, s = i / %lldLL;\n"
                 "        b[i] = a[((s * %lldLL + h + %lldLL) * %lldLL + w + %lldLL) * %lldLL + ch];\n    }\n",
              text(cnt, t, sizeof t), (long long)C, (long long)C, (long long)W, (long long)(C * W), (long long)H,
              (long long)(C * W * H), (long long)Hp, (long long)PT, (long long)Wp, (long long)PL, (long long)C);
    kclose(c);
}

static void emit_conv(cctx *c) {
    int32_t i = c->node;
    const kh_gnode *nd = N(c, i);
    const int32_t *in = IN(c, i);
    uint32_t op = nd->op;
    int32_t xn = op == KH_GOP_CONV2D_BACKPROP_INPUT ? nd->attr.shape_of : in[0];
    int32_t wn = op == KH_GOP_CONV2D ? in[1] : op == KH_GOP_CONV2D_BACKPROP_INPUT ? in[0] : nd->attr.shape_of;
    if (xn < 0 || wn < 0) {
        fail(c, KH_ERR_INTERNAL, "convolution without its input or filter shape");
        return;
    }
    const kh_gnode *Wn = N(c, wn);
    geom q;
    int64_t SH = nd->attr.strides[0] > 0 ? nd->attr.strides[0] : 1, SW = nd->attr.strides[1] > 0 ? nd->attr.strides[1] : 1;
    if (Wn->rank != 4 || !geometry(c, xn, Wn->dims[0], Wn->dims[1], Wn->dims[3], SH, SW, nd->attr.padding, &q)) {
        fail(c, KH_ERR_INVALID, "inconsistent convolution shapes");
        return;
    }
    int64_t K = q.KH * q.KW * q.d.C, F = q.F;
    int64_t Hp = q.asym ? q.d.H + q.d.pad_top + q.pad_bottom : q.d.H;
    int64_t Wp = q.asym ? q.d.W + q.d.pad_left + q.pad_right : q.d.W;
    th_cu_ref wt = scratch(c, K * F * 4);
    th_cu_ref xpad = q.asym ? scratch(c, c->g->max_batch * Hp * Wp * q.d.C * 4) : wt;
    th_cu_conv cv = {.op = op == KH_GOP_CONV2D ? TH_CU_CONV_FWD : op == KH_GOP_CONV2D_BACKPROP_INPUT ? TH_CU_CONV_BWD_DATA
                                                                                                  : TH_CU_CONV_BWD_FILTER,
                     .H = (int32_t)q.d.H, .W = (int32_t)q.d.W, .C = (int32_t)q.d.C, .KH = (int32_t)q.KH,
                     .KW = (int32_t)q.KW, .F = (int32_t)F, .OH = (int32_t)q.d.OH, .OW = (int32_t)q.d.OW,
                     .SH = (int32_t)SH, .SW = (int32_t)SW, .pad_h = q.asym ? 0 : (int32_t)q.d.pad_top,
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

// --- matrix products ------------------------------------------------------------------------------------------------
static void emit_matmul(cctx *c) {
    int32_t i = c->node;
    const kh_gnode *nd = N(c, i);
    const int32_t *in = IN(c, i);
    const kh_gnode *A = N(c, in[0]), *B = N(c, in[1]);
    int64_t ca = last_dim(A), cb = last_dim(B);
    th_cu_affine ra = rows(c, in[0]), rb = rows(c, in[1]);
    int ta = nd->attr.transpose_a != 0, tb = nd->attr.transpose_b != 0;
    th_cu_affine M = ta ? aff(0, ca) : ra, K = ta ? ra : aff(0, ca), Nn = tb ? rb : aff(0, cb);
    if (Nn.a != 0) {
        fail(c, KH_ERR_UNSUPPORTED, "a transposed batched right operand (its rows would be the output's row stride)");
        return;
    }
    gemm(c, ta, tb, M, Nn, K, value(c, in[0]), ca, value(c, in[1]), cb, value(c, i), Nn.b, 0.0f, 0);
}

// --- training -------------------------------------------------------------------------------------------------------
static void emit_apply(cctx *c) {
    int32_t i = c->node;
    const kh_gnode *nd = N(c, i);
    const int32_t *in = IN(c, i);
    int32_t v = kh_model_graphs_var(c->env->mg, nd->attr.layer, nd->attr.slot);
    if (v < 0) {
        fail(c, KH_ERR_INTERNAL, "no variable (%d, %d)", nd->attr.layer, nd->attr.slot);
        return;
    }
    int clear = N(c, in[1])->op == KH_GOP_GATHER_GRAD; /* the accumulator starts from zero next step */
    int64_t cnt = c->env->mg->vars[v].numel;
    kloop_open(c, NULL, aff(0, cnt));
    kptr(c, var_ref(v, TH_CU_VAR), "float *w");
    int slots = nd->op == KH_GOP_APPLY_ADAM || nd->op == KH_GOP_APPLY_ADADELTA ? 2 : nd->op == KH_GOP_APPLY_RMSPROP;
    if (slots >= 1) kptr(c, var_ref(v, TH_CU_SLOT1), "float *s1");
    if (slots >= 2) kptr(c, var_ref(v, TH_CU_SLOT2), "float *s2");
    kptr(c, value(c, in[1]), "float *g");
    kscalar(c, TH_CUARG_LR);
    char call[256];
    th_update_text(nd->op, &c->env->mg->opt, call, sizeof call);
    kbody(c, "    TH_CU_LOOP(k, %lldLL) {\n        const float gk = g[k];\n        %s;%s\n    }\n", (long long)cnt, call,
          clear ? "\n        g[k] = 0.0f;" : "");
    kclose(c);
}

static void emit_fill(cctx *c) {
    kloop_open(c, NULL, aff(1, 0));
    kptr(c, value(c, c->node), "float *y");
    kbody(c, "    TH_CU_LOOP(k, n) y[k] = 1.0f / (float)n;\n");
    kclose(c);
}

// --- LSTM scans -------------------------------------------------------------------------------------------------------
/* S (N, T, 6, U): h, c, i, f, g, o per step; xw, dXW (N, T, 4U). Per step t one GEMM and one fused gate kernel. */
static void emit_scan(cctx *c) {
    int32_t i = c->node;
    const kh_gnode *nd = N(c, i);
    const int32_t *in = IN(c, i);
    const kh_gnode *S = N(c, nd->op == KH_GOP_LSTM_SCAN ? i : in[0]);
    if (!(S->flags & KH_GVAL_BATCHED) || S->rank != 4 || S->dims[2] != 6) {
        fail(c, KH_ERR_UNSUPPORTED, "a scan state that is not batched (N, T, 6, U)");
        return;
    }
    int64_t T = S->dims[1], U = S->dims[3], G = 4 * U;
    th_cu_affine nU = aff(U, 0);
    char t[64];
    if (nd->op == KH_GOP_LSTM_SCAN) { /* (xw, U) -> S */
        th_cu_ref z = scratch(c, c->g->max_batch * G * 4);
        th_cu_ref Sref = value(c, i), h_prev = Sref;
        h_prev.offset -= 6 * U * 4; /* S[:, t-1, 0]: never read at t = 0 */
        h_prev.step = 6 * U * 4;
        loop(c, (int32_t)T, 0, 2);
        /* z (n, 4U) = h_{t-1} (n, U; row stride T*6U) U (U, 4U) */
        gemm(c, 0, 0, aff(1, 0), aff(0, G), aff(0, U), h_prev, T * 6 * U, value(c, in[1]), G, z, G, 0.0f, 1);
        kloop_open(c, "step", nU);
        kptr(c, value(c, in[0]), "const float *xw");
        kptr(c, z, "const float *z");
        kptr(c, Sref, "float *S");
        kscalar(c, TH_CUARG_STEP);
        kbody(c, "    TH_CU_LOOP(k, %s) {\n        const int64_t r = k / %lldLL, u = k %% %lldLL;\n"
                 "        const float *x = xw + (r * %lldLL + t) * %lldLL, *zr = z + r * %lldLL;\n"
                 "        float *s = S + (r * %lldLL + t) * %lldLL;\n"
                 "        const float cp = t > 0 ? s[u - %lldLL + %lldLL] : 0.0f;\n"
                 "        float zz[4];\n"
                 "        for (int q = 0; q < 4; q++) zz[q] = x[q * %lldLL + u] + (t > 0 ? zr[q * %lldLL + u] : 0.0f);\n"
                 "        kh_lstm_cell(zz[0], zz[1], zz[2], zz[3], cp, &s[2 * %lldLL + u], &s[3 * %lldLL + u], &s[4 * %lldLL + u],\n"
                 "                     &s[5 * %lldLL + u], &s[%lldLL + u], &s[u]);\n    }\n",
              text(nU, t, sizeof t), (long long)U, (long long)U, (long long)T, (long long)G, (long long)G, (long long)T,
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
        kbody(c, "    TH_CU_LOOP(k, %s) {\n        const int64_t r = k / %lldLL, u = k %% %lldLL;\n"
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
              text(nU, t, sizeof t), (long long)U, (long long)U, (long long)T, (long long)(6 * U), (long long)(6 * U),
              (long long)U, (long long)(T - 1), (long long)U, (long long)(T - 1), (long long)T, (long long)G,
              (long long)U, (long long)U, (long long)U, (long long)U, (long long)U, (long long)U, (long long)U,
              (long long)U);
        kclose(c);
        /* dh_{t-1} (n, U) = dZ_t (n, 4U; row stride T*4U) U^T: not needed after t = 0 */
        th_cu_ref dz = dxw;
        dz.step = G * 4;
        gemm(c, 0, 1, aff(1, 0), aff(0, U), aff(0, G), dz, T * G, value(c, in[1]), G, dh, U, 0.0f, 1);
    } else { /* (S, dXW) -> dU = sum over (r, t >= 1) of h_{t-1}^T dXW[r, t]: one GEMM over n*T shifted rows */
        th_cu_ref hp = scratch(c, c->g->max_batch * T * U * 4);
        kloop_open(c, "shift", aff(T * U, 0));
        kptr(c, value(c, in[0]), "const float *S");
        kptr(c, hp, "float *hp");
        kbody(c, "    TH_CU_LOOP(k, %s) {\n        const int64_t u = k %% %lldLL, rt = k / %lldLL, t = rt %% %lldLL;\n"
                 "        hp[k] = t > 0 ? S[(rt - 1) * %lldLL + u] : 0.0f;\n    }\n",
              text(aff(T * U, 0), t, sizeof t), (long long)U, (long long)U, (long long)T, (long long)(6 * U));
        kclose(c);
        gemm(c, 1, 0, aff(0, U), aff(0, G), aff(T, 0), hp, U, value(c, in[1]), G, value(c, i), G, 0.0f, 0);
    }
}

// --- one node -------------------------------------------------------------------------------------------------------
static void emit_node(cctx *c) {
    int32_t i = c->node;
    const kh_gnode *nd = N(c, i);
    const int32_t *in = IN(c, i);
    switch (nd->op) {
    case KH_GOP_INPUT: case KH_GOP_VARIABLE: case KH_GOP_RESHAPE: return;
    case KH_GOP_ZEROS: memset0(c, value(c, i), scale(numel(c, i), 4)); return;
    case KH_GOP_FILL_BATCH: emit_fill(c); return;
    case KH_GOP_ELEMWISE: emit_elemwise(c, &c->g->exprs[nd->attr.expr], in); return;
    case KH_GOP_MATMUL: emit_matmul(c); return;
    case KH_GOP_BIAS_ADD_GRAD: emit_bias_grad(c); return;
    case KH_GOP_SOFTMAX: emit_softmax(c, 0); return;
    case KH_GOP_SOFTMAX_GRAD: emit_softmax(c, 1); return;
    case KH_GOP_CONV2D: case KH_GOP_CONV2D_BACKPROP_INPUT: case KH_GOP_CONV2D_BACKPROP_FILTER: emit_conv(c); return;
    case KH_GOP_MAXPOOL: emit_pool(c, 0); return;
    case KH_GOP_MAXPOOL_GRAD: emit_pool(c, 1); return;
    case KH_GOP_SLICE: emit_slice(c); return;
    case KH_GOP_CONCAT: emit_concat(c); return;
    case KH_GOP_REVERSE: emit_reverse(c); return;
    case KH_GOP_MEAN: emit_mean(c, 0); return;
    case KH_GOP_MEAN_GRAD: emit_mean(c, 1); return;
    case KH_GOP_GATHER: emit_gather(c, 0); return;
    case KH_GOP_GATHER_GRAD: emit_gather(c, 1); return;
    case KH_GOP_SOFTMAX_XENT: emit_xent(c, 0); return;
    case KH_GOP_SIGMOID_XENT: emit_xent(c, 1); return;
    case KH_GOP_SOFTMAX_XENT_GRAD: emit_xent_grad(c, 0); return;
    case KH_GOP_SIGMOID_XENT_GRAD: emit_xent_grad(c, 1); return;
    case KH_GOP_LOSS_SUM: emit_metric(c, 0); return;
    case KH_GOP_CORRECT_COUNT: emit_metric(c, 1); return;
    case KH_GOP_APPLY_GRADIENT_DESCENT: case KH_GOP_APPLY_RMSPROP: case KH_GOP_APPLY_ADAM: case KH_GOP_APPLY_ADADELTA:
        emit_apply(c);
        return;
    case KH_GOP_LSTM_SCAN: case KH_GOP_LSTM_SCAN_GRAD: case KH_GOP_LSTM_SCAN_GRAD_U: emit_scan(c); return;
    default: {
        kh_gexpr e;
        if (nd->op == KH_GOP_ADDN && nd->n_in > KH_GEXPR_MAX_IN) {
            emit_addn_wide(c, in, nd->n_in);
            return;
        }
        if (kh_gop_elementwise(nd->op) && th_expr_single(nd, &e)) {
            emit_elemwise(c, &e, in);
            return;
        }
        fail(c, KH_ERR_UNSUPPORTED, "no CUDA code for this op");
        return;
    }
    }
}

kh_status th_emit_cuda(const th_emit_env *env, th_sb *out, th_cu_plan *plan, char *err, size_t errlen) {
    memset(plan, 0, sizeof *plan);
    kh_status st = th_prelude_cuda(out, err, errlen);
    if (st != KH_OK) return st;
    static const char *const names[KH_GFN_COUNT] = {"train", "eval", "predict", "probe"};
    cctx c = {.env = env, .g = env->g, .b = out, .plan = plan, .st = KH_OK, .err = err, .errlen = errlen, .kernel = -1};
    if (env->plan->n_nodes != env->g->n_nodes)
        return kh_errf(err, errlen, KH_ERR_INTERNAL, "the memory plan has %d nodes, the graph %d", env->plan->n_nodes,
                       env->g->n_nodes);
    th_sb_printf(out, "\n/* ==== generated: %s function, %d nodes, arena %lld bytes ==== */\n\n", names[env->fn],
                 env->g->n_nodes, (long long)env->plan->arena_bytes);
    for (int32_t i = 0; i < env->g->n_nodes && c.st == KH_OK; i++) {
        c.node = i;
        c.part = env->fn == KH_GFN_PROBE && env->g->nodes[i].phase != 0 ? 1 : 0;
        c.scratch = 0;
        emit_node(&c);
    }
    th_sb_free(&c.sig);
    th_sb_free(&c.body);
    if (c.st == KH_OK && (out->oom || c.sig.oom || c.body.oom))
        c.st = kh_errf(err, errlen, KH_ERR_NOMEM, "out of memory generating CUDA code");
    if (c.st != KH_OK) th_cu_plan_free(plan);
    return c.st;
}

// --- the plan's helpers ---------------------------------------------------------------------------------------------
void th_cu_plan_free(th_cu_plan *p) {
    free(p->v);
    memset(p, 0, sizeof *p);
}

int64_t th_cu_grid(const th_cu_launch *e, int64_t n) {
    if (e->kind != TH_CUL_KERNEL || e->block <= 0) return 0;
    if (e->fixed_grid > 0) return e->fixed_grid;
    int64_t t = th_cu_eval(e->threads, n);
    if (t <= 0) return 0;
    int64_t g = (t + e->block - 1) / e->block;
    return g > TH_CU_GRID_CAP ? TH_CU_GRID_CAP : g;
}

size_t th_cu_arg_size(uint32_t kind) {
    switch (kind) {
    case TH_CUARG_LR: case TH_CUARG_STEP: return 4;
    default: return 8;
    }
}

const char *th_cu_entry_library(uint32_t kind) {
    switch (kind) {
    case TH_CUL_KERNEL: return "kernel";
    case TH_CUL_GEMM: return "cublas";
    case TH_CUL_CONV: return "cudnn";
    case TH_CUL_MEMSET: return "memset";
    case TH_CUL_LOOP: return "loop";
    default: return "none";
    }
}
