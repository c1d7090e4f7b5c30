/* tests/backend/backend_testlib.h — the harness of the conformance suite and of the backend-specific tests:
 * load build/plugins/<plugin>.so with dlopen (as the host does; the plugin is $KHOST_TEST_PLUGIN, default
 * cntk; $KHOST_TEST_PLUGIN_DIR names another folder), a minimal host-services table, a cpu session
 * ($KHOST_TEST_THREADS threads; $KHOST_TEST_EXPECT_ENV must be in its environment string), and model
 * helpers. */
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
/* The loaded backend's cpu capabilities (image layout, one-hot input). */
const kh_caps *kb_cpu_caps(void);
/* kb_load_module, then open the cpu with `threads` threads. */
void kb_load(kb_backend *b, int threads);
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
