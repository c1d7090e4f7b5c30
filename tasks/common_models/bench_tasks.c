/* tasks/common_models/bench_tasks.c — see bench_tasks.h. The setups are the Keras 2 examples' (each task's
 * source cites its script); the published figures are the original benchmark's table. */
#include "bench_tasks.h"

#include <string.h>

#include "bench_models.h"

enum { N_PUBLISHED = 12 };

/* The published table as the benchmark laid it out: a row per backend x GPU, a column per task in
 * kh_bench_model_names' order, each {metric, seconds per epoch}; -1 = not reported. The metric is val_acc,
 * lstm_text_generation's the training loss. */
static const struct {
    const char *backend, *device;
    struct { double metric, s_per_epoch; } task[KH_BENCH_N_MODELS];
} published[N_PUBLISHED] = {
    {"theano", "K80", {{-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}}},
    {"theano", "M60", {{0.9952, 9.1}, {0.9903, 293.0}, {0.7378, 288.6}, {-1, -1}, {0.8856, 15.4}, {1.3939, 353.1}}},
    {"theano", "Titan X", {{0.9843, 20.0}, {0.9905, 332.2}, {0.7446, 630.3}, {0.8310, 310.3}, {0.8856, 10.9}, {1.4268, 548.3}}},
    {"theano", "1080 Ti", {{0.9843, 3.6}, {0.9894, 17.3}, {0.7531, 40.3}, {0.8364, 148.5}, {0.8856, 9.5}, {1.3988, 83.1}}},
    {"tensorflow", "K80", {{0.9839, 3.4}, {0.9916, 11.1}, {0.7453, 39.2}, {0.8343, 276.6}, {0.9068, 58.3}, {1.4060, 87.6}}},
    {"tensorflow", "M60", {{0.9953, 2.3}, {0.9912, 8.5}, {0.7440, 17.8}, {0.8301, 244.3}, {0.8856, 4.6}, {1.3944, 75.4}}},
    {"tensorflow", "Titan X", {{0.9804, 2.8}, {0.9909, 6.2}, {0.7366, 17.0}, {0.8327, 295.3}, {0.8856, 6.0}, {1.4138, 162.2}}},
    {"tensorflow", "1080 Ti", {{0.9840, 1.9}, {0.9899, 4.7}, {0.7366, 14.2}, {0.8313, 245.5}, {0.8856, 4.5}, {1.3976, 107.6}}},
    {"cntk", "K80", {{0.9796, 2.8}, {0.9892, 15.9}, {0.7400, 40.3}, {0.8354, 152.4}, {0.9064, 69.5}, {1.4047, 46.4}}},
    {"cntk", "M60", {{0.9953, 1.9}, {0.9896, 10.8}, {0.7418, 33.0}, {0.8348, 116.0}, {0.8854, 4.5}, {1.4004, 48.2}}},
    {"cntk", "Titan X", {{0.9835, 1.4}, {0.9908, 7.0}, {0.7226, 25.7}, {0.8325, 99.5}, {0.8854, 3.4}, {1.3980, 41.4}}},
    {"cntk", "1080 Ti", {{0.9830, 1.3}, {0.9910, 5.0}, {0.7410, 24.2}, {0.8388, 94.3}, {0.8854, 2.7}, {1.3956, 32.7}}},
};

/* One task's kh_task_info: a macro because the table below is a static initialiser. */
#define TASK(set, ep, batch, per_epoch, val, metric_, target_, is_max)                                            \
    {.struct_size = sizeof(kh_task_info), .dataset = (set), .epochs = (ep), .batch_size = (batch),                 \
     .train_samples_per_epoch = (per_epoch), .has_validation = (val), .metric = (metric_), .target = (target_),    \
     .target_is_max = (is_max), .n_published = N_PUBLISHED}

/* data set, epochs, batch, samples per epoch (0: the whole train split), validation, metric, target, whether
 * the metric must drop to it; in kh_bench_model_names' order. cifar10_cnn: fit_generator's
 * steps_per_epoch = 50000 // 32 batches of 32. */
static const kh_task_info setups[KH_BENCH_N_MODELS] = {
    TASK("mnist", 20, 128, 0, 1, "val_acc", 0.98, 0),
    TASK("mnist", 12, 128, 0, 1, "val_acc", 0.988, 0),
    TASK("cifar10", 20, 32, (50000 / 32) * 32, 1, "val_acc", 0.70, 0),
    TASK("imdb", 4, 32, 0, 1, "val_acc", 0.82, 0),
    TASK("imdb", 5, 32, 0, 1, "val_acc", 0.88, 0),
    TASK("nietzsche", 10, 128, 0, 0, "loss", 1.45, 1),
};

/* This module's task: a module holds one, which kh_bench_task_module fills in. */
static kh_published rows[N_PUBLISHED];
static kh_task_info info;
static kh_task_api api;
static kh_module_desc desc;

const kh_task_info *kh_bench_task_info(void) { return &info; }

/* info: task k's setup with its column of the published table. */
static void fill_info(int k) {
    for (int r = 0; r < N_PUBLISHED; r++)
        rows[r] = (kh_published){.backend = published[r].backend, .device = published[r].device,
                                 .metric = published[r].task[k].metric,
                                 .s_per_epoch = published[r].task[k].s_per_epoch};
    info = setups[k];
    info.published = rows;
}

const kh_module_desc *kh_bench_task_module(const char *name, const char *description, const kh_task_api *members) {
    int k = 0;
    while (k < KH_BENCH_N_MODELS && strcmp(name, kh_bench_model_names[k]) != 0) k++;
    if (k == KH_BENCH_N_MODELS) return NULL;
    fill_info(k);
    api = *members;
    api.struct_size = sizeof api;
    api.info = kh_bench_task_info;
    desc = (kh_module_desc){KH_MODULE_DESC_HEAD, .kind = KH_MODULE_TASK, .name = name, .version = "1.0",
                            .description = description, .api = &api};
    return &desc;
}
