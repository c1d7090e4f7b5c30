/* th_cuda_run.c — running a function's launch plan on the session's stream: the batch staged by the graph
 * runtime's device storage (khost/kit/graph_runtime_cuda.h: pinned buffers, indices and labels validated on the
 * host), then each entry in order: a generated kernel with
 * cuLaunchKernel, a cuBLAS SGEMM (row-major through the column-major API by swapping the operands:
 * C^T = op(B)^T op(A)^T), a cuDNN NHWC convolution (one algorithm per entry chosen at compile by the *_v7
 * heuristics, deterministic first, in the session's math: kh_cudnn_conv_choose, as tensorflow's GPU path
 * chooses), a memset, or a scan loop
 * (its body once per step t, GEMM operands moved by their per-step stride). Nothing here synchronises, except
 * TH_CUDA_SYNC_EACH_OP=1, which synchronises after every entry so an asynchronous fault names its node. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "khost/kit/cuda.h"
#include "th_cuda_exec.h"

#define CONV_WS_CAP ((size_t)512 << 20) /* the most workspace one convolution algorithm may ask for */

static const float k_one = 1.0f, k_zero = 0.0f;

CUdeviceptr thc_addr(th_model *m, int f, const th_cu_ref *r) {
    th_cuda_model *cm = m->cuda;
    CUdeviceptr b = 0;
    switch (r->base) {
    case TH_CU_ARENA: b = cm->dev.arena; break;
    case TH_CU_VAR: b = cm->dev.w[r->index]; break;
    case TH_CU_SLOT1: b = cm->dev.s1[r->index]; break;
    case TH_CU_SLOT2: b = cm->dev.s2[r->index]; break;
    case TH_CU_FEED: b = cm->dev.feed[r->index]; break;
    case TH_CU_PERSISTENT: b = r->index < cm->dev.n_pers[f] ? cm->dev.pers[f][r->index] : 0; break;
    case TH_CU_SCRATCH: b = cm->scratch; break;
    case TH_CU_METRICS: b = cm->dev.met; break;
    default: return 0;
    }
    return b ? b + (CUdeviceptr)r->offset : 0; /* an offset may be negative (h_{t-1} of a scan): modulo 2^64 */
}

// --- convolutions: compile-time state ---------------------------------------------------------------------------
/* descriptors for a batch of n and the entry's workspace for it */
static kh_status conv_descs(th_model *m, int f, const th_cu_launch *e, thc_conv *c, int64_t n, size_t *ws) {
    const th_cu_conv *v = &e->conv;
    cudnnHandle_t h = m->cuda->cs->k.dnn;
    if (c->desc_n != n) {
        THC_DNN(m, f, e->node, "run",
                cudnnSetTensor4dDescriptor(c->xd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, (int)n, v->C, v->Hp, v->Wp));
        THC_DNN(m, f, e->node, "run",
                cudnnSetTensor4dDescriptor(c->yd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, (int)n, v->F, v->OH, v->OW));
        c->desc_n = n;
    }
    *ws = 0;
    if (v->op == TH_CU_CONV_FWD)
        THC_DNN(m, f, e->node, "run",
                cudnnGetConvolutionForwardWorkspaceSize(h, c->xd, c->wd, c->cd, c->yd, (cudnnConvolutionFwdAlgo_t)c->algo, ws));
    else if (v->op == TH_CU_CONV_BWD_DATA)
        THC_DNN(m, f, e->node, "run",
                cudnnGetConvolutionBackwardDataWorkspaceSize(h, c->wd, c->yd, c->cd, c->xd,
                                                             (cudnnConvolutionBwdDataAlgo_t)c->algo, ws));
    else
        THC_DNN(m, f, e->node, "run",
                cudnnGetConvolutionBackwardFilterWorkspaceSize(h, c->xd, c->yd, c->cd, c->wd,
                                                               (cudnnConvolutionBwdFilterAlgo_t)c->algo, ws));
    return KH_OK;
}

/* The algorithm of a convolution entry, chosen once by the kit (khost/kit/cuda.h: cuDNN's heuristics ranked
 * fastest first; with [plugin theano] deterministic = 1, the default, the first working deterministic one, else
 * the first working one with a warning; none working: the candidates logged and named in the error). The choices
 * of the training function (or of predict alone) go into the record's cudnn_algos. */
