/* cuda/model.c — the CUDA executor of a plan: every buffer allocated at compile time, input staging
 * through pinned double buffers on a copy stream, the forward/backward drivers, training / evaluation /
 * prediction, the verify probes, metrics kept on the device, and weights / gradients in canonical layouts.
 *
 * Staging (why two buffers): train_batch copies the host batch into pinned buffer k (validating indices and
 * labels on the way: a bad index is a clear error, never a device fault), the copy stream uploads it once
 * the compute stream has finished with the batch that used k two calls ago, and the compute stream waits
 * for that upload. train_batch returns without synchronising, so the host prepares and uploads batch i+1
 * while the device still trains on batch i; waiting on k's previous upload bounds the queue to two batches.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h" /* cntk_nhwc_to_nchw / cntk_nchw_to_nhwc (host layout copies) */
#include "cuda/exec.h"
#include "khost/kit/optimizer.h"

#define ARENA_ALIGN 64 /* floats: 256-byte alignment for every parameter tensor (cuDNN weight space) */

static const struct ccu_ops *ops_for(uint32_t kind) {
    switch (kind) {
    case KH_LAYER_DENSE: return &ccu_dense_ops;
    case KH_LAYER_ACTIVATION: return &ccu_activation_ops;
    case KH_LAYER_DROPOUT: return &ccu_dropout_ops;
    case KH_LAYER_FLATTEN: return &ccu_flatten_ops;
    case KH_LAYER_CONV2D: return &ccu_conv_ops;
    case KH_LAYER_MAXPOOL2D: return &ccu_maxpool_ops;
    case KH_LAYER_EMBEDDING: return &ccu_embed_ops;
    case KH_LAYER_LSTM:
    case KH_LAYER_BILSTM: return &ccu_lstm_ops;
    case KH_LAYER_GAP1D: return &ccu_gap1d_ops;
    default: return NULL;
    }
}

// --- free / compile --------------------------------------------------------------------------------------
void cntk_cuda_free(cntk_model *mm) {
    ccu_model *m = mm->cuda;
    if (!m) return;
    if (m->cs) {
        cudaStreamSynchronize(m->cs->k.stream);
        cudaStreamSynchronize(m->cs->k.copy);
    }
    if (m->L) {
        for (int i = 0; i < m->n_layers; i++) {
            ccu_layer *L = &m->L[i];
            if (L->ops && L->ops->teardown) L->ops->teardown(m, L);
            ccu_free_dev(L->y);
        }
        free(m->L);
    }
    kh_cuda_stage_free(&m->stage);
    for (int k = 0; k < 2; k++) {
        ccu_free_dev(m->d_in[k]);
        ccu_free_dev(m->d_lab[k]);
        ccu_free_dev(m->gb[k]);
    }
    ccu_free_dev(m->xexp);
    ccu_free_dev(m->ws);
    ccu_free_dev(m->pw);
    ccu_free_dev(m->pg);
    ccu_free_dev(m->ps1);
    ccu_free_dev(m->ps2);
    ccu_free_dev(m->d_met);
    if (m->h_met) cudaFreeHost(m->h_met);
    cudaGetLastError();
    free(m);
    mm->cuda = NULL;
}

static kh_status host_oom(ccu_model *m, const char *what) {
    return cntk_fail(m->s, KH_ERR_NOMEM, "compile", "out of pinned host memory for %s", what);
}

static kh_status poison_activations(ccu_model *m, int n) {
    for (int i = 0; i < m->n_layers; i++)
        CCU_CUDA(m, &m->L[i], "poison", ccuk_fill(m->cs->k.stream, m->L[i].y, NAN, (int64_t)n * m->L[i].p->out_numel));
    return KH_OK;
}

