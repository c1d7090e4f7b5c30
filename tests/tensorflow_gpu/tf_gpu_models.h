/* tests/tensorflow_gpu/tf_gpu_models.h — the six benchmark models' specs as their task modules build them
 * (the layer stacks, optimizers and batch sizes of tasks/; vocabulary and text sizes of the real data sets),
 * without loading any data. */
#ifndef KHOST_TESTS_TF_GPU_MODELS_H
#define KHOST_TESTS_TF_GPU_MODELS_H

#include "khost/model.h"

typedef struct tfg_model {
    const char *name;
    kh_model_spec spec;
    int batch; /* the task's batch size */
} tfg_model;

/* The six models; returns their number (6). */
int tfg_bench_models(const tfg_model **out);

#endif
