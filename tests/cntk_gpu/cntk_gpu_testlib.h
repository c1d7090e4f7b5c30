/* tests/cntk_gpu/cntk_gpu_testlib.h — open the loaded cntk plugin on cuda:0 for the GPU tests (or skip, exit 77,
 * saying why: no driver, no device, built without CUDA). Reuses tests/cntk's loader helpers. */
#ifndef KHOST_TESTS_CNTK_GPU_TESTLIB_H
#define KHOST_TESTS_CNTK_GPU_TESTLIB_H

#include "backend_testlib.h"

/* Open cuda:$CNTK_TEST_DEVICE (default 0) on the cntk module kb_load_module loaded into b. Skips (77) when
 * the plugin reports the CUDA kind unavailable; a failure to open an available device is a test failure. */
void ctg_open_cuda(kb_backend *b);

#endif
