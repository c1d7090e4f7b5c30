#define _POSIX_C_SOURCE 200809L
/* th_cuda_model.c — a compiled model on the GPU: each optimised, planned function emitted as CUDA C
 * (th_emit.c in the CUDA dialect), compiled by NVRTC for the device's architecture, its CUBIN checked against the launch plan
 * (kernel names and parameter layouts, th_cubin.c) and loaded with cuModuleLoadData; then the device memory,
 * all of it allocated here and none during a step: one arena of the largest function plan (the same offsets
 * the CPU path uses), the scratch the plans ask for (convolution filters in cuDNN's layout, padded inputs, scan
 * carries), and the graph runtime's device storage (khost/kit/graph_runtime_cuda.h: variables with their
 * optimizer slots, the GatherGrad accumulators, device feeds with two pinned staging buffers, the metric doubles),
 * the cuDNN workspace. Weights, node values and metrics are read back
 * synchronously; everything else is enqueued on the session's stream. */
#include <stdlib.h>
#include <string.h>

#include <stdio.h>

#include "cache/th_cache.h"
#include "th_cuda_exec.h"
#include "khost/kit/status.h"
#include "khost/kit/clock.h"
#include "khost/kit/optimizer.h"

static const char *const g_fn_names[KH_GFN_COUNT] = {"train", "eval", "predict", "probe"};


// --- free -----------------------------------------------------------------------------------------------------------
void th_cuda_free(kh_grt_model *rtm) {
    th_model *m = (th_model *)rtm;
    th_cuda_model *cm = m->cuda;
    if (!cm) return;
    if (cm->cs) {
        kh_cu.CtxSetCurrent(cm->cs->k.ctx);
        kh_cu.StreamSynchronize(cm->cs->k.stream);
    }
    for (int f = 0; f < KH_GFN_COUNT; f++) {
        thc_fn *fn = &cm->fn[f];
        thc_release_convs(m, f);
        free(fn->conv);
        free(fn->func);
        free(fn->argp);
        if (fn->mod) kh_cu.ModuleUnload(fn->mod);
        th_cu_plan_free(&fn->plan);
    }
    kh_grt_dev_release(&m->rt, &cm->dev);
    thc_free(cm->ws);
    thc_free(cm->scratch);
    free(cm);
    m->cuda = NULL;
}

// --- code ---------------------------------------------------------------------------------------------------------
typedef struct nvrtc_job {
    const char *source;
    const char *arch;
} nvrtc_job;

/* The cache's build callback: NVRTC to a CUBIN written at out_path (the cache publishes it). */
static int nvrtc_build(void *ctx, const char *src_path, const char *out_path, const char *log_path, char *err,
                       size_t errlen) {
    (void)src_path, (void)log_path;
    const nvrtc_job *j = ctx;
    void *cubin = NULL;
    size_t len = 0;
    if (th_nvrtc_compile(j->source, j->arch, &cubin, &len, err, errlen) != KH_OK) return -1;
    FILE *f = fopen(out_path, "wb");
    int ok = f && fwrite(cubin, 1, len, f) == len;
    if (f && fclose(f) != 0) ok = 0;
    free(cubin);
    if (!ok) snprintf(err, errlen, "cannot write %s", out_path);
    return ok ? 0 : -1;
}