kh_status cntk_cuda_compile(cntk_model *mm) {
    cntk_session *s = mm->s;
    const cntk_plan *p = &mm->plan;
    if (!s->cuda) return cntk_fail(s, KH_ERR_INTERNAL, "compile", "no CUDA session state");
    ccu_model *m = calloc(1, sizeof *m);
    if (!m) return cntk_fail(s, KH_ERR_NOMEM, "compile", "out of host memory");
    mm->cuda = m;
    m->s = s;
    m->dev_mem = &mm->dev_mem;
    m->cs = s->cuda;
    m->plan = p;
    const char *pe = getenv("CNTK_CUDA_POISON"), *ce = getenv("CNTK_CUDA_CHECK_LAYERS"),
               *ve = getenv("CNTK_CUDA_VERBOSE");
    m->poison = pe && *pe && *pe != '0';
    m->check_layers = ce && *ce && *ce != '0';
    m->verbose = ve && *ve && *ve != '0';
    cudaStream_t st_ = m->cs->k.stream;
    int64_t N = p->max_batch;
    kh_status st;
    m->L = calloc((size_t)p->n_layers, sizeof *m->L);
    if (!m->L) return cntk_fail(s, KH_ERR_NOMEM, "compile", "out of host memory");
    m->n_layers = p->n_layers;

    /* staging: pinned x + labels, device copies, events */
    m->x_bytes = (size_t)(N * p->raw_numel) * 4u;
    char why[300];
    if ((st = kh_cuda_stage_init(&m->stage, m->cs->k.stream, m->cs->k.copy, m->x_bytes + (size_t)N * sizeof(int32_t),
                                 why, sizeof why)) != KH_OK)
        return cntk_fail(s, st, "compile", "input staging: %s", why);
    for (int k = 0; k < 2; k++) {
        if ((st = ccu_malloc(m, NULL, &m->d_in[k], m->x_bytes, "the input")) != KH_OK) return st;
        if ((st = ccu_malloc(m, NULL, (void **)&m->d_lab[k], (size_t)N * sizeof(int32_t), "the labels")) != KH_OK)
            return st;
    }
    int64_t in0 = p->layers[0].in_numel;
    if (p->input_onehot > 0 &&
        (st = ccu_malloc(m, NULL, (void **)&m->xexp, (size_t)(N * in0) * sizeof(float), "the one-hot input")) != KH_OK)
        return st;

    /* layers: outputs, state, parameter sizes */
    int64_t gmax = 1;
    for (int i = 0; i < p->n_layers; i++) {
        ccu_layer *L = &m->L[i];
        const cntk_layer_plan *lp = &p->layers[i];
        L->p = lp;
        L->ops = ops_for(lp->spec.kind);
        if (!L->ops) return cntk_layer_fail(s, KH_ERR_UNSUPPORTED, lp->spec.kind, i, "compile", "unknown kind");
        if (i > 0) L->x = m->L[i - 1].y;
        if ((st = ccu_malloc(m, L, (void **)&L->y, (size_t)(N * lp->out_numel) * sizeof(float), "the output")) != KH_OK)
            return st;
        if (L->ops->setup && (st = L->ops->setup(m, L)) != KH_OK) return st;
        if (L->n_t != (L->slots_in_t0 ? 1 : lp->sh.n_params))
            return cntk_layer_fail(s, KH_ERR_INTERNAL, lp->spec.kind, i, "compile", "%d tensors for %d weights", L->n_t,
                                   lp->sh.n_params);
        if (lp->in_numel > gmax) gmax = lp->in_numel;
        if (lp->out_numel > gmax) gmax = lp->out_numel;
    }

    /* the parameter arena */
    int64_t total = 0;
    for (int i = 0; i < m->n_layers; i++)
        for (int k = 0; k < m->L[i].n_t; k++) {
            m->L[i].t[k].off = total;
            total += (m->L[i].t[k].numel + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
        }
    m->p_numel = total;
    size_t pbytes = (size_t)(total > 0 ? total : 1) * sizeof(float);
    uint32_t ok = p->opt.kind;
    if ((st = ccu_malloc(m, NULL, (void **)&m->pw, pbytes, "the weights")) != KH_OK) return st;
    if ((st = ccu_malloc(m, NULL, (void **)&m->pg, pbytes, "the gradients")) != KH_OK) return st;
    CCU_CUDA(m, NULL, "compile", cudaMemsetAsync(m->pw, 0, pbytes, st_));
    CCU_CUDA(m, NULL, "compile", cudaMemsetAsync(m->pg, 0, pbytes, st_));
    if (ok == KH_OPT_RMSPROP || ok == KH_OPT_ADAM || ok == KH_OPT_ADADELTA) {
        if ((st = ccu_malloc(m, NULL, (void **)&m->ps1, pbytes, "optimizer slots")) != KH_OK) return st;
        CCU_CUDA(m, NULL, "compile", cudaMemsetAsync(m->ps1, 0, pbytes, st_));
    }
    if (ok == KH_OPT_ADAM || ok == KH_OPT_ADADELTA) {
        if ((st = ccu_malloc(m, NULL, (void **)&m->ps2, pbytes, "optimizer slots")) != KH_OK) return st;
        CCU_CUDA(m, NULL, "compile", cudaMemsetAsync(m->ps2, 0, pbytes, st_));
    }
    m->g_clean = 1;
    for (int i = 0; i < m->n_layers; i++)
        if (m->L[i].ops->bind && (st = m->L[i].ops->bind(m, &m->L[i])) != KH_OK) return st;

    m->gb_numel = gmax;
    for (int k = 0; k < 2; k++)
        if ((st = ccu_malloc(m, NULL, (void **)&m->gb[k], (size_t)(N * gmax) * sizeof(float),
                             "activation gradients")) != KH_OK)
            return st;
    if (m->ws_bytes > 0 && (st = ccu_malloc(m, NULL, &m->ws, m->ws_bytes, "the cuDNN workspace")) != KH_OK) return st;
    m->ws_final = 1;
    if ((st = ccu_malloc(m, NULL, (void **)&m->d_met, 4 * sizeof(double), "metrics")) != KH_OK) return st;
    CCU_CUDA(m, NULL, "compile", cudaMemsetAsync(m->d_met, 0, 4 * sizeof(double), st_));
    if (cudaHostAlloc((void **)&m->h_met, 4 * sizeof(double), cudaHostAllocDefault) != cudaSuccess) {
        m->h_met = NULL;
        cudaGetLastError();
        return host_oom(m, "metrics");
    }
    if (m->poison) {
        if ((st = poison_activations(m, (int)N)) != KH_OK) return st;
        for (int k = 0; k < 2; k++) CCU_CUDA(m, NULL, "poison", ccuk_fill(st_, m->gb[k], NAN, N * gmax));
    }
    CCU_CUDA(m, NULL, "compile", cudaStreamSynchronize(st_));
    return KH_OK;
}

// --- staging ---------------------------------------------------------------------------------------------
/* Validate x (and y when given), copy them into the next pinned buffer, upload on the copy stream and make
 * the compute stream wait for it; point layer 0 at the uploaded data. */
static kh_status stage(ccu_model *m, const kh_tensor *x, const kh_tensor *y, const char *op, int *n_out) {
    const cntk_plan *p = m->plan;
    int n;
    kh_status st = cntk_plan_check_input(p, m->s, x, op, &n);
    if (st != KH_OK) return st;
    int64_t nb = n;
    if (y && (!y->data || y->dtype != KH_I32 || kh_tensor_numel(y) != n))
        return cntk_fail(m->s, KH_ERR_INVALID, op, "y must be %d i32 labels", n);

    int k;
    void *pin;
    char why[300];
    if ((st = kh_cuda_stage_next(&m->stage, &k, &pin, why, sizeof why)) != KH_OK) /* pinned buffer k is free again */
        return cntk_fail(m->s, st, op, "%s", why);
    size_t xb = (size_t)(nb * p->raw_numel) * 4u;
    const cntk_layer_plan *l0 = &p->layers[0];
    if (p->input_dtype == KH_I32) {
        const int32_t *xi = x->data;
        int64_t lim = p->input_onehot > 0 ? p->input_onehot : l0->spec.kind == KH_LAYER_EMBEDDING ? l0->spec.input_dim : 0;
        for (int64_t i = 0; lim > 0 && i < nb * p->raw_numel; i++)
            if (xi[i] < 0 || xi[i] >= lim) {
                if (p->input_onehot > 0)
                    return cntk_fail(m->s, KH_ERR_INVALID, op, "one-hot index %d outside [0, %lld)", xi[i],
                                     (long long)lim);
                return cntk_layer_fail(m->s, KH_ERR_INVALID, l0->spec.kind, 0, op,
                                       "index %d at sample %lld step %lld outside [0, %lld)", xi[i],
                                       (long long)(i / p->raw_numel), (long long)(i % p->raw_numel), (long long)lim);
            }
        memcpy(pin, xi, xb);
    } else if (l0->image_in && x->layout == KH_LAYOUT_NHWC) { /* the host should have converted; accept it */
        cntk_nhwc_to_nchw(x->data, pin, nb, l0->sh.in_shape[2], l0->sh.in_shape[0], l0->sh.in_shape[1]);
    } else {
        memcpy(pin, x->data, xb);
    }
    int32_t *lab = (int32_t *)((char *)pin + m->x_bytes);
    if (y) {
        const int32_t *yl = y->data;
        const cntk_layer_plan *last = &p->layers[p->n_layers - 1];
        for (int i = 0; i < n; i++) {
            int bad = p->loss == KH_LOSS_BINARY_CROSSENTROPY ? (yl[i] != 0 && yl[i] != 1)
                                                             : (yl[i] < 0 || yl[i] >= p->out_numel);
            if (bad && p->loss != KH_LOSS_NONE)
                return cntk_layer_fail(m->s, KH_ERR_INVALID, last->spec.kind, last->index, "loss",
                                       p->loss == KH_LOSS_BINARY_CROSSENTROPY
                                           ? "binary label %d of sample %d is not 0 or 1"
                                           : "label %d of sample %d outside the classes",
                                       yl[i], i);
        }
        memcpy(lab, yl, (size_t)n * sizeof(int32_t));
    }
    st = kh_cuda_stage_upload(&m->stage, k, (CUdeviceptr)(uintptr_t)m->d_in[k], 0, xb, why, sizeof why);
    if (st == KH_OK && y)
        st = kh_cuda_stage_upload(&m->stage, k, (CUdeviceptr)(uintptr_t)m->d_lab[k], m->x_bytes, (size_t)n * sizeof(int32_t),
                                  why, sizeof why);
    if (st == KH_OK) st = kh_cuda_stage_ready(&m->stage, k, why, sizeof why);
    if (st != KH_OK) return cntk_fail(m->s, st, op, "%s", why);
    cudaStream_t cs = m->cs->k.stream;
    ccu_layer *L0 = &m->L[0];
    if (p->input_onehot > 0) {
        CCU_CUDA(m, NULL, op,
                 ccuk_onehot(cs, m->d_in[k], m->xexp, nb, p->raw_numel, p->input_onehot, l0->image_in ? 1 : 0));
        L0->x = m->xexp;
        L0->xi = NULL;
    } else if (p->input_dtype == KH_I32) {
        L0->xi = m->d_in[k];
        L0->x = NULL;
    } else {
        L0->x = m->d_in[k];
        L0->xi = NULL;
    }
    *n_out = n;
    return KH_OK;
}

/* The compute stream is done with the current staging slot once the work queued so far has run. */
static kh_status release_stage(ccu_model *m, const char *op) {
    char why[300];
    kh_status st = kh_cuda_stage_release(&m->stage, why, sizeof why);
    return st == KH_OK ? st : cntk_fail(m->s, st, op, "%s", why);
}

// --- drivers ---------------------------------------------------------------------------------------------
static kh_status forward_all(ccu_model *m, int n, int train) {
    kh_status st;
    if (m->poison && (st = poison_activations(m, n)) != KH_OK) return st;
    for (int i = 0; i < m->n_layers; i++) {
        if ((st = m->L[i].ops->forward(m, &m->L[i], n, train)) != KH_OK) return st;
        if ((st = ccu_check_layer(m, &m->L[i], "forward")) != KH_OK) return st;
    }
    m->n_forward++;
    return KH_OK;
}

/* The output gradient is in gb[0]; returns in *dx_buf the buffer holding the input gradient. */
static kh_status backward_all(ccu_model *m, int n, int fused, int want_dx, int *dx_buf) {
    kh_status st;
    if (!m->g_clean)
        CCU_CUDA(m, NULL, "backward", cudaMemsetAsync(m->pg, 0, (size_t)m->p_numel * sizeof(float), m->cs->k.stream));
    m->g_clean = 0;
    if (m->poison) CCU_CUDA(m, NULL, "poison", ccuk_fill(m->cs->k.stream, m->gb[1], NAN, (int64_t)n * m->gb_numel));
    int cur = 0;
    for (int i = m->n_layers - 1; i >= 0; i--) {
        ccu_layer *L = &m->L[i];
        float *dx = (i > 0 || want_dx) && !L->p->index_in ? m->gb[1 - cur] : NULL;
        float *spare = dx ? NULL : m->gb[1 - cur];
        if ((st = L->ops->backward(m, L, n, m->gb[cur], dx, spare, fused && i == m->n_layers - 1)) != KH_OK) return st;
        if ((st = ccu_check_layer(m, L, "backward")) != KH_OK) return st;
        cur = 1 - cur;
    }
    if (dx_buf) *dx_buf = cur;
    m->have_grad = 1;
    return KH_OK;
}

/* One optimizer step over the whole arena (Keras 2 schedule from kh_optimizer_step_lr; defaults resolved by the plan). */
static kh_status optimizer_step(ccu_model *m) {
    const kh_optimizer_spec *o = &m->plan->opt;
    ccuk_opt k = {.kind = (int32_t)o->kind,
                  .lr = (float)kh_optimizer_step_lr(o, m->iterations),
                  .rho = o->rho,
                  .b1 = o->beta_1,
                  .b2 = o->beta_2,
                  .eps = o->epsilon,
                  .clear_g = 1};
    CCU_CUDA(m, NULL, "optimizer", ccuk_optimizer(m->cs->k.stream, k, m->p_numel, m->pw, m->pg, m->ps1, m->ps2));
    m->g_clean = 1;
    m->iterations++;
    return KH_OK;
}

static const float *model_output(const ccu_model *m) { return m->L[m->n_layers - 1].y; }

kh_status cntk_cuda_train(cntk_model *mm, const kh_tensor *x, const kh_tensor *y) {
    ccu_model *m = mm->cuda;
    const cntk_plan *p = m->plan;
    if (p->loss == KH_LOSS_NONE)
        return cntk_fail(m->s, KH_ERR_INVALID, "train_batch", "the model was compiled without a loss");
    int n = 0;
    kh_status st = stage(m, x, y, "train_batch", &n);
    if (st != KH_OK) return st;
    m->have_fwd = 0;
    if ((st = forward_all(m, n, 1)) != KH_OK) return st;
    int C = p->loss == KH_LOSS_CATEGORICAL_CROSSENTROPY ? (int)p->out_numel : 1;
    CCU_CUDA(m, &m->L[m->n_layers - 1], "loss",
             ccuk_loss(m->cs->k.stream, (int)p->loss, model_output(m), m->d_lab[m->stage.cur], n, C, m->gb[0], m->d_met));
    if ((st = ccu_check_layer(m, &m->L[m->n_layers - 1], "loss")) != KH_OK) return st;
    if ((st = backward_all(m, n, 1, 0, NULL)) != KH_OK) return st;
    if ((st = optimizer_step(m)) != KH_OK) return st;
    if ((st = ccu_check_layer(m, NULL, "optimizer")) != KH_OK) return st;
    m->samples[KH_PHASE_TRAIN] += n;
    return release_stage(m, "train_batch");
}

kh_status cntk_cuda_eval(cntk_model *mm, const kh_tensor *x, const kh_tensor *y) {
    ccu_model *m = mm->cuda;
    const cntk_plan *p = m->plan;
    if (p->loss == KH_LOSS_NONE)
        return cntk_fail(m->s, KH_ERR_INVALID, "eval_batch", "the model was compiled without a loss");
    int n = 0;
    kh_status st = stage(m, x, y, "eval_batch", &n);
    if (st != KH_OK) return st;
    m->have_fwd = 0;
    if ((st = forward_all(m, n, 0)) != KH_OK) return st;
    int C = p->loss == KH_LOSS_CATEGORICAL_CROSSENTROPY ? (int)p->out_numel : 1;
    CCU_CUDA(m, &m->L[m->n_layers - 1], "loss",
             ccuk_loss(m->cs->k.stream, (int)p->loss, model_output(m), m->d_lab[m->stage.cur], n, C, NULL, m->d_met + 2));
    m->samples[KH_PHASE_EVAL] += n;
    return release_stage(m, "eval_batch");
}

/* Copy the model output (n, out...) into a host tensor, NCHW -> NHWC when asked; synchronous. */
static kh_status emit_output(ccu_model *m, int n, kh_tensor *out, const char *op) {
    const cntk_plan *p = m->plan;
    const cntk_layer_plan *last = &p->layers[p->n_layers - 1];
    if (!out->data || out->dtype != KH_F32 || kh_tensor_numel(out) != n * p->out_numel)
        return cntk_fail(m->s, KH_ERR_INVALID, op, "out must be f32 with %lld values (%d samples x %lld)",
                         (long long)(n * p->out_numel), n, (long long)p->out_numel);
    size_t bytes = (size_t)(n * p->out_numel) * sizeof(float);
    int convert = last->image_out && out->layout == KH_LAYOUT_NHWC;
    float *dst = convert ? malloc(bytes) : out->data;
    if (!dst) return cntk_fail(m->s, KH_ERR_NOMEM, op, "out of host memory");
    cudaError_t e = cudaMemcpyAsync(dst, model_output(m), bytes, cudaMemcpyDeviceToHost, m->cs->k.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(m->cs->k.stream);
    if (e == cudaSuccess && convert)
        cntk_nchw_to_nhwc(dst, out->data, n, last->sh.out_shape[2], last->sh.out_shape[0], last->sh.out_shape[1]);
    if (convert) free(dst);
    if (e != cudaSuccess) return ccu_err_cuda(m, NULL, op, e, "cudaMemcpyAsync(");
    return KH_OK;
}

kh_status cntk_cuda_predict(cntk_model *mm, const kh_tensor *x, kh_tensor *out) {
    ccu_model *m = mm->cuda;
    int n = 0;
    kh_status st = stage(m, x, NULL, "predict", &n);
    if (st != KH_OK) return st;
    m->have_fwd = 0;
    if ((st = forward_all(m, n, 0)) != KH_OK) return st;
    if ((st = release_stage(m, "predict")) != KH_OK) return st;
    return emit_output(m, n, out, "predict");
}

kh_status cntk_cuda_forward_probe(cntk_model *mm, const kh_tensor *x, kh_tensor *out) {
    ccu_model *m = mm->cuda;
    int n = 0;
    kh_status st = stage(m, x, NULL, "forward", &n);
    if (st != KH_OK) return st;
    m->have_fwd = 0;
    if ((st = forward_all(m, n, 1)) != KH_OK) return st;
    if ((st = release_stage(m, "forward")) != KH_OK) return st;
    m->have_fwd = 1;
    m->last_n = n;
    return emit_output(m, n, out, "forward");
}

kh_status cntk_cuda_backward_probe(cntk_model *mm, const kh_tensor *dy, kh_tensor *dx) {
    ccu_model *m = mm->cuda;
    const cntk_plan *p = m->plan;
    if (!m->have_fwd) return cntk_fail(m->s, KH_ERR_INVALID, "backward", "no forward() to back-propagate through");
    int n = m->last_n;
    const cntk_layer_plan *last = &p->layers[p->n_layers - 1], *first = &p->layers[0];
    if (!dy->data || dy->dtype != KH_F32 || kh_tensor_numel(dy) != n * p->out_numel)
        return cntk_fail(m->s, KH_ERR_INVALID, "backward", "dy must be f32 with %lld values",
                         (long long)(n * p->out_numel));
    int want_dx = dx && dx->data && p->input_dtype == KH_F32;
    if (want_dx && (dx->dtype != KH_F32 || kh_tensor_numel(dx) != n * first->in_numel))
        return cntk_fail(m->s, KH_ERR_INVALID, "backward", "dx must be f32 with %lld values",
                         (long long)(n * first->in_numel));
    size_t ob = (size_t)(n * p->out_numel) * sizeof(float), ib = (size_t)(n * first->in_numel) * sizeof(float);
    float *tmp = malloc(ob > ib ? ob : ib);
    if (!tmp) return cntk_fail(m->s, KH_ERR_NOMEM, "backward", "out of host memory");
    const float *src = dy->data;
    if (last->image_out && dy->layout == KH_LAYOUT_NHWC) {
        cntk_nhwc_to_nchw(dy->data, tmp, n, last->sh.out_shape[2], last->sh.out_shape[0], last->sh.out_shape[1]);
        src = tmp;
    }
    cudaError_t e = cudaMemcpyAsync(m->gb[0], src, ob, cudaMemcpyHostToDevice, m->cs->k.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(m->cs->k.stream); /* src may be tmp: finish before reuse */
    if (e != cudaSuccess) {
        free(tmp);
        return ccu_err_cuda(m, NULL, "backward", e, "cudaMemcpyAsync(");
    }
    int buf = 0;
    kh_status st = backward_all(m, n, 0, want_dx, &buf);
    if (st == KH_OK && want_dx) {
        int convert = first->image_in && dx->layout == KH_LAYOUT_NHWC;
        e = cudaMemcpyAsync(convert ? tmp : dx->data, m->gb[buf], ib, cudaMemcpyDeviceToHost, m->cs->k.stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(m->cs->k.stream);
        if (e != cudaSuccess)
            st = ccu_err_cuda(m, NULL, "backward", e, "cudaMemcpyAsync(");
        else if (convert)
            cntk_nchw_to_nhwc(tmp, dx->data, n, first->sh.in_shape[2], first->sh.in_shape[0], first->sh.in_shape[1]);
    } else if (st == KH_OK) {
        e = cudaStreamSynchronize(m->cs->k.stream);
        if (e != cudaSuccess) st = ccu_err_cuda(m, NULL, "backward", e, "cudaStreamSynchronize(");
    }
    free(tmp);
    return st;
}

kh_status cntk_cuda_read_metrics(cntk_model *mm, uint32_t phase, kh_metrics *out, int32_t reset) {
    ccu_model *m = mm->cuda;
    cudaStream_t s = m->cs->k.stream;
    CCU_CUDA(m, NULL, "read_metrics", cudaMemcpyAsync(m->h_met, m->d_met, 4 * sizeof(double), cudaMemcpyDeviceToHost, s));
    CCU_CUDA(m, NULL, "read_metrics", cudaStreamSynchronize(s));
    out->loss_sum = m->h_met[2 * phase];
    out->correct = m->h_met[2 * phase + 1];
    out->samples = m->samples[phase];
    if (reset) {
        CCU_CUDA(m, NULL, "read_metrics", cudaMemsetAsync(m->d_met + 2 * phase, 0, 2 * sizeof(double), s));
        m->samples[phase] = 0;
    }
    return KH_OK;
}

kh_status cntk_cuda_sync(cntk_model *mm) {
    ccu_model *m = mm->cuda;
    CCU_CUDA(m, NULL, "sync", cudaStreamSynchronize(m->cs->k.copy));
    CCU_CUDA(m, NULL, "sync", cudaStreamSynchronize(m->cs->k.stream));
    return KH_OK;
}

// --- weights and gradients in canonical layout ------------------------------------------------------------
/* Host image of tensor t of layer L from arena `base` (weights or gradients); caller frees. */
static kh_status tensor_down(ccu_model *m, ccu_layer *L, const float *base, int t, const char *op, float **out) {
    size_t bytes = (size_t)L->t[t].numel * sizeof(float);
    float *h = malloc(bytes > 0 ? bytes : 4);
    if (!h) return cntk_layer_fail(m->s, KH_ERR_NOMEM, L->p->spec.kind, L->p->index, op, "out of host memory");
    cudaError_t e = cudaMemcpyAsync(h, base + L->t[t].off, bytes, cudaMemcpyDeviceToHost, m->cs->k.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(m->cs->k.stream);
    if (e != cudaSuccess) {
        free(h);
        return ccu_err_cuda(m, L, op, e, "cudaMemcpyAsync(");
    }
    *out = h;
    return KH_OK;
}

static kh_status tensor_up(ccu_model *m, ccu_layer *L, float *base, int t, const float *h, const char *op) {
    size_t bytes = (size_t)L->t[t].numel * sizeof(float);
    CCU_CUDA(m, L, op, cudaMemcpyAsync(base + L->t[t].off, h, bytes, cudaMemcpyHostToDevice, m->cs->k.stream));
    CCU_CUDA(m, L, op, cudaStreamSynchronize(m->cs->k.stream)); /* h is pageable and freed by the caller */
    return KH_OK;
}

kh_status cntk_cuda_set_weight(cntk_model *mm, int32_t layer, int32_t slot, const kh_tensor *w) {
    ccu_model *m = mm->cuda;
    ccu_layer *L = &m->L[layer];
    kh_status st;
    if (L->slots_in_t0) { /* read-modify-write of the whole weight space */
        float *h = NULL;
        if ((st = tensor_down(m, L, m->pw, 0, "set_weight", &h)) != KH_OK) return st;
        L->ops->to_backend(L, slot, w->data, h);
        st = tensor_up(m, L, m->pw, 0, h, "set_weight");
        free(h);
        return st;
    }
    if (!L->ops->to_backend) return tensor_up(m, L, m->pw, slot, w->data, "set_weight");
    float *h = malloc((size_t)L->t[slot].numel * sizeof(float));
    if (!h) return cntk_layer_fail(m->s, KH_ERR_NOMEM, L->p->spec.kind, layer, "set_weight", "out of host memory");
    L->ops->to_backend(L, slot, w->data, h);
    st = tensor_up(m, L, m->pw, slot, h, "set_weight");
    free(h);
    return st;
}

static kh_status read_canonical(ccu_model *m, int32_t layer, int32_t slot, const float *base, kh_tensor *out,
                                const char *op) {
    ccu_layer *L = &m->L[layer];
    int t = L->slots_in_t0 ? 0 : slot;
    float *h = NULL;
    kh_status st = tensor_down(m, L, base, t, op, &h);
    if (st != KH_OK) return st;
    if (L->ops->to_canonical)
        L->ops->to_canonical(L, slot, h, out->data);
    else
        memcpy(out->data, h, (size_t)L->t[t].numel * sizeof(float));
    free(h);
    return KH_OK;
}

kh_status cntk_cuda_get_weight(cntk_model *mm, int32_t layer, int32_t slot, kh_tensor *w) {
    return read_canonical(mm->cuda, layer, slot, mm->cuda->pw, w, "get_weight");
}

kh_status cntk_cuda_get_grad(cntk_model *mm, int32_t layer, int32_t slot, kh_tensor *g) {
    ccu_model *m = mm->cuda;
    if (!m->have_grad || m->g_clean) /* after an optimizer step the gradients are consumed (cleared) */
        return cntk_layer_fail(m->s, KH_ERR_INVALID, m->L[layer].p->spec.kind, layer, "get_grad",
                               "no backward() gradients to read (run the forward/backward probes first)");
    return read_canonical(m, layer, slot, m->pg, g, "get_grad");
}
