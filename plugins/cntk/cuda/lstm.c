/* cuda/lstm.c — LSTM and Bidirectional(LSTM) as ONE fused cuDNN RNN call each way (the v8 API:
 * cudnnRNNForward, cudnnRNNBackwardData_v8, cudnnRNNBackwardWeights_v8), both directions in one
 * CUDNN_BIDIRECTIONAL descriptor.
 *
 * Layout: the data is batch-major (N, T, C) exactly as the rest of the model stores it
 * (CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, every sequence T long), so no transposes. cuDNN's
 * bidirectional output is (N, T, 2u), forward half first, the backward direction's state after consuming x[t]
 * at t — Keras's merge_mode='concat' with return_sequences. Without return_sequences Keras takes the forward
 * state after x[T-1] and the backward state after x[0]: cuDNN's final hidden states hy (dirs, N, u),
 * rearranged to (N, dirs*u) by a small kernel; the backward feeds them back as dhy (dy of the sequence zero).
 *
 * Weights: the layer's parameter tensor IS cuDNN's weight space (one tensor of the model's arena, so the
 * fused optimizer updates it like any other). Keras's kernel / recurrent / bias slots are mapped in and out
 * on the host by cuda/rnnmap.c from the offsets cudnnGetRNNWeightParams reports (see that header for
 * the gate order and the transposition). CUDNN_RNN_DOUBLE_BIAS: the Keras bias goes into the input bias,
 * the recurrent bias stays zero — its gradient is cleared after every backward, so no optimizer moves it.
 * Math: FP32 data and compute, CUDNN_FMA_MATH (no TF32) for the session's fp32. If cuDNN refuses it the layer
 * does not compile: its default math allows TF32 on sm_80 and newer, which would break parity with the
 * reference silently. With --math tf32 the RNN gets that default math (TF32 allowed).
 * Reserve space: cudnnRNNBackwardData_v8 writes into it (cuDNN documents it as input/output), so a second
 * backward after one forward (allowed by backend.h) first runs the training forward again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/exec.h"
#include "cuda/rnnmap.h"

typedef struct ccu_lstm {
    int dirs, T, in, u, seq;
    cudnnRNNDescriptor_t rnn;
    cudnnDropoutDescriptor_t drop;
    cudnnRNNDataDescriptor_t xd, yd;
    cudnnTensorDescriptor_t hd;
    int desc_n;
    int *h_len;        /* (max_batch) host sequence lengths, all T */
    int32_t *d_len;    /* (max_batch) the same on the device (cuDNN v8 wants both) */
    size_t w_bytes;    /* weight space */
    size_t rs_bytes;   /* reserve space for max_batch */
    void *reserve;
    float *yseq;       /* (N, T, dirs*u) when !seq (else the layer's y) */
    float *hy, *dhy;   /* (dirs, N, u) when !seq */
    float *dyseq;      /* (N, T, dirs*u) zero sequence gradient when !seq: cleared once, never written */
    int reserve_fresh; /* the reserve space holds the last training forward, untouched by a backward */
    cntk_rnn_layout map;
    int n_rb;
    int64_t rb_off[8], rb_len[8]; /* recurrent-bias ranges whose gradient is cleared */
} ccu_lstm;

static kh_status check_temp(ccu_model *m, ccu_layer *L, cudnnForwardMode_t mode) {
    ccu_lstm *r = L->st;
    size_t ws = 0, rs = 0;
    CCU_DNN(m, L, mode == CUDNN_FWD_MODE_TRAINING ? "forward" : "inference",
            cudnnGetRNNTempSpaceSizes(m->cs->k.dnn, r->rnn, mode, r->xd, &ws, &rs));
    if (ws > m->ws_bytes || (mode == CUDNN_FWD_MODE_TRAINING && rs > r->rs_bytes))
        return cntk_layer_fail(m->s, KH_ERR_INTERNAL, L->p->spec.kind, L->p->index, "forward",
                               "cuDNN asks for %zu/%zu workspace/reserve bytes, compiled with %zu/%zu", ws, rs,
                               m->ws_bytes, r->rs_bytes);
    return KH_OK;
}

