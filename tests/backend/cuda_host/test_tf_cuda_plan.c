/* tests/backend/cuda_host/test_tf_cuda_plan.c — what the tensorflow GPU path decides on the host, for the six
 * benchmark models, on any machine (no GPU, no CUDA runtime: tf_cuda_plan.c is plain C):
 *   - the device arena is exactly the largest of the four functions' plan.arena_bytes, from the same plans
 *     the CPU path uses (kh_graph_plan with TF_ALIGN);
 *   - every node resolves as the CPU's resolve() does: a Reshape shares its input's storage, an in-place node
 *     the buffer it reuses; arena values are TF_ALIGN-aligned and inside the arena; variables, feeds and
 *     accumulators are the right ones and fit their buffers;
 *   - no launched node reads an arena range overlapping the range it writes, unless the plan made it in-place
 *     (a kernel would read what it is overwriting);
 *   - the launch table has an entry for every op of the four functions (a missing op fails), and for every op
 *     of the IR but the scan forms tensorflow refuses (tf_node_refused: MatMul of a rank-3 operand, the LSTM
 *     scans): no node of its own lowering is refused, and the rnn_scan lowering of the recurrent models is;
 *   - every convolution and pooling node has a consistent cuDNN geometry at max_batch and at batch 1; where
 *     'same' padding is asymmetric, the explicitly padded input convolved 'valid' gives the same output size. */
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "tf.h"
#include "tf_cuda_plan.h"
#include "bench_specs.h"

static int overlap(const tf_cu_ref *a, const tf_cu_ref *b) {
    return a->base == TF_CU_BASE_ARENA && b->base == TF_CU_BASE_ARENA && a->offset < b->offset + b->bytes &&
           b->offset < a->offset + a->bytes;
}

