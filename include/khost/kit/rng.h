/* khost/kit/rng.h — xoshiro256** seeded through splitmix64: same seed, same stream everywhere (kit/base/rng.c). */
#ifndef KHOST_KIT_RNG_H
#define KHOST_KIT_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kh_rng { uint64_t s[4]; } kh_rng;
void kh_rng_seed(kh_rng *r, uint64_t seed);
uint64_t kh_rng_u64(kh_rng *r);
void kh_rng_fill_u64(kh_rng *r, uint64_t *out, int64_t n); /* the next n draws of kh_rng_u64, in order */
double kh_rng_uniform(kh_rng *r);          /* [0, 1) with 53 random bits */
double kh_rng_normal(kh_rng *r);           /* standard normal (Box-Muller) */
uint64_t kh_rng_below(kh_rng *r, uint64_t n); /* uniform in [0, n), unbiased */
void kh_rng_shuffle_i64(kh_rng *r, int64_t *v, int64_t n); /* Fisher-Yates */
/* The state after k more draws (of any kind that takes one u64), without drawing them: O(log k) work
 * (kit/base/rng_jump.c), so threads can each draw their own part of one stream. */
void kh_rng_advance(kh_rng *r, uint64_t k);
/* Derive an independent seed from a base seed and up to three indices (epoch, batch, ...). */
uint64_t kh_seed_mix(uint64_t seed, uint64_t a, uint64_t b, uint64_t c);

#ifdef __cplusplus
}
#endif
#endif
