/* khost/kit/counter_rng.h — a counter-based random draw for dropout masks, for C and CUDA alike.
 *
 * A mask element is a pure function of (seed, forward counter, salt, element index): the backward pass
 * recomputes the mask instead of storing it, every thread (or CUDA thread) draws its own elements with no
 * shared state, and CPU and GPU kernels of one backend draw the same mask. The mixer is splitmix64's
 * finaliser applied to the combined key (full avalanche on 64 bits), the top 24 bits giving a uniform in
 * [0, 1) with float resolution. Not the reference kit's xoshiro stream: parity tests run deterministic.
 */
#ifndef KHOST_COUNTER_RNG_H
#define KHOST_COUNTER_RNG_H

#include <stdint.h>

#if defined(__CUDACC__)
#define KH_CRNG_FN __host__ __device__ __forceinline__
#else
#define KH_CRNG_FN static inline __attribute__((unused))
#endif

KH_CRNG_FN uint64_t kh_crng_mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The key of one (seed, counter, salt) triple; element draws then mix in the index. */
KH_CRNG_FN uint64_t kh_crng_key(uint64_t seed, uint64_t counter, uint64_t salt) {
    return kh_crng_mix(seed ^ kh_crng_mix(counter * 0x632be59bd9b4e019ull + salt));
}

/* Uniform in [0, 1) for element `index` under `key`. */
KH_CRNG_FN float kh_crng_uniform(uint64_t key, uint64_t index) {
    return (float)(kh_crng_mix(key + index * 0xd1b54a32d192ed03ull) >> 40) * (1.0f / 16777216.0f);
}

/* 1 when dropout with `rate` keeps the element (u >= rate, as Keras draws), else 0. */
KH_CRNG_FN int kh_dropout_keep(uint64_t key, uint64_t index, float rate) {
    return kh_crng_uniform(key, index) >= rate;
}

#endif
