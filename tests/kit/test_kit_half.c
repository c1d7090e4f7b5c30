/* tests/kit/test_kit_half.c — the GPU-half loader (khost/kit/half.h) against a fake half
 * (fake_half.c, built into kit-half-cuda/fake_half.so beside this executable: the kit is linked into the
 * executable, so "the module's folder" is the executable's). A matching table loads, once; a table of another
 * version or other structure sizes, a missing file, a missing symbol or a NULL table are refused with a reason
 * that names the file; a build without a half says "built without CUDA". */
#include <stdio.h>
#include <string.h>

#include "khost/kit/half.h"
#include "testutil.h"

static kh_half g_ok = KH_HALF_INIT("kit", "kit-half-cuda", "fake_half.so", "fake_half_entry", 1, 3u, 8, 16);
static kh_half g_version = KH_HALF_INIT("kit", "kit-half-cuda", "fake_half.so", "fake_half_entry", 1, 4u, 8, 16);
static kh_half g_sizes = KH_HALF_INIT("kit", "kit-half-cuda", "fake_half.so", "fake_half_entry", 1, 3u, 8, 24);
static kh_half g_count = KH_HALF_INIT("kit", "kit-half-cuda", "fake_half.so", "fake_half_entry", 1, 3u, 8);
static kh_half g_missing = KH_HALF_INIT("kit", "kit-half-cuda", "absent.so", "fake_half_entry", 1, 3u, 8, 16);
static kh_half g_symbol = KH_HALF_INIT("kit", "kit-half-cuda", "fake_half.so", "no_such_entry", 1, 3u, 8, 16);
static kh_half g_null = KH_HALF_INIT("kit", "kit-half-cuda", "fake_half.so", "fake_half_none", 1, 3u, 8, 16);
static kh_half g_unbuilt = KH_HALF_INIT("kit", "kit-half-cuda", "fake_half.so", "fake_half_entry", 0, 3u, 8, 16);

static void refused(kh_half *h, const char *what, const char *needle) {
    const void *t = kh_half_load(h);
    const char *why = kh_half_why(h);
    printf("%-26s -> %s\n", what, t ? "loaded" : why);
    CHECK(t == NULL && kh_half_loaded(h) == NULL, "%s: refused", what);
    CHECK(strstr(why, needle) != NULL, "%s: the reason says '%s': %s", what, needle, why);
}

int main(void) {
    CHECK(kh_half_loaded(&g_ok) == NULL && kh_half_why(&g_ok)[0] == 0, "nothing loaded before the first call");
    const kh_half_header *t = kh_half_load(&g_ok);
    CHECK(t != NULL, "a matching half loads: %s", kh_half_why(&g_ok));
    if (t) CHECK(t->version == 3 && t->n_sizes == 2 && t->sizes[1] == 16, "its table");
    CHECK(kh_half_load(&g_ok) == t && kh_half_loaded(&g_ok) == t, "loaded once, then returned as it is");

    refused(&g_version, "another table version", "is from another build (table version 3, structures 8/16");
    refused(&g_sizes, "other structure sizes", "kit.so expects version 3, structures 8/24 bytes");
    refused(&g_count, "another number of structures", "is from another build");
    refused(&g_missing, "no file", KH_HALF_NOT_LOADABLE);
    CHECK(strstr(kh_half_why(&g_missing), "kit-half-cuda/absent.so") != NULL, "the missing file is named");
    refused(&g_symbol, "no entry symbol", "fake_half.so: no no_such_entry table");
    refused(&g_null, "a NULL table", "no fake_half_none table");
    refused(&g_unbuilt, "a build without a half", "built without CUDA");
    return kh_test_finish("test_kit_half");
}
