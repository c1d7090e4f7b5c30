/* tests/kit/test_rng_fill.c — kh_rng_fill_u64(n) writes the next n draws of kh_rng_u64 and leaves the
 * generator where those n draws would, for n = 0, 1, a few and many, and filled in pieces of uneven length. */
#include <string.h>

#include "khost/kit/rng.h"
#include "testutil.h"

static void check_fill(uint64_t seed, int64_t n) {
    static uint64_t want[1000], got[1000];
    kh_rng stepped, filled;
    kh_rng_seed(&stepped, seed);
    kh_rng_seed(&filled, seed);
    for (int64_t i = 0; i < n; i++) want[i] = kh_rng_u64(&stepped);
    memset(got, 0, sizeof got);
    kh_rng_fill_u64(&filled, got, n);
    CHECK(memcmp(want, got, (size_t)n * sizeof want[0]) == 0, "seed %llu: fill(%lld) differs from %lld draws",
          (unsigned long long)seed, (long long)n, (long long)n);
    CHECK(memcmp(stepped.s, filled.s, sizeof stepped.s) == 0, "seed %llu: state after fill(%lld)",
          (unsigned long long)seed, (long long)n);
    CHECK(n == 1000 || got[n] == 0, "fill(%lld) wrote past its end", (long long)n);
}

static void test_lengths(void) {
    const int64_t ns[] = {0, 1, 2, 3, 7, 64, 255, 256, 257, 999};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        check_fill(1, ns[i]);
        check_fill(0x9e3779b97f4a7c15ull, ns[i]);
    }
}

/* Pieces of 1, 2, 3, ... draws make the same stream as one fill. */
static void test_pieces(void) {
    enum { N = 1000 };
    static uint64_t whole[N], pieces[N];
    kh_rng r;
    kh_rng_seed(&r, 2026);
    kh_rng_fill_u64(&r, whole, N);
    kh_rng_seed(&r, 2026);
    for (int64_t at = 0, len = 1; at < N; at += len, len++)
        kh_rng_fill_u64(&r, pieces + at, len < N - at ? len : N - at);
    CHECK(memcmp(whole, pieces, sizeof whole) == 0, "a stream filled in growing pieces differs from one fill");
}

int main(void) {
    test_lengths();
    test_pieces();
    return kh_test_finish("test_rng_fill");
}
