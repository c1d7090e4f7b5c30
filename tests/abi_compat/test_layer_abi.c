/* tests/abi_compat/test_layer_abi.c — kh_layer_spec arrays between modules built with other element sizes:
 * the size a descriptor declares (1.2 descriptors end before the member), the repack in both directions,
 * a task whose layers are wider than the host's, and a backend given its layers at its own size. */
#include <stddef.h>
#include <string.h>

#include "modules/layer_abi.h"
#include "testutil.h"

#define WIDE 64 /* a layout with 8 more bytes per layer than the host's: a module built with a grown model.h */

static kh_layer_spec sample(int i) {
    kh_layer_spec l;
    memset(&l, 0, sizeof l);
    l.kind = KH_LAYER_DENSE;
    l.units = 10 + i;
    l.activation = (uint32_t)(i % 3);
    l.rate = 0.25f * (float)i;
    l.bias_init = KH_INIT_ZEROS;
    return l;
}

static void test_desc_size(void) {
    char err[256];
    uint32_t v = 0;
    kh_module_desc d;
    memset(&d, 0xab, sizeof d); /* bytes past an older descriptor are whatever follows it in the module */
    d.struct_size = (uint32_t)offsetof(kh_module_desc, layer_spec_size); /* an ABI 1.2 descriptor */
    CHECK(kh_desc_layer_spec_size("m.so", &d, &v, err, sizeof err) == 0 && v == KH_LAYER_SPEC_SIZE_1_0,
          "a 1.2 descriptor means the 1.0 layer size, not the bytes after it (got %u)", (unsigned)v);
    d.struct_size = sizeof d;
    d.layer_spec_size = 0;
    CHECK(kh_desc_layer_spec_size("m.so", &d, &v, err, sizeof err) == 0 && v == KH_LAYER_SPEC_SIZE_1_0, "0 is 1.0");
    d.layer_spec_size = WIDE;
    CHECK(kh_desc_layer_spec_size("m.so", &d, &v, err, sizeof err) == 0 && v == WIDE, "a declared size is used");
    d.layer_spec_size = 8;
    CHECK(kh_desc_layer_spec_size("m.so", &d, &v, err, sizeof err) != 0 && strstr(err, "m.so") &&
              strstr(err, "layer_spec_size 8"),
          "a size below the 1.0 layout is refused naming the file: %s", err);
    d.layer_spec_size = 1u << 20;
    CHECK(kh_desc_layer_spec_size("m.so", &d, &v, err, sizeof err) != 0, "a garbage size is refused");
    CHECK(sizeof(kh_layer_spec) == KH_LAYER_SPEC_SIZE_1_0,
          "kh_layer_spec grew (%zu): add its members to the 1.2 compatibility test", sizeof(kh_layer_spec));
}

