/* tests/cntk/cntk_testlib.h — shared helpers of the backend tests and benchmark (cntk's, and the parity tests
 * every CPU backend runs): load build/plugins/<plugin>.so with dlopen (as the host does; the plugin is
 * $KHOST_TEST_PLUGIN, default cntk), a minimal host-services table, a cpu session, and model helpers. */
#ifndef KHOST_TESTS_CNTK_TESTLIB_H
#define KHOST_TESTS_CNTK_TESTLIB_H

#include "khost/khost.h"
#include "khost/kit/rng.h"

typedef struct ct_backend {
    void *dl;
    const kh_module_desc *desc;
    const kh_backend_api *api;
    kh_bsession *s;
} ct_backend;

/* Load $KHOST_BUILD/plugins/<plugin>.so and call its entry point (skips the test, exit 77, when it is missing). */
void ct_load_module(ct_backend *b);
const char *ct_plugin_name(void);
/* The loaded backend's cpu capabilities (image layout, one-hot input). */
const kh_caps *ct_cpu_caps(void);
/* ct_load_module, then open the cpu with `threads` threads. */
void ct_load(ct_backend *b, int threads);
void ct_unload(ct_backend *b);
const kh_host_api *ct_host(void);
/* Replace the host table given to modules loaded after this call (NULL: the default). */
void ct_set_host(const kh_host_api *h);

/* Compile spec (max_batch, seed, deterministic); NULL with the error printed on failure. */
kh_bmodel *ct_compile(ct_backend *b, const kh_model_spec *spec, int max_batch, int deterministic);
/* Initialise every weight with the kit's Keras initialisers from seed, set them into the model and, when
 * keep is non-NULL, return them there (keep[layer][slot], malloc'ed floats). */
int ct_init_weights(ct_backend *b, kh_bmodel *m, const kh_model_spec *spec, uint64_t seed, float ***keep);
void ct_free_weights(const kh_model_spec *spec, float **keep);

kh_tensor ct_tensor(uint32_t dtype, uint32_t layout, int rank, const int64_t *dims, void *data);
void ct_fill_uniform(float *x, int64_t n, float lo, float hi, kh_rng *r);

#endif