static kh_status read_file(const char *path, void **data, size_t *len, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (!f || n <= 0 || fseek(f, 0, SEEK_SET) != 0) {
        if (f) fclose(f);
        return kh_errf(err, errlen, KH_ERR_IO, "cannot read %s", path);
    }
    *data = malloc((size_t)n);
    int ok = *data && fread(*data, 1, (size_t)n, f) == (size_t)n;
    fclose(f);
    if (!ok) {
        free(*data);
        *data = NULL;
        return kh_errf(err, errlen, KH_ERR_IO, "cannot read %s", path);
    }
    *len = (size_t)n;
    return KH_OK;
}
/* Emit, compile and load function f. */
static kh_status build_module(th_model *m, int f) {
    th_cuda_model *cm = m->cuda;
    thc_fn *fn = &cm->fn[f];
    th_fn_unit *u = &m->fn[f];
    char why[2048];
    double t0 = kh_now();
    th_emit_env env = {.g = &u->g, .plan = &u->plan, .mg = &m->rt.mg, .fn = (kh_gfn)f, .scratch_floats = NULL};
    th_sb src = {0};
    kh_status st = th_emit_cuda(&env, &src, &fn->plan, why, sizeof why);
    m->codegen_s += kh_now() - t0;
    if (st != KH_OK) {
        th_sb_free(&src);
        return th_fail(m->s, st, "compile", "%s function: CUDA code generation: %s", g_fn_names[f], why);
    }
    void *cubin = NULL;
    size_t len = 0;
    t0 = kh_now();
    /* through the generated-code cache: key = the source, NVRTC's version and options (with the architecture),
     * the driver version and the generator's; the CUBIN is the artifact */
    char nv[64], opts[256], extra[256];
    snprintf(extra, sizeof extra, "generator=%s\ndriver=%d\n", TH_GENERATOR_VERSION, kh_cu.version);
    nvrtc_job job = {.source = src.s, .arch = cm->cs->k.arch};
    th_cache_req req = {.source = src.s, .source_len = src.len, .source_name = "fn.cu", .artifact_name = "fn.cubin",
                        .tool_identity = th_nvrtc_version(nv, sizeof nv),
                        .tool_flags = th_nvrtc_options(cm->cs->k.arch, opts, sizeof opts), .key_extra = extra,
                        .build = nvrtc_build, .build_ctx = &job};
    th_cache_result res;
    st = th_cache_get(m->s->cache, &req, &res, why, sizeof why) == 0 ? read_file(res.artifact_path, &cubin, &len, why, sizeof why)
                                                                       : KH_ERR_INTERNAL;
    th_sb_free(&src);
    double cs = kh_now() - t0;
    cm->nvrtc_s += res.hit ? 0.0 : cs;
    m->cc_s += res.hit ? 0.0 : cs;
    m->load_s += res.hit ? cs : 0.0;
    if (!res.hit) m->cache_misses++;
    m->units++;
    if (st != KH_OK) return th_fail(m->s, st, "compile", "%s function: %s", g_fn_names[f], why);
    st = th_cubin_check_plan(cubin, len, &fn->plan, why, sizeof why);
    if (st != KH_OK) {
        free(cubin);
        return th_fail(m->s, st, "compile", "%s function: the CUBIN does not match its launch plan: %s", g_fn_names[f], why);
    }
    t0 = kh_now();
    CUresult r = kh_cu.ModuleLoadData(&fn->mod, cubin);
    free(cubin);
    if (r != CUDA_SUCCESS) {
        fn->mod = NULL;
        return thc_err_cu(m, -1, -1, "compile", r, "cuModuleLoadData(the CUBIN)");
    }
    fn->func = calloc((size_t)fn->plan.n + 1, sizeof *fn->func);
    fn->argp = calloc(((size_t)fn->plan.n + 1) * TH_CU_MAX_ARGS, sizeof *fn->argp);
    fn->conv = calloc((size_t)fn->plan.n + 1, sizeof *fn->conv);
    if (!fn->func || !fn->argp || !fn->conv) return th_fail(m->s, KH_ERR_NOMEM, "compile", "out of host memory");
    for (int32_t k = 0; k < fn->plan.n; k++) {
        const th_cu_launch *e = &fn->plan.v[k];
        if (e->kind != TH_CUL_KERNEL) continue;
        r = kh_cu.ModuleGetFunction(&fn->func[k], fn->mod, e->name);
        if (r != CUDA_SUCCESS) return thc_err_cu(m, f, e->node, "compile", r, "cuModuleGetFunction(the kernel)");
        cm->kernels++;
        for (int j = 0; kh_cu.FuncGetParamInfo && j < e->n_args; j++) { /* the driver's view of the parameters */
            size_t off = 0, sz = 0;
            if (kh_cu.FuncGetParamInfo(fn->func[k], (size_t)j, &off, &sz) == CUDA_SUCCESS && sz != th_cu_arg_size(e->args[j].kind))
                return thc_fail(m, f, e->node, "compile", KH_ERR_INTERNAL, "kernel %s parameter %d: %zu bytes, the plan passes %zu",
                                e->name, j, sz, th_cu_arg_size(e->args[j].kind));
        }
    }
    double ls = kh_now() - t0;
    cm->load_s += ls;
    m->load_s += ls;
    return KH_OK;
}

// --- memory ---------------------------------------------------------------------------------------------------------
/* resolved kernel arguments (the storage is the graph runtime's, kh_grt_dev), cuDNN state of function f */
static kh_status prepare_fn(th_model *m, int f) {
    thc_fn *fn = &m->cuda->fn[f];
    for (int32_t k = 0; k < fn->plan.n; k++) {
        const th_cu_launch *e = &fn->plan.v[k];
        for (int j = 0; e->kind == TH_CUL_KERNEL && j < e->n_args; j++)
            if (e->args[j].kind == TH_CUARG_PTR) {
                CUdeviceptr a = thc_addr(m, f, &e->args[j].ref);
                if (!a && e->args[j].ref.base != TH_CU_NONE)
                    return thc_fail(m, f, e->node, "compile", KH_ERR_INTERNAL, "kernel %s argument %d has no storage",
                                    e->name, j);
                fn->argp[(size_t)k * TH_CU_MAX_ARGS + j] = a;
            }
    }
    return thc_prepare_convs(m, f);
}

