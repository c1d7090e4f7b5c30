/* kit/base/rng.c — xoshiro256** seeded through splitmix64: one portable stream for weights, shuffles,
 * dropout and augmentation, identical on every machine for the same seed. */
#include <math.h>

#include "khost/kit/rng.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void kh_rng_seed(kh_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

/* one xoshiro256** step of the state s */
static inline uint64_t step(uint64_t *s) {
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t kh_rng_u64(kh_rng *r) { return step(r->s); }

void kh_rng_fill_u64(kh_rng *r, uint64_t *out, int64_t n) {
    /* the state in a local copy, which the compiler keeps in registers: a call per draw through memory costs
     * more than the draw */
    uint64_t s[4] = {r->s[0], r->s[1], r->s[2], r->s[3]};
    for (int64_t i = 0; i < n; i++) out[i] = step(s);
    for (int k = 0; k < 4; k++) r->s[k] = s[k];
}

double kh_rng_uniform(kh_rng *r) { return (double)(kh_rng_u64(r) >> 11) * 0x1.0p-53; }

double kh_rng_normal(kh_rng *r) {
    /* Box-Muller; u1 in (0,1] so log is finite */
    double u1 = 1.0 - kh_rng_uniform(r);
    double u2 = kh_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t kh_rng_below(kh_rng *r, uint64_t n) {
    if (n <= 1) return 0;
    /* rejection sampling removes modulo bias */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
        x = kh_rng_u64(r);
    } while (x >= limit);
    return x % n;
}

void kh_rng_shuffle_i64(kh_rng *r, int64_t *v, int64_t n) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)kh_rng_below(r, (uint64_t)i + 1);
        int64_t t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

uint64_t kh_seed_mix(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
    uint64_t x = seed;
    uint64_t h = splitmix64(&x);
    x = h ^ (a * 0xD6E8FEB86659FD93ull);
    h = splitmix64(&x);
    x = h ^ (b * 0xA0761D6478BD642Full);
    h = splitmix64(&x);
    x = h ^ (c * 0xE7037ED1A0B428DBull);
    return splitmix64(&x);
}
