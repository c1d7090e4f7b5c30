/* cpu/model.c — the CPU executor of a plan: allocation of every buffer at compile time, input
 * staging (layout conversion, one-hot), the forward/backward drivers, training / evaluation / prediction,
 * the verify probes, and weight / gradient exchange in canonical layouts. */
#include <string.h>

#include "cpu/cpu.h"
#ifdef CNTK_HAVE_DNNL
#include "cpu/conv.h"
#include "cpu/onednn.h"
#endif
#include "khost/kit/clock.h"
#include "khost/kit/spec.h"

void cntk_cpu_need_scratch(cntk_cpu_model *m, int64_t numel) {
    if (numel > m->scratch_numel) m->scratch_numel = numel;
}

static const cntk_cpu_ops *ops_for(uint32_t kind) {
    switch (kind) {
    case KH_LAYER_DENSE: return &cntk_cpu_dense_ops;
    case KH_LAYER_ACTIVATION: return &cntk_cpu_activation_ops;
    case KH_LAYER_DROPOUT: return &cntk_cpu_dropout_ops;
    case KH_LAYER_FLATTEN: return &cntk_cpu_flatten_ops;
    case KH_LAYER_CONV2D: return &cntk_cpu_conv_ops;
    case KH_LAYER_MAXPOOL2D: return &cntk_cpu_maxpool_ops;
    case KH_LAYER_EMBEDDING: return &cntk_cpu_embed_ops;
    case KH_LAYER_LSTM:
    case KH_LAYER_BILSTM: return &cntk_cpu_lstm_ops;
    case KH_LAYER_GAP1D: return &cntk_cpu_gap1d_ops;
    default: return NULL;
    }
}

// --- compile / free --------------------------------------------------------------------------------------
static void cpu_free(cntk_cpu_model *c) {
    if (!c) return;
    cntk_session *s = c->s;
    if (c->L) {
        for (int32_t i = 0; i < c->n_layers; i++) {
            cntk_cpu_layer *L = &c->L[i];
            if (L->ops && L->ops->teardown) L->ops->teardown(c, L);
            cntk_free(s, L->y);
            for (int k = 0; k < KH_MAX_SLOTS; k++) {
                cntk_free(s, L->prm[k].w);
                cntk_free(s, L->prm[k].g);
                cntk_free(s, L->prm[k].s1);
                cntk_free(s, L->prm[k].s2);
            }
        }
        cntk_free(s, c->L);
    }
#ifdef CNTK_HAVE_DNNL
    cntk_dnnl_close(c); /* after the layers: their primitives and memories were made on its engine */
#endif
    cntk_free(s, c->xin);
    cntk_free(s, c->xidx);
    cntk_free(s, c->labels);
    cntk_free(s, c->gb[0]);
    cntk_free(s, c->gb[1]);
    cntk_free(s, c->scratch);
    cntk_free(s, c);
}

static kh_status oom(cntk_model *m, const cntk_layer_plan *lp, const char *what, int64_t floats) {
    if (!lp) return cntk_fail(m->s, KH_ERR_NOMEM, "compile", "out of host memory for %s (%lld floats)", what,
                              (long long)floats);
    return cntk_layer_fail(m->s, KH_ERR_NOMEM, lp->spec.kind, lp->index, "compile",
                           "out of host memory for %s (%lld floats)", what, (long long)floats);
}

