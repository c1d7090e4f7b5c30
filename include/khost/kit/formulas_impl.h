/* khost/kit/formulas_impl.h — the body of khost/kit/formulas.h, included once per precision.
 * Do not include directly: formulas.h defines KH_T (the scalar type), KH_FN (the name: kh_x for float,
 * kh_x_d for double) and the math functions, then includes this file, which undefines them at its end. */
/* --- activations; derivatives are written in terms of the activation's output y ---------------------- */
KH_HD KH_T KH_FN(kh_relu)(KH_T x) { return x > ((KH_T)0) ? x : ((KH_T)0); }
KH_HD KH_T KH_FN(kh_relu_grad_y)(KH_T y) { return y > ((KH_T)0) ? ((KH_T)1) : ((KH_T)0); }
KH_HD KH_T KH_FN(kh_sigmoid)(KH_T x) {
    /* stable for large |x|: only exponentiates -|x|; both sides computed, then selected, so loops vectorise */
    KH_T e = KH_EXP(x >= ((KH_T)0) ? -x : x);
    KH_T r = ((KH_T)1) / (((KH_T)1) + e);
    return x >= ((KH_T)0) ? r : e * r;
}
KH_HD KH_T KH_FN(kh_sigmoid_grad_y)(KH_T y) { return y * (((KH_T)1) - y); }
KH_HD KH_T KH_FN(kh_tanh_grad_y)(KH_T y) { return ((KH_T)1) - y * y; }

/* act: kh_activation except softmax (which needs a whole row). */
KH_HD KH_T KH_FN(kh_act_forward)(int act, KH_T x) {
    switch (act) {
    case 1: return KH_FN(kh_relu)(x);
    case 2: return KH_FN(kh_sigmoid)(x);
    case 3: return KH_TANH(x);
    default: return x;
    }
}
KH_HD KH_T KH_FN(kh_act_grad_y)(int act, KH_T y) {
    switch (act) {
    case 1: return KH_FN(kh_relu_grad_y)(y);
    case 2: return KH_FN(kh_sigmoid_grad_y)(y);
    case 3: return KH_FN(kh_tanh_grad_y)(y);
    default: return ((KH_T)1);
    }
}

/* --- LSTM cell (Keras 2: recurrent_activation sigmoid, activation tanh; gates i, f, c, o) ------------- */
/* Given pre-activations of one unit, the previous cell state, produce c and h and keep the gate values. */
KH_HD void KH_FN(kh_lstm_cell)(KH_T zi, KH_T zf, KH_T zc, KH_T zo, KH_T c_prev, KH_T *i, KH_T *f, KH_T *g,
                        KH_T *o, KH_T *c, KH_T *h) {
    *i = KH_FN(kh_sigmoid)(zi);
    *f = KH_FN(kh_sigmoid)(zf);
    *g = KH_TANH(zc);
    *o = KH_FN(kh_sigmoid)(zo);
    *c = (*f) * c_prev + (*i) * (*g);
    *h = (*o) * KH_TANH(*c);
}
/* Backward of one unit: from dh (into h) and dc_next (into c from step t+1) produce the pre-activation
 * gradients and the gradient into c_prev. */
KH_HD void KH_FN(kh_lstm_cell_backward)(KH_T i, KH_T f, KH_T g, KH_T o, KH_T c, KH_T c_prev, KH_T dh,
                                 KH_T dc_next, KH_T *dzi, KH_T *dzf, KH_T *dzc, KH_T *dzo,
                                 KH_T *dc_prev) {
    KH_T tc = KH_TANH(c);
    KH_T dc = dc_next + dh * o * (((KH_T)1) - tc * tc);
    *dzo = dh * tc * o * (((KH_T)1) - o);
    *dzi = dc * g * i * (((KH_T)1) - i);
    *dzf = dc * c_prev * f * (((KH_T)1) - f);
    *dzc = dc * i * (((KH_T)1) - g * g);
    *dc_prev = dc * f;
}