static void check_fn(const char *name, int f, const kh_model_graphs *mg, const kh_gplan *p, const tf_cu_layout *lay,
                     int64_t feed_bytes[3], int *kinds_seen) {
    const kh_graph *g = &mg->fn[f];
    const tf_cu_ref *ref = lay->ref[f];
    CHECK(ref != NULL && lay->n_nodes[f] == g->n_nodes, "%s fn %d: a ref per node", name, f);
    if (!ref) return;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const kh_gnode *nd = &g->nodes[i];
        const tf_cu_ref *r = &ref[i];
        const int32_t *in = kh_graph_inputs(g, i);
        uint32_t kind = tf_cu_op_kind(nd->op);
        CHECK(kind != TF_CU_NONE, "%s fn %d node %d: no CUDA launch for %s", name, f, i, kh_gop_name(nd->op));
        char why[256];
        CHECK(!tf_node_refused(g, i, why, sizeof why), "%s fn %d: %s", name, f, why);
        kinds_seen[kind] = 1;
        CHECK(r->bytes == p->e[i].bytes, "%s fn %d node %d: bytes %lld, plan %lld", name, f, i, (long long)r->bytes,
              (long long)p->e[i].bytes);
        if (nd->op == KH_GOP_RESHAPE) {
            const tf_cu_ref *s = &ref[in[0]];
            CHECK(r->base == s->base && r->index == s->index && r->offset == s->offset,
                  "%s fn %d node %d: a reshape is its input's storage", name, f, i);
        } else if (p->e[i].inplace_of >= 0) {
            const tf_cu_ref *s = &ref[p->e[i].inplace_of];
            CHECK(r->base == s->base && r->offset == s->offset && r->bytes <= s->bytes,
                  "%s fn %d node %d: in place of node %d", name, f, i, p->e[i].inplace_of);
        }
        switch (r->base) {
        case TF_CU_BASE_ARENA:
            CHECK(r->offset >= 0 && r->offset % TF_ALIGN == 0, "%s fn %d node %d: offset %lld not %d-aligned", name, f, i,
                  (long long)r->offset, TF_ALIGN);
            CHECK(r->offset + r->bytes <= lay->arena_bytes, "%s fn %d node %d: [%lld, +%lld) outside the %lld B arena",
                  name, f, i, (long long)r->offset, (long long)r->bytes, (long long)lay->arena_bytes);
            break;
        case TF_CU_BASE_VAR:
            CHECK(r->index >= 0 && r->index < mg->n_vars, "%s fn %d node %d: variable %d", name, f, i, r->index);
            if (r->index >= 0 && r->index < mg->n_vars) {
                CHECK(mg->vars[r->index].layer == nd->attr.layer && mg->vars[r->index].slot == nd->attr.slot,
                      "%s fn %d node %d: the variable of (%d, %d)", name, f, i, nd->attr.layer, nd->attr.slot);
                CHECK(r->offset == 0 && r->bytes <= mg->vars[r->index].numel * 4, "%s fn %d node %d: fits variable %d",
                      name, f, i, r->index);
            }
            CHECK(nd->op == KH_GOP_VARIABLE || kind == TF_CU_APPLY, "%s fn %d node %d: %s in a variable", name, f, i,
                  kh_gop_name(nd->op));
            break;
        case TF_CU_BASE_FEED:
            CHECK(nd->op == KH_GOP_INPUT && r->index == nd->attr.input_id, "%s fn %d node %d: feed %d", name, f, i,
                  r->index);
            if (r->index >= 0 && r->index < 3)
                CHECK(r->bytes <= feed_bytes[r->index], "%s fn %d node %d: %lld B in a %lld B feed", name, f, i,
                      (long long)r->bytes, (long long)feed_bytes[r->index]);
            break;
        case TF_CU_BASE_PERSISTENT:
            CHECK(nd->op == KH_GOP_GATHER_GRAD && r->index < p->n_persistent &&
                      r->bytes <= p->persistent_bytes[r->index],
                  "%s fn %d node %d: accumulator %d", name, f, i, r->index);
            break;
        default:
            CHECK(kind == TF_CU_NOOP || kind == TF_CU_APPLY, "%s fn %d node %d: %s has no storage", name, f, i,
                  kh_gop_name(nd->op));
            break;
        }
        /* a launch must not read a range it overwrites, except its own in-place input */
        if (kind != TF_CU_NOOP && p->e[i].inplace_of < 0)
            for (int k = 0; k < nd->n_in; k++)
                CHECK(!overlap(r, &ref[in[k]]), "%s fn %d node %d (%s): input %d (node %d) overlaps the output", name,
                      f, i, kh_gop_name(nd->op), k, in[k]);
        if (kind == TF_CU_CONV_FWD || kind == TF_CU_CONV_BWD_DATA || kind == TF_CU_CONV_BWD_FILTER ||
            kind == TF_CU_MAXPOOL || kind == TF_CU_MAXPOOL_GRAD) {
            tf_cu_geom a, b;
            CHECK(tf_cu_geom_of(g, i, g->max_batch, &a) == KH_OK && tf_cu_geom_of(g, i, 1, &b) == KH_OK,
                  "%s fn %d node %d: geometry of %s", name, f, i, kh_gop_name(nd->op));
            CHECK(a.N == g->max_batch && b.N == 1 && a.OH == b.OH && a.pad_top == b.pad_top, "%s fn %d node %d: batch",
                  name, f, i);
            if (a.asym)
                CHECK((a.H + a.pad_top + a.pad_bottom - a.KH) / a.SH + 1 == a.OH &&
                          (a.W + a.pad_left + a.pad_right - a.KW) / a.SW + 1 == a.OW,
                      "%s fn %d node %d: the explicitly padded input gives the output size", name, f, i);
        }
    }
}

