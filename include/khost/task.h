/* khost/task.h — the task ABI: a data set, a model spec, and the original benchmark's figures.
 *
 * Lifetime: info() is static; load() reads the data set (streaming, bounded memory) into a kh_tdata that
 * lives until unload(). All pointers a task returns stay valid until unload().
 * Threading: the host calls a kh_tdata from one thread at a time.
 * Errors: load() writes "<file>: <what is wrong>" into err; later calls explain failures via last_error().
 * A missing data set is KH_ERR_IO with a message that names the file and the command that installs it
 * ("run: tools/fetch-datasets mnist").
 */
#ifndef KHOST_TASK_H
#define KHOST_TASK_H

#include <stdint.h>

#include "khost/abi.h"
#include "khost/model.h"
#include "khost/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One published figure of the original benchmark; a negative value means "not reported".
 * FROZEN: an array in kh_task_info of figures that were published once; nothing about them will grow. */
typedef struct kh_published {
    const char *backend; /* "theano", "tensorflow", "cntk" */
    const char *device;  /* "K80", "M60", "Titan X", "1080 Ti" */
    double metric;       /* val_acc, or loss for text generation */
    double s_per_epoch;
} kh_published;

typedef struct kh_task_info {
    uint32_t struct_size;
    const char *dataset;            /* the name tools/fetch-datasets knows: mnist, cifar10, imdb, nietzsche */
    int32_t epochs;                 /* the original benchmark's */
    int32_t batch_size;
    int64_t train_samples_per_epoch; /* 0 = the whole train split; cifar10_cnn: (50000/32)*32 */
    int32_t has_validation;         /* 0: no validation split (text generation) */
    const char *metric;             /* what the accuracy table shows: "val_acc" or "loss" */
    double target;                  /* target of that metric for time-to-accuracy; 0 = none */
    int32_t target_is_max;          /* 1: metric must drop to target (loss); 0: rise to it */
    int32_t n_published;
    const kh_published *published;
} kh_task_info;

typedef struct kh_tdata kh_tdata;

typedef enum kh_split { KH_SPLIT_TRAIN = 0, KH_SPLIT_VAL = 1 } kh_split;

typedef struct kh_load_opts {
    uint32_t struct_size;
    const char *data_dir; /* the data directory (KHOST_DATA or the registry's default) */
    int64_t limit_train;  /* 0 = all; else keep the first N samples (smoke tests) */
    int64_t limit_val;
    uint64_t seed;
} kh_load_opts;

/* Lets a task use the trained model after training (text generation samples through it).
 * FROZEN: filled by the host, read by the task; a new service to tasks is a new struct or a host-api call. */
typedef struct kh_predictor {
    void *ctx;
    /* Range: x and out of rank 1..KH_MAX_RANK, every dimension >= 1, out's first (the batch) equal to x's and
     * at most the task's batch size; anything else is KH_ERR_INVALID before the backend sees it. */
    kh_status (*predict)(void *ctx, const kh_tensor *x, kh_tensor *out);
    void (*print)(void *ctx, const char *text); /* user-visible output (stdout unless --json) */
    uint64_t seed;
} kh_predictor;

typedef void (*kh_print_fn)(void *ctx, const char *line);

typedef struct kh_task_api {
    uint32_t struct_size;
    const kh_task_info *(*info)(void);
    kh_status (*load)(const kh_host_api *host, const kh_load_opts *opts, kh_tdata **out /* out */,
                      char *err /* out */, size_t errlen);
    void (*unload)(kh_tdata *d);
    const char *(*last_error)(kh_tdata *d);
    /* The model spec; host sets out->struct_size first. Its layer array is owned by d. */
    kh_status (*model)(kh_tdata *d, kh_model_spec *out /* out */);
    int64_t (*count)(kh_tdata *d, uint32_t split);
    /* Gather samples idx[0..n) of a split: x has dims (n, input_shape...) (NHWC for images, NT for indices,
     * NC for features), y has dims (n) i32. Buffers are the host's. */
    kh_status (*get_batch)(kh_tdata *d, uint32_t split, const int64_t *idx, int32_t n, kh_tensor *x /* out: data */,
                           kh_tensor *y /* out: data */);
    /* Optional: augment a training batch in place (NHWC), deterministically from seed. */
    kh_status (*augment)(kh_tdata *d, kh_tensor *x /* in and out: data */, uint64_t seed);
    /* Human-readable description of the loaded data, a line per call of print. */
    kh_status (*describe)(kh_tdata *d, kh_print_fn print, void *ctx);
    /* Optional: run after training (text generation sampling). */
    kh_status (*after_training)(kh_tdata *d, const kh_predictor *p);
} kh_task_api;

#ifdef __cplusplus
}
#endif
#endif
