/* tests/backend/cuda_host/test_theano_cuda.c — theano's GPU code generation on a machine without a GPU.
 *
 * For the six benchmark models (their tasks' specs and batch sizes: tests/backend/bench_specs.h),
 * lowered as theano lowers them for the GPU (LSTMs as scans), and three small extra models (a 2x2 'same'
 * convolution, whose padding is asymmetric, with plain SGD; an unrolled LSTM, whose recurrent-kernel gradient is
 * an AddN of more inputs than an Elemwise program takes; a fused Elemwise program with a bias vector and
 * dropout, built by hand because the fusion pass is the lead's): theano's passes (th_optimize), the memory plan,
 * then th_emit_cuda for every function (train, eval, predict, probe), and checks of the launch plan on the CPU:
 *   - every node that computes has an entry; every kernel is defined once in the source under its name;
 *   - every pointer argument, GEMM operand and convolution tensor refers to storage that exists (arena offsets
 *     inside the arena, variables, slots the optimizer has, feeds, accumulators, scratch inside the plan's
 *     scratch, metric slots only in train and eval);
 *   - grids at n = 1 and n = max_batch are within [1, TH_CU_GRID_CAP]; kernels that reduce into one value run
 *     one block; GEMM sizes are positive with leading dimensions that fit, and arena operands stay inside the
 *     arena at the largest batch (at the first and last step of a scan);
 *   - cuDNN geometry is consistent ((Hp + 2 pad - KH) / SH + 1 == OH);
 *   - loops hold their bodies, which run only GEMMs and kernels;
 *   - no generated kernel (but the one-block LossSum / CorrectCount) makes a thread touch more than
 *     TH_TEST_SERIAL_MAX elements of its largest operand at the model's batch.
 * With the argument `nvrtc` it also compiles each source once with NVRTC for sm_90 (TH_TEST_ARCH to change) to a
 * CUBIN and requires: success with an empty compile log (no warnings), every kernel of the launch plan in the
 * CUBIN, and each kernel's parameter list (count, offsets, sizes, read from the CUBIN's .nv.info) equal to the
 * plan's argument list. A source that does not compile fails with NVRTC's log. It skips (exit 77) only where the
 * build found no NVRTC library; a found library that does not load is a failure. Prints per model and function
 * the kernel count, library calls and compile time. TH_TEST_DUMP=DIR writes every generated source there.
 *
 * The same walk in its C dialect (th_emit_c) over every function: it succeeds, th_main holds every node under
 * its comment in node order, convolutions claim scratch; with `nvrtc` each C source also passes the C compiler's
 * syntax check ($CC or cc, -fsyntax-only -fopenmp), so the extras the tasks do not have (asymmetric 'same', the
 * wide AddN, the hand-built program with dropout) are C that compiles too. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "passes/th_passes.h"
#include "parity.h"
#include "testutil.h"
#include "bench_specs.h"
#include "th_cuda_plan.h"
#include "th_emit.h"
#include "khost/kit/optimizer.h"

static int g_nvrtc;
static const char *g_arch = "sm_90";
static double g_compile_s;
static int g_sources, g_kernels, g_c_sources;
static int g_op_seen[KH_GOP_END];
static int g_wide_addn, g_pad_crop, g_loops; /* the extras exercise what the six models do not */
/* The most elements one thread of a generated kernel may touch at the model's batch: a kernel past it runs
 * rows in series that a reduction or more threads would spread (the bias gradient once summed every row of a
 * column on one thread: 86,528 at mnist_cnn's batch). Grid-stride loops past TH_CU_GRID_CAP count too. */
#define TH_TEST_SERIAL_MAX 512
static int64_t g_serial_max;
static char g_serial_where[200];

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct fnctx {
    const char *model, *fn;
    const kh_graph *g;
    const kh_gplan *p;
    const kh_model_graphs *mg;
    const th_cu_plan *plan;
    int f;
} fnctx;