static kh_status choose_algo(th_model *m, int f, const th_cu_launch *e, thc_conv *c) {
    const th_cu_conv *v = &e->conv;
    kh_conv_dir d = v->op == TH_CU_CONV_FWD ? KH_CONV_FWD : v->op == TH_CU_CONV_BWD_DATA ? KH_CONV_BWD_DATA
                                                                                       : KH_CONV_BWD_FILTER;
    char where[64], why[600];
    snprintf(where, sizeof where, "convolution node %d", e->node);
    kh_conv_choice_opts o = {.deterministic = m->s->set.deterministic != 0, .tf32 = m->cuda->cs->k.tf32,
                             .ws_cap = CONV_WS_CAP, .host = m->s->rt.host, .plugin = "theano", .where = where};
    int det = 0;
    kh_status st = kh_cudnn_conv_choose(m->cuda->cs->k.dnn, d, c->xd, c->wd, c->cd, c->yd, &o, &c->algo, &det, why,
                                        sizeof why);
    if (st != KH_OK) return thc_fail(m, f, e->node, "compile", st, "%s", why);
    const kh_graph *g = &m->fn[f].g;
    int layer = e->node >= 0 && e->node < g->n_nodes ? g->nodes[e->node].attr.layer : -1;
    if (f == KH_GFN_TRAIN || (f == KH_GFN_PREDICT && !m->fn[KH_GFN_TRAIN].g.n_nodes))
        kh_algo_record(m->cuda->cs->conv_algos, sizeof m->cuda->cs->conv_algos, layer, kh_conv_dir_name(d), c->algo,
                       det);
    return KH_OK;
}