static void test_repack(void) {
    char err[256];
    kh_layer_spec host[3] = {sample(0), sample(1), sample(2)};
    kh_model_spec spec = {.struct_size = sizeof spec, .n_layers = 3, .layers = host};
    /* host -> wide: members copied, the extra bytes zero */
    kh_spec_buf w;
    CHECK(kh_spec_repack(&spec, sizeof(kh_layer_spec), WIDE, &w, err, sizeof err) == KH_OK, "to wide: %s", err);
    int same = 1, zero = 1;
    for (int i = 0; i < 3; i++) {
        const unsigned char *e = (const unsigned char *)w.layers + (size_t)i * WIDE;
        same &= memcmp(e, &host[i], sizeof(kh_layer_spec)) == 0;
        for (size_t b = sizeof(kh_layer_spec); b < WIDE; b++) zero &= e[b] == 0;
    }
    CHECK(same, "every layer's members arrive at the wide stride");
    CHECK(zero, "members the host does not have read as 0 (their defaults)");
    CHECK(w.spec.layers == w.layers && w.spec.n_layers == 3 && w.spec.struct_size == spec.struct_size,
          "the spec points at the repacked layers");
    /* wide -> host: back to the same layers */
    kh_spec_buf h;
    CHECK(kh_spec_repack(&w.spec, WIDE, sizeof(kh_layer_spec), &h, err, sizeof err) == KH_OK, "from wide: %s", err);
    CHECK(memcmp(h.layers, host, sizeof host) == 0, "wide and back is the identity");
    kh_spec_buf_free(&h);
    /* a member the reader lacks that is set: refused, naming the layer */
    ((unsigned char *)w.layers)[1 * WIDE + sizeof(kh_layer_spec) + 3] = 7;
    CHECK(kh_spec_repack(&w.spec, WIDE, sizeof(kh_layer_spec), &h, err, sizeof err) == KH_ERR_UNSUPPORTED &&
              strstr(err, "layer 1 ") && h.layers == NULL,
          "a set member the reader does not have is unsupported: %s", err);
    kh_spec_buf_free(&w);
    kh_model_spec bad = {.struct_size = sizeof bad, .n_layers = 2, .layers = NULL};
    CHECK(kh_spec_repack(&bad, sizeof(kh_layer_spec), WIDE, &h, err, sizeof err) == KH_ERR_INVALID, "no layer array");
}

/* A task built with wide layers, and a backend that reads them at the wide stride. */
static unsigned char g_wide[3 * WIDE];
static kh_status wide_model(kh_tdata *d, kh_model_spec *out) {
    (void)d;
    memset(g_wide, 0, sizeof g_wide);
    for (int i = 0; i < 3; i++) {
        kh_layer_spec l = sample(i);
        memcpy(g_wide + (size_t)i * WIDE, &l, sizeof l);
    }
    out->n_layers = 3;
    out->layers = (const kh_layer_spec *)(const void *)g_wide;
    return KH_OK;
}
static const char *no_error(kh_tdata *d) { (void)d; return ""; }

static int g_seen_ok;
static kh_status wide_compile(kh_bsession *s, const kh_model_spec *spec, const kh_compile_opts *o, kh_bmodel **out) {
    (void)s, (void)o;
    g_seen_ok = spec->n_layers == 3;
    for (int i = 0; i < spec->n_layers; i++) {
        kh_layer_spec l = sample(i), got;
        memcpy(&got, (const unsigned char *)spec->layers + (size_t)i * WIDE, sizeof got);
        g_seen_ok &= memcmp(&got, &l, sizeof l) == 0;
    }
    *out = NULL;
    return KH_OK;
}

static void test_modules(void) {
    char err[256];
    kh_task_api tapi = {.struct_size = sizeof tapi, .model = wide_model, .last_error = no_error};
    kh_module task = {.kind = KH_MODULE_TASK, .task = &tapi, .layer_spec_size = WIDE};
    kh_spec_buf sb;
    CHECK(kh_task_model(&task, NULL, &sb, err, sizeof err) == KH_OK, "wide task: %s", err);
    int same = sb.spec.n_layers == 3;
    for (int i = 0; same && i < 3; i++) {
        kh_layer_spec l = sample(i);
        same = memcmp(&sb.spec.layers[i], &l, sizeof l) == 0;
    }
    CHECK(same, "the wide task's layers are read at its stride into the host's layout");
    kh_backend_api bapi = {.struct_size = sizeof bapi, .compile = wide_compile};
    kh_module be = {.kind = KH_MODULE_BACKEND, .backend = &bapi, .layer_spec_size = WIDE};
    kh_bmodel *m = (kh_bmodel *)&be;
    g_seen_ok = 0;
    CHECK(kh_backend_compile(&be, NULL, &sb.spec, NULL, &m, err, sizeof err) == KH_OK && g_seen_ok && m == NULL,
          "a wide backend gets its layers at its own stride: %s", err);
    kh_spec_buf_free(&sb);
}

int main(void) {
    test_desc_size();
    test_repack();
    test_modules();
    return kh_test_finish("test_layer_abi");
}