static kh_status cntk_cpu_compile(cntk_model *m) {
    cntk_session *s = m->s;
    const cntk_plan *p = &m->plan;
    cntk_cpu_model *c = cntk_alloc(s, sizeof *c);
    if (!c) return oom(m, NULL, "the model", 0);
    m->cpu = c;
    c->s = s;
    c->plan = p;
    c->L = cntk_alloc(s, (size_t)p->n_layers * sizeof *c->L);
    if (!c->L) return oom(m, NULL, "layers", 0);
    c->n_layers = p->n_layers;
    int64_t N = p->max_batch;
#ifdef CNTK_HAVE_DNNL
    kh_status dst = cntk_dnnl_open(c);
    if (dst != KH_OK) return dst;
#endif

    /* staged input */
    int64_t in0 = p->layers[0].in_numel;
    if (p->input_dtype == KH_F32 || p->expand_onehot) {
        c->xin = cntk_alloc(s, (size_t)(N * in0) * sizeof(float));
        if (!c->xin) return oom(m, NULL, "the input", N * in0);
    }
    if (p->input_dtype == KH_I32) {
        c->xidx = cntk_alloc(s, (size_t)(N * p->raw_numel) * sizeof(int32_t));
        if (!c->xidx) return oom(m, NULL, "the input indices", N * p->raw_numel);
    }
    c->labels = cntk_alloc(s, (size_t)N * sizeof(int32_t));
    if (!c->labels) return oom(m, NULL, "labels", N);

    int64_t gmax = 1;
    for (int32_t i = 0; i < p->n_layers; i++) {
        cntk_cpu_layer *L = &c->L[i];
        const cntk_layer_plan *lp = &p->layers[i];
        L->p = lp;
        L->ops = ops_for(lp->spec.kind);
        if (!L->ops) return cntk_layer_fail(s, KH_ERR_UNSUPPORTED, lp->spec.kind, i, "compile", "unknown kind");
        if (i == 0) {
            if (lp->index_in) L->xi = c->xidx;
            else L->x = c->xin;
        } else {
            L->x = c->L[i - 1].y;
        }
        L->y = cntk_alloc(s, (size_t)(N * lp->out_numel) * sizeof(float));
        if (!L->y) return oom(m, lp, "the output", N * lp->out_numel);
        L->n_params = lp->sh.n_params;
        for (int k = 0; k < L->n_params; k++) {
            cntk_param *pr = &L->prm[k];
            pr->numel = lp->sh.params[k].numel;
            pr->w = cntk_alloc(s, (size_t)pr->numel * sizeof(float));
            if (!pr->w) return oom(m, lp, lp->sh.params[k].name, pr->numel);
            if (lp->spec.kind != KH_LAYER_EMBEDDING) { /* Embedding keeps a row-sparse gradient */
                pr->g = cntk_alloc(s, (size_t)pr->numel * sizeof(float));
                if (!pr->g) return oom(m, lp, "a gradient", pr->numel);
            }
            if (cntk_optim_alloc(c, pr) != KH_OK) return oom(m, lp, "optimizer slots", pr->numel);
        }
        if (L->ops->setup) {
            kh_status st = L->ops->setup(c, L);
            if (st == KH_ERR_NOMEM) return oom(m, lp, "its state", 0);
            if (st != KH_OK) return st; /* the layer explained itself */
        }
        if (lp->in_numel > gmax) gmax = lp->in_numel;
        if (lp->out_numel > gmax) gmax = lp->out_numel;
    }
    c->gb_numel = gmax;
    for (int k = 0; k < 2; k++) {
        c->gb[k] = cntk_alloc(s, (size_t)(N * gmax) * sizeof(float));
        if (!c->gb[k]) return oom(m, NULL, "activation gradients", N * gmax);
    }
    if (c->scratch_numel > 0) {
        c->scratch = cntk_alloc(s, (size_t)c->scratch_numel * sizeof(float));
        if (!c->scratch) return oom(m, NULL, "scratch", c->scratch_numel);
    }
#ifdef CNTK_HAVE_DNNL
    if ((dst = cntk_conv_dnnl_chain(c)) != KH_OK) return dst;
    if ((dst = cntk_dnnl_finish(c)) != KH_OK) return dst;
#endif
    return KH_OK;
}

