/* kit/base/rng_jump.c — kh_rng_advance: the xoshiro256** state k draws ahead, without drawing them, so that
 * threads can each draw their own part of one stream and the whole comes out as one thread would draw it.
 *
 * The generator's state update is linear over GF(2): s' = T s for a 256x256 bit matrix T. With P the
 * characteristic polynomial of T, T^k = q(T) for q(x) = x^k mod P(x) (Cayley-Hamilton), so the state k steps
 * ahead is the sum (xor) of T^i s over the coefficients q_i = 1: 256 plain steps once q is known. q comes from
 * O(log k) squarings modulo P. P itself is derived, not written down: the generator has the full period
 * 2^256 - 1, so P is primitive and the minimal polynomial of any one state bit's sequence; Berlekamp-Massey
 * finds it from 512 terms of that sequence, once per process. */
#include <pthread.h>
#include <string.h>

#include "khost/kit/rng.h"

#define DEG 256
#define W 4 /* 64-bit words of a polynomial below degree 256 */

static uint64_t g_char_poly[W]; /* P without its x^256 term */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int bit_of(const uint64_t *v, int i) { return (int)((v[i >> 6] >> (i & 63)) & 1u); }
static void flip(uint64_t *v, int i) { v[i >> 6] ^= 1ull << (i & 63); }

/* Berlekamp-Massey over GF(2) on bit 0 of s[0]: the connection polynomial C (c_0 = 1) of length L with
 * b[n] = xor of c_i b[n-i]; P(x) = x^L C(1/x), i.e. P's x^j coefficient is c_{L-j}. */
static void derive_char_poly(void) {
    enum { TERMS = 2 * DEG, CW = TERMS / 64 + 2 };
    uint8_t b[TERMS];
    kh_rng r;
    kh_rng_seed(&r, 1);
    for (int n = 0; n < TERMS; n++) {
        b[n] = (uint8_t)(r.s[0] & 1u);
        kh_rng_u64(&r);
    }
    uint64_t C[CW] = {1}, B[CW] = {1}, T[CW];
    int L = 0, m = 1;
    for (int n = 0; n < TERMS; n++) {
        int d = b[n];
        for (int i = 1; i <= L; i++) d ^= bit_of(C, i) & b[n - i];
        if (!d) {
            m++;
            continue;
        }
        memcpy(T, C, sizeof C);
        for (int i = 0; i + m < CW * 64; i++)
            if (bit_of(B, i)) flip(C, i + m);
        if (2 * L <= n) {
            L = n + 1 - L;
            memcpy(B, T, sizeof T);
            m = 1;
        } else {
            m++;
        }
    }
    /* L == DEG for a full-period generator; kh_rng_advance's tests hold it to stepping */
    memset(g_char_poly, 0, sizeof g_char_poly);
    for (int j = 0; j < DEG && j <= L; j++)
        if (bit_of(C, L - j)) flip(g_char_poly, j);
}

/* v (degree < 2*DEG, 2W words) reduced modulo P into out (degree < DEG). */
static void reduce(uint64_t v[2 * W], uint64_t out[W]) {
    for (int i = 2 * DEG - 1; i >= DEG; i--) {
        if (!bit_of(v, i)) continue;
        flip(v, i); /* x^i = x^(i-DEG) * x^DEG and x^DEG = P's lower terms */
        int sh = i - DEG;
        for (int w = 0; w < W; w++) {
            uint64_t p = g_char_poly[w];
            if (!p) continue;
            int lo = w * 64 + sh; /* bit position of p's bit 0 */
            int wi = lo >> 6, bi = lo & 63;
            v[wi] ^= p << bi;
            if (bi) v[wi + 1] ^= p >> (64 - bi);
        }
    }
    memcpy(out, v, W * sizeof *out);
}

static void square_mod(uint64_t a[W]) {
    uint64_t v[2 * W] = {0};
    for (int i = 0; i < DEG; i++) /* over GF(2), (sum a_i x^i)^2 = sum a_i x^2i */
        if (bit_of(a, i)) flip(v, 2 * i);
    reduce(v, a);
}

static void times_x_mod(uint64_t a[W]) {
    uint64_t v[2 * W] = {0};
    for (int w = W - 1; w >= 0; w--) v[w] = (a[w] << 1) | (w ? a[w - 1] >> 63 : 0);
    v[W] = a[W - 1] >> 63;
    reduce(v, a);
}

void kh_rng_advance(kh_rng *r, uint64_t k) {
    if (k == 0) return;
    pthread_once(&g_once, derive_char_poly);
    uint64_t q[W] = {1}; /* x^0 */
    for (int bit = 63 - __builtin_clzll(k); bit >= 0; bit--) {
        square_mod(q);
        if ((k >> bit) & 1u) times_x_mod(q);
    }
    uint64_t acc[4] = {0};
    for (int i = 0; i < DEG; i++) {
        if (bit_of(q, i))
            for (int w = 0; w < 4; w++) acc[w] ^= r->s[w];
        kh_rng_u64(r);
    }
    memcpy(r->s, acc, sizeof acc);
}
