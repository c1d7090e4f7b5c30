/* khost/kit/fastmath.h — exp and tanh for float written so that loops over them vectorise.
 *
 * Why: libm's expf/tanhf are scalar calls, so an element-wise loop that uses them (the LSTM cell, sigmoid,
 * softmax) runs one element at a time whatever the vector width; on CPU those calls dominated the LSTM
 * tasks. These are branch-free (selects, no calls, no float->int conversions) so GCC and Clang vectorise the
 * loops that inline them. Accuracy, checked against double precision by tests/kit/test_fastmath.c over
 * the whole float range: under 2 ulp for exp on [-87, 88] and under 3.5 ulp for tanh (worst cases found:
 * bench/cpu/2026-11-30-fastmath-accuracy.txt); libm's are under 1 ulp.
 * NaN in gives NaN out, so a diverging loss is still seen. Host code only: formulas.h keeps CUDA's own
 * expf/tanhf for device code.
 */
#ifndef KHOST_FASTMATH_H
#define KHOST_FASTMATH_H

#include <stdint.h>
#include <string.h>

static inline __attribute__((unused)) float kh_bits_to_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline __attribute__((unused)) uint32_t kh_float_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* e^x. x = n ln2 + r with |r| <= ln2/2 (Cody–Waite: ln2 split so n * hi is exact), e^r by its degree-7
 * Taylor polynomial (truncation < 6e-9 relative), 2^n written into the exponent bits. n is rounded with the
 * 1.5 * 2^23 trick and read back from the float's low mantissa bits, which avoids an undefined float->int
 * conversion for NaN. The argument is clamped to [-87.3, 88.37] so 2^n stays a normal float: results below
 * ~1e-38 come out as ~1e-38 (and smaller products may be subnormal), above ~2.4e38 saturate there. */
static inline __attribute__((unused)) float kh_expf_fast(float x) {
    const float lo = -87.336544750553f, hi = 88.3762626647949f; /* -126 ln2 + tiny, 127.5 ln2 */
    x = x < lo ? lo : (x > hi ? hi : x);
    const float shifter = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer in the low bits */
    float k = x * 1.44269504088896341f + shifter;
    float n = k - shifter;
    float r = x - n * 0.693359375f;  /* ln2 high part: 9 significant bits, n * hi exact for |n| <= 128 */
    r = r - n * -2.12194440e-4f;     /* ln2 low part */
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    uint32_t ni = kh_float_to_bits(k) - kh_float_to_bits(shifter); /* n, two's complement */
    return p * kh_bits_to_float((ni + 127u) << 23);
}

/* tanh(x). For |x| < 0.4 the odd Taylor series through x^13 (truncation < 4e-9 relative); above, where
 * 1 - e has no cancellation to speak of, (1 - e) / (1 + e) with e = e^{-2|x|}. Sign restored last. */
static inline __attribute__((unused)) float kh_tanhf_fast(float x) {
    float a = x < 0.0f ? -x : x;
    float a2 = a * a;
    float s = 21844.0f / 6081075.0f;
    s = s * a2 - 1382.0f / 155925.0f;
    s = s * a2 + 62.0f / 2835.0f;
    s = s * a2 - 17.0f / 315.0f;
    s = s * a2 + 2.0f / 15.0f;
    s = s * a2 - 1.0f / 3.0f;
    s = a + a * a2 * s;
    float e = kh_expf_fast(-2.0f * a);
    float l = (1.0f - e) / (1.0f + e);
    float t = a < 0.4f ? s : l;
    return x < 0.0f ? -t : t;
}

#endif
