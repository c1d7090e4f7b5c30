/* mnist_cnn.c — Keras 2's examples/mnist_cnn.py as the benchmark ran it: (28, 28, 1) -> Conv2D(32, 3x3,
 * relu, valid) -> Conv2D(64, 3x3, relu, valid) -> MaxPooling2D(2x2) -> Dropout(0.25) -> Flatten ->
 * Dense(128, relu) -> Dropout(0.5) -> Dense(10, softmax); Adadelta(lr 1.0, rho 0.95, epsilon 1e-7);
 * categorical cross-entropy; batch 128; 12 epochs; pixels /255, channels_last.
 * [task mnist_cnn] dataset = fashion-mnist selects the drop-in. */
#include "../common_image/image_task.h"

static const img_task_def def = {
    .name = "mnist_cnn", .description = "MNIST convnet (Keras mnist_cnn.py): 2x Conv2D, max-pool, Dense(128), Adadelta",
    .source = IMG_SOURCE_IDX, .rows = 28, .cols = 28, .channels = 1, .classes = 10,
};

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) {
    (void)host;
    return img_task_module(&def);
}