/* Set the batch-dependent descriptors for n samples; `check`: verify the compiled workspace and reserve
 * still suffice (cuDNN's sizes are queried once per batch size, not per call). */
static kh_status lstm_descs(ccu_model *m, ccu_layer *L, int n, int check) {
    ccu_lstm *r = L->st;
    if (r->desc_n == n) return KH_OK;
    CCU_DNN(m, L, "descriptors",
            cudnnSetRNNDataDescriptor(r->xd, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, r->T, n,
                                      r->in, r->h_len, NULL));
    CCU_DNN(m, L, "descriptors",
            cudnnSetRNNDataDescriptor(r->yd, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, r->T, n,
                                      r->dirs * r->u, r->h_len, NULL));
    int dims[3] = {r->dirs, n, r->u}, strides[3] = {n * r->u, r->u, 1};
    CCU_DNN(m, L, "descriptors", cudnnSetTensorNdDescriptor(r->hd, CUDNN_DATA_FLOAT, 3, dims, strides));
    r->desc_n = n;
    if (!check) return KH_OK;
    kh_status st = check_temp(m, L, CUDNN_FWD_MODE_TRAINING);
    return st != KH_OK ? st : check_temp(m, L, CUDNN_FWD_MODE_INFERENCE);
}

static kh_status set_rnn(ccu_model *m, ccu_layer *L, cudnnMathType_t math) {
    ccu_lstm *r = L->st;
    CCU_DNN(m, L, "compile",
            cudnnSetRNNDescriptor_v8(r->rnn, CUDNN_RNN_ALGO_STANDARD, CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS,
                                     r->dirs == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT,
                                     CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, math, r->in, r->u, r->u, 1, r->drop,
                                     CUDNN_RNN_PADDED_IO_ENABLED));
    return KH_OK;
}

