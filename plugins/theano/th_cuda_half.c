/* th_cuda_half.c — the one exported symbol of theano_cuda.so (th_cuda.h): the GPU path as the graph runtime's
 * executor table (kh_grt_half) for theano.so, which loads this object only when the CUDA device kind is asked for. */
#include "th_cuda.h"

static const kh_grt_half g_table = {
    .head = {.version = TH_CUDA_HALF_VERSION, .n_sizes = 2, .sizes = {sizeof(th_session), sizeof(th_model)}},
    .exec = {
        .caps = th_cuda_caps,
        .open = th_cuda_open,
        .close = th_cuda_close,
        .environment = th_cuda_environment,
        .prepare = th_cuda_compile,
        .release = th_cuda_free,
        .set_var = th_cuda_set_var,
        .get_var = th_cuda_get_var,
        .run = th_cuda_run,
        .read_node = th_cuda_read_node,
        .read_metrics = th_cuda_read_metrics,
        .sync = th_cuda_sync,
    }};

KH_EXPORT const kh_half_header *theano_cuda_half_entry(void);
KH_EXPORT const kh_half_header *theano_cuda_half_entry(void) { return &g_table.head; }