/* --- losses (Keras clips probabilities to [eps, 1-eps]) ------------------------------------------------- */
KH_HD KH_T KH_FN(kh_clip_prob)(KH_T p) {
    return p < ((KH_T)KH_EPSILON) ? ((KH_T)KH_EPSILON) : (p > ((KH_T)1) - ((KH_T)KH_EPSILON) ? ((KH_T)1) - ((KH_T)KH_EPSILON) : p);
}
/* Categorical cross-entropy of one sample from the probability of its true class. */
KH_HD KH_T KH_FN(kh_cce_loss)(KH_T p_true) { return -KH_LOG(KH_FN(kh_clip_prob)(p_true)); }
/* Binary cross-entropy of one sample. */
KH_HD KH_T KH_FN(kh_bce_loss)(KH_T p, KH_T label) {
    KH_T q = KH_FN(kh_clip_prob)(p);
    return -(label * KH_LOG(q) + (((KH_T)1) - label) * KH_LOG(((KH_T)1) - q));
}
/* Gradient of the mean-over-batch loss w.r.t. the pre-softmax / pre-sigmoid logit, with Keras's clipping
 * folded in: where the clip is active the gradient through it is zero. inv_n = 1 / batch size. */
KH_HD KH_T KH_FN(kh_softmax_cce_grad)(KH_T p, int is_true, KH_T p_true, KH_T inv_n) {
    /* d/dz_j of -log(clip(p_t)) = p_j - [j==t] while p_t is inside the clip range; zero where the clip
     * binds (Keras differentiates through the clip). */
    if (p_true < ((KH_T)KH_EPSILON) || p_true > ((KH_T)1) - ((KH_T)KH_EPSILON)) return ((KH_T)0);
    return (p - (is_true ? ((KH_T)1) : ((KH_T)0))) * inv_n;
}
KH_HD KH_T KH_FN(kh_sigmoid_bce_grad)(KH_T p, KH_T label, KH_T inv_n) {
    KH_T q = KH_FN(kh_clip_prob)(p);
    if (q != p) {
        /* clipped: d/dp of the clipped loss is zero, as in Keras's graph */
        return ((KH_T)0);
    }
    return (p - label) * inv_n;
}

/* --- optimizers, per element (Keras 2; lr already decayed: lr_t = lr / (1 + decay * iterations)) -------- */
/* RMSprop: a = rho a + (1-rho) g^2; w -= lr g / (sqrt(a) + eps) */
KH_HD void KH_FN(kh_rmsprop_update)(KH_T *w, KH_T *a, KH_T g, KH_T lr, KH_T rho, KH_T eps) {
    KH_T an = rho * (*a) + (((KH_T)1) - rho) * g * g;
    *a = an;
    *w -= lr * g / (KH_SQRT(an) + eps);
}
/* Adam: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; w -= lr_t m / (sqrt(v) + eps), where
 * lr_t = lr sqrt(1 - b2^t) / (1 - b1^t) is computed once per step by the caller (t = iterations + 1). */
KH_HD void KH_FN(kh_adam_update)(KH_T *w, KH_T *m, KH_T *v, KH_T g, KH_T lr_t, KH_T b1, KH_T b2, KH_T eps) {
    KH_T mn = b1 * (*m) + (((KH_T)1) - b1) * g;
    KH_T vn = b2 * (*v) + (((KH_T)1) - b2) * g * g;
    *m = mn;
    *v = vn;
    *w -= lr_t * mn / (KH_SQRT(vn) + eps);
}
/* Adadelta: a = rho a + (1-rho) g^2; u = g sqrt(d + eps) / sqrt(a + eps); w -= lr u;
 * d = rho d + (1-rho) u^2 */
KH_HD void KH_FN(kh_adadelta_update)(KH_T *w, KH_T *a, KH_T *d, KH_T g, KH_T lr, KH_T rho, KH_T eps) {
    KH_T an = rho * (*a) + (((KH_T)1) - rho) * g * g;
    KH_T u = g * KH_SQRT(*d + eps) / KH_SQRT(an + eps);
    *a = an;
    *w -= lr * u;
    *d = rho * (*d) + (((KH_T)1) - rho) * u * u;
}

#undef KH_T
#undef KH_FN
#undef KH_EXP
#undef KH_TANH
#undef KH_SQRT
#undef KH_LOG