/* a reference is to existing storage; `bytes` (0: unknown) must fit where the extent is known */
static void check_ref(const fnctx *c, const th_cu_launch *e, const th_cu_ref *r, int64_t bytes, const char *what) {
    const char *m = c->model, *fn = c->fn;
    int slots = kh_optimizer_slots(c->mg->opt.kind);
    switch (r->base) {
    case TH_CU_NONE: CHECK(!strcmp(what, "met"), "%s %s %s: %s has no storage", m, fn, e->name, what); break;
    case TH_CU_ARENA:
        CHECK(r->offset >= 0 && r->offset + bytes <= c->p->arena_bytes && (bytes > 0 || r->offset < c->p->arena_bytes),
              "%s %s node %d: %s [%lld, +%lld) outside the %lld B arena", m, fn, e->node, what, (long long)r->offset,
              (long long)bytes, (long long)c->p->arena_bytes);
        break;
    case TH_CU_VAR: case TH_CU_SLOT1: case TH_CU_SLOT2:
        CHECK(r->index >= 0 && r->index < c->mg->n_vars && r->offset == 0, "%s %s node %d: %s variable %d", m, fn,
              e->node, what, r->index);
        CHECK(r->base == TH_CU_VAR || (r->base == TH_CU_SLOT1 ? slots >= 1 : slots >= 2),
              "%s %s node %d: %s: a slot the optimizer does not have", m, fn, e->node, what);
        if (r->index >= 0 && r->index < c->mg->n_vars && bytes > 0)
            CHECK(bytes <= c->mg->vars[r->index].numel * 4, "%s %s node %d: %s: %lld B in variable %d", m, fn, e->node,
                  what, (long long)bytes, r->index);
        break;
    case TH_CU_FEED: CHECK(r->index >= 0 && r->index <= KH_GIN_DY && r->offset == 0, "%s %s: feed %d", m, fn, r->index); break;
    case TH_CU_PERSISTENT:
        CHECK(r->index >= 0 && r->index < c->p->n_persistent, "%s %s node %d: accumulator %d", m, fn, e->node, r->index);
        break;
    case TH_CU_SCRATCH:
        CHECK(r->offset >= 0 && r->offset + bytes <= c->plan->scratch_bytes &&
                  (bytes > 0 || r->offset < c->plan->scratch_bytes),
              "%s %s node %d: %s scratch [%lld, +%lld) of %lld B", m, fn, e->node, what, (long long)r->offset,
              (long long)bytes, (long long)c->plan->scratch_bytes);
        break;
    case TH_CU_METRICS:
        CHECK((c->f == KH_GFN_TRAIN && (r->offset == 0 || r->offset == 8)) ||
                  (c->f == KH_GFN_EVAL && (r->offset == 16 || r->offset == 24)),
              "%s %s node %d: metric slot at %lld", m, fn, e->node, (long long)r->offset);
        break;
    default: CHECK(0, "%s %s node %d: %s: base %u", m, fn, e->node, what, r->base); break;
    }
}

/* a row-major matrix operand (rows, cols) with row stride ld at the largest batch */
static void check_operand(const fnctx *c, const th_cu_launch *e, th_cu_ref r, int64_t rows, int64_t cols, int64_t ld,
                          const char *what, int steps) {
    CHECK(rows > 0 && cols > 0 && ld >= cols, "%s %s node %d: GEMM %s (%lld x %lld, ld %lld)", c->model, c->fn,
          e->node, what, (long long)rows, (long long)cols, (long long)ld);
    int64_t bytes = ((rows - 1) * ld + cols) * 4;
    if (steps > 0) { /* inside a loop: the operand at the first and the last step it runs */
        th_cu_ref a = r, b = r;
        a.offset += (e->skip_t0 ? 1 : 0) * r.step;
        b.offset += (int64_t)(steps - 1) * r.step;
        check_ref(c, e, &a, bytes, what);
        check_ref(c, e, &b, bytes, what);
    } else {
        CHECK(r.step == 0, "%s %s node %d: a step outside a loop", c->model, c->fn, e->node);
        check_ref(c, e, &r, bytes, what);
    }
}

