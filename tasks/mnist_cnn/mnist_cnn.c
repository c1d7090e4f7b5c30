/* mnist_cnn.c — Keras 2's examples/mnist_cnn.py as the benchmark ran it: (28, 28, 1) -> Conv2D(32, 3x3,
 * relu, valid) -> Conv2D(64, 3x3, relu, valid) -> MaxPooling2D(2x2) -> Dropout(0.25) -> Flatten ->
 * Dense(128, relu) -> Dropout(0.5) -> Dense(10, softmax); Adadelta(lr 1.0, rho 0.95, epsilon 1e-7);
 * categorical cross-entropy; batch 128; 12 epochs; pixels /255, channels_last.
 * [task mnist_cnn] dataset = fashion-mnist selects the drop-in. */
#include "../common_image/image_task.h"

/* The published table, backend x GPU (K80, M60, Titan X, 1080 Ti); -1 = not reported. */
static const kh_published published[] = {
    {"theano", "K80", -1, -1},           {"theano", "M60", 0.9903, 293.0},    {"theano", "Titan X", 0.9905, 332.2},
    {"theano", "1080 Ti", 0.9894, 17.3}, {"tensorflow", "K80", 0.9916, 11.1}, {"tensorflow", "M60", 0.9912, 8.5},
    {"tensorflow", "Titan X", 0.9909, 6.2}, {"tensorflow", "1080 Ti", 0.9899, 4.7}, {"cntk", "K80", 0.9892, 15.9},
    {"cntk", "M60", 0.9896, 10.8},       {"cntk", "Titan X", 0.9908, 7.0},    {"cntk", "1080 Ti", 0.9910, 5.0},
};

static const kh_task_info info = {
    .struct_size = sizeof(kh_task_info), .dataset = "mnist", .epochs = 12, .batch_size = 128,
    .train_samples_per_epoch = 0, .has_validation = 1, .metric = "val_acc", .target = 0.988, .target_is_max = 0,
    .n_published = (int32_t)(sizeof published / sizeof published[0]), .published = published,
};

static const img_task_def def = {
    .name = "mnist_cnn", .info = &info, .source = IMG_SOURCE_IDX, .rows = 28, .cols = 28, .channels = 1,
    .classes = 10, .flat = 0,
};

static const kh_task_info *get_info(void) { return &info; }
static kh_status load(const kh_host_api *host, const kh_load_opts *o, kh_tdata **out, char *err, size_t errlen) {
    return img_task_load(&def, host, o, out, err, errlen);
}

static const kh_task_api api = {
    .struct_size = sizeof(kh_task_api), .info = get_info, .load = load, .unload = img_task_unload,
    .last_error = img_task_last_error, .model = img_task_model, .count = img_task_count,
    .get_batch = img_task_get_batch, .augment = NULL, .describe = img_task_describe, .after_training = NULL,
};

static const kh_module_desc desc = {
    KH_MODULE_DESC_HEAD,
    .kind = KH_MODULE_TASK, .name = "mnist_cnn", .version = "1.0",
    .description = "MNIST convnet (Keras mnist_cnn.py): 2x Conv2D, max-pool, Dense(128), Adadelta", .api = &api,
};

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) {
    (void)host;
    return &desc;
}