// --- staging ---------------------------------------------------------------------------------------------
/* Check x against the plan and copy it into the executor's input buffers; returns the batch size in *n. */
static kh_status stage_input(cntk_model *m, const kh_tensor *x, const char *op, int *n) {
    cntk_cpu_model *c = m->cpu;
    const cntk_plan *p = &m->plan;
    kh_status st = cntk_plan_check_input(p, m->s, x, op, n);
    if (st != KH_OK) return st;
    int64_t nb = *n;
    if (p->input_dtype == KH_I32) {
        memcpy(c->xidx, x->data, (size_t)(nb * p->raw_numel) * sizeof(int32_t));
        if (p->expand_onehot) {
            /* (N, raw..., depth); a rank-3 result is image-like and so stored NCHW like every rank-3 tensor */
            int64_t depth = p->input_onehot, pixels = p->raw_numel;
            int nchw = p->layers[0].image_in;
            memset(c->xin, 0, (size_t)(nb * pixels * depth) * sizeof(float));
            for (int64_t i = 0; i < nb * pixels; i++) {
                int32_t v = c->xidx[i];
                if (v < 0 || v >= depth)
                    return cntk_fail(m->s, KH_ERR_INVALID, op, "one-hot index %d outside [0, %lld)", v,
                                     (long long)depth);
                int64_t s = i / pixels, pix = i % pixels;
                c->xin[nchw ? (s * depth + v) * pixels + pix : i * depth + v] = 1.0f;
            }
        }
        return KH_OK;
    }
    const cntk_layer_plan *l0 = &p->layers[0];
    if (l0->image_in && x->layout == KH_LAYOUT_NHWC) /* the host should have converted; accept it anyway */
        cntk_nhwc_to_nchw(x->data, c->xin, nb, l0->sh.in_shape[2], l0->sh.in_shape[0], l0->sh.in_shape[1]);
    else
        memcpy(c->xin, x->data, (size_t)(nb * p->raw_numel) * sizeof(float));
    return KH_OK;
}

static kh_status stage_labels(cntk_model *m, const kh_tensor *y, int n, const char *op) {
    if (!y->data || y->dtype != KH_I32 || kh_tensor_numel(y) != n)
        return cntk_fail(m->s, KH_ERR_INVALID, op, "y must be %d i32 labels", n);
    memcpy(m->cpu->labels, y->data, (size_t)n * sizeof(int32_t));
    return KH_OK;
}

// --- drivers ---------------------------------------------------------------------------------------------
static kh_status forward_all(cntk_cpu_model *c, int n, int train) {
    for (int32_t i = 0; i < c->n_layers; i++) {
        cntk_cpu_layer *L = &c->L[i];
        double t0 = c->prof ? kh_now() : 0;
        kh_status st = L->ops->forward(c, L, n, train);
        if (st != KH_OK) return st;
        if (c->prof) c->prof[3 * i] += kh_now() - t0;
    }
    c->n_forward++;
    return KH_OK;
}

/* The gradient of the model output is in gb[0]; returns the buffer index holding the input gradient. */
static kh_status backward_all(cntk_cpu_model *c, int n, int fused, int want_dx, int *dx_buf) {
    int cur = 0;
    for (int32_t i = c->n_layers - 1; i >= 0; i--) {
        cntk_cpu_layer *L = &c->L[i];
        float *dx = (i > 0 || want_dx) && !L->p->index_in ? c->gb[1 - cur] : NULL;
        double t0 = c->prof ? kh_now() : 0;
        kh_status st = L->ops->backward(c, L, n, c->gb[cur], dx, fused && i == c->n_layers - 1);
        if (st != KH_OK) return st;
        if (c->prof) c->prof[3 * i + 1] += kh_now() - t0;
        cur = 1 - cur;
    }
    if (dx_buf) *dx_buf = cur;
    c->have_grad = 1;
    return KH_OK;
}

static const float *model_output(const cntk_cpu_model *c) { return c->L[c->n_layers - 1].y; }

static kh_status cntk_cpu_train(cntk_model *m, const kh_tensor *x, const kh_tensor *y) {
    cntk_cpu_model *c = m->cpu;
    int n = 0;
    kh_status st = stage_input(m, x, "train_batch", &n);
    if (st == KH_OK) st = stage_labels(m, y, n, "train_batch");
    if (st != KH_OK) return st;
    if (m->plan.loss == KH_LOSS_NONE)
        return cntk_fail(m->s, KH_ERR_INVALID, "train_batch", "the model was compiled without a loss");
    if ((st = forward_all(c, n, 1)) != KH_OK) return st;
    c->have_fwd = 0; /* the probes' saved forward is gone */
    kh_metrics batch = {0, 0, 0};
    if ((st = cntk_loss_eval(c, model_output(c), c->labels, n, &batch, c->gb[0])) != KH_OK) return st;
    if ((st = backward_all(c, n, 1, 0, NULL)) != KH_OK) return st;
    cntk_optim_step(c);
    c->met[KH_PHASE_TRAIN].loss_sum += batch.loss_sum;
    c->met[KH_PHASE_TRAIN].correct += batch.correct;
    c->met[KH_PHASE_TRAIN].samples += batch.samples;
    return KH_OK;
}

