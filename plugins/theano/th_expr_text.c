/* th_expr_text.c — an Elemwise program as straight-line expressions, shared by the C and CUDA dialects:
 * `t<k>` temporaries over the inputs `i<j>[index]` (vectors over the last axis at `vec_index`), each op's text
 * from one table over the element-wise formulas of khost/kit/formulas.h. Dropout reads the per-instruction key
 * `<key_prefix><k>`. Also the one-instruction programs of primitive element-wise ops and the optimizer updates. */
#include <stdio.h>
#include <string.h>

#include "th.h"

/* The text of each element-wise op over its operands, as data for both dialects (the formulas of formulas.h
 * compile as C and as CUDA device code): $a and $b the operands, $k the instruction's dropout key, $i the
 * element's index, $r the drop rate and $s the scale of a kept element (float literals). */
static const char *const op_text[KH_GOP_END] = {
    [KH_GOP_ADD] = "$a + $b",
    [KH_GOP_SUB] = "$a - $b",
    [KH_GOP_MUL] = "$a * $b",
    [KH_GOP_NEG] = "-$a",
    [KH_GOP_RELU] = "kh_relu($a)",
    [KH_GOP_SIGMOID] = "kh_sigmoid($a)",
    [KH_GOP_TANH] = "TH_TANH($a)",
    [KH_GOP_RELU_GRAD] = "$b * kh_relu_grad_y($a)",
    [KH_GOP_SIGMOID_GRAD] = "$b * kh_sigmoid_grad_y($a)",
    [KH_GOP_TANH_GRAD] = "$b * kh_tanh_grad_y($a)",
    [KH_GOP_DROPOUT] = "kh_dropout_keep($k, (uint64_t)($i), $r) ? $a * $s : 0.0f",
    [KH_GOP_DROPOUT_GRAD] = "kh_dropout_keep($k, (uint64_t)($i), $r) ? $a * $s : 0.0f",
};

static void operand(th_sb *b, const kh_gexpr *e, int32_t r, const char *index, const char *vec_index) {
    if (r >= 0) th_sb_printf(b, "t%d", r);
    else th_sb_printf(b, "i%d[%s]", -1 - r, e->vec[-1 - r] ? vec_index : index);
}

void th_expr_text(th_sb *b, const kh_gexpr *e, const char *index, const char *vec_index, const char *key_prefix,
                  const char *ftype) {
    for (int k = 0; k < e->n_ops; k++) {
        const kh_gexpr_op *o = &e->ops[k];
        th_sb_printf(b, "            const %s t%d = ", ftype, k);
        const char *t = o->op < KH_GOP_END ? op_text[o->op] : NULL;
        for (; t && *t; t++) {
            if (*t != '$' || !t[1]) {
                th_sb_put(b, t, 1);
                continue;
            }
            switch (*++t) {
            case 'a': operand(b, e, o->a, index, vec_index); break;
            case 'b': operand(b, e, o->b, index, vec_index); break;
            case 'k': th_sb_printf(b, "%s%d", key_prefix, k); break;
            case 'i': th_sb_printf(b, "%s", index); break;
            case 'r': th_sb_printf(b, "%#.9gf", (double)o->rate); break;
            case 's': th_sb_printf(b, "%#.9gf", 1.0 / (1.0 - (double)o->rate)); break;
            default: th_sb_put(b, t - 1, 2); break;
            }
        }
        th_sb_printf(b, ";\n");
    }
}

/* A primitive element-wise op as a one- (or few-) instruction program (see th.h). */
int th_expr_single(const kh_gnode *nd, kh_gexpr *e) {
    memset(e, 0, sizeof *e);
    e->n_in = nd->n_in;
    switch (nd->op) {
    case KH_GOP_ADDN:
        if (nd->n_in > KH_GEXPR_MAX_IN) return 0;
        if (nd->n_in == 1) {
            e->ops[0] = (kh_gexpr_op){KH_GOP_ADD, -1, -1, 0, 0};
            e->ops[1] = (kh_gexpr_op){KH_GOP_SUB, 0, -1, 0, 0}; /* x + x - x: a copy */
            e->n_ops = 2;
            return 1;
        }
        e->ops[0] = (kh_gexpr_op){KH_GOP_ADD, -1, -2, 0, 0};
        for (int j = 2; j < nd->n_in; j++) e->ops[j - 1] = (kh_gexpr_op){KH_GOP_ADD, j - 2, -1 - j, 0, 0};
        e->n_ops = nd->n_in - 1;
        return 1;
    case KH_GOP_BIAS_ADD:
        e->vec[1] = 1;
        e->ops[0] = (kh_gexpr_op){KH_GOP_ADD, -1, -2, 0, 0};
        break;
    case KH_GOP_ADD: case KH_GOP_SUB: case KH_GOP_MUL: case KH_GOP_RELU_GRAD: case KH_GOP_SIGMOID_GRAD:
    case KH_GOP_TANH_GRAD:
        e->ops[0] = (kh_gexpr_op){nd->op, -1, -2, 0, 0};
        break;
    case KH_GOP_NEG: case KH_GOP_RELU: case KH_GOP_SIGMOID: case KH_GOP_TANH:
        e->ops[0] = (kh_gexpr_op){nd->op, -1, 0, 0, 0};
        break;
    case KH_GOP_DROPOUT: case KH_GOP_DROPOUT_GRAD:
        e->ops[0] = (kh_gexpr_op){nd->op, -1, 0, nd->attr.rate, nd->attr.salt};
        break;
    default: return 0;
    }
    e->n_ops = 1;
    return 1;
}

/* The statement of one optimizer update at element k (see th.h). Float literals are written with %#.9g: always a
 * decimal point, so 2 is "2.00000000f", never the invalid "2f". */
const char *th_update_text(uint32_t op, const kh_optimizer_spec *o, char *buf, size_t n) {
    if (op == KH_GOP_APPLY_ADAM)
        snprintf(buf, n, "kh_adam_update(&w[k], &s1[k], &s2[k], gk, lr, %#.9gf, %#.9gf, %#.9gf)", (double)o->beta_1,
                 (double)o->beta_2, (double)o->epsilon);
    else if (op == KH_GOP_APPLY_RMSPROP)
        snprintf(buf, n, "kh_rmsprop_update(&w[k], &s1[k], gk, lr, %#.9gf, %#.9gf)", (double)o->rho, (double)o->epsilon);
    else if (op == KH_GOP_APPLY_ADADELTA)
        snprintf(buf, n, "kh_adadelta_update(&w[k], &s1[k], &s2[k], gk, lr, %#.9gf, %#.9gf)", (double)o->rho,
                 (double)o->epsilon);
    else snprintf(buf, n, "w[k] -= lr * gk");
    return buf;
}
