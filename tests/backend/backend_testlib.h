/* tests/backend/backend_testlib.h — the harness of the conformance suite and of the backend-specific tests:
 * load build/plugins/<plugin>.so with dlopen (as the host does; the plugin is $KHOST_TEST_PLUGIN, default
 * cntk; $KHOST_TEST_PLUGIN_DIR names another folder), a minimal host-services table, a session on the device
 * under test ($KHOST_TEST_DEVICE, cpu or cuda:N; $KHOST_TEST_THREADS threads on the cpu; $KHOST_TEST_EXPECT_ENV
 * must be in its environment string), and model helpers. */
#ifndef KHOST_TESTS_BACKEND_TESTLIB_H
#define KHOST_TESTS_BACKEND_TESTLIB_H

#include "khost/khost.h"
#include "khost/kit/rng.h"

typedef struct kb_backend {
    void *dl;
    const kh_module_desc *desc;
    const kh_backend_api *api;
    kh_bsession *s;
} kb_backend;

/* Load $KHOST_BUILD/plugins/<plugin>.so and call its entry point (skips the test, exit 77, when it is missing). */
void kb_load_module(kb_backend *b);
const char *kb_plugin_name(void);
/* The loaded backend's capabilities on the session's device kind (image layout, one-hot input): the cpu's until
 * a session opens on another. */
const kh_caps *kb_caps(void);
/* The device under test, $KHOST_TEST_DEVICE: "cpu" (default) or "cuda:N"; its math, $KHOST_TEST_MATH: "fp32"
 * (default) or "tf32" (the cpu has no TF32: fp32 there, as the host records it). */
const char *kb_device_id(void);
/* kb_load_module, then open the cpu with `threads` threads (skips, exit 77, where the cpu is unavailable). */
void kb_load(kb_backend *b, int threads);
int kb_device_is_cuda(void);
uint32_t kb_device_math(void);
/* Open the device under test on the module kb_load_module loaded (`threads` for the cpu). 0: open; 1: the
 * module reports that device kind unavailable here, the reason in why (the caller reports its cases as not
 * reached: never a pass). A bad device name, an available device that does not open, or an environment string
 * without $KHOST_TEST_EXPECT_ENV fail the test (exit 1). */
int kb_open_device(kb_backend *b, int threads, char *why, size_t n);
/* n floats set to NaN (an element a kernel forgets to write fails a comparison); NULL when out of memory. */
float *kb_nan_floats(int64_t n);

/* What the harness must know of a bundled backend beyond its caps: its GPU half's file, the environment switch
 * that synchronises and checks after every layer or op (NULL: none), the one that NaN-fills device buffers
 * before every pass (NULL: none), what its out-of-device-memory message names, and the keys its CUDA
 * environment string holds. */
typedef struct kb_traits {
    const char *plugin, *gpu_half, *sync_env, *poison_env, *oom_says;
    const char *cuda_env_keys[3];
} kb_traits;
const kb_traits *kb_traits_of(const char *plugin);
void kb_unload(kb_backend *b);
const kh_host_api *kb_host(void);
/* Replace the host table given to modules loaded after this call (NULL: the default). */
void kb_set_host(const kh_host_api *h);

/* Compile spec (max_batch, seed, deterministic); NULL with the error printed on failure. */
kh_bmodel *kb_compile(kb_backend *b, const kh_model_spec *spec, int max_batch, int deterministic);
/* Initialise every weight with the kit's Keras initialisers from seed, set them into the model and, when
 * keep is non-NULL, return them there (keep[layer][slot], malloc'ed floats). */
int kb_init_weights(kb_backend *b, kh_bmodel *m, const kh_model_spec *spec, uint64_t seed, float ***keep);
void kb_free_weights(const kh_model_spec *spec, float **keep);

kh_tensor kb_tensor(uint32_t dtype, uint32_t layout, int rank, const int64_t *dims, void *data);
void kb_fill_uniform(float *x, int64_t n, float lo, float hi, kh_rng *r);

#endif