static kh_status cntk_cpu_eval(cntk_model *m, const kh_tensor *x, const kh_tensor *y) {
    cntk_cpu_model *c = m->cpu;
    int n = 0;
    kh_status st = stage_input(m, x, "eval_batch", &n);
    if (st == KH_OK) st = stage_labels(m, y, n, "eval_batch");
    if (st != KH_OK) return st;
    if ((st = forward_all(c, n, 0)) != KH_OK) return st;
    c->have_fwd = 0;
    return cntk_loss_eval(c, model_output(c), c->labels, n, &c->met[KH_PHASE_EVAL], NULL);
}

/* Copy the model output (n, out...) to a host tensor in its layout (images: NCHW -> NHWC when asked). */
static kh_status emit_output(cntk_model *m, int n, kh_tensor *out, const char *op) {
    const cntk_plan *p = &m->plan;
    const cntk_layer_plan *last = &p->layers[p->n_layers - 1];
    if (!out->data || out->dtype != KH_F32 || kh_tensor_numel(out) != n * p->out_numel)
        return cntk_fail(m->s, KH_ERR_INVALID, op, "out must be f32 with %lld values (%d samples x %lld)",
                         (long long)(n * p->out_numel), n, (long long)p->out_numel);
    const float *y = model_output(m->cpu);
    if (last->image_out && out->layout == KH_LAYOUT_NHWC)
        cntk_nchw_to_nhwc(y, out->data, n, last->sh.out_shape[2], last->sh.out_shape[0], last->sh.out_shape[1]);
    else
        memcpy(out->data, y, (size_t)(n * p->out_numel) * sizeof(float));
    return KH_OK;
}

static kh_status cntk_cpu_predict(cntk_model *m, const kh_tensor *x, kh_tensor *out) {
    int n = 0;
    kh_status st = stage_input(m, x, "predict", &n);
    if (st != KH_OK) return st;
    if ((st = forward_all(m->cpu, n, 0)) != KH_OK) return st;
    m->cpu->have_fwd = 0;
    return emit_output(m, n, out, "predict");
}

static kh_status cntk_cpu_forward_probe(cntk_model *m, const kh_tensor *x, kh_tensor *out) {
    cntk_cpu_model *c = m->cpu;
    int n = 0;
    kh_status st = stage_input(m, x, "forward", &n);
    if (st != KH_OK) return st;
    c->have_fwd = 0;
    if ((st = forward_all(c, n, 1)) != KH_OK) return st;
    c->have_fwd = 1;
    c->last_n = n;
    return emit_output(m, n, out, "forward");
}

static kh_status cntk_cpu_backward_probe(cntk_model *m, const kh_tensor *dy, kh_tensor *dx) {
    cntk_cpu_model *c = m->cpu;
    const cntk_plan *p = &m->plan;
    if (!c->have_fwd) return cntk_fail(m->s, KH_ERR_INVALID, "backward", "no forward() to back-propagate through");
    int n = c->last_n;
    const cntk_layer_plan *last = &p->layers[p->n_layers - 1], *first = &p->layers[0];
    if (!dy->data || dy->dtype != KH_F32 || kh_tensor_numel(dy) != n * p->out_numel)
        return cntk_fail(m->s, KH_ERR_INVALID, "backward", "dy must be f32 with %lld values",
                         (long long)(n * p->out_numel));
    if (last->image_out && dy->layout == KH_LAYOUT_NHWC)
        cntk_nhwc_to_nchw(dy->data, c->gb[0], n, last->sh.out_shape[2], last->sh.out_shape[0], last->sh.out_shape[1]);
    else
        memcpy(c->gb[0], dy->data, (size_t)(n * p->out_numel) * sizeof(float));
    int want_dx = dx && dx->data && p->input_dtype == KH_F32;
    if (want_dx && (dx->dtype != KH_F32 || kh_tensor_numel(dx) != n * first->in_numel))
        return cntk_fail(m->s, KH_ERR_INVALID, "backward", "dx must be f32 with %lld values",
                         (long long)(n * first->in_numel));
    int buf = 0;
    kh_status st = backward_all(c, n, 0, want_dx, &buf);
    if (st != KH_OK) return st;
    if (want_dx) {
        if (first->image_in && dx->layout == KH_LAYOUT_NHWC)
            cntk_nchw_to_nhwc(c->gb[buf], dx->data, n, first->sh.in_shape[2], first->sh.in_shape[0],
                              first->sh.in_shape[1]);
        else
            memcpy(dx->data, c->gb[buf], (size_t)(n * first->in_numel) * sizeof(float));
    }
    return KH_OK;
}