static void check_plan(const fnctx *c, const char *src) {
    const th_cu_plan *plan = c->plan;
    const kh_graph *g = c->g;
    int64_t nmax = g->max_batch;
    char *has = calloc((size_t)g->n_nodes + 1, 1);
    int32_t loop_left = 0, loop_steps = 0;
    for (int32_t k = 0; k < plan->n; k++) {
        const th_cu_launch *e = &plan->v[k];
        CHECK(e->node >= 0 && e->node < g->n_nodes, "%s %s: entry %d node %d", c->model, c->fn, k, e->node);
        if (e->node < 0 || e->node >= g->n_nodes) continue;
        has[e->node] = 1;
        int probe_back = c->f == KH_GFN_PROBE && g->nodes[e->node].phase != 0;
        CHECK(e->part == probe_back, "%s %s node %d: part %d", c->model, c->fn, e->node, e->part);
        int in_loop = loop_left > 0;
        if (in_loop) {
            loop_left--;
            CHECK(e->kind == TH_CUL_KERNEL || e->kind == TH_CUL_GEMM, "%s %s node %d: a %s in a loop", c->model, c->fn,
                  e->node, th_cu_entry_library(e->kind));
        } else {
            CHECK(!e->skip_t0, "%s %s node %d: skip_t0 outside a loop", c->model, c->fn, e->node);
        }
        switch (e->kind) {
        case TH_CUL_KERNEL: {
            char want[TH_CU_NAME + 64];
            snprintf(want, sizeof want, "void __launch_bounds__(%d) %s(", e->block, e->name);
            const char *at = strstr(src, want);
            CHECK(at && !strstr(at + 1, want), "%s %s: kernel %s defined %s", c->model, c->fn, e->name,
                  at ? "twice" : "nowhere");
            for (int32_t j = 0; j < k; j++)
                if (plan->v[j].kind == TH_CUL_KERNEL)
                    CHECK(strcmp(plan->v[j].name, e->name) != 0, "%s %s: kernel name %s repeated", c->model, c->fn,
                          e->name);
            int64_t g1 = th_cu_grid(e, 1), gm = th_cu_grid(e, nmax);
            CHECK(g1 >= 1 && gm >= g1 && gm <= TH_CU_GRID_CAP && e->block == TH_CU_BLOCK_HOST,
                  "%s %s %s: grid %lld at n=1, %lld at n=%lld, block %d", c->model, c->fn, e->name, (long long)g1,
                  (long long)gm, (long long)nmax, e->block);
            uint32_t op = g->nodes[e->node].op;
            if (op == KH_GOP_LOSS_SUM || op == KH_GOP_CORRECT_COUNT)
                CHECK(e->fixed_grid == 1, "%s %s %s: a reduction in one block", c->model, c->fn, e->name);
            else /* enough threads: one per element (grid-stride loops past the cap) */
                CHECK(gm == TH_CU_GRID_CAP || gm * e->block >= th_cu_eval(e->threads, nmax),
                      "%s %s %s: %lld blocks for %lld threads", c->model, c->fn, e->name, (long long)gm,
                      (long long)th_cu_eval(e->threads, nmax));
            /* serial work: the largest tensor the kernel reads or writes at max_batch, per thread launched
             * (grid x block); LossSum and CorrectCount are one block by design and counted apart. A convolution
             * node's kernels only transpose its filter (cuDNN does the rest): the smallest tensor; a kernel in a
             * scan's loop handles one of its steps. */
            int conv = op == KH_GOP_CONV2D || op == KH_GOP_CONV2D_BACKPROP_INPUT || op == KH_GOP_CONV2D_BACKPROP_FILTER;
            int64_t work = kh_graph_numel(g, e->node, nmax);
            for (int j = 0; j < g->nodes[e->node].n_in; j++) {
                int64_t w = kh_graph_numel(g, kh_graph_inputs(g, e->node)[j], nmax);
                if (conv ? w < work : w > work) work = w;
            }
            if (in_loop && loop_steps > 0) work = (work + loop_steps - 1) / loop_steps;
            int64_t launched = gm * e->block, serial = launched > 0 ? (work + launched - 1) / launched : work;
            if (op != KH_GOP_LOSS_SUM && op != KH_GOP_CORRECT_COUNT) {
                CHECK(serial <= TH_TEST_SERIAL_MAX, "%s %s %s (%s): %lld elements per thread (%lld over %lld threads), "
                      "bound %d", c->model, c->fn, e->name, kh_gop_name(op), (long long)serial, (long long)work,
                      (long long)launched, TH_TEST_SERIAL_MAX);
                if (serial > g_serial_max) {
                    g_serial_max = serial;
                    snprintf(g_serial_where, sizeof g_serial_where, "%s %s %s", c->model, c->fn, e->name);
                }
            }
            if (op == KH_GOP_ADDN && g->nodes[e->node].n_in > KH_GEXPR_MAX_IN) g_wide_addn++;
            if (strstr(e->name, "_pad") || strstr(e->name, "_crop")) g_pad_crop++;
            int n_last = e->n_args > 0 && e->args[e->n_args - 1].kind == TH_CUARG_N;
            CHECK(n_last, "%s %s %s: n is the last argument", c->model, c->fn, e->name);
            for (int j = 0; j < e->n_args; j++) {
                const th_cu_arg *a = &e->args[j];
                CHECK(a->kind < TH_CUARG_KIND_END, "%s %s %s: argument %d kind %u", c->model, c->fn, e->name, j, a->kind);
                if (a->kind == TH_CUARG_PTR)
                    check_ref(c, e, &a->ref, 0, op == KH_GOP_LOSS_SUM || op == KH_GOP_CORRECT_COUNT ? "met" : "argument");
                if (a->kind == TH_CUARG_STEP) CHECK(in_loop, "%s %s %s: a step argument outside a loop", c->model, c->fn, e->name);
                if (a->kind == TH_CUARG_LR) CHECK(c->f == KH_GFN_TRAIN, "%s %s %s: lr outside train", c->model, c->fn, e->name);
            }
            break;
        }
        case TH_CUL_GEMM: {
            const th_cu_gemm *m = &e->gemm;
            int64_t M = th_cu_eval(m->M, nmax), N = th_cu_eval(m->N, nmax), K = th_cu_eval(m->K, nmax);
            CHECK(th_cu_eval(m->M, 1) > 0 && th_cu_eval(m->N, 1) > 0 && th_cu_eval(m->K, 1) > 0 && m->N.a == 0,
                  "%s %s node %d: GEMM sizes at n=1", c->model, c->fn, e->node);
            int steps = in_loop ? loop_steps : 0;
            check_operand(c, e, m->A, m->ta ? K : M, m->ta ? M : K, m->lda, "A", steps);
            check_operand(c, e, m->B, m->tb ? N : K, m->tb ? K : N, m->ldb, "B", steps);
            check_operand(c, e, m->C, M, N, m->ldc, "C", steps);
            break;
        }
        case TH_CUL_CONV: {
            const th_cu_conv *v = &e->conv;
            CHECK(v->OH == (v->Hp + 2 * v->pad_h - v->KH) / v->SH + 1 && v->OW == (v->Wp + 2 * v->pad_w - v->KW) / v->SW + 1,
                  "%s %s node %d: cuDNN geometry", c->model, c->fn, e->node);
            CHECK(v->asym ? (v->pad_h == 0 && v->pad_w == 0 && v->Hp >= v->H && v->Wp >= v->W)
                          : (v->Hp == v->H && v->Wp == v->W),
                  "%s %s node %d: padding", c->model, c->fn, e->node);
            check_ref(c, e, &v->x, nmax * v->Hp * v->Wp * v->C * 4, "x");
            check_ref(c, e, &v->y, nmax * v->OH * v->OW * v->F * 4, "y");
            check_ref(c, e, &v->w, (int64_t)v->KH * v->KW * v->C * v->F * 4, "w");
            CHECK(v->w.base == TH_CU_SCRATCH, "%s %s node %d: cuDNN's filter is the transposed copy", c->model, c->fn,
                  e->node);
            break;
        }
        case TH_CUL_MEMSET: check_ref(c, e, &e->dst, th_cu_eval(e->bytes, nmax), "memset"); break;
        case TH_CUL_LOOP:
            CHECK(!in_loop && e->steps > 0 && e->body > 0 && k + e->body < plan->n, "%s %s node %d: loop", c->model,
                  c->fn, e->node);
            loop_left = e->body;
            loop_steps = e->steps;
            g_loops++;
            break;
        default: CHECK(0, "%s %s node %d: entry kind %u", c->model, c->fn, e->node, e->kind); break;
        }
    }
    CHECK(loop_left == 0, "%s %s: a loop runs past the plan", c->model, c->fn);
    for (int32_t i = 0; i < g->n_nodes; i++) {
        uint32_t op = g->nodes[i].op;
        g_op_seen[op] = 1;
        int quiet = op == KH_GOP_INPUT || op == KH_GOP_VARIABLE || op == KH_GOP_RESHAPE;
        CHECK(has[i] != quiet, "%s %s node %d (%s): %s", c->model, c->fn, i, kh_gop_name(op),
              quiet ? "a launch for storage" : "no launch");
    }
    free(has);
}

