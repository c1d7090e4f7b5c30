/* mnist_mlp.c — Keras 2's examples/mnist_mlp.py as the benchmark ran it: 784 -> Dense(512, relu) ->
 * Dropout(0.2) -> Dense(512, relu) -> Dropout(0.2) -> Dense(10, softmax); RMSprop(lr 0.001, rho 0.9,
 * epsilon 1e-7); categorical cross-entropy; batch 128; 20 epochs. Input: the 28x28 images flattened
 * (x.reshape(60000, 784)), /255. [task mnist_mlp] dataset = fashion-mnist selects the drop-in. */
#include "../common_image/image_task.h"

static const img_task_def def = {
    .name = "mnist_mlp", .description = "MNIST multilayer perceptron (Keras mnist_mlp.py): 2x Dense(512), RMSprop",
    .source = IMG_SOURCE_IDX, .rows = 28, .cols = 28, .channels = 1, .classes = 10, .flat = 1,
};

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) {
    (void)host;
    return img_task_module(&def);
}