static kh_status lstm_setup(ccu_model *m, ccu_layer *L) {
    ccu_lstm *r = calloc(1, sizeof *r);
    if (!r) return cntk_layer_fail(m->s, KH_ERR_NOMEM, L->p->spec.kind, L->p->index, "compile", "out of host memory");
    L->st = r;
    int N = m->plan->max_batch;
    r->dirs = L->p->spec.kind == KH_LAYER_BILSTM ? 2 : 1;
    r->T = L->p->sh.in_shape[0];
    r->in = L->p->sh.in_shape[1];
    r->u = L->p->spec.units;
    r->seq = L->p->spec.return_sequences != 0;
    r->h_len = malloc((size_t)N * sizeof(int));
    if (!r->h_len) return cntk_layer_fail(m->s, KH_ERR_NOMEM, L->p->spec.kind, L->p->index, "compile", "out of host memory");
    for (int i = 0; i < N; i++) r->h_len[i] = r->T;
    kh_status st = ccu_malloc(m, L, (void **)&r->d_len, (size_t)N * sizeof(int32_t), "sequence lengths");
    if (st != KH_OK) return st;
    CCU_CUDA(m, L, "compile",
             cudaMemcpyAsync(r->d_len, r->h_len, (size_t)N * sizeof(int32_t), cudaMemcpyHostToDevice, m->cs->k.stream));
    CCU_CUDA(m, L, "compile", cudaStreamSynchronize(m->cs->k.stream)); /* h_len is pageable: finish before reuse */

    cudnnHandle_t h = m->cs->k.dnn;
    CCU_DNN(m, L, "compile", cudnnCreateRNNDescriptor(&r->rnn));
    CCU_DNN(m, L, "compile", cudnnCreateDropoutDescriptor(&r->drop));
    CCU_DNN(m, L, "compile", cudnnCreateRNNDataDescriptor(&r->xd));
    CCU_DNN(m, L, "compile", cudnnCreateRNNDataDescriptor(&r->yd));
    CCU_DNN(m, L, "compile", cudnnCreateTensorDescriptor(&r->hd));
    /* no dropout inside the RNN (Keras's LSTM dropout arguments are 0 in every task): no RNG states needed */
    CCU_DNN(m, L, "compile", cudnnSetDropoutDescriptor(r->drop, h, 0.0f, NULL, 0, 0));
    if ((st = set_rnn(m, L, m->cs->k.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH)) != KH_OK) {
        char why[sizeof m->s->base.err];
        snprintf(why, sizeof why, "%s", m->s->base.err);
        if (m->cs->k.tf32)
            return cntk_layer_fail(m->s, KH_ERR_UNSUPPORTED, L->p->spec.kind, L->p->index, "compile",
                                   "cuDNN refuses its default math (TF32 allowed) for this RNN [%s]", why);
        return cntk_layer_fail(m->s, KH_ERR_UNSUPPORTED, L->p->spec.kind, L->p->index, "compile",
                               "cuDNN refuses strict FP32 (CUDNN_FMA_MATH) for this RNN; its default math may use "
                               "TF32 and break parity, so the layer is refused [%s]", why);
    }
    if ((st = lstm_descs(m, L, N, 0)) != KH_OK) return st;
    CCU_DNN(m, L, "compile", cudnnGetRNNWeightSpaceSize(h, r->rnn, &r->w_bytes));
    size_t ws = 0;
    CCU_DNN(m, L, "compile", cudnnGetRNNTempSpaceSizes(h, r->rnn, CUDNN_FWD_MODE_TRAINING, r->xd, &ws, &r->rs_bytes));
    ccu_need_ws(m, ws);
    size_t ws_inf = 0, rs_inf = 0;
    CCU_DNN(m, L, "compile", cudnnGetRNNTempSpaceSizes(h, r->rnn, CUDNN_FWD_MODE_INFERENCE, r->xd, &ws_inf, &rs_inf));
    ccu_need_ws(m, ws_inf);
    if ((st = ccu_malloc(m, L, &r->reserve, r->rs_bytes, "the RNN reserve space")) != KH_OK) return st;
    size_t seq_bytes = (size_t)N * r->T * r->dirs * r->u * sizeof(float);
    size_t h_bytes = (size_t)r->dirs * N * r->u * sizeof(float);
    if (!r->seq) {
        if ((st = ccu_malloc(m, L, (void **)&r->yseq, seq_bytes, "the output sequence")) != KH_OK) return st;
        if ((st = ccu_malloc(m, L, (void **)&r->dyseq, seq_bytes, "the output sequence gradient")) != KH_OK) return st;
        /* only the final states carry a gradient (dhy); cuDNN reads dy without writing it */
        CCU_CUDA(m, L, "compile", cudaMemsetAsync(r->dyseq, 0, seq_bytes, m->cs->k.stream));
        if ((st = ccu_malloc(m, L, (void **)&r->hy, h_bytes, "the final states")) != KH_OK) return st;
        if ((st = ccu_malloc(m, L, (void **)&r->dhy, h_bytes, "the final state gradients")) != KH_OK) return st;
    }
    L->n_t = 1;
    L->t[0].numel = (int64_t)((r->w_bytes + sizeof(float) - 1) / sizeof(float));
    L->slots_in_t0 = 1;
    return KH_OK;
}