/* Write src to a temporary file and run the C compiler's syntax check on it (nvrtc mode). */
static void syntax_check(const char *model, const char *fn, const th_sb *src) {
    char path[512], cmd[1200];
    const char *tmp = getenv("TMPDIR"), *cc = getenv("CC");
    snprintf(path, sizeof path, "%s/th_test_c_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(path);
    FILE *fp = fd >= 0 ? fdopen(fd, "w") : NULL;
    int ok = fp && fwrite(src->s, 1, src->len, fp) == src->len;
    if (fp) ok = fclose(fp) == 0 && ok;
    CHECK(ok, "%s %s: C: cannot write %s", model, fn, path);
    snprintf(cmd, sizeof cmd, "'%s' -fsyntax-only -fopenmp -x c '%s'", cc && *cc ? cc : "cc", path);
    if (ok) CHECK(system(cmd) == 0, "%s %s: C: the compiler refuses the source (%s)", model, fn, cmd);
    if (fd >= 0) remove(path);
}

/* The training function's profiling variant (th_emit_env.profile, what theano's profile call builds): the entry
 * th_main_prof and no th_main; every node in order, each node with work timed exactly once (its lap, into
 * th_node_s + node, after its code and before the next node with work), storage nodes never; the scratch of the
 * ordinary function; the CUDA dialect refuses it. */
static void check_c_profile(const char *model, const kh_graph *g, const kh_gplan *p, const kh_model_graphs *mg,
                            int64_t scratch_main) {
    int64_t scratch = 0;
    th_emit_env env = {.g = g, .plan = p, .mg = mg, .fn = KH_GFN_TRAIN, .scratch_floats = &scratch, .profile = 1};
    th_sb src = {0};
    char err[1024];
    kh_status st = th_emit_c(&env, &src, err, sizeof err);
    CHECK(st == KH_OK, "%s train: profiling variant: %s", model, err);
    if (st != KH_OK) {
        th_sb_free(&src);
        return;
    }
    CHECK(strstr(src.s, "int th_main_prof(th_rt_ctx *c, int64_t n, int part, double *th_node_s, double (*th_now)(void)) {\n") &&
              !strstr(src.s, "int th_main("),
          "%s train: profiling variant: entry point", model);
    CHECK(scratch == scratch_main, "%s train: profiling variant claims %lld scratch floats, th_main %lld", model,
          (long long)scratch, (long long)scratch_main);
    const char *at = src.s;
    int32_t running = -1, laps = 0, work = 0;
    for (int32_t i = 0; i <= g->n_nodes; i++) {
        int storage = i < g->n_nodes && th_em_storage_op(g->nodes[i].op);
        char tag[96], lap[96];
        if (i < g->n_nodes) snprintf(tag, sizeof tag, "    /* %%%d %s */\n", i, kh_gop_name(g->nodes[i].op));
        else snprintf(tag, sizeof tag, "    return 0;\n}\n");
        const char *q = strstr(at, tag);
        CHECK(q != NULL, "%s train: profiling variant: node %d missing or out of order", model, i);
        if (!q) break;
        /* the text between the previous node's comment and this one's holds the lap of the running node exactly
         * when this node has work (or at the end), and no other lap */
        int want = running >= 0 && !storage;
        snprintf(lap, sizeof lap, "th_prof_lap(th_node_s + %d, ", running);
        const char *l = running >= 0 ? strstr(at, lap) : NULL;
        int has = l && l < q;
        CHECK(has == want, "%s train: profiling variant: node %d's lap %s before node %d", model, running,
              has ? "present" : "missing", i);
        if (has) laps++;
        if (!storage && i < g->n_nodes) running = i, work++;
        at = q + strlen(tag);
    }
    int total = 0;
    for (const char *l = strstr(src.s, "th_prof_lap(th_node_s + "); l; l = strstr(l + 1, "th_prof_lap(th_node_s + "))
        total++;
    CHECK(laps == work && total == work, "%s train: profiling variant: %d laps in place, %d in all, for %d nodes with work",
          model, laps, total, work);
    th_sb cu = {0};
    th_cu_plan plan;
    CHECK(th_emit_cuda(&env, &cu, &plan, err, sizeof err) == KH_ERR_UNSUPPORTED, "%s train: a CUDA profiling variant",
          model);
    th_sb_free(&cu);
    if (g_nvrtc) syntax_check(model, "train (profiling variant)", &src);
    th_sb_free(&src);
}

/* the C dialect of one function (see the header) */
static void check_c(const char *model, const char *fn, const kh_graph *g, const kh_gplan *p, const kh_model_graphs *mg,
                    int f) {
    int64_t scratch = 0;
    th_emit_env env = {.g = g, .plan = p, .mg = mg, .fn = (kh_gfn)f, .scratch_floats = &scratch};
    th_sb src = {0};
    char err[1024];
    kh_status st = th_emit_c(&env, &src, err, sizeof err);
    CHECK(st == KH_OK, "%s %s: C: %s", model, fn, err);
    if (st != KH_OK) {
        th_sb_free(&src);
        return;
    }
    CHECK(strstr(src.s, "int th_main(th_rt_ctx *c, int64_t n, int part) {\n") != NULL, "%s %s: C: no th_main", model, fn);
    const char *at = src.s;
    int convs = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        char tag[96];
        uint32_t op = g->nodes[i].op;
        convs += op == KH_GOP_CONV2D || op == KH_GOP_CONV2D_BACKPROP_INPUT || op == KH_GOP_CONV2D_BACKPROP_FILTER;
        snprintf(tag, sizeof tag, "    /* %%%d %s */\n", i, kh_gop_name(op));
        const char *q = strstr(at, tag);
        CHECK(q != NULL, "%s %s: C: node %d (%s) missing or out of order", model, fn, i, kh_gop_name(op));
        if (q) at = q + strlen(tag);
    }
    CHECK(convs == 0 || scratch > 0, "%s %s: C: convolutions without im2col scratch", model, fn);
    CHECK(strstr(src.s, "th_prof") == NULL && strstr(src.s, "th_now") == NULL,
          "%s %s: C: profiling code in the ordinary function", model, fn);
    g_c_sources++;
    if (f == KH_GFN_TRAIN) check_c_profile(model, g, p, mg, scratch);
    if (g_nvrtc) syntax_check(model, fn, &src);
    th_sb_free(&src);
}

