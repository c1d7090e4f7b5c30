/* tf_cuda_half.c — the one exported symbol of tensorflow_cuda.so (tf_cuda.h): the CUDA executor as the graph
 * runtime's executor table (kh_grt_half) for tensorflow.so, which loads this object only when the CUDA device
 * kind is asked for. */
#include "tf_cuda.h"

KH_GRT_HALF_EXPORT(tensorflow_cuda_half_entry, TF_CUDA_HALF_VERSION, tf_cuda, tf_session, tf_model)