kh_status th_cuda_compile(kh_grt_model *rtm) {
    th_model *m = (th_model *)rtm;
    th_session *s = m->s;
    if (!s->cuda) return th_fail(s, KH_ERR_INTERNAL, "compile", "no CUDA session state");
    th_cuda_model *cm = calloc(1, sizeof *cm);
    if (!cm) return th_fail(s, KH_ERR_NOMEM, "compile", "out of host memory");
    m->cuda = cm;
    cm->cs = s->cuda;
    cm->cs->conv_algos[0] = 0;
    const char *se = getenv("TH_CUDA_SYNC_EACH_OP");
    cm->sync_each = se && *se && *se != '0';
    cm->dev.ctx = cm->cs->k.ctx;
    cm->dev.stream = cm->cs->k.stream;
    kh_status st = thc_bind(m, "compile");
    for (int f = 0; f < KH_GFN_COUNT && st == KH_OK; f++)
        if (m->rt.mg.fn[f].n_nodes > 0) {
            st = build_module(m, f);
            if (st == KH_OK && cm->fn[f].plan.scratch_bytes > cm->scratch_bytes)
                cm->scratch_bytes = cm->fn[f].plan.scratch_bytes;
        }
    if (st != KH_OK) return st;
    /* the arena of the largest function plan (one function runs at a time), variables, feeds, accumulators */
    if ((st = kh_grt_dev_prepare(&m->rt, &cm->dev, cm->cs->k.ctx, cm->cs->k.stream)) != KH_OK) return st;
    if (cm->scratch_bytes > 0 && (st = thc_alloc(m, &cm->scratch, (size_t)cm->scratch_bytes, "the scratch")) != KH_OK)
        return st;
    for (int f = 0; f < KH_GFN_COUNT && st == KH_OK; f++)
        if (cm->fn[f].mod) st = prepare_fn(m, f);
    if (st == KH_OK && cm->ws_bytes > 0) st = thc_alloc(m, &cm->ws, cm->ws_bytes, "the cuDNN workspace");
    if (st != KH_OK) return st;
    THC_CU(m, -1, -1, "compile", kh_cu.StreamSynchronize(cm->cs->k.stream));
    th_log(s, KH_LOG_INFO, "CUDA: %d kernels for %s, NVRTC %.2f s, module load %.3f s, device arena %.1f MiB, scratch %.1f MiB",
           cm->kernels, cm->cs->k.arch, cm->nvrtc_s, cm->load_s, m->rt.arena_bytes / 1048576.0, cm->scratch_bytes / 1048576.0);
    return KH_OK;
}

// --- weights, values, metrics -----------------------------------------------------------------------------------------
kh_status th_cuda_set_var(kh_grt_model *rtm, int32_t v, const float *w) {
    return kh_grt_dev_set_var(rtm, &((th_model *)rtm)->cuda->dev, v, w);
}

kh_status th_cuda_get_var(kh_grt_model *rtm, int32_t v, float *w) {
    return kh_grt_dev_get_var(rtm, &((th_model *)rtm)->cuda->dev, v, w);
}

kh_status th_cuda_read_node(kh_grt_model *rtm, kh_gfn f, int32_t node, int64_t n, float *dst) {
    th_model *m = (th_model *)rtm;
    th_emit_env env = {.g = &m->fn[f].g, .plan = &m->fn[f].plan, .mg = &m->rt.mg, .fn = f, .scratch_floats = NULL};
    th_cu_ref r;
    if (node < 0 || node >= m->fn[f].g.n_nodes || th_cu_value(&env, node, &r) != KH_OK)
        return th_fail(m->s, KH_ERR_INTERNAL, "read", "node %d of the %s function has no storage", node, g_fn_names[f]);
    size_t b = (size_t)kh_graph_numel(&m->fn[f].g, node, n) * sizeof(float);
    return kh_grt_dev_read(rtm, &m->cuda->dev, dst, thc_addr(m, f, &r), b, "read");
}

kh_status th_cuda_read_metrics(kh_grt_model *rtm, uint32_t phase, kh_metrics *out, int32_t reset) {
    return kh_grt_dev_read_metrics(rtm, &((th_model *)rtm)->cuda->dev, phase, out, reset);
}

kh_status th_cuda_sync(kh_grt_model *rtm) { return kh_grt_dev_sync(rtm, &((th_model *)rtm)->cuda->dev, "sync"); }