/* optimise, plan, emit, check, and (nvrtc) compile one function */
static void one_fn(const char *model, const kh_model_graphs *mg, const kh_graph *lg, int f, int optimize) {
    static const char *const names[KH_GFN_COUNT] = {"train", "eval", "predict", "probe"};
    char err[8192];
    kh_graph g;
    th_opt_report rep;
    int32_t *map = malloc(((size_t)lg->n_nodes + 1) * sizeof *map);
    kh_status st = th_optimize(lg, optimize, &g, map, &rep, err, sizeof err);
    free(map);
    CHECK(st == KH_OK, "%s %s: passes: %s", model, names[f], err);
    if (st != KH_OK) return;
    kh_gplan p;
    st = kh_graph_plan(&g, TH_ALIGN, &p);
    CHECK(st == KH_OK, "%s %s: memory plan", model, names[f]);
    if (st != KH_OK) {
        kh_graph_release(&g);
        return;
    }
    check_c(model, names[f], &g, &p, mg, f);
    th_emit_env env = {.g = &g, .plan = &p, .mg = mg, .fn = (kh_gfn)f, .scratch_floats = NULL};
    th_sb src = {0};
    th_cu_plan plan;
    st = th_emit_cuda(&env, &src, &plan, err, sizeof err);
    CHECK(st == KH_OK, "%s %s: emit: %s", model, names[f], err);
    if (st == KH_OK) {
        fnctx c = {model, names[f], &g, &p, mg, &plan, f};
        check_plan(&c, src.s);
        if (getenv("TH_TEST_DUMP")) { /* TH_TEST_DUMP=DIR: every generated source written there, to read */
            char path[512];
            snprintf(path, sizeof path, "%s/%s_%s.cu", getenv("TH_TEST_DUMP"), model, names[f]);
            FILE *fp = fopen(path, "w");
            if (fp) fwrite(src.s, 1, src.len, fp), fclose(fp);
        }
        double cs = 0;
        size_t bytes = 0;
        if (g_nvrtc) {
            void *cubin = NULL;
            char log[4096];
            double t0 = now();
            st = th_nvrtc_compile_log(src.s, g_arch, &cubin, &bytes, log, sizeof log, err, sizeof err);
            cs = now() - t0;
            g_compile_s += cs;
            g_sources++;
            CHECK(st == KH_OK, "%s %s: NVRTC: %s", model, names[f], err);
            CHECK(st != KH_OK || log[0] == 0, "%s %s: NVRTC warnings:\n%s", model, names[f], log);
            if (st == KH_OK) {
                st = th_cubin_check_plan(cubin, bytes, &plan, err, sizeof err);
                CHECK(st == KH_OK, "%s %s: CUBIN against the launch plan: %s", model, names[f], err);
            }
            free(cubin);
        }
        g_kernels += plan.n_kernels;
        printf("  %-8s %5d nodes -> %4d kernels, %3d GEMM, %2d cuDNN, %4d plan entries, scratch %8.2f MiB, "
               "source %6.1f KiB",
               names[f], g.n_nodes, plan.n_kernels, plan.n_gemm, plan.n_conv, plan.n, plan.scratch_bytes / 1048576.0,
               src.len / 1024.0);
        if (g_nvrtc) printf(", CUBIN %6.1f KiB in %5.2f s", bytes / 1024.0, cs);
        printf("\n");
        th_cu_plan_free(&plan);
    }
    th_sb_free(&src);
    kh_gplan_free(&p);
    kh_graph_release(&g);
}

