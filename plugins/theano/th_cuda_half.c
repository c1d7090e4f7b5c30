/* th_cuda_half.c — the one exported symbol of theano_cuda.so (th_cuda.h): the GPU path as the graph runtime's
 * executor table (kh_grt_half) for theano.so, which loads this object only when the CUDA device kind is asked
 * for. */
#include "th_cuda.h"

KH_GRT_HALF_EXPORT(theano_cuda_half_entry, TH_CUDA_HALF_VERSION, th_cuda, th_session, th_model)
