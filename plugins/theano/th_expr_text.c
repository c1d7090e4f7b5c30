/* th_expr_text.c — an Elemwise program as straight-line expressions, shared by the C and CUDA emitters:
 * `t<k>` temporaries over the inputs `i<j>[index]` (vectors over the last axis at `vec_index`), with the
 * element-wise formulas of khost/formulas.h. Dropout reads the per-instruction key `<key_prefix><k>`. */
#include "th.h"

static void operand(th_sb *b, const kh_gexpr *e, int32_t r, const char *index, const char *vec_index) {
    if (r >= 0) th_sb_printf(b, "t%d", r);
    else th_sb_printf(b, "i%d[%s]", -1 - r, e->vec[-1 - r] ? vec_index : index);
}

void th_expr_text(th_sb *b, const kh_gexpr *e, const char *index, const char *vec_index, const char *key_prefix,
                  const char *ftype) {
    for (int k = 0; k < e->n_ops; k++) {
        const kh_gexpr_op *o = &e->ops[k];
        th_sb_printf(b, "            const %s t%d = ", ftype, k);
        const char *fn = NULL, *infix = NULL;
        switch (o->op) {
        case KH_GOP_ADD: infix = " + "; break;
        case KH_GOP_SUB: infix = " - "; break;
        case KH_GOP_MUL: infix = " * "; break;
        case KH_GOP_NEG: th_sb_printf(b, "-"); break;
        case KH_GOP_RELU: fn = "kh_relu"; break;
        case KH_GOP_SIGMOID: fn = "kh_sigmoid"; break;
        case KH_GOP_TANH: fn = "TH_TANH"; break;
        default: break;
        }
        if (infix) {
            operand(b, e, o->a, index, vec_index);
            th_sb_printf(b, "%s", infix);
            operand(b, e, o->b, index, vec_index);
        } else if (fn) {
            th_sb_printf(b, "%s(", fn);
            operand(b, e, o->a, index, vec_index);
            th_sb_printf(b, ")");
        } else if (o->op == KH_GOP_NEG) {
            operand(b, e, o->a, index, vec_index);
        } else if (o->op == KH_GOP_RELU_GRAD || o->op == KH_GOP_SIGMOID_GRAD || o->op == KH_GOP_TANH_GRAD) {
            operand(b, e, o->b, index, vec_index);
            th_sb_printf(b, " * %s(", o->op == KH_GOP_RELU_GRAD ? "kh_relu_grad_y"
                                      : o->op == KH_GOP_SIGMOID_GRAD ? "kh_sigmoid_grad_y" : "kh_tanh_grad_y");
            operand(b, e, o->a, index, vec_index);
            th_sb_printf(b, ")");
        } else if (o->op == KH_GOP_DROPOUT || o->op == KH_GOP_DROPOUT_GRAD) {
            th_sb_printf(b, "kh_dropout_keep(%s%d, (uint64_t)(%s), %.9ef) ? ", key_prefix, k, index, (double)o->rate);
            operand(b, e, o->a, index, vec_index);
            th_sb_printf(b, " * %.9ef : 0.0f", 1.0 / (1.0 - (double)o->rate));
        }
        th_sb_printf(b, ";\n");
    }
}
