/* th_dump.c — `[plugin theano] dump_dir`: for each compiled function, what the passes did (nodes before and
 * after each pass, op counts of the lowered and the optimised graph), the optimised graph node by node, and the
 * generated source — the describe-style view of a compile, for debugging and for reading what fusion made. */
#include <stdio.h>

#include "passes/th_passes.h"
#include "th.h"

static void put_line(void *ctx, const char *text) { fprintf((FILE *)ctx, "  %s\n", text); }

void th_dump_fn(th_session *s, const char *fn_name, const kh_graph *lowered, const kh_graph *opt,
                const th_opt_report *rep, const char *source, size_t len) {
    if (!s->set.dump_dir[0]) return;
    char path[700];
    snprintf(path, sizeof path, "%s/%s.graph.txt", s->set.dump_dir, fn_name);
    FILE *f = fopen(path, "w");
    if (!f) {
        th_log(s, KH_LOG_WARN, "dump_dir: cannot write %s", path);
        return;
    }
    fprintf(f, "%s function: %d nodes lowered, %d after the passes\n\npasses:\n", fn_name, lowered->n_nodes,
            opt->n_nodes);
    for (int k = 0; k < rep->n; k++)
        fprintf(f, "  %-14s %5d -> %5d nodes, %4d rewrites, %.2f ms\n", rep->run[k].name, rep->run[k].nodes_before,
                rep->run[k].nodes_after, rep->run[k].changed, rep->run[k].seconds * 1e3);
    int32_t before[KH_GOP_END], after[KH_GOP_END];
    kh_graph_op_counts(lowered, before);
    kh_graph_op_counts(opt, after);
    fprintf(f, "\nops (lowered -> optimised):\n");
    for (uint32_t op = 1; op < KH_GOP_END; op++)
        if (before[op] || after[op]) fprintf(f, "  %-24s %5d -> %5d\n", kh_gop_name(op), before[op], after[op]);
    fprintf(f, "\noptimised graph:\n");
    kh_graph_dump(opt, put_line, f);
    for (int32_t i = 0; i < opt->n_nodes; i++) {
        const kh_gnode *n = &opt->nodes[i];
        if (n->op != KH_GOP_ELEMWISE) continue;
        const kh_gexpr *e = &opt->exprs[n->attr.expr];
        fprintf(f, "  %%%d program:", i);
        for (int k = 0; k < e->n_ops; k++) fprintf(f, " t%d=%s(%d,%d)", k, kh_gop_name(e->ops[k].op), e->ops[k].a, e->ops[k].b);
        fprintf(f, "\n");
    }
    if (fclose(f) != 0) th_log(s, KH_LOG_WARN, "dump_dir: cannot write %s", path);
    if (!source) return;
    snprintf(path, sizeof path, "%s/%s.c", s->set.dump_dir, fn_name);
    f = fopen(path, "w");
    if (!f || fwrite(source, 1, len, f) != len || fclose(f) != 0) th_log(s, KH_LOG_WARN, "dump_dir: cannot write %s", path);
}
