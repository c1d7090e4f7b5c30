/* khost/model.h — the declarative layer ABI: a task describes its model, a backend compiles it.
 *
 * Shapes are per sample, in Keras order (images H,W,C; sequences T or T,C), without the batch axis.
 * Weights cross the ABI in Keras's canonical layouts, one tensor per (layer, slot):
 *   Dense        slot 0 kernel [in, units]            slot 1 bias [units]
 *   Conv2D       slot 0 kernel [kh, kw, cin, filters] slot 1 bias [filters]
 *   Embedding    slot 0 embeddings [input_dim, units]
 *   LSTM         slot 0 kernel [in, 4u]  slot 1 recurrent [u, 4u]  slot 2 bias [4u]   gate order i, f, c, o
 *   Bidirectional(LSTM): slots 0-2 the forward LSTM, slots 3-5 the backward LSTM; outputs concatenated
 *                (forward first) along the feature axis.
 * Other layers have no weights. kh_spec_infer() (khost/kit/spec.h) computes every shape from a spec.
 */
#ifndef KHOST_MODEL_H
#define KHOST_MODEL_H

#include <stdint.h>

#include "khost/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kh_layer_kind {
    KH_LAYER_DENSE = 1,
    KH_LAYER_ACTIVATION = 2,
    KH_LAYER_DROPOUT = 3,
    KH_LAYER_FLATTEN = 4,
    KH_LAYER_CONV2D = 5,
    KH_LAYER_MAXPOOL2D = 6,
    KH_LAYER_EMBEDDING = 7,
    KH_LAYER_LSTM = 8,
    KH_LAYER_BILSTM = 9, /* Bidirectional(LSTM), merge_mode='concat' */
    KH_LAYER_GAP1D = 10, /* GlobalAveragePooling1D over T (mask-free, as Keras 2 without mask_zero) */
    KH_LAYER_KIND_END
} kh_layer_kind;

typedef enum kh_activation {
    KH_ACT_LINEAR = 0,
    KH_ACT_RELU = 1,
    KH_ACT_SIGMOID = 2,
    KH_ACT_TANH = 3,
    KH_ACT_SOFTMAX = 4, /* over the last axis */
    KH_ACT_END
} kh_activation;

typedef enum kh_padding { KH_PAD_VALID = 0, KH_PAD_SAME = 1 } kh_padding;

typedef enum kh_loss {
    KH_LOSS_NONE = 0,                  /* only for verify's forward/backward probes */
    KH_LOSS_CATEGORICAL_CROSSENTROPY = 1, /* labels: class index per sample (== one-hot targets) */
    KH_LOSS_BINARY_CROSSENTROPY = 2       /* labels: 0/1 per sample, model output (N,1) */
} kh_loss;

typedef enum kh_optimizer { KH_OPT_SGD = 0, KH_OPT_RMSPROP = 1, KH_OPT_ADAM = 2, KH_OPT_ADADELTA = 3 } kh_optimizer;

/* Keras 2 optimizer semantics; lr_t = lr / (1 + decay * iterations) for every optimizer.
 * FROZEN: embedded by value inside kh_model_spec before later members; a new optimizer parameter is a new
 * member appended to kh_model_spec. */
typedef struct kh_optimizer_spec {
    uint32_t kind; /* kh_optimizer */
    float lr;      /* RMSprop 0.001, Adam 0.001, Adadelta 1.0 */
    float rho;     /* RMSprop 0.9, Adadelta 0.95 */
    float beta_1;  /* Adam 0.9 */
    float beta_2;  /* Adam 0.999 */
    float epsilon; /* 1e-7 (Keras 2 backend epsilon) */
    float decay;   /* 0 unless the task says */
} kh_optimizer_spec;

typedef enum kh_init {
    KH_INIT_DEFAULT = 0, /* Keras 2 default for that slot */
    KH_INIT_GLOROT_UNIFORM = 1,
    KH_INIT_ORTHOGONAL = 2,
    KH_INIT_ZEROS = 3,
    KH_INIT_UNIFORM_005 = 4,    /* uniform(-0.05, 0.05), Embedding default */
    KH_INIT_LSTM_BIAS = 5       /* zeros with the forget-gate quarter set to 1 (unit_forget_bias) */
} kh_init;

/* kh_layer_spec travels as an array (kh_model_spec.layers) and carries no struct_size: its element size is
 * negotiated per module (kh_module_desc.layer_spec_size) and the host repacks the array for a module built
 * with another one (a member it lacks reads as 0, its default; a non-zero member it lacks makes the model
 * unsupported for it). Members are only ever appended. */
#define KH_LAYER_SPEC_SIZE_1_0 56 /* ABI 1.0 - 1.2 */
typedef struct kh_layer_spec {
    uint32_t kind;          /* kh_layer_kind */
    uint32_t activation;    /* Activation layer's function; Dense/Conv2D fused activation (kh_activation) */
    int32_t units;          /* Dense units, Conv2D filters, LSTM units (per direction), Embedding output_dim */
    int32_t kernel[2];      /* Conv2D kernel size, MaxPooling2D pool size */
    int32_t strides[2];     /* 0 = default (Conv2D 1, pooling = pool size) */
    uint32_t padding;       /* kh_padding, Conv2D and MaxPooling2D */
    float rate;             /* Dropout rate */
    int32_t input_dim;      /* Embedding vocabulary size */
    int32_t return_sequences; /* LSTM / BiLSTM: 1 returns (T, u), 0 the last step (u) */
    uint32_t kernel_init, recurrent_init, bias_init; /* kh_init, 0 = Keras default */
} kh_layer_spec;

typedef struct kh_model_spec {
    uint32_t struct_size;
    const char *name;
    uint32_t input_dtype;      /* KH_F32 features/images, KH_I32 indices */
    int32_t input_rank;        /* per-sample rank, 1..3 */
    int32_t input_shape[3];    /* per sample, Keras order */
    int32_t input_onehot;      /* > 0: the i32 input holds indices and the model's real input is
                                  one_hot(x, input_onehot), shape input_shape + [input_onehot]. A backend
                                  without KH_CAP_ONEHOT_INPUT receives it expanded by the host. */
    int32_t n_layers;
    const kh_layer_spec *layers;
    uint32_t loss;             /* kh_loss */
    kh_optimizer_spec optimizer;
    int32_t n_classes;         /* categorical: classes; binary: 1 */
} kh_model_spec;

#ifdef __cplusplus
}
#endif
#endif
