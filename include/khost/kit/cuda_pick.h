/* khost/kit/cuda_pick.h — the plain-C half of the kit's CUDA helper (khost/kit/cuda.h): choosing among
 * library algorithm candidates (deterministic first, else the fastest working one), the candidate list for a
 * message, the record's "cudnn_algos" string, a driver error as "name: description", and the device's
 * compute capability against the module's minimum. No CUDA headers:
 * part of khost_kit on every machine, unit-tested without a GPU (tests/kit/test_cuda_pick.c). */
#ifndef KHOST_KIT_CUDA_PICK_H
#define KHOST_KIT_CUDA_PICK_H

#include <stddef.h>

#include "khost/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One candidate of a library's heuristics list, ranked fastest first. */
typedef struct kh_algo_cand {
    int algo;
    int ok;          /* usable: succeeded, allowed math, accurate enough, workspace within the cap */
    int det;         /* deterministic */
    size_t memory;   /* workspace bytes */
} kh_algo_cand;

/* The index of the choice among n candidates: with want_det the first usable deterministic one, else (or
 * when there is none) the first usable one; -1 when none is usable. *fallback (may be NULL) is 1 when a
 * deterministic one was wanted and a non-deterministic one chosen. */
int kh_algo_pick(const kh_algo_cand *c, int n, int want_det, int *fallback);
/* "1(deterministic, 0 B) 6(non-deterministic, refused, 4096 B)" into buf ("none" for n == 0). */
void kh_algo_list(const kh_algo_cand *c, int n, char *buf, size_t len);
/* Append "L<layer>.<dir>=<algo>" ("~" after it when not deterministic) to the space-separated record string
 * buf of cap bytes; a string that would overflow ends in "..." instead. */
void kh_algo_record(char *buf, size_t cap, int layer, const char *dir, int algo, int det);
/* A driver error (CUresult r, with the strings cuGetErrorName / cuGetErrorString gave, either may be NULL)
 * as "CUDA_ERROR_X: description", else "CUDA error <r>". Returns buf. */
const char *kh_cu_errtext(int r, const char *name, const char *desc, char *buf, size_t n);
/* The called function's name in a checked call's source text (the macros' #call): the identifier before the
 * first '(', after its last '.' ("cudnnConvolutionForward(h, ...)" -> "cudnnConvolutionForward",
 * "kh_cu.LaunchKernel(f, ...)" -> "LaunchKernel"). Returns out. */
const char *kh_call_name(const char *call, char *out, size_t n);
/* KH_OK when compute capability major.minor is at least min_arch (90: sm_90, the lowest architecture the module
 * was compiled for), else KH_ERR_UNSUPPORTED and err: "<plugin> open on <id>: compute capability 8.0, built
 * for sm_90 and newer (set KHOST_CUDA_ARCHS)". */
kh_status kh_cuda_arch_check(int major, int minor, int min_arch, const char *plugin, const char *id, char *err,
                             size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