static kh_status prepare_conv(th_model *m, int f, int32_t k) {
    const th_cu_launch *e = &m->cuda->fn[f].plan.v[k];
    const th_cu_conv *v = &e->conv;
    thc_conv *c = calloc(1, sizeof *c);
    if (!c) return thc_fail(m, f, e->node, "compile", KH_ERR_NOMEM, "out of host memory");
    m->cuda->fn[f].conv[k] = c;
    int N = (int)m->rt.max_batch;
    THC_DNN(m, f, e->node, "compile", cudnnCreateTensorDescriptor(&c->xd));
    THC_DNN(m, f, e->node, "compile", cudnnCreateTensorDescriptor(&c->yd));
    THC_DNN(m, f, e->node, "compile", cudnnCreateFilterDescriptor(&c->wd));
    THC_DNN(m, f, e->node, "compile", cudnnCreateConvolutionDescriptor(&c->cd));
    THC_DNN(m, f, e->node, "compile",
            cudnnSetFilter4dDescriptor(c->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, v->F, v->C, v->KH, v->KW));
    THC_DNN(m, f, e->node, "compile",
            cudnnSetConvolution2dDescriptor(c->cd, v->pad_h, v->pad_w, v->SH, v->SW, 1, 1, CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_FLOAT));
    /* the session's math: FMA only (fp32; refused math is an error, not a silent fallback), or cuDNN's default,
     * which allows TF32 tensor cores for FP32 data (tf32) */
    THC_DNN(m, f, e->node, "compile",
            cudnnSetConvolutionMathType(c->cd, m->cuda->cs->k.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    THC_DNN(m, f, e->node, "compile",
            cudnnSetTensor4dDescriptor(c->xd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, N, v->C, v->Hp, v->Wp));
    THC_DNN(m, f, e->node, "compile",
            cudnnSetTensor4dDescriptor(c->yd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, N, v->F, v->OH, v->OW));
    c->desc_n = N;
    int on, oc, oh, ow;
    THC_DNN(m, f, e->node, "compile", cudnnGetConvolution2dForwardOutputDim(c->cd, c->xd, c->wd, &on, &oc, &oh, &ow));
    if (on != N || oc != v->F || oh != v->OH || ow != v->OW)
        return thc_fail(m, f, e->node, "compile", KH_ERR_INTERNAL, "cuDNN output %dx%dx%dx%d, the plan says %dx%dx%dx%d",
                        on, oh, ow, oc, N, v->OH, v->OW, v->F);
    return choose_algo(m, f, e, c);
}

kh_status thc_prepare_convs(th_model *m, int f) {
    thc_fn *fn = &m->cuda->fn[f];
    for (int32_t k = 0; k < fn->plan.n; k++) {
        if (fn->plan.v[k].kind != TH_CUL_CONV) continue;
        kh_status st = prepare_conv(m, f, k);
        if (st != KH_OK) return st;
    }
    return KH_OK;
}

void thc_release_convs(th_model *m, int f) {
    thc_fn *fn = &m->cuda->fn[f];
    for (int32_t k = 0; fn->conv && k < fn->plan.n; k++) {
        thc_conv *c = fn->conv[k];
        if (!c) continue;
        if (c->xd) cudnnDestroyTensorDescriptor(c->xd);
        if (c->yd) cudnnDestroyTensorDescriptor(c->yd);
        if (c->wd) cudnnDestroyFilterDescriptor(c->wd);
        if (c->cd) cudnnDestroyConvolutionDescriptor(c->cd);
        free(c);
        fn->conv[k] = NULL;
    }
}

// --- one entry --------------------------------------------------------------------------------------------------
typedef struct run_args {
    int64_t n;
    float lr;
    uint64_t seed, counter;
    int32_t t;
} run_args;

static kh_status run_kernel(th_model *m, int f, int32_t k, const run_args *a) {
    thc_fn *fn = &m->cuda->fn[f];
    const th_cu_launch *e = &fn->plan.v[k];
    int64_t grid = th_cu_grid(e, a->n);
    if (grid <= 0) return KH_OK;
    void *params[TH_CU_MAX_ARGS];
    CUdeviceptr *argp = fn->argp + (size_t)k * TH_CU_MAX_ARGS;
    for (int j = 0; j < e->n_args; j++) {
        switch (e->args[j].kind) {
        case TH_CUARG_PTR: params[j] = &argp[j]; break;
        case TH_CUARG_N: params[j] = (void *)&a->n; break;
        case TH_CUARG_LR: params[j] = (void *)&a->lr; break;
        case TH_CUARG_SEED: params[j] = (void *)&a->seed; break;
        case TH_CUARG_COUNTER: params[j] = (void *)&a->counter; break;
        default: params[j] = (void *)&a->t; break; /* TH_CUARG_STEP */
        }
    }
    CUresult r = kh_cu.LaunchKernel(fn->func[k], (unsigned)grid, 1, 1, (unsigned)e->block, 1, 1, 0, m->cuda->cs->k.stream,
                                    params, NULL);
    if (r != CUDA_SUCCESS) {
        char t[160];
        return thc_fail(m, f, e->node, "run", kh_cu_status(r),
                        "%s (cuLaunchKernel of %s, grid %lld x %d)", kh_cu_result_text(r, t, sizeof t), e->name,
                        (long long)grid, e->block);
    }
    return KH_OK;
}

static kh_status run_gemm(th_model *m, int f, const th_cu_launch *e, const run_args *a) {
    const th_cu_gemm *g = &e->gemm;
    int64_t M = th_cu_eval(g->M, a->n), N = th_cu_eval(g->N, a->n), K = th_cu_eval(g->K, a->n);
    if (M <= 0 || N <= 0 || K <= 0)
        return thc_fail(m, f, e->node, "run", KH_ERR_INTERNAL, "GEMM of %lld x %lld x %lld", (long long)M, (long long)N,
                        (long long)K);
    CUdeviceptr A = thc_addr(m, f, &g->A) + (CUdeviceptr)(g->A.step * a->t);
    CUdeviceptr B = thc_addr(m, f, &g->B) + (CUdeviceptr)(g->B.step * a->t);
    CUdeviceptr C = thc_addr(m, f, &g->C) + (CUdeviceptr)(g->C.step * a->t);
    THC_BLAS(m, f, e->node, "run",
             cublasSgemm(m->cuda->cs->k.blas, g->tb ? CUBLAS_OP_T : CUBLAS_OP_N, g->ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N,
                         (int)M, (int)K, &k_one, (const float *)(uintptr_t)B, (int)g->ldb, (const float *)(uintptr_t)A,
                         (int)g->lda, &g->beta, (float *)(uintptr_t)C, (int)g->ldc));
    return KH_OK;
}

static kh_status run_conv(th_model *m, int f, int32_t k, int64_t n) {
    th_cuda_model *cm = m->cuda;
    const th_cu_launch *e = &cm->fn[f].plan.v[k];
    thc_conv *c = cm->fn[f].conv[k];
    size_t ws = 0;
    kh_status st = conv_descs(m, f, e, c, n, &ws);
    if (st != KH_OK) return st;
    if (ws > cm->ws_bytes)
        return thc_fail(m, f, e->node, "run", KH_ERR_INTERNAL, "batch %lld needs %zu B of cuDNN workspace, %zu B allocated",
                        (long long)n, ws, cm->ws_bytes);
    cudnnHandle_t h = cm->cs->k.dnn;
    void *x = (void *)(uintptr_t)thc_addr(m, f, &e->conv.x), *w = (void *)(uintptr_t)thc_addr(m, f, &e->conv.w);
    void *y = (void *)(uintptr_t)thc_addr(m, f, &e->conv.y), *wsp = (void *)(uintptr_t)cm->ws;
    switch (e->conv.op) {
    case TH_CU_CONV_FWD:
        THC_DNN(m, f, e->node, "run",
                cudnnConvolutionForward(h, &k_one, c->xd, x, c->wd, w, c->cd, (cudnnConvolutionFwdAlgo_t)c->algo, wsp,
                                        cm->ws_bytes, &k_zero, c->yd, y));
        break;
    case TH_CU_CONV_BWD_DATA:
        THC_DNN(m, f, e->node, "run",
                cudnnConvolutionBackwardData(h, &k_one, c->wd, w, c->yd, y, c->cd, (cudnnConvolutionBwdDataAlgo_t)c->algo,
                                             wsp, cm->ws_bytes, &k_zero, c->xd, x));
        break;
    default:
        THC_DNN(m, f, e->node, "run",
                cudnnConvolutionBackwardFilter(h, &k_one, c->xd, x, c->yd, y, c->cd,
                                               (cudnnConvolutionBwdFilterAlgo_t)c->algo, wsp, cm->ws_bytes, &k_zero,
                                               c->wd, w));
        break;
    }
    return KH_OK;
}

static kh_status run_entry(th_model *m, int f, int32_t k, const run_args *a) {
    th_cuda_model *cm = m->cuda;
    const th_cu_launch *e = &cm->fn[f].plan.v[k];
    kh_status st = KH_OK;
    switch (e->kind) {
    case TH_CUL_KERNEL: st = run_kernel(m, f, k, a); break;
    case TH_CUL_GEMM: st = run_gemm(m, f, e, a); break;
    case TH_CUL_CONV: st = run_conv(m, f, k, a->n); break;
    case TH_CUL_MEMSET: {
        int64_t b = th_cu_eval(e->bytes, a->n);
        if (b > 0) THC_CU(m, f, e->node, "run", kh_cu.MemsetD8Async(thc_addr(m, f, &e->dst), 0, (size_t)b, cm->cs->k.stream));
        break;
    }
    default: return thc_fail(m, f, e->node, "run", KH_ERR_INTERNAL, "plan entry %d of kind %u", k, e->kind);
    }
    if (st == KH_OK && cm->sync_each) THC_CU(m, f, e->node, "run", kh_cu.StreamSynchronize(cm->cs->k.stream));
    return st;
}

// --- the run -------------------------------------------------------------------------------------------------------
kh_status th_cuda_run(kh_grt_model *rtm, kh_gfn f, int part, int64_t n, double lr, uint64_t counter, const void *x,
                      const int32_t *labels, const float *dy) {
    th_model *m = (th_model *)rtm;
    th_cuda_model *cm = m->cuda;
    thc_fn *fn = &cm->fn[f];
    if (!fn->mod) return th_fail(m->s, KH_ERR_UNSUPPORTED, "run", "the model has no such function (no loss?)");
    kh_status st = kh_grt_dev_stage(&m->rt, &cm->dev, n, x, labels, dy);
    if (st == KH_OK && f == KH_GFN_PROBE && part == 1) /* accumulators of a probe start from zero at every backward */
        st = kh_grt_dev_clear_accumulators(&m->rt, &cm->dev, f);
    if (st != KH_OK) return st;
    run_args a = {n, (float)lr, m->rt.seed, counter, 0};
    const th_cu_plan *p = &fn->plan;
    for (int32_t k = 0; k < p->n && st == KH_OK; k++) {
        const th_cu_launch *e = &p->v[k];
        int32_t body = e->kind == TH_CUL_LOOP ? e->body : 0;
        if (e->part != part) {
            k += body;
            continue;
        }
        if (!body) {
            st = run_entry(m, f, k, &a);
            continue;
        }
        for (int32_t it = 0; it < e->steps && st == KH_OK; it++) {
            a.t = e->reverse ? e->steps - 1 - it : it;
            for (int32_t b = 1; b <= body && st == KH_OK; b++)
                if (!(p->v[k + b].skip_t0 && a.t == 0)) st = run_entry(m, f, k + b, &a);
        }
        a.t = 0;
        k += body;
    }
    if (st != KH_OK) return st;
    kh_grt_dev_count(&cm->dev, f, n);
    return KH_OK;
}
