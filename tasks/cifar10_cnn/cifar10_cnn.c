/* cifar10_cnn.c — Keras 2's examples/cifar10_cnn.py as the benchmark ran it (data_augmentation = True):
 * (32, 32, 3) -> Conv2D(32, same) relu -> Conv2D(32, valid) relu -> MaxPooling2D(2) -> Dropout(0.25) ->
 * Conv2D(64, same) relu -> Conv2D(64, valid) relu -> MaxPooling2D(2) -> Dropout(0.25) -> Flatten ->
 * Dense(512) relu -> Dropout(0.5) -> Dense(10) softmax, with the activations as separate Activation layers
 * as the script wrote them; RMSprop(lr 1e-4, rho 0.9, epsilon 1e-7, decay 1e-6); batch 32; 20 epochs of
 * fit_generator(steps_per_epoch = 50000 // 32), i.e. 1562 * 32 = 49984 samples per epoch; real-time
 * augmentation ImageDataGenerator(width_shift_range=0.1, height_shift_range=0.1, horizontal_flip=True). */
#include "../common_image/image_task.h"

/* The published table, backend x GPU (K80, M60, Titan X, 1080 Ti); -1 = not reported. */
static const kh_published published[] = {
    {"theano", "K80", -1, -1},           {"theano", "M60", 0.7378, 288.6},    {"theano", "Titan X", 0.7446, 630.3},
    {"theano", "1080 Ti", 0.7531, 40.3}, {"tensorflow", "K80", 0.7453, 39.2}, {"tensorflow", "M60", 0.7440, 17.8},
    {"tensorflow", "Titan X", 0.7366, 17.0}, {"tensorflow", "1080 Ti", 0.7366, 14.2}, {"cntk", "K80", 0.7400, 40.3},
    {"cntk", "M60", 0.7418, 33.0},       {"cntk", "Titan X", 0.7226, 25.7},   {"cntk", "1080 Ti", 0.7410, 24.2},
};

static const kh_task_info info = {
    .struct_size = sizeof(kh_task_info), .dataset = "cifar10", .epochs = 20, .batch_size = 32,
    .train_samples_per_epoch = (50000 / 32) * 32, .has_validation = 1, .metric = "val_acc", .target = 0.70,
    .target_is_max = 0, .n_published = (int32_t)(sizeof published / sizeof published[0]), .published = published,
};

static const kh_shift_flip augmentation = {.width_shift_range = 0.1, .height_shift_range = 0.1, .horizontal_flip = 1};

static const img_task_def def = {
    .name = "cifar10_cnn", .info = &info, .source = IMG_SOURCE_CIFAR, .rows = 32, .cols = 32, .channels = 3,
    .classes = 10, .flat = 0, .augment = &augmentation,
};

static const kh_task_info *get_info(void) { return &info; }
static kh_status load(const kh_host_api *host, const kh_load_opts *o, kh_tdata **out, char *err, size_t errlen) {
    return img_task_load(&def, host, o, out, err, errlen);
}

static const kh_task_api api = {
    .struct_size = sizeof(kh_task_api), .info = get_info, .load = load, .unload = img_task_unload,
    .last_error = img_task_last_error, .model = img_task_model, .count = img_task_count,
    .get_batch = img_task_get_batch, .augment = img_task_augment, .describe = img_task_describe,
    .after_training = NULL,
};

static const kh_module_desc desc = {
    KH_MODULE_DESC_HEAD,
    .kind = KH_MODULE_TASK, .name = "cifar10_cnn", .version = "1.0",
    .description = "CIFAR-10 convnet (Keras cifar10_cnn.py): 4x Conv2D, Dense(512), RMSprop, augmentation",
    .api = &api,
};

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) {
    (void)host;
    return &desc;
}
