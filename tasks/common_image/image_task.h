/* image_task.h — the shared body of the image-classification task modules (mnist_mlp, mnist_cnn,
 * cifar10_cnn): data loading through the kit's readers, u8 storage converted to f32 /255 per batch,
 * describe() and the optional augmentation hook. Each task supplies an img_task_def and a load() that
 * passes it; every other kh_task_api member is one of the img_task_* functions below. */
#ifndef KHOST_TASKS_IMAGE_TASK_H
#define KHOST_TASKS_IMAGE_TASK_H

#include "khost/kit/data_image.h"
#include "khost/khost.h"

typedef enum img_source { IMG_SOURCE_IDX = 1, IMG_SOURCE_CIFAR = 2 } img_source;

typedef struct img_task_def {
    const char *name;            /* task name, also the registry section "task <name>" and the model's
                                    name in tasks/common_models/bench_models.h */
    const kh_task_info *info;
    uint32_t source;             /* img_source: which data sets (and readers) the task accepts */
    int32_t rows, cols, channels, classes;
    int32_t flat;                /* 1: input (rows*cols*channels) NC, as Keras's reshape(-1, 784); 0: NHWC */
    const kh_shift_flip *augment; /* NULL: no augmentation */
} img_task_def;

kh_status img_task_load(const img_task_def *def, const kh_host_api *host, const kh_load_opts *o, kh_tdata **out,
                        char *err, size_t errlen);
void img_task_unload(kh_tdata *d);
const char *img_task_last_error(kh_tdata *d);
kh_status img_task_model(kh_tdata *d, kh_model_spec *out);
int64_t img_task_count(kh_tdata *d, uint32_t split);
kh_status img_task_get_batch(kh_tdata *d, uint32_t split, const int64_t *idx, int32_t n, kh_tensor *x, kh_tensor *y);
kh_status img_task_augment(kh_tdata *d, kh_tensor *x, uint64_t seed);
kh_status img_task_describe(kh_tdata *d, kh_print_fn print, void *ctx);

#endif
