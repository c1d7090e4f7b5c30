/* tests/kit/test_rng_advance.c — kh_rng_advance(k) leaves the generator where k draws would: for small k
 * around the polynomial's degree (256), for larger k against stepping, for sums of jumps, and from states
 * seeded differently (a wrong characteristic polynomial or reduction differs at once). */
#include <string.h>

#include "khost/kit/rng.h"
#include "testutil.h"

static int same_state(const kh_rng *a, const kh_rng *b) { return memcmp(a->s, b->s, sizeof a->s) == 0; }

static void check_against_steps(uint64_t seed, uint64_t k) {
    kh_rng stepped, jumped;
    kh_rng_seed(&stepped, seed);
    kh_rng_seed(&jumped, seed);
    for (uint64_t i = 0; i < k; i++) kh_rng_u64(&stepped);
    kh_rng_advance(&jumped, k);
    CHECK(same_state(&stepped, &jumped), "seed %llu: advance(%llu) differs from %llu draws",
          (unsigned long long)seed, (unsigned long long)k, (unsigned long long)k);
    CHECK(kh_rng_u64(&stepped) == kh_rng_u64(&jumped), "seed %llu, k %llu: next draw", (unsigned long long)seed,
          (unsigned long long)k);
}

static void test_small_and_medium(void) {
    const uint64_t ks[] = {0, 1, 2, 3, 63, 64, 65, 255, 256, 257, 511, 512, 1000, 4096, 9216, 123457, 1179648};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        check_against_steps(7, ks[i]);
        check_against_steps(0x9e3779b97f4a7c15ull, ks[i]);
    }
}

/* advance(a) then advance(b) = advance(a + b), including a jump past 2^32 no test could step. */
static void test_composition(void) {
    kh_rng x, y;
    kh_rng_seed(&x, 11);
    kh_rng_seed(&y, 11);
    kh_rng_advance(&x, 5000000000ull);
    kh_rng_advance(&x, 12345);
    kh_rng_advance(&y, 5000012345ull);
    CHECK(same_state(&x, &y), "advance(5e9) + advance(12345) != advance(5000012345)");
    kh_rng z;
    kh_rng_seed(&z, 11);
    CHECK(!same_state(&z, &y), "a long jump left the state unchanged");
}

/* A stream drawn in parts from advanced copies is the stream drawn whole. */
static void test_parts(void) {
    enum { N = 3000, PARTS = 7 };
    static uint64_t whole[N], parts[N];
    kh_rng r;
    kh_rng_seed(&r, 2026);
    for (int i = 0; i < N; i++) whole[i] = kh_rng_u64(&r);
    for (int p = 0; p < PARTS; p++) {
        int b = p * N / PARTS, e = (p + 1) * N / PARTS;
        kh_rng_seed(&r, 2026);
        kh_rng_advance(&r, (uint64_t)b);
        for (int i = b; i < e; i++) parts[i] = kh_rng_u64(&r);
    }
    CHECK(memcmp(whole, parts, sizeof whole) == 0, "a stream drawn in %d advanced parts differs from one draw", PARTS);
}

int main(void) {
    test_small_and_medium();
    test_composition();
    test_parts();
    return kh_test_finish("test_rng_advance");
}