/* With the arena in place: where cuDNN keeps every matrix and bias, checked and recorded for the mapping. */
static kh_status lstm_bind(ccu_model *m, ccu_layer *L) {
    ccu_lstm *r = L->st;
    cntk_rnn_layout *map = &r->map;
    memset(map, 0, sizeof *map);
    map->dirs = r->dirs;
    map->in = r->in;
    map->u = r->u;
    map->space = L->t[0].numel;
    float *base = ccu_w(m, L, 0);
    cudnnTensorDescriptor_t md = NULL, bd = NULL;
    kh_status st = KH_OK;
    cudnnStatus_t e = cudnnCreateTensorDescriptor(&md);
    if (e == CUDNN_STATUS_SUCCESS) e = cudnnCreateTensorDescriptor(&bd);
    for (int d = 0; d < r->dirs && e == CUDNN_STATUS_SUCCESS; d++)
        for (int lin = 0; lin < CNTK_RNN_LIN && e == CUDNN_STATUS_SUCCESS; lin++) {
            void *ma = NULL, *ba = NULL;
            e = cudnnGetRNNWeightParams(m->cs->k.dnn, r->rnn, d, r->w_bytes, base, lin, md, &ma, bd, &ba);
            if (e != CUDNN_STATUS_SUCCESS) break;
            cntk_rnn_region *mr = &map->mat[d][lin], *br = &map->bias[d][lin];
            mr->off = br->off = -1;
            cudnnDataType_t dt;
            int nb = 0, dims[4] = {0}, str[4] = {0};
            if (ma) {
                e = cudnnGetTensorNdDescriptor(md, 4, &dt, &nb, dims, str);
                if (e != CUDNN_STATUS_SUCCESS) break;
                if (nb < 2 || str[nb - 1] != 1) {
                    st = cntk_layer_fail(m->s, KH_ERR_UNSUPPORTED, L->p->spec.kind, L->p->index, "compile",
                                         "cuDNN reports matrix %d of direction %d with %d dims, column stride %d", lin,
                                         d, nb, nb > 0 ? str[nb - 1] : 0);
                    goto done;
                }
                mr->off = (int64_t)((float *)ma - base);
                mr->rows = dims[nb - 2];
                mr->cols = dims[nb - 1];
                mr->ld = str[nb - 2];
            }
            if (ba) {
                e = cudnnGetTensorNdDescriptor(bd, 4, &dt, &nb, dims, str);
                if (e != CUDNN_STATUS_SUCCESS) break;
                /* a vector however cuDNN shapes it ({1, u, 1} in practice): its length is the product */
                int64_t len = 1;
                for (int k = 0; k < nb; k++) len *= dims[k];
                br->off = (int64_t)((float *)ba - base);
                br->rows = len;
                br->cols = 1;
                br->ld = 1;
            }
        }
    if (e != CUDNN_STATUS_SUCCESS) {
        st = ccu_err_dnn(m, L, "compile", e, "cudnnGetRNNWeightParams(");
        goto done;
    }
    char why[256];
    if (cntk_rnn_layout_check(map, why, sizeof why) != KH_OK) {
        st = cntk_layer_fail(m->s, KH_ERR_UNSUPPORTED, L->p->spec.kind, L->p->index, "compile", "%s", why);
        goto done;
    }
    r->n_rb = cntk_rnn_rec_bias_ranges(map, r->rb_off, r->rb_len, 8);
    if (r->n_rb < 0)
        st = cntk_layer_fail(m->s, KH_ERR_INTERNAL, L->p->spec.kind, L->p->index, "compile", "recurrent bias ranges");
done:
    if (md) cudnnDestroyTensorDescriptor(md);
    if (bd) cudnnDestroyTensorDescriptor(bd);
    return st;
}

static void lstm_teardown(ccu_model *m, ccu_layer *L) {
    (void)m;
    ccu_lstm *r = L->st;
    if (!r) return;
    ccu_free_dev(r->d_len);
    ccu_free_dev(r->reserve);
    ccu_free_dev(r->yseq);
    ccu_free_dev(r->dyseq);
    ccu_free_dev(r->hy);
    ccu_free_dev(r->dhy);
    if (r->xd) cudnnDestroyRNNDataDescriptor(r->xd);
    if (r->yd) cudnnDestroyRNNDataDescriptor(r->yd);
    if (r->hd) cudnnDestroyTensorDescriptor(r->hd);
    if (r->rnn) cudnnDestroyRNNDescriptor(r->rnn);
    if (r->drop) cudnnDestroyDropoutDescriptor(r->drop);
    free(r->h_len);
    free(r);
    L->st = NULL;
}