int main(void) {
    const kb_model *models;
    int nm = kb_bench_models(&models);
    CHECK(nm == 6, "six benchmark models");
    int kinds_seen[TF_CU_KIND_END];
    memset(kinds_seen, 0, sizeof kinds_seen);
    for (int k = 0; k < nm; k++) {
        const kb_model *t = &models[k];
        kh_model_graphs mg;
        char err[256];
        kh_graph_lower_opts lo = {.max_batch = t->batch, .deterministic = 0};
        kh_status st = kh_graph_lower(&t->spec, &lo, &mg, err, sizeof err);
        CHECK(st == KH_OK, "%s: lower: %s", t->name, err);
        if (st != KH_OK) continue;
        kh_gplan plans[KH_GFN_COUNT];
        memset(plans, 0, sizeof plans);
        int64_t want = 0;
        int fns = 0;
        for (int f = 0; f < KH_GFN_COUNT; f++) {
            if (mg.fn[f].n_nodes == 0) continue;
            fns++;
            CHECK(kh_graph_plan(&mg.fn[f], TF_ALIGN, &plans[f]) == KH_OK, "%s: plan of function %d", t->name, f);
            if (plans[f].arena_bytes > want) want = plans[f].arena_bytes;
        }
        CHECK(fns == KH_GFN_COUNT, "%s: four functions", t->name);
        tf_cu_layout lay;
        st = tf_cu_layout_build(&mg, plans, &lay, err, sizeof err);
        CHECK(st == KH_OK, "%s: layout: %s", t->name, err);
        if (st == KH_OK) {
            CHECK(lay.arena_bytes == want && want > 0, "%s: device arena %lld B, max plan %lld B", t->name,
                  (long long)lay.arena_bytes, (long long)want);
            int64_t feed[3] = {t->batch * mg.input_numel * 4, t->batch * 4, t->batch * mg.out_numel * 4};
            int64_t nodes = 0;
            for (int f = 0; f < KH_GFN_COUNT; f++) {
                check_fn(t->name, f, &mg, &plans[f], &lay, feed, kinds_seen);
                nodes += mg.fn[f].n_nodes;
            }
            printf("%-24s batch %3d: %5lld nodes in 4 functions, device arena %9.2f MiB (train %.2f, eval %.2f, "
                   "predict %.2f, probe %.2f)\n", t->name, t->batch, (long long)nodes, lay.arena_bytes / 1048576.0,
                   plans[0].arena_bytes / 1048576.0, plans[1].arena_bytes / 1048576.0, plans[2].arena_bytes / 1048576.0,
                   plans[3].arena_bytes / 1048576.0);
            tf_cu_layout_free(&lay);
        }
        for (int f = 0; f < KH_GFN_COUNT; f++) kh_gplan_free(&plans[f]);
        kh_model_graphs_free(&mg);
    }
    /* the scan lowering (never tensorflow's) is refused with a reason, not run by kernels that assume matrices */
    for (int k = 0; k < nm; k++) {
        const kb_model *t = &models[k];
        kh_model_graphs mg;
        char err[256];
        kh_graph_lower_opts lo = {.max_batch = t->batch, .rnn_scan = 1};
        if (kh_graph_lower(&t->spec, &lo, &mg, err, sizeof err) != KH_OK) {
            CHECK(0, "%s: lower with rnn_scan: %s", t->name, err);
            continue;
        }
        int recurrent = 0, refused = 0;
        for (int32_t l = 0; l < t->spec.n_layers; l++)
            recurrent |= t->spec.layers[l].kind == KH_LAYER_LSTM || t->spec.layers[l].kind == KH_LAYER_BILSTM;
        char why[256] = "";
        for (int32_t i = 0; i < mg.fn[KH_GFN_TRAIN].n_nodes && !refused; i++)
            refused = tf_node_refused(&mg.fn[KH_GFN_TRAIN], i, why, sizeof why);
        CHECK(refused == recurrent, "%s: rnn_scan lowering %s", t->name, refused ? "refused" : "not refused");
        if (refused) printf("%s with rnn_scan: refused: %s\n", t->name, why);
        kh_model_graphs_free(&mg);
    }
    /* the table is complete for the whole IR, not only for what these models use, but for the scan forms */
    for (uint32_t op = KH_GOP_INPUT; op < KH_GOP_END; op++) {
        int scan = op == KH_GOP_LSTM_SCAN || op == KH_GOP_LSTM_SCAN_GRAD || op == KH_GOP_LSTM_SCAN_GRAD_U ||
                   op == KH_GOP_ELEMWISE;
        CHECK((tf_cu_op_kind(op) != TF_CU_NONE) != scan, "op %s: %s CUDA launch", kh_gop_name(op),
              scan ? "a" : "no");
    }
    CHECK(tf_cu_op_kind(KH_GOP_END) == TF_CU_NONE && tf_cu_op_kind(0) == TF_CU_NONE, "unknown ops have no launch");
    CHECK(!strcmp(tf_cu_kind_library(tf_cu_op_kind(KH_GOP_MATMUL)), "cublas"), "MatMul on cuBLAS");
    CHECK(!strcmp(tf_cu_kind_library(tf_cu_op_kind(KH_GOP_CONV2D_BACKPROP_FILTER)), "cudnn"), "Conv2D on cuDNN");
    CHECK(!strcmp(tf_cu_kind_library(tf_cu_op_kind(KH_GOP_MAXPOOL_GRAD)), "kernel"), "MaxPoolGrad: own kernel");
    int used = 0;
    for (int k = 0; k < TF_CU_KIND_END; k++) used += kinds_seen[k];
    printf("launch kinds used by the six models: %d of %d\n", used, TF_CU_KIND_END - 1);
    CHECK(kinds_seen[TF_CU_CONV_BWD_FILTER] && kinds_seen[TF_CU_GATHER_GRAD] && kinds_seen[TF_CU_DROPOUT] &&
              kinds_seen[TF_CU_CONCAT] && kinds_seen[TF_CU_MEAN_GRAD] && kinds_seen[TF_CU_APPLY],
          "the six models exercise convolutions, embeddings, dropout, recurrences, pooling over time, optimizers");
    return kh_test_finish("test_tf_cuda_plan");
}