static kh_status cntk_cpu_read_metrics(cntk_model *m, uint32_t phase, kh_metrics *out, int32_t reset) {
    *out = m->cpu->met[phase];
    if (reset) memset(&m->cpu->met[phase], 0, sizeof m->cpu->met[phase]);
    return KH_OK;
}

// --- weights and gradients in canonical layout ------------------------------------------------------------
static kh_status cntk_cpu_set_weight(cntk_model *m, int32_t layer, int32_t slot, const kh_tensor *w) {
    cntk_cpu_layer *L = &m->cpu->L[layer];
    cntk_param *p = &L->prm[slot];
    if (L->ops->to_backend)
        L->ops->to_backend(L, slot, w->data, p->w);
    else
        memcpy(p->w, w->data, (size_t)p->numel * sizeof(float));
    return KH_OK;
}

static kh_status cntk_cpu_get_weight(cntk_model *m, int32_t layer, int32_t slot, kh_tensor *w) {
    cntk_cpu_layer *L = &m->cpu->L[layer];
    cntk_param *p = &L->prm[slot];
    if (L->ops->to_canonical)
        L->ops->to_canonical(L, slot, p->w, w->data);
    else
        memcpy(w->data, p->w, (size_t)p->numel * sizeof(float));
    return KH_OK;
}

static kh_status cntk_cpu_get_grad(cntk_model *m, int32_t layer, int32_t slot, kh_tensor *g) {
    cntk_cpu_layer *L = &m->cpu->L[layer];
    cntk_param *p = &L->prm[slot];
    if (!m->cpu->have_grad)
        return cntk_layer_fail(m->s, KH_ERR_INVALID, L->p->spec.kind, layer, "get_grad", "no backward has run yet");
    float *out = g->data;
    if (p->row_slot) { /* row-sparse: zeros, then the touched rows */
        memset(out, 0, (size_t)p->numel * sizeof(float));
        for (int64_t k = 0; k < p->n_touched; k++)
            memcpy(out + (int64_t)p->touched[k] * p->cols, p->grow + k * p->cols, (size_t)p->cols * sizeof(float));
    } else if (L->ops->to_canonical) {
        L->ops->to_canonical(L, slot, p->g, out);
    } else {
        memcpy(out, p->g, (size_t)p->numel * sizeof(float));
    }
    return KH_OK;
}

static void cntk_cpu_free_model(cntk_model *m) {
    cpu_free(m->cpu);
    m->cpu = NULL;
}

/* The executor's model calls never queue work: sync has nothing to wait for. */
static kh_status cntk_cpu_sync(cntk_model *m) {
    (void)m;
    return KH_OK;
}

const cntk_exec cntk_cpu_exec = {
    .caps = cntk_cpu_caps,
    .open = cntk_cpu_open,
    .close = cntk_cpu_close,
    .environment = cntk_cpu_environment,
    .compile = cntk_cpu_compile,
    .free_model = cntk_cpu_free_model,
    .set_weight = cntk_cpu_set_weight,
    .get_weight = cntk_cpu_get_weight,
    .get_grad = cntk_cpu_get_grad,
    .train = cntk_cpu_train,
    .eval = cntk_cpu_eval,
    .predict = cntk_cpu_predict,
    .forward_probe = cntk_cpu_forward_probe,
    .backward_probe = cntk_cpu_backward_probe,
    .read_metrics = cntk_cpu_read_metrics,
    .sync = cntk_cpu_sync,
};
