/* tf_cuda_half.c — the one exported symbol of tensorflow_cuda.so (tf_cuda.h): the CUDA executor as the graph
 * runtime's executor table (kh_grt_half) for tensorflow.so, which loads this object only when the CUDA device kind is asked for. */
#include "tf_cuda.h"

static const kh_grt_half g_table = {
    .head = {.version = TF_CUDA_HALF_VERSION, .n_sizes = 2, .sizes = {sizeof(tf_session), sizeof(tf_model)}},
    .exec = {
        .caps = tf_cuda_caps,
        .open = tf_cuda_open,
        .close = tf_cuda_close,
        .environment = tf_cuda_environment,
        .prepare = tf_cuda_compile,
        .release = tf_cuda_free,
        .set_var = tf_cuda_set_var,
        .get_var = tf_cuda_get_var,
        .run = tf_cuda_run,
        .read_node = tf_cuda_read_node,
        .read_metrics = tf_cuda_read_metrics,
        .sync = tf_cuda_sync,
    }};

KH_EXPORT const kh_half_header *tensorflow_cuda_half_entry(void);
KH_EXPORT const kh_half_header *tensorflow_cuda_half_entry(void) { return &g_table.head; }
