/* mnist_mlp.c — Keras 2's examples/mnist_mlp.py as the benchmark ran it: 784 -> Dense(512, relu) ->
 * Dropout(0.2) -> Dense(512, relu) -> Dropout(0.2) -> Dense(10, softmax); RMSprop(lr 0.001, rho 0.9,
 * epsilon 1e-7); categorical cross-entropy; batch 128; 20 epochs. Input: the 28x28 images flattened
 * (x.reshape(60000, 784)), /255. [task mnist_mlp] dataset = fashion-mnist selects the drop-in. */
#include "../common_image/image_task.h"

/* The published table, backend x GPU (K80, M60, Titan X, 1080 Ti); -1 = not reported. */
static const kh_published published[] = {
    {"theano", "K80", -1, -1},          {"theano", "M60", 0.9952, 9.1},     {"theano", "Titan X", 0.9843, 20.0},
    {"theano", "1080 Ti", 0.9843, 3.6}, {"tensorflow", "K80", 0.9839, 3.4}, {"tensorflow", "M60", 0.9953, 2.3},
    {"tensorflow", "Titan X", 0.9804, 2.8}, {"tensorflow", "1080 Ti", 0.9840, 1.9}, {"cntk", "K80", 0.9796, 2.8},
    {"cntk", "M60", 0.9953, 1.9},       {"cntk", "Titan X", 0.9835, 1.4},   {"cntk", "1080 Ti", 0.9830, 1.3},
};

static const kh_task_info info = {
    .struct_size = sizeof(kh_task_info), .dataset = "mnist", .epochs = 20, .batch_size = 128,
    .train_samples_per_epoch = 0, .has_validation = 1, .metric = "val_acc", .target = 0.98, .target_is_max = 0,
    .n_published = (int32_t)(sizeof published / sizeof published[0]), .published = published,
};

static const img_task_def def = {
    .name = "mnist_mlp", .info = &info, .source = IMG_SOURCE_IDX, .rows = 28, .cols = 28, .channels = 1,
    .classes = 10, .flat = 1,
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
    .kind = KH_MODULE_TASK, .name = "mnist_mlp", .version = "1.0",
    .description = "MNIST multilayer perceptron (Keras mnist_mlp.py): 2x Dense(512), RMSprop", .api = &api,
};

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) {
    (void)host;
    return &desc;
}
