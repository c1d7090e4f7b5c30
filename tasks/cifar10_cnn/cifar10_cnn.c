/* cifar10_cnn.c — Keras 2's examples/cifar10_cnn.py as the benchmark ran it (data_augmentation = True):
 * (32, 32, 3) -> Conv2D(32, same) relu -> Conv2D(32, valid) relu -> MaxPooling2D(2) -> Dropout(0.25) ->
 * Conv2D(64, same) relu -> Conv2D(64, valid) relu -> MaxPooling2D(2) -> Dropout(0.25) -> Flatten ->
 * Dense(512) relu -> Dropout(0.5) -> Dense(10) softmax, with the activations as separate Activation layers
 * as the script wrote them; RMSprop(lr 1e-4, rho 0.9, epsilon 1e-7, decay 1e-6); batch 32; 20 epochs of
 * fit_generator(steps_per_epoch = 50000 // 32), i.e. 1562 * 32 = 49984 samples per epoch; real-time
 * augmentation ImageDataGenerator(width_shift_range=0.1, height_shift_range=0.1, horizontal_flip=True). */
#include "../common_image/image_task.h"

static const kh_shift_flip augmentation = {.width_shift_range = 0.1, .height_shift_range = 0.1, .horizontal_flip = 1};

static const img_task_def def = {
    .name = "cifar10_cnn",
    .description = "CIFAR-10 convnet (Keras cifar10_cnn.py): 4x Conv2D, Dense(512), RMSprop, augmentation",
    .source = IMG_SOURCE_CIFAR, .rows = 32, .cols = 32, .channels = 3, .classes = 10, .flat = 0,
    .augment = &augmentation,
};

KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host) {
    (void)host;
    return img_task_module(&def);
}