static kh_status lstm_forward(ccu_model *m, ccu_layer *L, int n, int train) {
    ccu_lstm *r = L->st;
    kh_status st = lstm_descs(m, L, n, 1);
    if (st != KH_OK) return st;
    cudnnForwardMode_t mode = train ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE;
    float *y = r->seq ? L->y : r->yseq;
    CCU_DNN(m, L, "forward",
            cudnnRNNForward(m->cs->k.dnn, r->rnn, mode, r->d_len, r->xd, L->x, r->yd, y, r->hd, NULL, r->seq ? NULL : r->hy,
                            r->hd, NULL, NULL, r->w_bytes, ccu_w(m, L, 0), m->ws_bytes, m->ws,
                            train ? r->rs_bytes : 0, train ? r->reserve : NULL));
    if (!r->seq) CCU_CUDA(m, L, "forward", ccuk_hy_to_y(m->cs->k.stream, r->hy, L->y, n, r->dirs, r->u));
    r->reserve_fresh = train;
    return KH_OK;
}

static kh_status lstm_backward(ccu_model *m, ccu_layer *L, int n, float *dy, float *dx, float *spare, int fused) {
    (void)fused; /* an LSTM's output is never fused with a loss */
    ccu_lstm *r = L->st;
    kh_status st = lstm_descs(m, L, n, 1);
    if (st != KH_OK) return st;
    cudaStream_t s = m->cs->k.stream;
    /* a previous backward consumed the reserve space: rebuild it from the same input and weights (the outputs
     * it rewrites come out identical) */
    if (!r->reserve_fresh && (st = lstm_forward(m, L, n, 1)) != KH_OK) return st;
    r->reserve_fresh = 0;
    const float *y = r->seq ? L->y : r->yseq;
    const float *dyseq = dy, *dhy = NULL;
    if (!r->seq) {
        CCU_CUDA(m, L, "backward", ccuk_dy_to_dhy(s, dy, r->dhy, n, r->dirs, r->u));
        dyseq = r->dyseq;
        dhy = r->dhy;
    }
    /* cuDNN always produces dx: into the spare gradient buffer when the model does not want it */
    float *dxo = dx ? dx : spare;
    CCU_DNN(m, L, "backward",
            cudnnRNNBackwardData_v8(m->cs->k.dnn, r->rnn, r->d_len, r->yd, y, dyseq, r->xd, dxo, r->hd, NULL, dhy, NULL,
                                    r->hd, NULL, NULL, NULL, r->w_bytes, ccu_w(m, L, 0), m->ws_bytes, m->ws,
                                    r->rs_bytes, r->reserve));
    /* accumulates (CUDNN_WGRAD_MODE_ADD) into the gradient arena, which the discipline keeps zeroed */
    CCU_DNN(m, L, "backward",
            cudnnRNNBackwardWeights_v8(m->cs->k.dnn, r->rnn, CUDNN_WGRAD_MODE_ADD, r->d_len, r->xd, L->x, r->hd, NULL,
                                       r->yd, y, r->w_bytes, ccu_g(m, L, 0), m->ws_bytes, m->ws, r->rs_bytes,
                                       r->reserve));
    for (int i = 0; i < r->n_rb; i++)
        CCU_CUDA(m, L, "backward",
                 cudaMemsetAsync(ccu_g(m, L, 0) + r->rb_off[i], 0, (size_t)r->rb_len[i] * sizeof(float), s));
    return KH_OK;
}

static void lstm_to_backend(const ccu_layer *L, int slot, const float *canon, float *space) {
    const ccu_lstm *r = L->st;
    cntk_rnn_pack_slot(&r->map, slot, canon, space);
}

static void lstm_to_canonical(const ccu_layer *L, int slot, const float *space, float *canon) {
    const ccu_lstm *r = L->st;
    cntk_rnn_unpack_slot(&r->map, slot, space, canon);
}

const struct ccu_ops ccu_lstm_ops = {.setup = lstm_setup,
                                     .bind = lstm_bind,
                                     .teardown = lstm_teardown,
                                     .forward = lstm_forward,
                                     .backward = lstm_backward,
                                     .to_backend = lstm_to_backend,
                                     .to_canonical = lstm_to_canonical};
