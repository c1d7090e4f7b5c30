/* tests/tensorflow_gpu/tf_gpu_testlib.h — load a graph backend as the host does (dlopen of
 * $KHOST_BUILD/plugins/<TFG_PLUGIN>.so: tensorflow, or theano where tests/theano_cuda compiles these tests with
 * TFG_PLUGIN="theano") and open sessions on it; the model helpers of tests/cntk (kb_compile, kb_init_weights,
 * kb_tensor...) work on any backend through the same kb_backend. */
#ifndef KHOST_TESTS_TF_GPU_TESTLIB_H
#define KHOST_TESTS_TF_GPU_TESTLIB_H

#include "backend_testlib.h"

#ifndef TFG_PLUGIN
#define TFG_PLUGIN "tensorflow"
#endif

/* Load the module (skips, exit 77, when it is missing); no session. */
void tfg_load_module(kb_backend *b);
/* Open a cpu session with `threads` threads: NULL with the error printed on failure. */
kh_bsession *tfg_open_cpu(kb_backend *b, int threads);
/* Open cuda:$TF_TEST_DEVICE (default 0). Skips (77) when the plugin reports the CUDA kind unavailable; a
 * failure to open an available device is a test failure (exit 1). */
kh_bsession *tfg_open_cuda(kb_backend *b);
void tfg_unload(kb_backend *b);

#endif
