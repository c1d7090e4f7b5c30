/* tests/dispatch/test_blas_dispatch.c — the OpenBLAS core type khost chooses, and that tests get it.
 * Run once per core type the CPU executes (<name>.<core type>, OPENBLAS_CORETYPE set by ctest) and once plainly
 * (KHOST_TEST_EXPECT_CHOICE=1: the environment every other test gets must be khost's own choice; when ctest
 * itself inherited OPENBLAS_CORETYPE or KHOST_OPENBLAS_CORETYPE, KHOST_TEST_DISPATCH=inherited, the inherited
 * value, which khost would use too). In each run, the OpenBLAS loaded into this process must report the core
 * type the environment names: what khost sets before it loads a module is what OpenBLAS runs. Then
 * kh_blas_tune's rules, in this process. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "devices/blas_tune.h"
#include "testutil.h"

static void check_openblas_runs(const char *want) {
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) kh_test_skip("libopenblas.so.0 is not installed");
    const char *(*corename)(void) = (const char *(*)(void))dlsym(h, "openblas_get_corename");
    CHECK(corename != NULL, "openblas_get_corename not found");
    if (!corename) return;
    const char *got = corename();
    CHECK(got && !strcasecmp(got, want), "OPENBLAS_CORETYPE=%s but OpenBLAS runs its %s kernels", want,
          got ? got : "(null)");
    printf("OPENBLAS_CORETYPE=%s: OpenBLAS reports %s kernels\n", want, got ? got : "(null)");
}

int main(void) {
    const char *isa = kh_cpu_isa();
    const char *mine = kh_blas_coretype_for_isa(isa);
    const char *env = getenv("OPENBLAS_CORETYPE");
    char given[64] = "";
    if (env) snprintf(given, sizeof given, "%s", env);

    const char *dispatch = getenv("KHOST_TEST_DISPATCH");
    int inherited = dispatch && !strcmp(dispatch, "inherited");
    if (inherited) printf("the core type was inherited from ctest's environment: %s\n", env ? env : "(unset)");
    const char *expect = getenv("KHOST_TEST_EXPECT_CHOICE");
    if (expect && !strcmp(expect, "1") && !inherited) {
        if (mine) CHECK(env && !strcmp(env, mine), "a test runs with OPENBLAS_CORETYPE=%s, khost chooses %s on %s "
                        "(an inherited value? tools/test clears it)", env ? env : "(unset)", mine, isa);
        else CHECK(env == NULL, "khost leaves OpenBLAS its own choice on %s, the test has OPENBLAS_CORETYPE=%s", isa,
                   env);
    }
    if (env) check_openblas_runs(given);

    /* the table and the runnable list agree with the ISA */
    CHECK(!strcmp(kh_blas_coretype_for_isa("avx512"), "SkylakeX"), "avx512");
    CHECK(!strcmp(kh_blas_coretype_for_isa("avx2"), "Haswell"), "avx2");
    CHECK(kh_blas_coretype_for_isa("avx") == NULL && kh_blas_coretype_for_isa("sse") == NULL, "avx/sse keep OpenBLAS's");
    const char *types[8];
    int n = kh_blas_coretypes_runnable(types, 8), has_mine = !mine, has_given = !env;
    for (int i = 0; i < n; i++) {
        has_mine |= mine && !strcmp(types[i], mine);
        has_given |= env && !strcmp(types[i], given);
    }
    CHECK(has_mine, "khost's choice %s is not among the core types this CPU runs", mine);
    CHECK(has_given || inherited, "the test runs under %s, not among the core types this CPU runs", given);
    if (!strcmp(isa, "avx512")) CHECK(n >= 2 && !strcmp(types[0], "Haswell") && !strcmp(types[1], "SkylakeX"), "avx512: %d", n);
    if (!strcmp(isa, "avx2")) CHECK(n == 1 && !strcmp(types[0], "Haswell"), "avx2: %d types", n);
    CHECK(kh_blas_coretypes_runnable(types, 1) <= 1, "max respected");

    /* kh_blas_tune's rules: a set OPENBLAS_CORETYPE wins; KHOST_OPENBLAS_CORETYPE=keep leaves it unset; any
     * other value of it is used; else the table */
    unsetenv("KHOST_OPENBLAS_CORETYPE");
    setenv("OPENBLAS_CORETYPE", "Prescott", 1);
    CHECK(kh_blas_tune() == NULL && !strcmp(getenv("OPENBLAS_CORETYPE"), "Prescott"), "a set value wins");
    unsetenv("OPENBLAS_CORETYPE");
    setenv("KHOST_OPENBLAS_CORETYPE", "keep", 1);
    CHECK(kh_blas_tune() == NULL && getenv("OPENBLAS_CORETYPE") == NULL, "keep");
    setenv("KHOST_OPENBLAS_CORETYPE", "Zen", 1);
    const char *t = kh_blas_tune();
    CHECK(t && !strcmp(t, "Zen") && !strcmp(getenv("OPENBLAS_CORETYPE"), "Zen"), "KHOST_OPENBLAS_CORETYPE=Zen");
    unsetenv("KHOST_OPENBLAS_CORETYPE");
    unsetenv("OPENBLAS_CORETYPE");
    t = kh_blas_tune();
    CHECK(mine ? t && !strcmp(t, mine) : t == NULL, "the table's choice on %s", isa);
    return kh_test_finish("test_blas_dispatch");
}
