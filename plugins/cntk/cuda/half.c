/* cuda/half.c — the one exported symbol of cntk_cuda.so (cuda/half.h): the CUDA executor's entry
 * points as a table for cntk.so, which loads this object only when a CUDA device kind is asked for. */
#include "cuda/gpu.h"
#include "cuda/half.h"

static const cntk_cuda_table g_table = {
    .head = {.version = CNTK_CUDA_HALF_VERSION, .n_sizes = 3,
             .sizes = {sizeof(cntk_session), sizeof(cntk_model), sizeof(cntk_plan)}},
    .exec = {
        .caps = cntk_cuda_caps,
        .open = cntk_cuda_open,
        .close = cntk_cuda_close,
        .environment = cntk_cuda_environment,
        .compile = cntk_cuda_compile,
        .free_model = cntk_cuda_free,
        .set_weight = cntk_cuda_set_weight,
        .get_weight = cntk_cuda_get_weight,
        .get_grad = cntk_cuda_get_grad,
        .train = cntk_cuda_train,
        .eval = cntk_cuda_eval,
        .predict = cntk_cuda_predict,
        .forward_probe = cntk_cuda_forward_probe,
        .backward_probe = cntk_cuda_backward_probe,
        .read_metrics = cntk_cuda_read_metrics,
        .sync = cntk_cuda_sync,
    },
};

KH_EXPORT const kh_half_header *cntk_cuda_half_entry(void) { return &g_table.head; }