/* fns: a bit per function to generate (the unrolled extra: train only, NVRTC time) */
static void one_model(const char *name, const kh_model_spec *spec, int batch, int rnn_scan, unsigned fns) {
    kh_model_graphs mg;
    char err[512];
    kh_graph_lower_opts lo = {.max_batch = batch, .rnn_scan = rnn_scan};
    kh_status st = kh_graph_lower(spec, &lo, &mg, err, sizeof err);
    CHECK(st == KH_OK, "%s: lower: %s", name, err);
    if (st != KH_OK) return;
    printf("%s (batch %d%s):\n", name, batch, rnn_scan ? ", LSTMs as scans" : "");
    for (int f = 0; f < KH_GFN_COUNT; f++)
        if (mg.fn[f].n_nodes > 0 && (fns >> f & 1u)) one_fn(name, &mg, &mg.fn[f], f, 1);
    kh_model_graphs_free(&mg);
}

/* a fused Elemwise program over a batched input and a bias vector, with dropout: relu(x + b), dropped */
static void elemwise_model(void) {
    kh_gvar var = {.layer = 0, .slot = 1, .numel = 8, .rank = 1, .dims = {8}, .name = "bias"};
    kh_model_graphs mg;
    memset(&mg, 0, sizeof mg);
    mg.n_vars = 1;
    mg.vars = &var;
    kh_graph g;
    kh_graph_init(&g, 16);
    int64_t xd[2] = {16, 8}, bd[1] = {8};
    kh_gattr a = kh_gattr_none();
    a.input_id = KH_GIN_X;
    int32_t x = kh_graph_add(&g, KH_GOP_INPUT, NULL, 0, &a, KH_F32, 2, xd, KH_GVAL_BATCHED);
    a = kh_gattr_none();
    a.layer = 0, a.slot = 1;
    int32_t b = kh_graph_add(&g, KH_GOP_VARIABLE, NULL, 0, &a, KH_F32, 1, bd, 0);
    kh_gexpr e;
    memset(&e, 0, sizeof e);
    e.n_in = 2;
    e.vec[1] = 1;
    e.ops[0] = (kh_gexpr_op){KH_GOP_ADD, -1, -2, 0, 0};
    e.ops[1] = (kh_gexpr_op){KH_GOP_RELU, 0, 0, 0, 0};
    e.ops[2] = (kh_gexpr_op){KH_GOP_DROPOUT, 1, 0, 0.25f, 3};
    e.ops[3] = (kh_gexpr_op){KH_GOP_SIGMOID_GRAD, 2, -1, 0, 0};
    e.ops[4] = (kh_gexpr_op){KH_GOP_TANH, 3, 0, 0, 0};
    e.n_ops = 5;
    a = kh_gattr_none();
    a.expr = kh_graph_add_expr(&g, &e);
    int32_t in[2] = {x, b};
    int32_t y = kh_graph_add(&g, KH_GOP_ELEMWISE, in, 2, &a, KH_F32, 0, NULL, 0);
    CHECK(a.expr >= 0 && y >= 0, "elemwise graph: %s", g.err);
    if (y < 0) {
        kh_graph_release(&g);
        return;
    }
    g.nodes[y].flags |= KH_GVAL_OUTPUT;
    g.outputs[0] = y;
    g.n_outputs = 1;
    printf("elemwise (a hand-built fused program: bias vector, relu, dropout, sigmoid_grad, tanh):\n");
    one_fn("elemwise", &mg, &g, KH_GFN_PREDICT, 0);
    kh_graph_release(&g);
}

