/* khost/kit/gemm_tile.h — the register tile of a hand-rolled GEMM, for the backends whose strategy fuses the
 * operand fetch into the GEMM (theano's implicit-GEMM convolutions, tensorflow's contraction over image
 * patches): KH_TILE_MR rows x KH_TILE_NR columns accumulate sum_t a_i[t] * b[t][0, KH_TILE_NR) in registers,
 * each row's a read through its own pointer with a stride (an image row, a packed panel, a gradient row), b a
 * run of KH_TILE_NR contiguous floats per step. The vector width follows the compiler's target (AVX-512:
 * 16 floats, else 8); the tile is 6 x 2 vectors: twelve accumulators, two loads and a broadcast fit the 16
 * registers of AVX2 with no spill. Header-only, so theano's generated code, built with -march=native, carries
 * it too. */
#ifndef KHOST_KIT_GEMM_TILE_H
#define KHOST_KIT_GEMM_TILE_H

#include <stdint.h>
#include <string.h>

#if defined(__AVX512F__)
#define KH_TILE_VL 16 /* floats in one vector register */
#else
#define KH_TILE_VL 8
#endif
#define KH_TILE_MR 6
#define KH_TILE_NR (2 * KH_TILE_VL)
typedef float kh_tile_vf __attribute__((vector_size(KH_TILE_VL * sizeof(float))));

/* tile (KH_TILE_MR x KH_TILE_NR, row-major) = [tile +] the sum over runs r and steps t < n of
 * a[r][i][t * as] * b[r][t * bs + j]: a run is a stretch both operands walk with fixed strides */
static inline __attribute__((always_inline, unused)) void
kh_gemm_tile(int64_t runs, const float *(*a)[KH_TILE_MR], int64_t as, const float **b, int64_t bs, int64_t n,
             float *tile, int accumulate) {
    kh_tile_vf c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
#define KH_TILE_LOAD(i)                                                      \
    memcpy(&c##i##0, tile + (i) * KH_TILE_NR, sizeof(kh_tile_vf)),           \
        memcpy(&c##i##1, tile + (i) * KH_TILE_NR + KH_TILE_VL, sizeof(kh_tile_vf))
    if (accumulate) {
        KH_TILE_LOAD(0), KH_TILE_LOAD(1), KH_TILE_LOAD(2), KH_TILE_LOAD(3), KH_TILE_LOAD(4), KH_TILE_LOAD(5);
    } else {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = (kh_tile_vf){0};
    }
#undef KH_TILE_LOAD
    for (int64_t r = 0; r < runs; r++) {
        const float *a0 = a[r][0], *a1 = a[r][1], *a2 = a[r][2], *a3 = a[r][3], *a4 = a[r][4], *a5 = a[r][5];
        const float *br = b[r];
        for (int64_t t = 0, ao = 0, bo = 0; t < n; t++, ao += as, bo += bs) {
            kh_tile_vf b0, b1;
            memcpy(&b0, br + bo, sizeof b0);
            memcpy(&b1, br + bo + KH_TILE_VL, sizeof b1);
            float x;
            x = a0[ao], c00 += x * b0, c01 += x * b1;
            x = a1[ao], c10 += x * b0, c11 += x * b1;
            x = a2[ao], c20 += x * b0, c21 += x * b1;
            x = a3[ao], c30 += x * b0, c31 += x * b1;
            x = a4[ao], c40 += x * b0, c41 += x * b1;
            x = a5[ao], c50 += x * b0, c51 += x * b1;
        }
    }
#define KH_TILE_STORE(i)                                                     \
    memcpy(tile + (i) * KH_TILE_NR, &c##i##0, sizeof(kh_tile_vf)),           \
        memcpy(tile + (i) * KH_TILE_NR + KH_TILE_VL, &c##i##1, sizeof(kh_tile_vf))
    KH_TILE_STORE(0), KH_TILE_STORE(1), KH_TILE_STORE(2), KH_TILE_STORE(3), KH_TILE_STORE(4), KH_TILE_STORE(5);
#undef KH_TILE_STORE
}

/* b (K, N) row-major as N / KH_TILE_NR panels of (K, KH_TILE_NR), the layout the tile's b runs read
 * contiguously: panel j0 (a multiple of KH_TILE_NR) starts at bp + j0 * K. N must be a multiple of KH_TILE_NR. */
static inline __attribute__((unused)) void kh_gemm_tile_pack_b(const float *b, int64_t K, int64_t N, float *bp) {
    for (int64_t j0 = 0; j0 < N; j0 += KH_TILE_NR)
        for (int64_t k = 0; k < K; k++) memcpy(bp + j0 * K + k * KH_TILE_NR, b + k * N + j0, KH_TILE_NR * sizeof *bp);
}

#endif
