/* image_task.h — the shared body of the image-classification task modules (mnist_mlp, mnist_cnn,
 * cifar10_cnn): data loading through the kit's readers, u8 storage converted to f32 /255 per batch,
 * describe() and the optional augmentation hook. Each task supplies an img_task_def, and its entry point
 * returns img_task_module(def): every kh_task_api member is one of the img_task_* functions below. */
#ifndef KHOST_TASKS_IMAGE_TASK_H
#define KHOST_TASKS_IMAGE_TASK_H

#include "khost/kit/data_image.h"
#include "khost/khost.h"

typedef enum img_source { IMG_SOURCE_IDX = 1, IMG_SOURCE_CIFAR = 2 } img_source;

typedef struct img_task_def {
    const char *name;            /* task name, also the registry section "task <name>" and the name of its
                                    model and info in tasks/common_models */
    const char *description;     /* the module descriptor's */
    uint32_t source;             /* img_source: which data sets (and readers) the task accepts */
    int32_t rows, cols, channels, classes;
    int32_t flat;                /* 1: input (rows*cols*channels) NC, as Keras's reshape(-1, 784); 0: NHWC */
    const kh_shift_flip *augment; /* NULL: no augmentation */
} img_task_def;

/* The module descriptor of the module's one task, def: call it from the entry point. The augmentation
 * hook is in its table only where def->augment is set. */
const kh_module_desc *img_task_module(const img_task_def *def);

#endif