/* a source that cannot compile fails with NVRTC's log in the error */
static void broken_source(void) {
    void *cubin = NULL;
    size_t len = 0;
    char err[2048];
    kh_status st = th_nvrtc_compile("extern \"C\" __global__ void k(float *y) { y[0] = undefined_name; }\n", g_arch,
                                    &cubin, &len, err, sizeof err);
    CHECK(st != KH_OK && !cubin && strstr(err, "undefined_name"), "a broken source: %s", err);
    st = th_nvrtc_compile("extern \"C\" __global__ void k(float *y) { y[0] = 1.0f; }\n", "compute_90", &cubin, &len,
                          err, sizeof err);
    CHECK(st == KH_ERR_INVALID, "an architecture that is not sm_XX is refused: %s", err);
}

int main(int argc, char **argv) {
    g_nvrtc = argc > 1 && !strcmp(argv[1], "nvrtc");
    const char *arch = getenv("TH_TEST_ARCH");
    if (arch && *arch) g_arch = arch;
    if (g_nvrtc) {
        char why[512];
        if (!th_nvrtc_load(why, sizeof why)) {
#ifdef TH_TEST_NVRTC_FOUND
            fprintf(stderr, "FAIL: the build found NVRTC (%s) but it does not load: %s\n", TH_TEST_NVRTC_FOUND, why);
            return 1;
#else
            char msg[700];
            snprintf(msg, sizeof msg, "NVRTC is not installed (the build found no libnvrtc): %s", why);
            kh_test_skip(msg);
#endif
        }
        char ver[32], opts[128];
        printf("NVRTC %s (%s), options: %s\n", th_nvrtc_version(ver, sizeof ver), th_nvrtc_library(),
               th_nvrtc_options(g_arch, opts, sizeof opts));
        broken_source();
    }
    double t0 = now();
    const kb_model *models;
    int nm = kb_bench_models(&models);
    CHECK(nm == 6, "six benchmark models");
    for (int k = 0; k < nm; k++) one_model(models[k].name, &models[k].spec, models[k].batch, 1, 0xfu);

    static const kh_layer_spec asym[] = {
        KB_L(.kind = KH_LAYER_CONV2D, .units = 4, .kernel = {2, 2}, .padding = KH_PAD_SAME, .activation = KH_ACT_TANH),
        KB_L(.kind = KH_LAYER_MAXPOOL2D, .kernel = {2, 2}), KB_L(.kind = KH_LAYER_FLATTEN),
        KB_L(.kind = KH_LAYER_DENSE, .units = 3, .activation = KH_ACT_SOFTMAX)};
    kh_model_spec s = kb_spec("asym_conv", KH_F32, 3, 7, 7, 2, 0, asym, 4, KH_LOSS_CATEGORICAL_CROSSENTROPY,
                              kb_opt(KH_OPT_SGD, 0.01f, 0), 3);
    one_model("asym_conv", &s, 5, 1, 0xfu);
    static const kh_layer_spec rnn[] = {KB_L(.kind = KH_LAYER_EMBEDDING, .input_dim = 50, .units = 8),
                                        KB_L(.kind = KH_LAYER_LSTM, .units = 6),
                                        KB_L(.kind = KH_LAYER_DENSE, .units = 1, .activation = KH_ACT_SIGMOID)};
    s = kb_spec("lstm_unrolled", KH_I32, 1, 10, 0, 0, 0, rnn, 3, KH_LOSS_BINARY_CROSSENTROPY,
                kb_opt(KH_OPT_ADADELTA, 0.01f, 0), 1);
    one_model("lstm_unrolled", &s, 4, 0, 1u << KH_GFN_TRAIN);
    elemwise_model();

    CHECK(g_wide_addn > 0 && g_pad_crop >= 4 && g_loops > 0,
          "exercised: %d wide AddN kernels, %d pad/crop kernels, %d scan loops", g_wide_addn, g_pad_crop, g_loops);
    int seen = 0, total = 0;
    for (uint32_t op = KH_GOP_INPUT; op < KH_GOP_END; op++) {
        total++;
        seen += g_op_seen[op];
        if (!g_op_seen[op]) printf("op not exercised: %s\n", kh_gop_name(op));
    }
    printf("most elements per thread of a generated kernel: %lld (%s), bound %d\n", (long long)g_serial_max,
           g_serial_where, TH_TEST_SERIAL_MAX);
    printf("ops exercised: %d of %d; %d kernels generated; %d C sources%s", seen, total, g_kernels, g_c_sources,
           g_nvrtc ? " (syntax-checked)" : "");
    if (g_nvrtc) printf("; %d sources compiled for %s in %.1f s (NVRTC)", g_sources, g_arch, g_compile_s);
    printf("; %.1f s in all\n", now() - t0);
    return kh_test_finish(g_nvrtc ? "test_theano_cuda_nvrtc" : "test_theano_cuda_plan");
}
